"""The coding agents themselves, run against the gateway, the versions
pinned in tests/agents/package-lock.json: Claude Code's CLI (`claude -p`)
with `ANTHROPIC_BASE_URL` at a pool of the gateway, and Codex's (`codex
exec`) with a `model_providers` entry whose `base_url` is the gateway's
`/v1`, each as a new user points it, with a key of the gateway, a
throwaway HOME (and CODEX_HOME) and no traffic but the requests. Each lane
protocol's vendor fake holds the CLI's request to what its vendor takes,
so a shape the gateway cannot read or translate fails here the way it
fails a user.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import anthropic.types.beta.message_create_params as anthropic_create

from agent_capture import CaptureServer, ResponsesCaptureServer, Script
from conftest import admin_api, serving
from sdk_support import PROTOCOLS

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / "tests" / "agents" / "node_modules" / ".bin" / "claude"
CODEX = ROOT / "tests" / "agents" / "node_modules" / ".bin" / "codex"
PINS = json.loads((ROOT / "tests" / "agents" / "package.json").read_text())["dependencies"]
PINNED = PINS["@anthropic-ai/claude-code"]


@pytest.fixture(scope="module")
def claude():
    if not os.access(CLAUDE, os.X_OK):
        pytest.fail(f"{CLAUDE} is missing: scripts/sdk-tests.sh installs tests/agents' pinned npm packages")
    version = subprocess.run([CLAUDE, "--version"], capture_output=True, text=True, timeout=60).stdout
    assert version.startswith(PINNED), f"tests/agents pins {PINNED}, the installed CLI is {version!r}"
    return CLAUDE


@pytest.fixture(scope="module")
def keyed(governed):
    """The governed gateway's data address and a key of it."""
    addr, admin = governed
    created = admin_api(admin, "POST", "/api/v1/admin/keys", {"name": "claude-code"})
    return addr, created["key"]


def run_claude(claude: Path, base_url: str, key: str, prompt: str, workdir: Path) -> subprocess.CompletedProcess:
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": key,
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    return subprocess.run(
        [str(claude), "-p", prompt], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=180,
    )


def evidence(run: subprocess.CompletedProcess) -> str:
    return f"exit {run.returncode}\nstdout:\n{run.stdout[-2000:]}\nstderr:\n{run.stderr[-2000:]}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_claude_code_answers_a_prompt_through_every_lane_protocol(claude, keyed, tmp_path, protocol):
    """The CLI's first request (a system message inside `messages`, betas,
    `context_management`, `output_config`) reaches a lane of each protocol
    and its answer comes back to the CLI."""
    addr, key = keyed
    run = run_claude(claude, f"http://{addr}/lane-{protocol}", key, "say hello [mock:tool=none]", tmp_path)
    assert run.returncode == 0, evidence(run)
    assert f"[{protocol} wire-{protocol}] you said:" in run.stdout, evidence(run)
    assert "say hello" in run.stdout, evidence(run)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_claude_code_runs_a_tool_loop_through_every_lane_protocol(claude, keyed, tmp_path, protocol):
    """The fake asks for the CLI's own Read tool; the CLI runs it on a file
    of its working directory and sends the result back; the fake's final
    answer names what the tool returned, which the CLI prints."""
    addr, key = keyed
    note = tmp_path / "note.txt"
    note.write_text("paper tiger\n")
    prompt = "read the note [mock:tool=Read " + json.dumps({"file_path": str(note)}) + "]"
    run = run_claude(claude, f"http://{addr}/lane-{protocol}", key, prompt, tmp_path)
    assert run.returncode == 0, evidence(run)
    assert f"[{protocol} wire-{protocol}] tool Read returned:" in run.stdout, evidence(run)
    assert "paper tiger" in run.stdout, evidence(run)


def test_claude_codes_request_reaches_an_anthropic_lane_untouched(claude, tmp_path):
    """Same protocol, the lane's wire model the CLI's own: the bytes the CLI
    sends a capturing upstream directly and through the gateway are the
    same (but for the session id the CLI draws per run), and so are its
    betas. The first turn's shape is what the codec's golden fixtures hold."""
    work, gateway_dir = tmp_path / "work", tmp_path / "gateway"
    work.mkdir()
    gateway_dir.mkdir()
    capture = CaptureServer(Script())
    try:
        direct = run_claude(claude, f"http://{capture.address}", "sk-ant-direct", "say hello", work)
        assert direct.returncode == 0, evidence(direct)
        model = json.loads(capture.captured[0].body)["model"]
        provider = f'  capture: {{ protocol: anthropic, base_url: "http://{capture.address}" }}\n'
        lane = f"  same: {{ provider: capture, model: {model} }}\n"

        def with_capture(lanes: str) -> str:
            return lanes.replace("providers:\n", "providers:\n" + provider, 1).replace("models:\n", "models:\n" + lane, 1)

        with serving(gateway_dir, "", config=with_capture) as (addr, _):
            through = run_claude(claude, f"http://{addr}/same", "unused", "say hello", work)
        assert through.returncode == 0, evidence(through)
    finally:
        capture.close()
    sent, passed = capture.captured[0], capture.captured[1]

    def normalised(captured) -> bytes:
        # The session id rides in `metadata.user_id` (JSON text) too.
        session = json.loads(json.loads(captured.body)["metadata"]["user_id"])["session_id"]
        return captured.body.replace(session.encode(), b"SESSION")

    assert normalised(passed) == normalised(sent), "the gateway changed the CLI's request"
    assert passed.headers["anthropic-beta"] == sent.headers["anthropic-beta"]
    body = json.loads(sent.body)
    assert [m["role"] for m in body["messages"]] == ["user", "system"]
    for member in ("context_management", "output_config", "thinking", "metadata"):
        assert member in body, member
    assert re.search(r"mid-conversation-tool-changes", sent.headers["anthropic-beta"])


# Codex (`codex exec`, non-interactive). Its config is the documented
# custom provider: `wire_api = "responses"` (the only one it takes now) and
# `supports_websockets = false`. Codex opens a WebSocket at `/v1/responses`
# only for a provider that sets `supports_websockets = true` (its old
# `responses_websockets` features are gone); this keeps it on the HTTP
# Responses path, which is what these tests cover (test_responses_socket.py
# runs this CLI over its socket, and crates/gateway/tests/duplex.rs drives
# its socket shapes). Web search, apps,
# plugins, model discovery and analytics are off; any other traffic meets
# a dead proxy, the gateway's loopback address excepted. `--strict-config`
# refuses a key this version does not know, so the config cannot rot in
# silence.
CODEX_CONFIG = """\
model_provider = "switchyard"
approval_policy = "never"
sandbox_mode = "read-only"
web_search = "disabled"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
apps = false
plugins = false
remote_plugin = false
api_key_model_discovery = false

[model_providers.switchyard]
name = "Switchyard"
base_url = "{base_url}"
wire_api = "responses"
env_key = "SWITCHYARD_KEY"
supports_websockets = false
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 60000
"""
# Codex's shell tool (unified exec): one command line in `cmd`.
ECHO = {"cmd": "echo paper tiger"}


@pytest.fixture(scope="module")
def codex(tmp_path_factory):
    if not os.access(CODEX, os.X_OK):
        pytest.fail(f"{CODEX} is missing: scripts/sdk-tests.sh installs tests/agents' pinned npm packages")
    # Even `--version` writes helper links under CODEX_HOME (~/.codex by default).
    home = tmp_path_factory.mktemp("codex-version")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home)}
    version = subprocess.run([CODEX, "--version"], capture_output=True, text=True, timeout=60, env=env).stdout
    assert version.strip() == f"codex-cli {PINS['@openai/codex']}", \
        f"tests/agents pins {PINS['@openai/codex']}, the installed CLI is {version!r}"
    return CODEX


def run_codex(codex: Path, base_url: str, key: str, model: str, prompt: str, workdir: Path,
              socket: bool = False) -> subprocess.CompletedProcess:
    """`codex exec` in `workdir` (its sandboxed workspace), with its HOME
    and CODEX_HOME under it; over its Responses socket when `socket`."""
    home, codex_home = workdir / "home", workdir / "codex-home"
    home.mkdir(exist_ok=True)
    codex_home.mkdir(exist_ok=True)
    config = CODEX_CONFIG.format(base_url=base_url)
    if socket:
        config = config.replace("supports_websockets = false", "supports_websockets = true")
    (codex_home / "config.toml").write_text(config)
    dead = "http://127.0.0.1:9"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "SWITCHYARD_KEY": key,
        "HTTP_PROXY": dead, "HTTPS_PROXY": dead, "ALL_PROXY": dead, "NO_PROXY": "127.0.0.1,localhost",
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [str(codex), "exec", "--strict-config", "--skip-git-repo-check", "--ephemeral", "--color", "never",
         "-C", str(workdir), "-m", model, prompt],
        cwd=workdir, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_codex_answers_a_prompt_through_every_lane_protocol(codex, keyed, tmp_path, protocol):
    """Codex's first request (developer messages, its tools, a namespace of
    sub-agent tools, `store: false`, encrypted reasoning asked back,
    `client_metadata`) reaches a lane of each protocol and its answer comes
    back to the CLI, which prints it."""
    addr, key = keyed
    run = run_codex(codex, f"http://{addr}/v1", key, f"lane-{protocol}", "say hello [mock:tool=none]", tmp_path)
    assert run.returncode == 0, evidence(run)
    assert f"[{protocol} wire-{protocol}] you said:" in run.stdout, evidence(run)
    assert "say hello" in run.stdout, evidence(run)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_codex_runs_a_tool_loop_through_every_lane_protocol(codex, keyed, tmp_path, protocol):
    """The fake asks for Codex's own shell tool (`exec_command`) to echo
    a phrase; Codex runs it in its read-only sandbox and sends the output
    back; the fake's final answer names what the tool returned, and that
    the result answers the call it issued (its id came back as it gave it,
    or, on Gemini, the call's signature did), which the CLI prints."""
    addr, key = keyed
    prompt = "echo it [mock:tool=exec_command " + json.dumps(ECHO) + "]"
    run = run_codex(codex, f"http://{addr}/v1", key, f"lane-{protocol}", prompt, tmp_path)
    assert run.returncode == 0, evidence(run)
    assert f"[{protocol} wire-{protocol}] tool exec_command returned:" in run.stdout, evidence(run)
    assert "paper tiger" in run.stdout, evidence(run)
    assert ("(signed)" if protocol == "gemini" else "(own call id)") in run.stdout, evidence(run)


def capture_lane(capture: CaptureServer, protocol: str, model: str):
    """A config change adding lane `same` at `capture`."""
    provider = f'  capture: {{ protocol: {protocol}, base_url: "http://{capture.address}" }}\n'
    lane = f"  same: {{ provider: capture, model: {model} }}\n"
    return lambda lanes: lanes.replace("providers:\n", "providers:\n" + provider, 1).replace(
        "models:\n", "models:\n" + lane, 1)


# What differs between two runs of Codex: its ids (UUIDs, in headers,
# `client_metadata`, the prompt cache key and message ids), the turn's
# start time, and the call id of the shell session it opens.
RUN_SPECIFIC = [
    (re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), b"UUID"),
    (re.compile(rb'(turn_started_at_unix_ms\\?":)\d+'), rb"\1TIME"),
    (re.compile(rb"Chunk ID: [0-9a-f]+"), b"Chunk ID: X"),
    (re.compile(rb"Wall time: [0-9.]+ seconds"), b"Wall time: X seconds"),
]


def normalised(body: bytes) -> bytes:
    for pattern, replacement in RUN_SPECIFIC:
        body = pattern.sub(replacement, body)
    return body


def first_difference(sent: bytes, passed: bytes) -> str:
    at = next((i for i, (a, b) in enumerate(zip(sent, passed)) if a != b), min(len(sent), len(passed)))
    return f"at byte {at}: sent {sent[at - 80:at + 80]!r}, passed {passed[at - 80:at + 80]!r}"


def test_codexs_requests_reach_a_responses_lane_untouched(codex, tmp_path):
    """Same protocol: the requests of a tool loop (the call, then its
    output) that Codex sends a capturing Responses upstream directly and
    through the gateway are the same JSON (but for what differs between
    runs), and the second carries the shell's output as the
    `function_call_output` of the upstream's own call id."""
    work, gateway_dir = tmp_path / "work", tmp_path / "gateway"
    work.mkdir()
    gateway_dir.mkdir()
    capture = ResponsesCaptureServer(Script("exec_command", ECHO))
    try:
        direct = run_codex(codex, f"http://{capture.address}/v1", "sk-direct", "same", "echo it", work)
        assert direct.returncode == 0, evidence(direct)
        assert len(capture.captured) == 2, evidence(direct)
        with serving(gateway_dir, "", config=capture_lane(capture, "responses", "same")) as (addr, _):
            through = run_codex(codex, f"http://{addr}/v1", "unused", "same", "echo it", work)
        assert through.returncode == 0, evidence(through)
    finally:
        capture.close()
    assert len(capture.captured) == 4, [c.path for c in capture.captured]
    assert "the tool returned:" in through.stdout and "paper tiger" in through.stdout, evidence(through)
    for sent, passed in zip(capture.captured[:2], capture.captured[2:]):
        assert passed.path == sent.path == "/v1/responses"
        # Parsed: `client_metadata` is a hash map in Codex, its order per run.
        assert json.loads(normalised(passed.body)) == json.loads(normalised(sent.body)), \
            f"the gateway changed Codex's request: {first_difference(normalised(sent.body), normalised(passed.body))}"
    outputs = [i for i in capture.captured[3].json()["input"] if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_capture_1"], outputs
    assert "paper tiger" in outputs[0]["output"], outputs


def test_codexs_tool_loop_reaches_an_anthropic_lane_as_anthropic_takes_it(codex, tmp_path):
    """Cross protocol, at a capturing Anthropic upstream that thinks
    (signed) and then calls Codex's shell tool: the second request carries
    the thinking with its signature, the call with the upstream's own id,
    and the shell's output as the `tool_result` of that id; every member of
    both requests is one Anthropic's SDK declares (nothing the Messages API
    would refuse, none of Responses' own members)."""
    work, gateway_dir = tmp_path / "work", tmp_path / "gateway"
    work.mkdir()
    gateway_dir.mkdir()
    capture = CaptureServer(Script("exec_command", ECHO))
    try:
        with serving(gateway_dir, "", config=capture_lane(capture, "anthropic", "claude-sonnet-4-5")) as (addr, _):
            run = run_codex(codex, f"http://{addr}/v1", "unused", "same", "echo it", work)
    finally:
        capture.close()
    assert run.returncode == 0, evidence(run)
    assert "the tool returned:" in run.stdout and "paper tiger" in run.stdout, evidence(run)
    assert len(capture.captured) == 2, [c.path for c in capture.captured]
    # `betas` is the SDK's name for the `anthropic-beta` header, no member.
    declared = set(anthropic_create.MessageCreateParamsStreaming.__annotations__) - {"betas"}
    for captured in capture.captured:
        assert captured.path == "/v1/messages"
        assert set(captured.json()) <= declared, set(captured.json()) - declared
    messages = capture.captured[1].json()["messages"]
    turn, result = messages[-2], messages[-1]
    assert turn["role"] == "assistant" and result["role"] == "user", messages[-2:]
    thinking = [b for b in turn["content"] if b["type"] == "thinking"]
    assert [b["signature"] for b in thinking] == ["capture-signature"], turn
    calls = [b for b in turn["content"] if b["type"] == "tool_use"]
    assert [(c["id"], c["name"], c["input"]) for c in calls] == [("toolu_capture_1", "exec_command", ECHO)], turn
    results = [b for b in result["content"] if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_capture_1"], result
    content = results[0]["content"]
    text = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
    assert "paper tiger" in text, results
