"""Session fixtures: the real `switchyard` binary on free loopback ports,
configured with one `mock://` lane per protocol, and one client per SDK.

Every client records the HTTP requests it sends (through public hooks: an
httpx event hook or a botocore `before-send` handler), so a failing test can
replay the exact request and show the gateway's raw answer as evidence.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sdk_support import PROTOCOLS, RATE_LIMIT_LANES, Recorder, make_drivers

HEALTH_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The admin plane of the gateway under test (its `/stats` shows what each
# lane's breaker recorded).
ADMIN_TOKEN = "sdk-admin-token-0123456789abcdef"
ADMIN: dict[str, str] = {}


class Moderator(BaseHTTPRequestHandler):
    """An OpenAI-moderation-shaped endpoint: `/flag` flags input that says
    "bad"; `/slow` answers only after the gateway stopped waiting."""

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.path == "/slow":
            time.sleep(3)
        flagged = "bad" in json.loads(body or b"{}").get("input", "")
        reply = json.dumps({"id": "modr", "results": [{"flagged": flagged, "categories": {}}]}).encode()
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
        except OSError:
            pass  # the gateway stopped waiting

    def log_message(self, *_):
        pass


def start_moderator() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Moderator)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"127.0.0.1:{server.server_address[1]}"


MODERATOR = start_moderator()


def lanes_config(listen: str, admin: str) -> str:
    """The Python twin of `lanes_config("mock://")` in crates/gateway/tests/common."""
    lines = [
        f"listen: {listen}",
        f"admin_listen: {admin}",
        f"admin: {{ tokens: [{ADMIN_TOKEN}] }}",
        "server: { drain_timeout: 2s }",
        "providers:",
    ]
    lines += [f'  up-{p}: {{ protocol: {p}, base_url: "mock://" }}' for p in PROTOCOLS]
    lines.append("models:")
    lines += [f"  lane-{p}: {{ provider: up-{p}, model: wire-{p} }}" for p in PROTOCOLS]
    lines.append("  cut-anthropic: { provider: up-anthropic }")
    lines.append("  cutthink-anthropic: { provider: up-anthropic, model: cut-anthropic }")
    # lanes that misbehave when asked by instruction to go on (the mock knows them by name)
    lines.append("  restart-openai: { provider: up-openai }")
    lines.append("  unrelated-openai: { provider: up-openai }")
    # private lanes for the 429 tests, so their breakers trip nobody else's
    lines += [f"  {name}: {{ provider: up-{p}, model: wire-{p} }}" for name, p in RATE_LIMIT_LANES]
    # strict translation: a request a lane cannot fully carry is refused
    # guardrails: emails and secrets masked in requests, a phrase refused,
    # card numbers masked in replies (the mock echoes them in four chunks)
    lines += [
        "policies:",
        "  pii: { detect: [email, phone, secrets], action: mask, direction: request }",
        '  words: { literal: ["forbidden-phrase"], action: block }',
        "  cards: { detect: [card], action: mask, direction: response }",
        "  names: { detect: [email], action: mask, direction: request, reversible: true }",
        # a word of the mock's reasoning ("...a deterministic answer")
        '  plans: { regex: { plan: "determin[a-z]{1,12}" }, action: mask, direction: request }',
        f'  checked: {{ moderator: {{ url: "http://{MODERATOR}/flag" }}, action: block }}',
        f'  lenient: {{ moderator: {{ url: "http://{MODERATOR}/slow", timeout: 200ms, on_error: allow }}, action: block }}',
        f'  strict: {{ moderator: {{ url: "http://{MODERATOR}/slow", timeout: 200ms, on_error: block }}, action: block }}',
    ]
    lines.append("pools:")
    lines.append("  guarded: { policies: [pii, words, cards], members: [{ model: lane-openai }] }")
    lines.append("  cached: { cache: { ttl: 5m }, members: [{ model: lane-openai }] }")
    lines.append("  private: { policies: [names], members: [{ model: lane-openai }] }")
    # signed thinking: a mask over a word of it refuses the turn
    lines.append("  thinking-pii: { policies: [pii], members: [{ model: lane-anthropic }] }")
    lines.append("  thinking-plans: { policies: [pii, plans], members: [{ model: lane-anthropic }] }")
    for pool in ("checked", "lenient", "strict"):
        lines.append(f"  {pool}: {{ policies: [{pool}], members: [{{ model: lane-openai }}] }}")
    lines += [f"  strict-{p}: {{ translation: strict, members: [{{ model: lane-{p} }}] }}" for p in PROTOCOLS]
    # lanes of three vendors: a conversation with signed state stays with its vendor's
    lines.append("  mixed: { members: [{ model: lane-openai }, { model: lane-gemini }, { model: lane-anthropic }] }")
    # lanes that cut their streams ([mock:cut=N]), with breakers patient enough
    # that every cut reaches the lane (the cut tests count each one)
    patient = "breaker: { consecutive_failures: 100000, min_requests: 100000 }"
    lines.append(f"  cut: {{ {patient}, members: [{{ model: cut-anthropic }}] }}")
    lines.append(f"  lane-cutthink: {{ {patient}, members: [{{ model: cutthink-anthropic }}] }}")
    # a lane that cuts its streams ([mock:cut=N]) first; broken streams go on elsewhere
    lines.append(
        "  continued: { failover: { stream_failure: continue }, breaker: { consecutive_failures: 100000, failure_rate: 1.0 },"
        " members: [{ model: cut-anthropic, weight: 1000000 }, { model: lane-openai, weight: 1 }] }"
    )
    # ... and go on by instruction with a lane that restarts its answer, or answers something else
    for lane in ("restart-openai", "unrelated-openai"):
        lines.append(
            f"  continued-{lane.split('-')[0]}: {{ failover: {{ stream_failure: continue }}, {patient},"
            f" members: [{{ model: cut-anthropic, weight: 1000000 }}, {{ model: {lane}, weight: 1 }}] }}"
        )
    return "\n".join(lines) + "\n"


def healthy(addr: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{addr}/healthz", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def serving(workdir: Path, extra: str, env: dict[str, str] | None = None, config=None):
    """A second gateway (the lanes config, changed by `config` when given,
    plus `extra`) for a module's tests: yields its data and admin
    addresses; stops it cleanly."""
    binary = os.environ["SWITCHYARD_BIN"]
    addr, admin = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    lanes = lanes_config(addr, admin)
    (workdir / "switchyard.yaml").write_text((config(lanes) if config else lanes) + extra)
    log = open(workdir / "switchyard.log", "wb")
    proc = subprocess.Popen(
        [binary, "serve", "--config", str(workdir / "switchyard.yaml")],
        stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})),
    )
    deadline = time.monotonic() + 30
    while not healthy(addr):
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail((workdir / "switchyard.log").read_text(errors="replace"))
        time.sleep(0.05)
    try:
        yield addr, admin
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0, (workdir / "switchyard.log").read_text(errors="replace")[-3000:]
        log.close()


def fleet_storage(prefix: str) -> tuple[str, str]:
    """A fresh PostgreSQL database and the Redis URL for a module's fleet
    (scripts/test.sh starts both); skips outside CI when they are not
    running."""
    postgres, redis = os.environ.get("SWITCHYARD_TEST_POSTGRES_URL"), os.environ.get("SWITCHYARD_TEST_REDIS_URL")
    if not (postgres and redis):
        assert not os.environ.get("CI"), "CI runs PostgreSQL and Redis: run the tests through scripts/test.sh"
        pytest.skip("PostgreSQL and Redis are not running (scripts/test.sh starts them)")
    name = f"{prefix}_{os.getpid()}_{int(time.time() * 1000) % 100000}"
    psql = Path(os.environ.get("SWITCHYARD_TEST_PG_BIN", "")) / "psql"
    subprocess.run([str(psql) if psql.parent != Path("") else "psql", postgres, "-qc", f"CREATE DATABASE {name}"], check=True)
    return f"{postgres.rsplit('/', 1)[0]}/{name}", redis


def admin_api(admin: str, method: str, path: str, body: dict | None = None) -> dict:
    """One admin API call with the admin token; its JSON answer."""
    request = urllib.request.Request(
        f"http://{admin}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"authorization": f"Bearer {ADMIN_TOKEN}", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def start(binary: str, workdir: Path, attempt: int):
    addr = f"127.0.0.1:{free_port()}"
    admin = f"127.0.0.1:{free_port()}"
    config = workdir / "switchyard.yaml"
    config.write_text(lanes_config(addr, admin))
    log_path = workdir / f"switchyard-{attempt}.log"
    log = open(log_path, "wb")
    env = dict(os.environ, SWITCHYARD_LOG=os.environ.get("SWITCHYARD_LOG", "info"), NO_COLOR="1")
    proc = subprocess.Popen(
        [binary, "serve", "--config", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + HEALTH_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if healthy(addr):
            ADMIN["addr"] = admin
            return proc, addr, log, log_path
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    log.close()
    return None, addr, None, log_path


@pytest.fixture(scope="session")
def gateway(tmp_path_factory):
    binary = os.environ.get("SWITCHYARD_BIN")
    if not binary or not os.access(binary, os.X_OK):
        pytest.fail("SWITCHYARD_BIN must name the built switchyard binary (run ./scripts/sdk-tests.sh)")
    workdir = tmp_path_factory.mktemp("switchyard")
    proc = None
    for attempt in range(3):  # a freed port can be taken before the gateway binds it
        proc, addr, log, log_path = start(binary, workdir, attempt)
        if proc is not None:
            break
    if proc is None:
        pytest.fail(f"switchyard did not become healthy; log:\n{log_path.read_text(errors='replace')}")
    try:
        yield addr
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
        log.close()
        if rc != 0:
            pytest.fail(
                f"switchyard did not exit cleanly on SIGTERM (rc={rc}); log tail:\n"
                + log_path.read_text(errors="replace")[-3000:]
            )


@pytest.fixture(scope="module")
def governed(tmp_path_factory):
    """A second gateway with `auth: keys`, every lane priced and SQLite
    storage: (data address, admin address), one per test module."""
    workdir = tmp_path_factory.mktemp("governed")
    extra = "rate_card:\n" + "".join(f"  lane-{p}: {{ input_utok: 1, output_utok: 2 }}\n" for p in PROTOCOLS)
    # lanes_config already names ADMIN_TOKEN as the admin plane's token.
    extra += "auth: { mode: keys }\n"
    extra += f"storage: {{ sqlite_path: {workdir / 'switchyard.db'} }}\n"
    with serving(workdir, extra) as addresses:
        yield addresses


@pytest.fixture(scope="session")
def recorder():
    return Recorder()


@pytest.fixture(scope="session")
def drivers(gateway, recorder):
    made = make_drivers(gateway, recorder)
    try:
        yield made
    finally:
        for driver in made.values():
            driver.close()


@pytest.fixture(scope="session")
def lane_failures(gateway):
    """`lane_failures(pool, lane)`: the failures the lane's breaker counted
    in that pool, from the admin plane's `/stats`."""
    import json

    def read(pool: str, lane: str) -> int:
        request = urllib.request.Request(f"http://{ADMIN['addr']}/stats",
                                         headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
        with urllib.request.urlopen(request, timeout=5) as r:
            stats = json.loads(r.read())
        for entry in stats["pools"]:
            if entry["pool"] == pool:
                for state in entry["lanes"]:
                    if state["lane"] == lane:
                        return int(state["upstream_failures"])
        return 0

    return read
