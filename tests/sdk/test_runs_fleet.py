"""An agent run across a fleet of two (real PostgreSQL and Redis) through
the official SDKs: the loop's model turns alternate between the OpenAI SDK
on one instance and the Anthropic SDK on the other, with an MCP SDK tool
call between them on the instance the next turn does not use, all naming
one run. The run's USD cap is reserved fleet-wide (`run_admit.lua`), so
whichever instance the loop reaches stops it with the caller's quota error
naming the run and the limit, and the other refuses its next call too; the
spend either instance lists is the one run's and never past its cap. A
kill told to one instance stops the run on the other.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anthropic
import anyio
import httpx2
import openai
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from conftest import PROTOCOLS, admin_api, fleet_storage, serving

HERE = Path(__file__).parent
LIMITED = -32029
CAP = 0.08


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    database, redis = fleet_storage("runs")
    work = tmp_path_factory.mktemp("runs-fleet")
    files = f'{{ command: "{sys.executable}", args: ["{HERE / "mcp_upstream.py"}", stdio, --name, files] }}'
    extra = (
        "rate_card:\n"
        + "".join(f"  lane-{p}: {{ input_utok: 1000, output_utok: 2000 }}\n" for p in PROTOCOLS)
        + "auth: { mode: keys }\n"
        + f'storage: {{ postgres_url: "{database}", redis_url: "{redis}", ledger_spool: "{{spool}}" }}\n'
        + "governance: { ledger_flush_interval: 20ms }\n"
        + "groups:\n"
        + f"  spender: {{ runs: {{ usd: {CAP} }} }}\n"
        + "  looper: { runs: { calls: 1000 } }\n"
        + f"mcp:\n  servers:\n    files: {files}\n"
    )
    (work / "a").mkdir()
    (work / "b").mkdir()
    with serving(work / "a", extra.replace("{spool}", str(work / "a" / "spool.db"))) as (a, admin_a), serving(
        work / "b", extra.replace("{spool}", str(work / "b" / "spool.db"))
    ) as (b, admin_b):
        def key(group: str) -> dict:
            return admin_api(admin_a, "POST", "/api/v1/admin/keys", {"name": f"{group}-agent", "group": group, "mcp": ["*"]})

        yield {"a": a, "b": b, "admin_a": admin_a, "admin_b": admin_b, "key": key}


def run_on(admin: str, run: str, key_id: str) -> dict:
    found = [r for r in admin_api(admin, "GET", "/api/v1/admin/runs")["runs"] if r["id"] == run and r["key"] == key_id]
    assert len(found) == 1, found
    return found[0]


def gpt(addr: str, key: str, run: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key, default_headers={"x-switchyard-run": run}, max_retries=0)


def claude(addr: str, key: str, run: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=f"http://{addr}", api_key=key, default_headers={"x-switchyard-run": run}, max_retries=0)


def model_turn(client, text: str) -> None:
    if isinstance(client, openai.OpenAI):
        client.chat.completions.create(model="lane-openai", max_tokens=5, messages=[{"role": "user", "content": text}])
    else:
        client.messages.create(model="lane-anthropic", max_tokens=5, messages=[{"role": "user", "content": text}])


async def tool_call(addr: str, key: str, run: str, path: str) -> str | MCPError:
    """One MCP SDK tool call naming `run` (the SDK's default mode speaks the
    stateless revision first, which the gateway answers: no session id, so
    `x-switchyard-run` is the run): the file's text, or the error the SDK
    raised (caught inside the client, which would wrap it in a group)."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}", "x-switchyard-run": run}, timeout=httpx2.Timeout(30.0))
    async with http:
        async with Client(streamable_http_client(f"http://{addr}/mcp", http_client=http)) as client:
            try:
                result = await client.call_tool("files__read_file", {"path": path})
            except MCPError as error:
                return error
            return result.content[0].text


def test_an_agent_loop_across_two_instances_is_stopped_by_its_runs_usd_cap(fleet):
    made = fleet["key"]("spender")
    run = "sdk-fleet-usd"
    models = [gpt(fleet["a"], made["key"], run), claude(fleet["b"], made["key"], run)]
    turns = tools = 0
    refused = None
    # Model turns on alternating instances, a tool call on the other one
    # after each: whichever call comes after the one that reaches the cap
    # is refused, the model's (`RateLimitError`) or the tool's (-32029).
    while turns < 100 and refused is None:
        try:
            model_turn(models[turns % 2], f"step {turns}")
        except (openai.RateLimitError, anthropic.RateLimitError) as error:
            refused, last = str(error), turns % 2
            break
        turns += 1
        there = fleet["b"] if turns % 2 == 1 else fleet["a"]
        text = anyio.run(tool_call, there, made["key"], run, f"step{turns}.txt")
        if isinstance(text, MCPError):
            assert text.code == LIMITED, text
            refused, last = text.message, turns % 2
            break
        assert text == f"contents of step{turns}.txt"
        tools += 1
    assert refused is not None, "the run was never stopped"
    assert turns >= 2, "the cap stopped the loop before it crossed instances"
    assert f"run `{run}` is stopped: it reached its `usd` limit of ${CAP}" in refused, refused
    # The other instance refuses the run's next call too, whichever SDK.
    other = models[1 - last]
    with pytest.raises((openai.RateLimitError, anthropic.RateLimitError)) as again:
        model_turn(other, "one more")
    assert f"run `{run}`" in str(again.value), again.value
    # Both instances list the one run: its state, its calls, its spend within the cap.
    for admin in (fleet["admin_a"], fleet["admin_b"]):
        listed = run_on(admin, run, made["id"])
        assert listed["state"] == "limited(usd)", listed
        assert (listed["calls"], listed["tool_calls"]) == (turns, tools), listed
        assert 0 < listed["spent_usd"] <= CAP, listed


def test_a_kill_told_to_one_instance_stops_the_run_on_the_other(fleet):
    made = fleet["key"]("looper")
    run = "sdk-fleet-kill"
    model_turn(gpt(fleet["a"], made["key"], run), "start")
    killed = admin_api(fleet["admin_a"], "POST", f"/api/v1/admin/runs/{run}/kill?key={made['id']}")
    assert killed["id"] == run and killed["killed"] == 1, killed
    with pytest.raises(anthropic.RateLimitError) as refused:
        model_turn(claude(fleet["b"], made["key"], run), "go on")
    assert f"run `{run}` is stopped: an operator killed it" in str(refused.value), refused.value

    stopped = anyio.run(tool_call, fleet["b"], made["key"], run, "after.txt")
    assert isinstance(stopped, MCPError), stopped
    assert stopped.code == LIMITED and f"run `{run}`" in stopped.message, stopped.message
    assert run_on(fleet["admin_b"], run, made["id"])["state"] == "killed"
