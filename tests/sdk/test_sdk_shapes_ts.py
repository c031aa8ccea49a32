"""Everything the official TypeScript SDKs (`@anthropic-ai/sdk`, `openai`,
pinned in tests/agents) can put in a request is modelled by the gateway or
reported, never refused nor lost in silence: the TypeScript twin of
test_sdk_shapes.py.

`tests/agents/sdk_shapes.mjs` walks the SDKs' .d.ts request types with the
TypeScript compiler API (pinned in tests/agents): Anthropic's
`MessageCreateParams` members (stable and beta), `MessageParam` roles,
content block params and `Tool` members; Chat's
`ChatCompletionCreateParams` members, message roles and content parts;
Responses' `ResponseCreateParams` members, input items, message roles and
content parts. It sends the smallest value of each with the SDK itself
(so header params such as `betas` go as the SDK sends them) to a lane of
the same protocol, which must accept it, and to a lane of another, which
must answer 200 and name in `x-switchyard-dropped` what the gateway does
not model. What the gateway models, and the walk's special cases, are in
modelled.json, which the Python walk reads too.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from sdk_support import MOCK_SIGNATURE, MOCK_THOUGHT

HERE = Path(__file__).resolve().parent
WALK = HERE.parents[0] / "agents" / "sdk_shapes.mjs"
MODELLED = json.loads((HERE / "modelled.json").read_text())
FAMILIES = ["anthropic", "chat", "responses"]
# The same protocol's lane, and one of another.
LANES = {
    "anthropic": {"same": "lane-anthropic", "cross": "lane-openai"},
    "chat": {"same": "lane-openai", "cross": "lane-anthropic"},
    "responses": {"same": "lane-responses", "cross": "lane-anthropic"},
}


def walk(gateway: str, modelled: dict) -> list[dict]:
    """Every case the walk sent, with what each lane answered."""
    config = {**{k: v for k, v in modelled.items() if not k.startswith("_")}, "gateway": gateway, "lanes": LANES,
              "thought": MOCK_THOUGHT, "signature": MOCK_SIGNATURE}
    done = subprocess.run(["node", str(WALK), json.dumps(config)], capture_output=True, text=True, timeout=300,
                          cwd=WALK.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def problem(case: dict) -> str | None:
    """What is wrong with one case, or None: the same protocol's lane
    refused it, the other lane did not answer 200, or lost a shape the
    gateway does not model without naming it."""
    same, cross, reported_as = case["same"], case["cross"], case["reported_as"]
    if same["status"] != 200:
        return f"the same protocol's lane answered {same['status']}: {same.get('error', '')}"
    if cross["status"] != 200:
        return f"the other protocol's lane answered {cross['status']}: {cross.get('error', '')}"
    if reported_as is not None and not any(p == reported_as or p.startswith(reported_as + ".")
                                           for p in cross["dropped"]):
        return f"neither modelled nor reported as {reported_as}: x-switchyard-dropped = {cross['dropped']}"
    return None


def failures(cases: list[dict]) -> list[str]:
    return [f"{c['family']} {c['what']}: {problem(c)}\n  sent {json.dumps(c['body'])[:400]}"
            for c in cases if c["pending"] is None and problem(c) is not None]


@pytest.fixture(scope="module")
def walked(gateway):
    return walk(gateway, MODELLED)


def test_the_sdks_have_the_shapes_this_test_walks(walked):
    seen = {(c["family"], c["what"]) for c in walked}
    for family, what in [
        ("anthropic", "role system"), ("anthropic", "content block tool_result"),
        ("anthropic", "content block tool_addition"), ("anthropic", "member context_management"),
        ("anthropic", "member betas"), ("anthropic", "tool member input_schema"),
        ("chat", "role developer"), ("chat", "role tool"), ("chat", "user content part image_url"),
        ("chat", "assistant content part refusal"), ("chat", "member reasoning_effort"),
        ("responses", "role developer"), ("responses", "input item function_call_output"),
        ("responses", "input item web_search_call"), ("responses", "user content part input_file"),
        ("responses", "member reasoning"),
    ]:
        assert (family, what) in seen, f"the walk found no {family} {what}"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_request_shape_of_the_typescript_sdks_is_modelled_or_reported(walked, family):
    cases = [c for c in walked if c["family"] == family]
    assert cases, f"the walk sent no {family} case"
    wrong = failures(cases)
    assert not wrong, f"{len(wrong)} of {len(cases)} {family} cases:\n" + "\n".join(wrong)


@pytest.mark.parametrize("family,what", [(f, w) for f in FAMILIES for w in MODELLED[f].get("pending", {})])
def test_pending_gaps(walked, family, what):
    """A known gap (modelled.json's `pending`, why beside it) is expected to
    fail; when it passes, take it off the list."""
    case = next((c for c in walked if c["family"] == family and c["what"] == what), None)
    assert case is not None, f"the walk no longer sends {family} {what}: take it off `pending`"
    wrong = problem(case)
    if wrong is not None:
        pytest.xfail(f"{MODELLED[family]['pending'][what]}: {wrong}")
