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

import collections.abc
import json
import typing
from pathlib import Path

import httpx
import pytest
import typing_extensions as te

import anthropic.types as stable
import anthropic.types.beta as beta
from anthropic.types import message_create_params as stable_create
from anthropic.types.beta import message_create_params as beta_create

from sdk_support import MOCK_SIGNATURE, MOCK_THOUGHT

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


def unwrap(tp):
    while te.get_origin(tp) in (te.Required, te.NotRequired, typing.Required, typing.NotRequired, te.Annotated,
                                typing.Annotated):
        tp = te.get_args(tp)[0]
    return tp


def hints(typed_dict) -> dict:
    return {name: unwrap(tp) for name, tp in typing.get_type_hints(typed_dict, include_extras=True).items()}


def required(typed_dict) -> set[str]:
    # `__required_keys__` misses `Required[...]` written as a string
    # annotation (the SDK's `from __future__ import annotations`).
    raw = typing.get_type_hints(typed_dict, include_extras=True)
    return {name for name, tp in raw.items() if te.get_origin(tp) in (te.Required, typing.Required)}


def options(tp) -> list:
    tp = unwrap(tp)
    if te.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType", typing.Union)):
        return [unwrap(arg) for arg in te.get_args(tp) if arg is not type(None)]
    return [tp]


def items_of(tp):
    """The element type of an iterable type, else None."""
    origin = te.get_origin(tp)
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence, typing.Iterable, typing.List,
                  typing.Sequence):
        return unwrap(te.get_args(tp)[0])
    return None


def typed_dicts(tp) -> list:
    """Every TypedDict a type may hold at its top (through unions and lists)."""
    found = []
    for option in options(tp):
        inner = items_of(option)
        if inner is not None:
            found += typed_dicts(inner)
        elif te.is_typeddict(option):
            found.append(option)
    return found


def literal_of(typed_dict, member: str):
    tp = hints(typed_dict).get(member)
    return te.get_args(tp)[0] if tp is not None and te.get_origin(tp) is te.Literal else None


def value(tp, depth: int = 0):
    """The smallest value of `tp`: required members only, first choices."""
    tp = unwrap(tp)
    if depth > 6:
        return {}
    origin = te.get_origin(tp)
    if origin is te.Literal:
        return te.get_args(tp)[0]
    if origin in (typing.Union,) or str(origin) == "<class 'types.UnionType'>":
        choices = options(tp)
        # A plain value first (a string for `str | TypedDict`), else the first shape.
        for simple in (str, int, float, bool):
            if simple in choices:
                return value(simple, depth + 1)
        return value(choices[0], depth + 1)
    inner = items_of(tp)
    if inner is not None:
        return [value(inner, depth + 1)]
    if origin in (dict, collections.abc.Mapping, typing.Dict):
        return {}
    if te.is_typeddict(tp):
        fields = hints(tp)
        return {name: value(fields[name], depth + 1) for name in sorted(required(tp))}
    return {str: "x", int: 1, float: 1.0, bool: True}.get(tp, {})


def with_member(typed_dict, member: str) -> dict:
    body = value(typed_dict)
    body[member] = value(hints(typed_dict)[member])
    return body


def block_types() -> dict[str, object]:
    """type → block param, from the content of every message param."""
    found: dict[str, object] = {}
    for message in typed_dicts(stable.MessageParam) + typed_dicts(beta.BetaMessageParam):
        for block in typed_dicts(hints(message)["content"]):
            kind = literal_of(block, "type")
            if kind is not None:
                found.setdefault(kind, block)
            # A tool result's own content blocks.
            if kind in ("tool_result",) and "content" in hints(block):
                for part in typed_dicts(hints(block)["content"]):
                    part_kind = literal_of(part, "type")
                    if part_kind is not None:
                        found.setdefault(part_kind, part)
    return found


def roles() -> set[str]:
    return {literal_of(m, "role") for m in typed_dicts(stable.MessageParam) + typed_dicts(beta.BetaMessageParam)}


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


def dropped(response: httpx.Response) -> list[str]:
    header = response.headers.get("x-switchyard-dropped", "")
    return [path.strip() for path in header.split(",") if path.strip()]


def check(gateway: str, body: dict, what: str, reported_as: str | None):
    """200 from an Anthropic lane and an OpenAI lane; with `reported_as`,
    the OpenAI lane names a path under it."""
    same = send(gateway, "lane-anthropic", body)
    assert same.status_code == 200, f"{what}: the Anthropic lane answered {same.status_code} {same.text[:500]}"
    cross = send(gateway, "lane-openai", body)
    assert cross.status_code == 200, f"{what}: the OpenAI lane answered {cross.status_code} {cross.text[:500]}"
    if reported_as is not None:
        paths = dropped(cross)
        assert any(p == reported_as or p.startswith(reported_as + ".") for p in paths), \
            f"{what} is neither modelled nor reported: x-switchyard-dropped = {paths}"


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
