"""Agent runs (`groups.<g>.runs`) through the official SDKs: a scripted
agent loop (the OpenAI and Anthropic SDKs for its model turns, the MCP SDK
for its tool calls through `/mcp`) is stopped by its run's call cap, by its
USD cap and by the loop breaker, each refusal the SDK's own quota error
(`RateLimitError`, or the MCP SDK's `MCPError` -32029) naming the run and
the limit; the kill switch stops a run between two turns; another key's
run of the same id is untouched. One gateway, SQLite; runs are counted per
instance.
"""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anthropic
import anyio
import httpx2
import openai
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from conftest import PROTOCOLS, admin_api, serving

HERE = Path(__file__).parent
LIMITED = -32029


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    work = tmp_path_factory.mktemp("runs")
    files = f'{{ command: "{sys.executable}", args: ["{HERE / "mcp_upstream.py"}", stdio, --name, files] }}'
    extra = (
        "rate_card:\n"
        + "".join(f"  lane-{p}: {{ input_utok: 1000, output_utok: 2000 }}\n" for p in PROTOCOLS)
        + "auth: { mode: keys }\n"
        + f"storage: {{ sqlite_path: {work / 'switchyard.db'} }}\n"
        + "governance: { ledger_flush_interval: 20ms }\n"
        + "groups:\n"
        + "  capped: { runs: { calls: 3, wall: 30m } }\n"
        + "  spender: { runs: { usd: 0.08 } }\n"
        + "  looper: { runs: { tool_calls: 50, loop: { repeats: 3 } } }\n"
        + f"mcp:\n  servers:\n    files: {files}\n"
    )
    with serving(work, extra) as (addr, admin):
        def key(group: str) -> dict:
            return admin_api(admin, "POST", "/api/v1/admin/keys", {"name": f"{group}-agent", "group": group, "mcp": ["*"]})

        yield {"addr": addr, "admin": admin, "key": key}


def runs(admin: str) -> list[dict]:
    return admin_api(admin, "GET", "/api/v1/admin/runs")["runs"]


def run_of(admin: str, run: str, key_id: str) -> dict:
    found = [r for r in runs(admin) if r["id"] == run and r["key"] == key_id]
    assert len(found) == 1, runs(admin)
    return found[0]


def oa(addr: str, key: str, headers: dict[str, str]) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key, default_headers=headers, max_retries=0)


def ant(addr: str, key: str, headers: dict[str, str]) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=f"http://{addr}", api_key=key, default_headers=headers, max_retries=0)


def openai_turn(client: openai.OpenAI, text: str) -> str:
    reply = client.chat.completions.create(
        model="lane-openai", max_tokens=5, messages=[{"role": "user", "content": text}]
    )
    return reply.choices[0].message.content or ""


def anthropic_turn(client: anthropic.Anthropic, text: str) -> str:
    reply = client.messages.create(model="lane-anthropic", max_tokens=5, messages=[{"role": "user", "content": text}])
    return "".join(block.text for block in reply.content if block.type == "text")


@asynccontextmanager
async def mcp_session(addr: str, key: str):
    """The MCP SDK's client through the gateway, naming run `sdk-loop`, and
    the session handle the gateway gave it, if the era it speaks has one
    (`mcp-session-id` is then the run its tool calls count on)."""
    seen: dict[str, str] = {}

    async def keep(response):
        if "mcp-session-id" in response.headers:
            seen["id"] = response.headers["mcp-session-id"]

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}", "x-switchyard-run": "sdk-loop"},
        timeout=httpx2.Timeout(30.0),
        event_hooks={"response": [keep]},
    )
    async with http:
        async with Client(streamable_http_client(f"http://{addr}/mcp", http_client=http)) as client:
            yield client, seen


def test_an_agent_loop_is_stopped_by_its_runs_call_cap(world):
    made = world["key"]("capped")
    headers = {"x-switchyard-run": "sdk-calls"}
    gpt, claude = oa(world["addr"], made["key"], headers), ant(world["addr"], made["key"], headers)
    # Three model turns, alternating SDKs: the run's whole cap.
    assert openai_turn(gpt, "plan the work")
    assert anthropic_turn(claude, "do step one")
    assert openai_turn(gpt, "do step two")
    with pytest.raises(openai.RateLimitError) as refused:
        openai_turn(gpt, "do step three")
    assert refused.value.status_code == 429
    assert "run `sdk-calls` is stopped: it reached its `calls` limit of 3 model calls" in str(refused.value), refused.value
    with pytest.raises(anthropic.RateLimitError) as refused:
        anthropic_turn(claude, "try anyway")
    assert "run `sdk-calls`" in str(refused.value) and "`calls` limit" in str(refused.value), refused.value
    run = run_of(world["admin"], "sdk-calls", made["id"])
    assert (run["state"], run["calls"]) == ("limited(calls)", 3), run
    # Another key's run of the same id is its own.
    other = world["key"]("capped")
    assert openai_turn(oa(world["addr"], other["key"], headers), "my own run")
    assert run_of(world["admin"], "sdk-calls", other["id"])["state"] == "open"


def test_an_agent_loop_is_stopped_by_its_runs_usd_cap(world):
    made = world["key"]("spender")
    gpt = oa(world["addr"], made["key"], {"x-switchyard-run": "sdk-usd"})
    turns = 0
    with pytest.raises(openai.RateLimitError) as refused:
        while turns < 100:
            openai_turn(gpt, f"turn {turns}")
            turns += 1
    assert turns >= 1
    message = str(refused.value)
    assert "run `sdk-usd` is stopped: it reached its `usd` limit of $0.08" in message, message
    run = run_of(world["admin"], "sdk-usd", made["id"])
    assert run["state"] == "limited(usd)" and run["calls"] == turns, run
    # Reserved like a budget: never past its cap.
    assert 0 < run["spent_usd"] <= 0.08, run


def test_an_agent_loop_repeating_one_tool_call_is_stopped_by_the_loop_breaker(world):
    made = world["key"]("looper")

    async def go():
        async with mcp_session(world["addr"], made["key"]) as (tools, seen):
            # The 2026-07-28 era has no session: the run is `x-switchyard-run`;
            # a session's handle, where there is one, comes first.
            session = seen.get("id", "sdk-loop")
            naming = {"mcp-session-id": session} if "id" in seen else {"x-switchyard-run": session}
            # The model turns name the same run: one run for both.
            gpt = oa(world["addr"], made["key"], naming)
            for turn in range(3):
                assert openai_turn(gpt, f"what next, step {turn}?")
                result = await tools.call_tool("files__read_file", {"path": "a.txt"})
                assert result.content[0].text == "contents of a.txt"
            with pytest.raises(MCPError) as stopped:
                await tools.call_tool("files__read_file", {"path": "b.txt"})
            assert stopped.value.code == LIMITED
            assert f"run `{session}` is stopped: its loop breaker tripped" in stopped.value.message, stopped.value.message
            with pytest.raises(openai.RateLimitError) as refused:
                openai_turn(gpt, "and now?")
            assert "loop breaker" in str(refused.value), refused.value
            return session

    session = anyio.run(go)
    run = run_of(world["admin"], session, made["id"])
    assert (run["state"], run["calls"], run["tool_calls"]) == ("loop", 3, 3), run


def test_the_kill_switch_stops_a_run_between_two_turns(world):
    made = world["key"]("looper")
    gpt = oa(world["addr"], made["key"], {"x-switchyard-run": "sdk-kill"})
    assert openai_turn(gpt, "start")
    killed = admin_api(world["admin"], "POST", f"/api/v1/admin/runs/sdk-kill/kill?key={made['id']}")
    assert killed == {"id": "sdk-kill", "killed": 1}
    with pytest.raises(openai.RateLimitError) as refused:
        openai_turn(gpt, "go on")
    assert "run `sdk-kill` is stopped: an operator killed it" in str(refused.value), refused.value
    assert run_of(world["admin"], "sdk-kill", made["id"])["state"] == "killed"
