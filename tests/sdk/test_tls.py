"""The data listener over TLS (`server.tls`), driven by the official
OpenAI and Anthropic SDKs given the deployment's CA bundle, and with a
client certificate when `client_ca` asks for one (mTLS). The TLS material
is the test fixtures' (crates/gateway/tests/fixtures/tls-data)."""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import free_port, lanes_config

FIXTURES = Path(__file__).resolve().parents[2] / "crates/gateway/tests/fixtures/tls-data"
CA = str(FIXTURES / "ca.pem")
CLIENT = (str(FIXTURES / "client.pem"), str(FIXTURES / "client.key"))


def context(client: bool) -> ssl.SSLContext:
    """What a deployment's client holds: the CA bundle, and its certificate."""
    ctx = ssl.create_default_context(cafile=CA)
    if client:
        ctx.load_cert_chain(*CLIENT)
    return ctx


@contextlib.contextmanager
def tls_gateway(workdir: Path, mtls: bool, extra: str = "", models: str = ""):
    """A gateway whose data listener serves TLS with the fixtures'
    `localhost` certificate (asking for a client certificate when `mtls`),
    the lanes config with `models` added to its models and `extra` after
    it: yields its `https://localhost:<port>` URL and its admin address."""
    binary = os.environ["SWITCHYARD_BIN"]
    port, admin = free_port(), f"127.0.0.1:{free_port()}"
    client_ca = f', client_ca: "{CA}"' if mtls else ""
    config = lanes_config(f"127.0.0.1:{port}", admin).replace(
        "server: { drain_timeout: 2s }",
        f'server: {{ drain_timeout: 2s, tls: {{ cert: "{FIXTURES / "server-a.pem"}", key: "{FIXTURES / "server-a.key"}"{client_ca} }} }}',
    )
    config = config.replace("models:\n", "models:\n" + models, 1)
    (workdir / "switchyard.yaml").write_text(config + extra)
    log = open(workdir / "switchyard.log", "wb")
    proc = subprocess.Popen([binary, "serve", "--config", str(workdir / "switchyard.yaml")], stdout=log, stderr=subprocess.STDOUT)
    url = f"https://localhost:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1, context=context(mtls)) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail((workdir / "switchyard.log").read_text(errors="replace"))
        time.sleep(0.05)
    try:
        yield url, admin
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0, (workdir / "switchyard.log").read_text(errors="replace")[-3000:]
        log.close()


def test_the_official_sdks_reach_the_tls_listener_with_the_ca_bundle(tmp_path):
    import anthropic
    import openai

    with tls_gateway(tmp_path, mtls=False) as (url, _):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, http_client=openai.DefaultHttpxClient(verify=context(False)))
        reply = client.chat.completions.create(model="lane-openai", messages=[{"role": "user", "content": "hello over tls"}])
        assert reply.choices[0].message.content
        with client.chat.completions.create(model="lane-anthropic", messages=[{"role": "user", "content": "stream"}], stream=True) as stream:
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

        claude = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, http_client=anthropic.DefaultHttpxClient(verify=context(False)))
        message = claude.messages.create(model="lane-gemini", max_tokens=32, messages=[{"role": "user", "content": "hi"}])
        assert message.content[0].text

        # Without the bundle the SDK refuses the server, as it should.
        stranger = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.APIConnectionError):
            stranger.chat.completions.create(model="lane-openai", messages=[{"role": "user", "content": "hi"}])


def test_mtls_serves_only_a_client_with_a_certificate_the_ca_signed(tmp_path):
    import openai

    with tls_gateway(tmp_path, mtls=True) as (url, _):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, http_client=openai.DefaultHttpxClient(verify=context(True)))
        reply = client.chat.completions.create(model="lane-openai", messages=[{"role": "user", "content": "hello with a certificate"}])
        assert reply.choices[0].message.content

        anonymous = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, http_client=openai.DefaultHttpxClient(verify=context(False)))
        with pytest.raises(openai.APIConnectionError):
            anonymous.chat.completions.create(model="lane-openai", messages=[{"role": "user", "content": "hi"}])
