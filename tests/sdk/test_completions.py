"""OpenAI's legacy Completions API (`client.completions.create`) through the
official `openai` SDK, whole and streamed, to an OpenAI lane (the request
passes to its `/v1/completions` as it came) and to an Anthropic lane (a chat
request through the IR, the reply written back as a `text_completion`).

The SDK first calls the vendor fake (`switchyard mock-upstream`) directly,
so the fake's completions are ones the SDK accepts; the gateway's lanes then
reach that same fake over HTTP. Every request is governed: a key, priced
lanes, and a ledger row of operation `completion` with its usage.
"""

from __future__ import annotations

import time

import openai
import pytest

from conftest import admin_api, free_port, healthy, serving
from test_operations import spawn, stop

PROMPT = "Say this is a test"


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    """(fake, gateway, admin): the vendor fake, and a governed gateway whose
    lanes reach it over HTTP."""
    import os

    workdir = tmp_path_factory.mktemp("completions")
    fake = f"127.0.0.1:{free_port()}"
    fake_proc = spawn([os.environ["SWITCHYARD_BIN"], "mock-upstream", "--listen", fake], workdir / "fake.log")
    deadline = time.monotonic() + 30
    while not healthy(fake):
        assert fake_proc.poll() is None and time.monotonic() < deadline, (workdir / "fake.log").read_text()
        time.sleep(0.05)
    extra = "auth: { mode: keys }\n"
    extra += "governance: { ledger_flush_interval: 20ms }\n"
    extra += f"storage: {{ sqlite_path: {workdir / 'switchyard.db'} }}\n"
    extra += "rate_card:\n  lane-openai: { input_utok: 1.5, output_utok: 2 }\n  lane-anthropic: { input_utok: 3, output_utok: 15 }\n"
    over_http = lambda lanes: lanes.replace('base_url: "mock://"', f'base_url: "http://{fake}"')  # noqa: E731
    try:
        with serving(workdir, extra, config=over_http) as (addr, admin):
            yield fake, addr, admin
    finally:
        stop(fake_proc)


def client_of(legacy, name: str) -> tuple[openai.OpenAI, str]:
    """A client with a key of its own, and the key's id."""
    _, addr, admin = legacy
    key = admin_api(admin, "POST", "/api/v1/admin/keys", {"name": name})
    return openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key["key"], max_retries=0), key["id"]


def rows(admin: str, key_id: str, n: int) -> list[dict]:
    """The key's ledger rows, once there are `n`."""
    deadline = time.monotonic() + 10
    while True:
        data = admin_api(admin, "GET", f"/api/v1/admin/requests?key={key_id}")["data"]
        if len(data) >= n or time.monotonic() > deadline:
            return data
        time.sleep(0.05)


def streamed(chunks) -> tuple[str, str | None, object]:
    """A stream's text, its finish reason and its usage chunk's usage."""
    text, finish, usage = "", None, None
    for chunk in chunks:
        assert chunk.object == "text_completion"
        if not chunk.choices:
            usage = chunk.usage
            continue
        (choice,) = chunk.choices
        text += choice.text
        finish = choice.finish_reason or finish
    return text, finish, usage


def test_the_fake_answers_completions_as_openai_does(legacy):
    fake, _, _ = legacy
    direct = openai.OpenAI(base_url=f"http://{fake}/v1", api_key="x", max_retries=0)
    reply = direct.completions.create(model="gpt-3.5-turbo-instruct", prompt=PROMPT, max_tokens=7, echo=True)
    assert reply.object == "text_completion" and reply.id.startswith("cmpl-")
    assert reply.choices[0].text.startswith(PROMPT + "[openai gpt-3.5-turbo-instruct] you said: " + PROMPT)
    assert reply.choices[0].finish_reason == "stop" and reply.usage.total_tokens > 0
    with pytest.raises(openai.BadRequestError):
        direct.completions.create(model="m", prompt=PROMPT, best_of=2, stream=True)


def test_a_completion_passes_through_to_an_openai_lane_whole_and_streamed(legacy):
    _, _, admin = legacy
    client, key_id = client_of(legacy, "instruct-caller")
    raw = client.completions.with_raw_response.create(model="lane-openai", prompt=PROMPT, echo=True, user="ada")
    assert "x-switchyard-dropped" not in raw.headers
    assert raw.headers["x-switchyard-lane"] == "lane-openai"
    reply = raw.parse()
    # The lane got `echo` as it came: the fake put the prompt before its answer.
    assert reply.id.startswith("cmpl-")
    assert reply.choices[0].text == f"{PROMPT}[openai wire-openai] you said: {PROMPT}"
    assert reply.choices[0].finish_reason == "stop"
    usage = reply.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    # Streamed: the gateway meters it (it asks the lane for usage), and the
    # caller, who did not ask, gets no usage chunk.
    text, finish, seen = streamed(client.completions.create(model="lane-openai", prompt=PROMPT, stream=True))
    assert (text, finish, seen) == (f"[openai wire-openai] you said: {PROMPT}", "stop", None)
    options = {"include_usage": True}
    text, finish, seen = streamed(
        client.completions.create(model="lane-openai", prompt=PROMPT, stream=True, stream_options=options)
    )
    assert finish == "stop" and seen.total_tokens == seen.prompt_tokens + seen.completion_tokens > 0
    # Three ledger rows of operation `completion`, with the usage billed.
    ledger = rows(admin, key_id, 3)
    assert len(ledger) == 3, ledger
    for row in ledger:
        assert row["operation"] == "completion" and row["lane"] == "lane-openai", row
        assert row["input_tokens"] > 0 and row["output_tokens"] > 0 and row["usd"] > 0, row
        assert row.get("end_user") == "ada" or row["stream"], row
    whole = next(row for row in ledger if not row["stream"])
    assert (whole["input_tokens"], whole["output_tokens"]) == (usage.prompt_tokens, usage.completion_tokens)


def test_a_completion_crosses_to_an_anthropic_lane_whole_and_streamed(legacy):
    _, _, admin = legacy
    client, key_id = client_of(legacy, "claude-caller")
    raw = client.completions.with_raw_response.create(model="lane-anthropic", prompt=[PROMPT], echo=True, max_tokens=64)
    # `echo` cannot cross: reported, and the text is the lane's answer alone.
    assert raw.headers["x-switchyard-dropped"] == "echo"
    reply = raw.parse()
    assert reply.object == "text_completion"
    assert reply.choices[0].text == f"[anthropic wire-anthropic] you said: {PROMPT}"
    assert (reply.choices[0].index, reply.choices[0].finish_reason) == (0, "stop")
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens > 0
    text, finish, usage = streamed(
        client.completions.create(
            model="lane-anthropic", prompt=PROMPT, stream=True, stream_options={"include_usage": True}
        )
    )
    assert (text, finish) == (f"[anthropic wire-anthropic] you said: {PROMPT}", "stop")
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens > 0
    # Strict translation refuses what would be lost, naming it.
    with pytest.raises(openai.BadRequestError, match="echo"):
        client.completions.create(model="strict-anthropic", prompt=PROMPT, echo=True)
    # Several prompts have no chat form: the caller's 400, naming `prompt`.
    with pytest.raises(openai.BadRequestError) as refused:
        client.completions.create(model="lane-anthropic", prompt=["a", "b"])
    assert refused.value.body["param"] == "prompt"
    ledger = [row for row in rows(admin, key_id, 4) if row["status"] == 200]
    assert len(ledger) == 2, ledger
    for row in ledger:
        assert (row["operation"], row["lane"], row["model"]) == ("completion", "lane-anthropic", "wire-anthropic"), row
        assert row["input_tokens"] > 0 and row["output_tokens"] > 0 and row["usd"] > 0, row
    whole = next(row for row in ledger if not row["stream"])
    assert (whole["input_tokens"], whole["output_tokens"]) == (reply.usage.prompt_tokens, reply.usage.completion_tokens)
