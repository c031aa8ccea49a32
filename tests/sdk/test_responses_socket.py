"""The Responses API over WebSocket through the official OpenAI SDK
(`client.responses.connect()`, over its `websockets` transport), on a lane
of each protocol the fake serves: five turns on one socket (a tool call,
its output sent after `previous_response_id` with `store: false`, three
text turns each going on from the one before), an `error` event for a
previous response the socket never saw and for `response.steer` (which the
gateway does not take) with the socket going on, a conversation kept on
one socket that neither another socket of the same key nor another
tenant's can continue, and a spent budget refusing the next turn only.
The official JS SDK's socket (`ResponsesWS`) runs the five turns too, and
Codex's own CLI runs a tool loop over its socket on a lane of each
protocol, its session taken as its run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import openai
import pytest

from conftest import admin_api, serving
from sdk_support import PROTOCOLS
from test_agents import CODEX, ECHO, evidence, run_codex

TOOLS = [
    {
        "type": "function",
        "name": "lookup",
        "description": "find a thing",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    }
]

TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")


@pytest.fixture(scope="module")
def sockets(tmp_path_factory):
    """A gateway with keys, every lane priced and SQLite storage: (data, admin)."""
    workdir = tmp_path_factory.mktemp("responses-socket")
    extra = "rate_card:\n" + "".join(f"  lane-{p}: {{ input_utok: 1000, output_utok: 2000 }}\n" for p in PROTOCOLS)
    extra += "auth: { mode: keys }\n"
    extra += "governance: { ledger_flush_interval: 20ms }\n"
    # Codex's keys are in a group whose runs are tracked (by its session).
    extra += "groups:\n  coders: { runs: { calls: 1000 } }\n"
    extra += f"storage: {{ sqlite_path: {workdir / 'switchyard.db'} }}\n"
    with serving(workdir, extra) as addresses:
        yield addresses


def client(addr: str, admin: str, name: str, **spec) -> tuple[openai.OpenAI, dict]:
    key = admin_api(admin, "POST", "/api/v1/admin/keys", {"name": name, **spec})
    return openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key["key"], max_retries=0), key


def turn(connection, **create) -> list:
    """Sends one `response.create` and reads its events up to its terminal one."""
    connection.response.create(**create)
    return until_end(connection)


def until_end(connection) -> list:
    events = []
    for event in connection:
        events.append(event)
        if event.type in TERMINAL:
            return events
    raise AssertionError(f"the socket closed: {events}")


def completed(events: list):
    assert events[-1].type == "response.completed", [e.to_dict() for e in events]
    return events[-1].response


def said(response) -> str:
    return "".join(
        part.text
        for item in response.output
        if item.type == "message"
        for part in item.content
        if getattr(part, "text", None)
    )


def rows(admin: str, key_id: str, count: int) -> list:
    """The key's ledger rows, once `count` are written (the ledger flushes
    on an interval)."""
    deadline = time.monotonic() + 10
    while True:
        found = admin_api(admin, "GET", f"/api/v1/admin/requests?limit=100&key={key_id}")["data"]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_five_turns_with_a_tool_call_on_one_socket(sockets, protocol):
    addr, admin = sockets
    sdk, key = client(addr, admin, f"five-{protocol}")
    lane = f"lane-{protocol}"
    with sdk.responses.connect() as connection:
        # 1: a tool call, its arguments streamed as deltas.
        events = turn(
            connection, model=lane, store=False, tools=TOOLS, input='[mock:tool=lookup {"q":"tides"}]'
        )
        assert events[0].type == "response.created", events[0]
        first = completed(events)
        call = next(item for item in first.output if item.type == "function_call")
        assert call.name == "lookup" and json.loads(call.arguments) == {"q": "tides"}, call
        deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
        assert json.loads(deltas) == {"q": "tides"}, deltas
        added = [e for e in events if e.type == "response.output_item.added"]
        assert any(e.item.type == "function_call" for e in added), events
        # 2: its output alone after the id; the call is only in the socket's
        # own conversation (store: false), so the lane had it from there.
        events = turn(
            connection,
            model=lane,
            store=False,
            tools=TOOLS,
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "high at noon"}],
        )
        previous = completed(events)
        assert "tool lookup returned: high at noon" in said(previous), said(previous)
        # 3-5: text turns, each going on from the one before; the history
        # goes along (the input grows each turn).
        for n in range(3, 6):
            events = turn(connection, model=lane, store=False, previous_response_id=previous.id, input=f"turn {n}")
            response = completed(events)
            assert said(response).endswith(f"you said: turn {n}"), said(response)
            text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
            assert text == said(response), (text, said(response))
            assert response.usage.input_tokens > previous.usage.input_tokens, (response.usage, previous.usage)
            previous = response
    # Five turns, five ledger rows of this key, each streamed and priced.
    ledger = rows(admin, key["id"], 5)
    assert len(ledger) == 5, ledger
    assert all(r["status"] == 200 and r["stream"] and r["pool"] == lane and r["cost_nano"] > 0 for r in ledger), ledger


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_unknown_previous_id_and_an_unsupported_event_are_errors_and_the_socket_goes_on(sockets, protocol):
    addr, admin = sockets
    sdk, _ = client(addr, admin, f"errors-{protocol}")
    lane = f"lane-{protocol}"
    with sdk.responses.connect() as connection:
        events = turn(connection, model=lane, store=False, previous_response_id="resp_never_seen", input="hi")
        assert [e.type for e in events] == ["error"], events
        assert events[0].error.code == "previous_response_not_found", events[0]
        # The SDK's own `response.steer`: not taken, and said so.
        connection.response.steer(input=[{"type": "message", "role": "user", "content": "faster"}],
                                  previous_response_id="resp_never_seen")
        refused = until_end(connection)[-1]
        assert refused.type == "error" and refused.error.code == "unsupported_event", refused
        events = turn(connection, model=lane, store=False, input="still here")
        assert said(completed(events)).endswith("you said: still here")


def test_a_conversation_kept_on_a_socket_is_that_sockets_alone(sockets):
    """`store: false`: the conversation lives on the socket that made it.
    Another socket of the same key, and another tenant's, get
    `previous_response_not_found` for its id (and never its words)."""
    addr, admin = sockets
    owner, _ = client(addr, admin, "keeper")
    other, _ = client(addr, admin, "stranger")
    with owner.responses.connect() as connection:
        first = completed(turn(connection, model="lane-openai", store=False, input="the vault code is 4417"))
        for sdk in (owner, other):
            with sdk.responses.connect() as elsewhere:
                events = turn(elsewhere, model="lane-openai", store=False, previous_response_id=first.id, input="and?")
                assert [e.type for e in events] == ["error"], events
                assert events[0].error.code == "previous_response_not_found", events[0]
                assert "4417" not in events[0].to_json(), events[0]
        # The socket that made it still goes on from it.
        events = turn(connection, model="lane-openai", store=False, previous_response_id=first.id, input="repeat")
        response = completed(events)
        assert response.usage.input_tokens > first.usage.input_tokens


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_spent_budget_refuses_the_next_turn_only(sockets, protocol):
    addr, admin = sockets
    lane = f"lane-{protocol}"
    sdk, key = client(addr, admin, f"thrifty-{protocol}", budget={"usd": 0.25, "window": "1d"})
    with sdk.responses.connect() as connection:
        served, refused = 0, None
        for n in range(30):
            events = turn(connection, model=lane, max_output_tokens=100, input=f"turn {n}")
            if events[-1].type == "error":
                refused = events[-1]
                break
            completed(events)
            served += 1
        assert refused is not None and served >= 1, served
        assert refused.error.code == "insufficient_quota" and refused.status == 429, refused
        # The refusal ended that turn only: the socket answers a warm-up
        # (nothing generated, nothing billed) and the next turn is refused
        # in the same words, not dropped.
        warm = completed(turn(connection, model=lane, generate=False, input="x"))
        assert warm.output == [], warm
        again = turn(connection, model=lane, input="once more")
        assert [e.type for e in again] == ["error"] and again[0].error.code == "insufficient_quota", again
    ledger = rows(admin, key["id"], served + 2)
    billed = [r for r in ledger if r["status"] == 200]
    assert len(billed) == served, ledger
    assert sum(1 for r in ledger if r["status"] == 429) >= 2, ledger


AGENTS = Path(__file__).resolve().parents[1] / "agents"


def test_the_js_sdks_socket_runs_five_turns_on_a_lane_of_each_protocol(sockets):
    """The official JS SDK's `ResponsesWS` (tests/agents/responses_socket.mjs)
    on one socket per lane: the tool call, its output after the id with
    `store: false`, three text turns, an unknown previous id answered with
    an error event, and a turn after it."""
    addr, admin = sockets
    key = admin_api(admin, "POST", "/api/v1/admin/keys", {"name": "js-socket"})
    lanes = [f"lane-{p}" for p in PROTOCOLS]
    done = subprocess.run(["node", str(AGENTS / "responses_socket.mjs"), addr, key["key"], *lanes],
                          capture_output=True, text=True, timeout=120, cwd=AGENTS)
    assert done.returncode == 0, done.stderr[-3000:]
    for run in json.loads(done.stdout):
        lane, turns = run["lane"], run["turns"]
        assert len(turns) == 7, (lane, turns)
        first = turns[0]
        assert first["types"][0] == "response.created" and first["types"][-1] == "response.completed", (lane, first)
        call = next(i for i in first["response"]["output"] if i["type"] == "function_call")
        assert call["name"] == "lookup" and json.loads(first["arguments"]) == {"q": "tides"}, (lane, first)
        assert "tool lookup returned: high at noon" in turns[1]["text"], (lane, turns[1])
        for n, text_turn in zip((3, 4, 5), turns[2:5]):
            assert text_turn["text"].endswith(f"you said: turn {n}"), (lane, text_turn)
        grew = [t["response"]["usage"]["input_tokens"] for t in turns[1:5]]
        assert grew == sorted(grew) and len(set(grew)) == 4, (lane, grew)
        assert turns[5]["types"] == ["error"] and turns[5]["error"]["code"] == "previous_response_not_found", (lane, turns[5])
        assert turns[6]["text"].endswith("you said: still here"), (lane, turns[6])


UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_codex_runs_a_tool_loop_over_its_socket_and_its_session_is_the_run(sockets, tmp_path, protocol):
    """`codex exec` with `supports_websockets = true`: its prewarm
    (`generate: false`), its turn with its own tools, its shell tool's
    output sent back after `previous_response_id` with `store: false`, all
    on one socket to a lane of each protocol, never falling back to HTTP.
    Its handshake's `session-id` is the run the key's calls count in."""
    if not os.access(CODEX, os.X_OK):
        pytest.fail(f"{CODEX} is missing: scripts/sdk-tests.sh installs tests/agents' pinned npm packages")
    addr, admin = sockets
    key = admin_api(admin, "POST", "/api/v1/admin/keys", {"name": f"codex-{protocol}", "group": "coders"})
    prompt = "echo it [mock:tool=exec_command " + json.dumps(ECHO) + "]"
    run = run_codex(CODEX, f"http://{addr}/v1", key["key"], f"lane-{protocol}", prompt, tmp_path, socket=True)
    assert run.returncode == 0, evidence(run)
    assert "Falling back from WebSockets" not in run.stderr, evidence(run)
    assert f"[{protocol} wire-{protocol}] tool exec_command returned:" in run.stdout, evidence(run)
    assert "paper tiger" in run.stdout, evidence(run)
    runs = [r for r in admin_api(admin, "GET", "/api/v1/admin/runs")["runs"] if r["key"] == key["id"]]
    assert len(runs) == 1 and UUID.match(runs[0]["id"]), runs
    # The turn that called the tool and the one that read its output (the
    # prewarm generates nothing and is no call).
    assert runs[0]["calls"] == 2, runs
