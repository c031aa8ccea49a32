"""The coding agents themselves, run against the gateway: Claude Code's CLI
(`claude -p`, the version pinned in tests/agents/package-lock.json) with
`ANTHROPIC_BASE_URL` at a pool of the gateway, as a new user points it,
with a key of the gateway, a throwaway HOME and no traffic but the
requests. Each lane protocol's vendor fake holds the CLI's request to what
its vendor takes, so a shape the gateway cannot read or translate fails
here the way it fails a user.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from agent_capture import CaptureServer, Script
from conftest import admin_api, serving
from sdk_support import PROTOCOLS

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / "tests" / "agents" / "node_modules" / ".bin" / "claude"
PINNED = json.loads((ROOT / "tests" / "agents" / "package.json").read_text())["dependencies"]["@anthropic-ai/claude-code"]


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
