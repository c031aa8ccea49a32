"""The MCP gateway through the official MCP Python SDK (client), in front of
two upstream servers written with the same SDK (server): `tickets` over
streamable HTTP (behind a pool whose first member is down, so every call
fails over before dispatch) and `files` as a stdio child. The same
`tickets` process is also reached as `modern`, spoken to in the stateless
revision (2026-07-28: no session). A key reaches only what its `mcp`
grants name: nothing without them.

The SDK speaks either revision: `mode="legacy"` pins the handshake at
2025-11-25, `mode="2026-07-28"` the stateless revision, and its default
(`auto`) probes `server/discover`, which the gateway answers, so it adopts
2026-07-28. The tests that do not name a mode run in that default.

Two gateway instances share PostgreSQL and Redis: keys, pins and sessions
are the fleet's. One session alternates between them through a
round-robin proxy (no stickiness) without a failure.
"""

from __future__ import annotations

import json
import os
import random
import socket
import string
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from conftest import admin_api, fleet_storage, free_port, serving

HERE = Path(__file__).parent
FORBIDDEN, LIMITED, HANDLE_REFUSED, INVALID_PARAMS = -32003, -32029, -32004, -32602
SECRET = "sdk-fleet-handle-secret-0123456789abcdef"
MODES = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}


class Alerts(BaseHTTPRequestHandler):
    """The operator's alert webhook: keeps what it is told."""

    got: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        Alerts.got.append(json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}"))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *_):
        pass


def start_alerts() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Alerts)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/alerts"


@contextmanager
def upstream(workdir: Path, flag: Path):
    """The `tickets` server over streamable HTTP, on a free port."""
    port_file = workdir / "tickets.port"
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "mcp_upstream.py"), "http", "--port", "0", "--port-file", str(port_file),
         "--name", "tickets", "--schema-flag", str(flag), "--log", str(workdir / "tickets.log")],
        stdout=subprocess.DEVNULL, stderr=open(workdir / "tickets.err", "wb"),
    )
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail((workdir / "tickets.err").read_text(errors="replace"))
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port_file.read_text().strip()}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class Dropper(BaseHTTPRequestHandler):
    """Forwards each message to the upstream, but hangs up on a tool call
    once the upstream ran it: a failure after dispatch."""

    upstream = ""

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        names = ("content-type", "accept", "mcp-session-id", "mcp-protocol-version", "authorization")
        headers = {name: self.headers[name] for name in names if self.headers.get(name)}
        request = urllib.request.Request(Dropper.upstream, data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, reply, answer_headers = response.status, response.read(), response.headers
        except urllib.error.HTTPError as err:
            status, reply, answer_headers = err.code, err.read(), err.headers
        if json.loads(body).get("method") == "tools/call":
            self.close_connection = True
            return
        self.send_response(status)
        for name in ("content-type", "mcp-session-id"):
            if answer_headers.get(name):
                self.send_header(name, answer_headers[name])
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *_):
        pass


def start_dropper(upstream_url: str) -> str:
    Dropper.upstream = upstream_url
    server = ThreadingHTTPServer(("127.0.0.1", 0), Dropper)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/mcp"


class RoundRobin:
    """A TCP proxy that sends each new connection to the next backend."""

    def __init__(self, backends: list[str]):
        self.backends, self.turn, self.served = backends, 0, [0] * len(backends)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            index = self.turn % len(self.backends)
            self.turn += 1
            self.served[index] += 1
            host, port = self.backends[index].rsplit(":", 1)
            backend = socket.create_connection((host, int(port)))
            for a, b in ((client, backend), (backend, client)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def pipe(source: socket.socket, sink: socket.socket):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Two instances over one PostgreSQL and Redis, the upstreams, keys."""
    database, redis = fleet_storage("mcp")
    work = tmp_path_factory.mktemp("mcp")
    flag = work / "schema-changed"
    dead = f"http://127.0.0.1:{free_port()}/mcp"
    with upstream(work, flag) as tickets:
        files = f'{{ command: "{sys.executable}", args: ["{HERE / "mcp_upstream.py"}", stdio, --name, files, --log, "{work / "files.log"}"] }}'
        extra = (
            "auth: { mode: keys }\n"
            f'storage: {{ postgres_url: "{database}", redis_url: "{redis}", ledger_spool: "{{spool}}" }}\n'
            "governance: { ledger_flush_interval: 20ms }\n"
            f'alerts: {{ webhook: "{start_alerts()}" }}\n'
            "mcp:\n"
            "  policies: [words, cards]\n"
            # One secret for the fleet: a session id opens on either instance.
            f"  handles: {{ secret: {SECRET} }}\n"
            "  servers:\n"
            # The same server, spoken to in the stateless revision.
            f'    modern: {{ url: "{tickets}", protocol: "2026-07-28" }}\n'
            f'    tickets-down: {{ url: "{dead}", timeout: 5s }}\n'
            f'    tickets-up: {{ url: "{tickets}", idempotent: [read_ticket], price_per_call: 0.25, timeout: 20s }}\n'
            f"    files: {files}\n"
            # Hangs up after the upstream ran the call; its twin is the upstream itself.
            f'    flaky-drop: {{ url: "{start_dropper(tickets)}", idempotent: [read_ticket] }}\n'
            f'    flaky-twin: {{ url: "{tickets}" }}\n'
            # A command that exits at once: quarantined after three tries.
            '    broken: { command: /bin/false }\n'
            "  pools:\n"
            "    tickets: [tickets-down, tickets-up]\n"
            "    flaky: [flaky-drop, flaky-twin]\n"
        )
        (work / "a").mkdir()
        (work / "b").mkdir()
        with serving(work / "a", extra.replace("{spool}", str(work / "a" / "spool.db"))) as (a, admin_a), serving(
            work / "b", extra.replace("{spool}", str(work / "b" / "spool.db"))
        ) as (b, admin_b):
            key = lambda spec: admin_api(admin_a, "POST", "/api/v1/admin/keys", {"name": "mcp", **spec})["key"]  # noqa: E731
            yield {
                "a": a, "b": b, "admin": admin_a, "admin_b": admin_b, "flag": flag, "work": work, "tickets": tickets,
                "bare": key({}),
                "everything": key({"mcp": ["*"]}),
                "some": key({"mcp": ["files__*", "tickets__read_*"]}),
                "reader": key({"mcp": ["files__*", "prompt:*__greeting", "resource:tickets+*"]}),
                "limited": key({"mcp": ["tickets__read_queue"], "limits": {"rpm": 2}}),
            }


@asynccontextmanager
async def connect(addr: str, key: str, *, fresh_connections: bool = False, mode: str = "auto", path: str = "/mcp",
                  seen: list | None = None):
    """An SDK client of `addr`'s `path` as `key`, in `mode`; `seen` gets
    each response's headers."""
    limits = httpx2.Limits(max_keepalive_connections=0) if fresh_connections else httpx2.Limits()

    async def record(response):
        if seen is not None:
            seen.append(dict(response.headers))

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30.0), limits=limits,
                              event_hooks={"response": [record]})
    async with http:
        # The SDK's default mode probes the stateless era first (the gateway
        # answers it) and falls back to `initialize` on a server that does not.
        async with Client(streamable_http_client(f"http://{addr}{path}", http_client=http), mode=mode) as client:
            yield client


def run(coroutine):
    return anyio.run(coroutine)


def tool_names(addr: str, key: str) -> set[str]:
    async def go():
        async with connect(addr, key) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    return run(go)


def calls(admin: str) -> list[dict]:
    return admin_api(admin, "GET", "/api/v1/admin/requests?operation=mcp&limit=1000")["data"]


def test_the_list_is_namespaced_and_filtered_per_key(fleet):
    everything = tool_names(fleet["a"], fleet["everything"])
    assert {"tickets__read_ticket", "tickets__close_ticket", "tickets__count", "files__read_file", "files__delete_file"} <= everything
    assert {name.split("__", 1)[0] for name in everything} == {"tickets", "files", "flaky", "modern"}, everything
    some = tool_names(fleet["a"], fleet["some"])
    assert some == {name for name in everything if name.startswith("files__") or name.startswith("tickets__read_")}
    assert tool_names(fleet["a"], fleet["limited"]) == {"tickets__read_queue"}


def test_a_key_without_grants_reaches_no_tool_prompt_or_resource(fleet):
    assert tool_names(fleet["a"], fleet["bare"]) == set()

    async def go():
        async with connect(fleet["a"], fleet["bare"]) as client:
            assert (await client.list_prompts()).prompts == []
            assert (await client.list_resources()).resources == []
            for attempt in (
                client.call_tool("files__delete_file", {"path": "a.txt"}),
                client.get_prompt("files__greeting", {"name": "Ada"}),
                client.read_resource("tickets+tickets://readme"),
            ):
                with pytest.raises(MCPError) as denied:
                    await attempt
                assert denied.value.code == FORBIDDEN, denied.value.message

    run(go)
    log = fleet["work"] / "files.log"
    seen = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert not any(e["method"] == "tools/call" and e["name"] == "delete_file" for e in seen)


def test_allowed_calls_succeed_denied_ones_error_and_a_rate_limit_refuses(fleet):
    async def go():
        async with connect(fleet["a"], fleet["some"]) as client:
            # HTTP, behind a pool whose first server is down: failed over before dispatch.
            result = await client.call_tool("tickets__read_ticket", {"id": "T-7"})
            assert result.content[0].text == "ticket T-7: open" and not result.is_error
            # stdio, spawned with a cleared environment.
            result = await client.call_tool("files__read_file", {"path": "a.txt"})
            assert result.content[0].text == "contents of a.txt"
            with pytest.raises(MCPError) as denied:
                await client.call_tool("tickets__close_ticket", {"id": "T-7"})
            assert denied.value.code == FORBIDDEN and "tickets__close_ticket" in denied.value.message
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("tickets__no_such_tool", {})
            assert unknown.value.code in (FORBIDDEN, -32602)
        # A key of its own, three requests a minute: `initialize` is the first.
        spec = {"name": "limited-calls", "mcp": ["tickets__read_queue"], "limits": {"rpm": 3}}
        limited = admin_api(fleet["admin"], "POST", "/api/v1/admin/keys", spec)["key"]
        async with connect(fleet["a"], limited) as client:
            for _ in range(2):
                assert (await client.call_tool("tickets__read_queue", {})).content[0].text.startswith("queue:")
            with pytest.raises(MCPError) as limited:
                await client.call_tool("tickets__read_queue", {})
            assert limited.value.code == LIMITED
            assert (limited.value.data or {}).get("retry_after", 0) >= 1

    run(go)
    # What reached the upstream: the allowed calls only, under the server's own names.
    seen = [json.loads(line) for line in (fleet["work"] / "tickets.log").read_text().splitlines()]
    called = [entry["name"] for entry in seen if entry["method"] == "tools/call"]
    assert "read_ticket" in called and "close_ticket" not in called


def test_every_call_is_a_ledger_row(fleet):
    async def go():
        async with connect(fleet["a"], fleet["some"]) as client:
            await client.call_tool("tickets__read_ticket", {"id": "T-audit"})
            with pytest.raises(MCPError):
                await client.call_tool("tickets__close_ticket", {"id": "T-audit"})

    run(go)
    deadline = time.monotonic() + 10
    while True:
        rows = calls(fleet["admin"])
        allowed = [r for r in rows if r["model"] == "tickets__read_ticket" and r["status"] == 200]
        denied = [r for r in rows if r["model"] == "tickets__close_ticket" and r["status"] == 403]
        if (allowed and denied) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert allowed and denied, rows
    row = allowed[0]
    assert row["operation"] == "mcp" and row["pool"] == "tickets" and row["lane"] == "mcp:tickets-up"
    assert row["notes"]["tool"]["server"] == "tickets-up" and row["notes"]["tool"]["bytes_in"] > 0
    assert row["notes"]["tool"]["bytes_out"] > 0
    assert row["failovers"] == 1, "the first server of the pool is down"
    assert abs(row["usd"] - 0.25) < 1e-9, "priced per call"
    assert denied[0]["usd"] == 0 and denied[0]["notes"]["tool"]["error"] == FORBIDDEN
    # The same rows from the other instance: one ledger.
    assert any(r["request_id"] == row["request_id"] for r in calls(fleet["admin_b"]))


def test_guardrails_screen_arguments_and_results(fleet):
    async def go():
        async with connect(fleet["a"], fleet["everything"]) as client:
            with pytest.raises(MCPError) as blocked:
                await client.call_tool("tickets__echo_secret", {"text": "say forbidden-phrase now"})
            assert "words" in blocked.value.message and "forbidden-phrase" not in blocked.value.message
            masked = await client.call_tool("tickets__echo_secret", {"text": "card 4111 1111 1111 1111"})
            assert "4111" not in masked.content[0].text and "[CARD_1]" in masked.content[0].text

    run(go)


def test_prompts_resources_and_progress_pass_through(fleet):
    async def go():
        async with connect(fleet["a"], fleet["reader"]) as client:
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert {"tickets__greeting", "files__greeting"} <= prompts
            got = await client.get_prompt("files__greeting", {"name": "Ada"})
            assert "Hello, Ada!" in got.messages[0].content.text
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert uris == {"tickets+tickets://readme"}, "the files server's resource is not granted"
            read = await client.read_resource("tickets+tickets://readme")
            assert read.contents[0].text == "readme of tickets"
            with pytest.raises(MCPError) as denied:
                await client.read_resource("files+files://readme")
            assert denied.value.code == FORBIDDEN
        # Tool grants open no prompt or resource.
        async with connect(fleet["a"], fleet["some"]) as client:
            assert (await client.list_prompts()).prompts == []
            assert (await client.list_resources()).resources == []
        async with connect(fleet["a"], fleet["everything"]) as client:
            seen = []

            async def progress(done, total, message):
                seen.append(done)

            result = await client.call_tool("tickets__count", {"n": 3}, progress_callback=progress)
            assert result.content[0].text == "counted 3"
            assert seen == [1, 2, 3]

    run(go)


def test_a_stdio_servers_progress_reaches_only_its_own_caller(fleet):
    """Two keys' sessions call the one stdio child at once, each with the
    progress token the SDK chose (the same one): each hears its own steps."""

    async def counting(key: str, label: str, heard: list[str]):
        async with connect(fleet["a"], key) as client:

            async def progress(done, total, message):
                heard.append(message)

            result = await client.call_tool(
                "files__count", {"n": 3, "label": label, "pause": 0.2}, progress_callback=progress
            )
            assert result.content[0].text == "counted 3"

    heard: dict[str, list[str]] = {"alpha": [], "beta": []}

    async def go():
        async with anyio.create_task_group() as both:
            both.start_soon(counting, fleet["everything"], "alpha", heard["alpha"])
            both.start_soon(counting, fleet["some"], "beta", heard["beta"])

    run(go)
    assert heard == {"alpha": ["alpha step 1", "alpha step 2", "alpha step 3"],
                     "beta": ["beta step 1", "beta step 2", "beta step 3"]}, heard


def test_a_pinned_tools_schema_change_withholds_it(fleet):
    admin = fleet["admin"]
    approved = admin_api(admin, "POST", "/api/v1/admin/mcp/tools/tickets__read_ticket/approval")
    assert len(approved["digest"]) == 64
    overview = admin_api(admin, "GET", "/api/v1/admin/mcp")
    tool = next(t for t in overview["tools"] if t["name"] == "tickets__read_ticket")
    assert tool["standing"] == "approved" and tool["listed"]
    assert {s["name"] for s in overview["servers"]} == {"tickets-down", "tickets-up", "files", "flaky-drop", "flaky-twin", "broken", "modern"}
    assert {s["name"]: s["protocol"] for s in overview["servers"]}["modern"] == "2026-07-28"
    fleet["flag"].write_text("changed")
    try:
        assert "tickets__read_ticket" not in tool_names(fleet["a"], fleet["everything"])
        # The other instance reads the same pin.
        assert "tickets__read_ticket" not in tool_names(fleet["b"], fleet["everything"])

        async def call():
            async with connect(fleet["a"], fleet["everything"]) as client:
                with pytest.raises(MCPError) as withheld:
                    await client.call_tool("tickets__read_ticket", {"id": "T-1", "reason": "x"})
                assert withheld.value.code == FORBIDDEN and "withheld" in withheld.value.message

        run(call)
        tool = next(t for t in admin_api(admin, "GET", "/api/v1/admin/mcp")["tools"] if t["name"] == "tickets__read_ticket")
        assert tool["standing"] == "changed" and not tool["listed"]
        open_alerts = admin_api(admin, "GET", "/api/v1/admin/alerts")["open"]
        assert any(a["kind"] == "mcp_tool_changed" and a["subject"] == "tickets__read_ticket" for a in open_alerts)
        # Approved again: listed again, under its new schema.
        admin_api(admin, "POST", "/api/v1/admin/mcp/tools/tickets__read_ticket/approval")
        assert "tickets__read_ticket" in tool_names(fleet["a"], fleet["everything"])
    finally:
        fleet["flag"].unlink()
        admin_api(admin, "DELETE", "/api/v1/admin/mcp/tools/tickets__read_ticket/approval")
        # Each instance reads pins again within seconds: the tests after
        # this one see the tool unpinned on both.
        deadline = time.monotonic() + 10
        while not all("tickets__read_ticket" in tool_names(fleet[i], fleet["everything"]) for i in ("a", "b")):
            assert time.monotonic() < deadline, "the unpinned tool is listed again"
            time.sleep(0.2)


def test_after_dispatch_only_an_idempotent_tool_goes_to_the_twin(fleet):
    log = fleet["work"] / "tickets.log"

    def ran(tool: str, arg: str) -> int:
        entries = [json.loads(line) for line in log.read_text().splitlines()]
        return sum(1 for e in entries if e["method"] == "tools/call" and e["name"] == tool and arg in json.dumps(e["arguments"]))

    async def go():
        async with connect(fleet["a"], fleet["everything"]) as client:
            result = await client.call_tool("flaky__read_ticket", {"id": "T-idem"})
            assert result.content[0].text == "ticket T-idem: open"
            with pytest.raises(MCPError) as lost:
                await client.call_tool("flaky__close_ticket", {"id": "T-once"})
            assert lost.value.code == -32050 and "flaky-drop" in lost.value.message

    run(go)
    assert ran("read_ticket", "T-idem") == 2, "run by the dropped server, then by its twin"
    assert ran("close_ticket", "T-once") == 1, "never run twice"


def test_a_crash_looping_stdio_server_is_quarantined_and_the_rest_serve(fleet):
    for _ in range(3):
        names = tool_names(fleet["a"], fleet["everything"])
        assert "files__read_file" in names and not any(n.startswith("broken__") for n in names)
    broken = next(s for s in admin_api(fleet["admin"], "GET", "/api/v1/admin/mcp")["servers"] if s["name"] == "broken")
    assert broken["state"]["quarantined_for_s"] > 0, broken
    assert "exited" in broken["state"]["last_error"]


@pytest.mark.parametrize("mode", list(MODES))
def test_one_session_alternates_between_two_instances(fleet, mode):
    """A 2025-11-25 session's id (sealed with the fleet's secret) opens on
    either instance; a 2026-07-28 caller's requests find the session the
    gateway holds with `tickets` on either instance too."""
    proxy = RoundRobin([fleet["a"], fleet["b"]])

    async def go():
        async with connect(proxy.addr, fleet["some"], fresh_connections=True, mode=mode) as client:
            assert client.protocol_version == MODES[mode]
            for n in range(6):
                result = await client.call_tool("tickets__read_ticket", {"id": f"T-alt-{mode}-{n}"})
                assert result.content[0].text == f"ticket T-alt-{mode}-{n}: open"
                assert (await client.call_tool("files__list_files", {})).content[0].text
            assert "files__read_file" in {t.name for t in (await client.list_tools()).tools}

    run(go)
    assert all(served >= 5 for served in proxy.served), proxy.served
    # Both instances sent the calls in the one session the gateway has with
    # `tickets` for this caller (kept in Redis), never one each.
    sessions = {e["session_id"] for e in upstream_log(fleet)
                if e["method"] == "tools/call" and f"T-alt-{mode}-" in json.dumps(e["arguments"])}
    assert len(sessions) == 1 and None not in sessions, sessions


def test_a_session_is_its_keys_alone(fleet):
    def post(key: str, body: dict, session: str | None = None) -> tuple[int, dict, dict]:
        headers = {"authorization": f"Bearer {key}", "content-type": "application/json",
                   "accept": "application/json, text/event-stream"}
        if session:
            headers["mcp-session-id"] = session
        request = urllib.request.Request(f"http://{fleet['a']}/mcp", data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, dict(response.headers), json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), json.loads(err.read() or b"{}")

    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    status, headers, answer = post(fleet["some"], hello)
    assert status == 200 and answer["result"]["protocolVersion"] == "2025-06-18", answer
    session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert post(fleet["some"], listing, session)[0] == 200
    assert post(fleet["everything"], listing, session)[0] == 404, "another key's message finds no session"
    assert post(fleet["some"], listing)[0] == 400, "no session named"
    assert post("sk-not-a-key", listing, session)[0] == 401


def upstream_log(fleet) -> list[dict]:
    return [json.loads(line) for line in (fleet["work"] / "tickets.log").read_text().splitlines()]


@pytest.mark.parametrize("mode", list(MODES))
def test_each_revision_lists_and_calls_tools_on_both_kinds_of_server(fleet, mode):
    """The SDK pinned to 2025-11-25 (the handshake) and to 2026-07-28
    (stateless) lists and calls tools of the server reached in a session
    (`tickets`) and of the one reached statelessly (`modern`)."""
    # Letters only: a long digit run can pass the Luhn check and be masked
    # by the `cards` policy this fleet runs (it was, one run in a few).
    tag = f"T-{mode}-" + "".join(random.choices(string.ascii_lowercase, k=12))

    async def go():
        seen: list[dict] = []
        async with connect(fleet["a"], fleet["everything"], mode=mode, seen=seen) as client:
            assert client.protocol_version == MODES[mode]
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"tickets__read_ticket", "modern__read_ticket", "files__read_file"} <= names
            for name in ("tickets__read_ticket", "modern__read_ticket"):
                result = await client.call_tool(name, {"id": f"{tag}-{name}"})
                assert result.content[0].text == f"ticket {tag}-{name}: open" and not result.is_error
        sessions = {h.get("mcp-session-id") for h in seen} - {None}
        # Only the handshake caller is handed a session id.
        assert (len(sessions) == 1) == (mode == "legacy"), sessions

    run(go)
    # What reached the server: `tickets__` in the gateway's session with it
    # (the handshake), `modern__` statelessly, whichever revision called.
    calls = {e["arguments"]["id"]: e for e in upstream_log(fleet) if e["method"] == "tools/call" and tag in json.dumps(e["arguments"])}
    stateful, stateless = calls[f"{tag}-tickets__read_ticket"], calls[f"{tag}-modern__read_ticket"]
    assert stateful["session_id"] and stateful["protocol_version"] == "2025-11-25", stateful
    assert stateless["session_id"] is None and stateless["protocol_version"] == "2026-07-28", stateless


def test_the_sdks_default_mode_adopts_the_stateless_revision(fleet):
    async def go():
        async with connect(fleet["a"], fleet["some"]) as client:
            assert client.protocol_version == "2026-07-28"
            assert (await client.call_tool("files__read_file", {"path": "b.txt"})).content[0].text == "contents of b.txt"

    run(go)


def raw(addr: str, key: str, body: dict, *, path: str = "/mcp", session: str | None = None,
        headers: dict | None = None) -> tuple[int, dict, dict]:
    sent = {"authorization": f"Bearer {key}", "content-type": "application/json",
            "accept": "application/json, text/event-stream", **(headers or {})}
    if session:
        sent["mcp-session-id"] = session
    request = urllib.request.Request(f"http://{addr}{path}", data=json.dumps(body).encode(), headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read() or b"{}")


def test_a_session_id_replayed_by_another_key_or_on_another_route_is_refused(fleet):
    """The SDK (2025-11-25) opens a session; its id, replayed by another
    key, on another route or altered, is refused, and the SDK's own
    session goes on."""
    seen: list[dict] = []
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}

    async def go():
        async with connect(fleet["a"], fleet["some"], mode="legacy", seen=seen) as client:
            session = next(h["mcp-session-id"] for h in seen if h.get("mcp-session-id"))
            status, _, answer = raw(fleet["a"], fleet["everything"], listing, session=session)
            assert status == 404 and answer["error"]["code"] == HANDLE_REFUSED, answer
            assert answer["error"]["data"]["reason"] == "other_caller" and "result" not in answer
            # The other instance shares the secret: the same verdicts there.
            assert raw(fleet["b"], fleet["everything"], listing, session=session)[2]["error"]["data"]["reason"] == "other_caller"
            status, _, answer = raw(fleet["a"], fleet["some"], listing, session=session, path="/mcp/files")
            assert status == 404 and answer["error"]["data"]["reason"] == "other_route", answer
            flipped = session[:-2] + ("AA" if session[-2:] != "AA" else "BB")
            assert raw(fleet["a"], fleet["some"], listing, session=flipped)[2]["error"]["data"]["reason"] == "forged"
            # Its own key on its own route: still served, on either instance.
            status, _, answer = raw(fleet["b"], fleet["some"], listing, session=session)
            assert status == 200 and answer["result"]["tools"], answer
            assert (await client.call_tool("files__read_file", {"path": "c.txt"})).content[0].text == "contents of c.txt"

    run(go)


@pytest.fixture(scope="module")
def paged(fleet):
    """A gateway listing two items a page (so it mints cursors), in front
    of the same tickets server, reached at `/mcp` and `/mcp/tickets`."""
    work = fleet["work"] / "paged"
    work.mkdir()
    extra = (
        "auth: { mode: keys }\n"
        "mcp:\n"
        "  handles: { secret: paged-gateway-handle-secret-0123456789, page_size: 2 }\n"
        "  servers:\n"
        f'    tickets: {{ url: "{fleet["tickets"]}", protocol: "2026-07-28" }}\n'
        f'    again: {{ url: "{fleet["tickets"]}" }}\n'
    )
    with serving(work, extra) as (addr, admin):
        key = lambda name: admin_api(admin, "POST", "/api/v1/admin/keys", {"name": name, "mcp": ["*"]})["key"]  # noqa: E731
        yield {"addr": addr, "alice": key("alice"), "mallory": key("mallory")}


@pytest.mark.parametrize("mode", list(MODES))
def test_a_cursor_replayed_by_another_key_or_on_another_route_is_refused(paged, mode):
    async def go():
        async with connect(paged["addr"], paged["alice"], mode=mode) as alice:
            first = await alice.list_tools()
            assert len(first.tools) == 2 and first.next_cursor
            names = [t.name for t in first.tools]
            cursor = first.next_cursor
            while cursor:
                page = await alice.list_tools(cursor=cursor)
                names += [t.name for t in page.tools]
                cursor = page.next_cursor
            assert len(names) == len(set(names)) == 16, names  # eight tools of each name, each once
            async with connect(paged["addr"], paged["mallory"], mode=mode) as mallory:
                with pytest.raises(MCPError) as replayed:
                    await mallory.list_tools(cursor=first.next_cursor)
                assert replayed.value.code == INVALID_PARAMS and "another caller" in replayed.value.message
            async with connect(paged["addr"], paged["alice"], mode=mode, path="/mcp/tickets") as narrow:
                assert {t.name.split("__")[0] for t in (await narrow.list_tools()).tools} == {"tickets"}
                with pytest.raises(MCPError) as elsewhere:
                    await narrow.list_tools(cursor=first.next_cursor)
                assert elsewhere.value.code == INVALID_PARAMS and "another MCP route" in elsewhere.value.message
            with pytest.raises(MCPError) as other_list:
                await alice.list_prompts(cursor=first.next_cursor)
            assert other_list.value.code == INVALID_PARAMS

    run(go)
