"""Everything Anthropic's official Python SDK can put in a Messages request
is modelled by the gateway or reported, never refused nor lost in silence.

The test walks the SDK's own request types (`MessageCreateParams`, the
`MessageParam` roles, every content block param, `ToolParam`; stable and
beta), makes the smallest value each type allows, and sends a request
holding it through the gateway: to an Anthropic lane, whose fake takes
what Anthropic's reader takes, and to an OpenAI lane, which must answer
200 and, for what the IR does not model, name it in
`x-switchyard-dropped`. A new SDK that adds a member, role or block type
the gateway neither models nor reports fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

import anthropic.types as stable
import anthropic.types.beta as beta
from anthropic.types import message_create_params as stable_create
from anthropic.types.beta import message_create_params as beta_create

import sdk_walk as walk
from sdk_support import MOCK_SIGNATURE, MOCK_THOUGHT
from sdk_walk import hints, literal_of, value, with_member

# What the gateway reads into the IR: a modelled member need not be
# reported (it crosses, or its own loss is named under another path).
# Shared with the TypeScript walk (test_sdk_shapes_ts.py).
MODELLED = json.loads((Path(__file__).resolve().parent / "modelled.json").read_text())["anthropic"]
MODELLED_MEMBERS = set(MODELLED["modelled_members"])
MODELLED_BLOCKS = set(MODELLED["modelled_blocks"])
MODELLED_TOOL_MEMBERS = set(MODELLED["modelled_tool_members"])
# Blocks a model's turn holds; the rest go in a user's.
ASSISTANT_BLOCKS = set(MODELLED["assistant_blocks"])
# Members the SDK sends as headers (`betas` as `anthropic-beta`).
HEADER_PARAMS = MODELLED["header_params"]


def block_types() -> dict[str, object]:
    """type → block param, from the content of every message param."""
    found: dict[str, object] = {}
    for message in walk.shapes(stable.MessageParam) + walk.shapes(beta.BetaMessageParam):
        for block in walk.shapes(hints(message)["content"]):
            kind = literal_of(block, "type")
            if kind is not None:
                found.setdefault(kind, block)
            # A tool result's own content blocks.
            if kind in ("tool_result",) and "content" in hints(block):
                for part in walk.shapes(hints(block)["content"]):
                    part_kind = literal_of(part, "type")
                    if part_kind is not None:
                        found.setdefault(part_kind, part)
    return found


def roles() -> set[str]:
    return {literal_of(m, "role") for m in walk.shapes(stable.MessageParam) + walk.shapes(beta.BetaMessageParam)}


def send(gateway: str, lane: str, body: dict) -> httpx.Response:
    body = {"model": lane, "max_tokens": 64, **body}
    headers = {"x-api-key": "unused", "anthropic-version": "2023-06-01"}
    # The SDK sends `betas` as the `anthropic-beta` header, not in the
    # body, and its other header params likewise.
    for member, header in HEADER_PARAMS.items():
        if member in body:
            sent = body.pop(member)
            headers[header] = ",".join(sent) if isinstance(sent, list) else str(sent)
    return httpx.post(f"http://{gateway}/v1/messages", json=body, timeout=30, headers=headers)


def check(gateway: str, body: dict, what: str, reported_as: str | None):
    """200 from an Anthropic lane and an OpenAI lane; with `reported_as`,
    the OpenAI lane names a path under it."""
    walk.check(lambda lane, b: send(gateway, lane, b), body, what, reported_as, "lane-anthropic", "lane-openai")


def test_the_sdk_has_the_shapes_this_test_walks():
    assert {"user", "assistant", "system"} <= roles()
    assert {"text", "tool_result", "tool_addition"} <= set(block_types())
    assert "context_management" in hints(beta_create.MessageCreateParamsBase)


@pytest.mark.parametrize("role", sorted(roles()))
def test_every_role_of_the_sdk_is_carried(gateway, role):
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    messages.append({"role": role, "content": "a note"})
    if role != "user":
        messages.append({"role": "user", "content": "go on"})
    check(gateway, {"messages": messages}, f"role {role}", None)


@pytest.mark.parametrize("kind", sorted(block_types()))
def test_every_content_block_type_of_the_sdk_is_modelled_or_reported(gateway, kind):
    block = value(block_types()[kind])
    if kind == "thinking":
        # Signed reasoning goes back as the lane signed it (the fake refuses
        # a signature it did not give, as the vendors do).
        block = {**block, "thinking": MOCK_THOUGHT, "signature": MOCK_SIGNATURE}
    if kind == "tool_reference":
        block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [block]}
    if kind in ("tool_addition", "tool_removal"):
        messages = [{"role": "user", "content": "hi"}, {"role": "system", "content": [block]}]
    elif kind in ASSISTANT_BLOCKS or kind.endswith("_tool_result") and kind != "tool_result":
        messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [block]},
                    {"role": "user", "content": "go on"}]
    else:
        messages = [{"role": "user", "content": [block]}]
    check(gateway, {"messages": messages}, f"content block {kind}",
          None if kind in MODELLED_BLOCKS else f"messages.content.{kind}")


def members() -> list[tuple[str, object]]:
    """Every request member but those every request has."""
    seen = {}
    for params in (stable_create.MessageCreateParamsBase, beta_create.MessageCreateParamsBase):
        for member in hints(params):
            if member not in ("model", "max_tokens", "messages"):
                seen.setdefault(member, params)
    return sorted(seen.items())


@pytest.mark.parametrize("member,params", members(), ids=[m for m, _ in members()])
def test_every_request_member_of_the_sdk_is_modelled_or_reported(gateway, member, params):
    body = {"messages": [{"role": "user", "content": "hi"}], member: value(hints(params)[member])}
    reported_as = HEADER_PARAMS.get(member) or (None if member in MODELLED_MEMBERS else member)
    check(gateway, body, f"member {member}", reported_as)


@pytest.mark.parametrize("member", sorted(set(hints(stable.ToolParam)) | set(hints(beta.BetaToolParam))))
def test_every_tool_member_of_the_sdk_is_modelled_or_reported(gateway, member):
    source = stable.ToolParam if member in hints(stable.ToolParam) else beta.BetaToolParam
    tool = with_member(source, member)
    if member == "type":
        tool["type"] = "custom"
    body = {"messages": [{"role": "user", "content": "hi [mock:tool=none]"}], "tools": [tool]}
    check(gateway, body, f"tool member {member}", None if member in MODELLED_TOOL_MEMBERS else f"tools.{member}")
