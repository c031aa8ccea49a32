"""Everything Cohere's official Python SDK can put in a v2 chat request is
modelled by the gateway or reported, never refused nor lost in silence.

The walk of `test_sdk_shapes.py` (shared in `sdk_walk`) over the SDK's
own request types: the members `ClientV2.chat` takes, every
`ChatMessageV2` role with its members and content types, `ToolV2` and its
function. Each smallest value goes to a Cohere lane (whose fake takes what
Cohere's reader takes) and to an OpenAI lane, which must answer 200 and,
for what the IR does not model, name it in `x-switchyard-dropped`.
"""

from __future__ import annotations

import typing

import httpx
import pytest

import cohere.types as cohere_types
from cohere.v2 import client as v2_client

import sdk_walk as walk
from sdk_walk import by_literal, hints, value

# The SDK's own keyword arguments, not members of the body.
SDK_ONLY = {"self", "return", "request_options"}
BASE = {"model", "messages"}
MODELLED = {
    "tools", "tool_choice", "max_tokens", "temperature", "p", "k", "stop_sequences", "seed", "frequency_penalty",
    "presence_penalty", "response_format", "strict_tools", "thinking", "logprobs",
}
MODELLED_MESSAGE_MEMBERS = {"role", "content", "tool_calls", "tool_plan", "tool_call_id"}
# Reported under a modelled field's own name (`ir::Field::Citations`).
REPORTED_MESSAGE_MEMBERS = {"citations": "citations"}
MODELLED_CONTENT = {"text", "image_url", "thinking", "document"}
MODELLED_TOOL_MEMBERS = {"type", "function"}
MODELLED_FUNCTION_MEMBERS = {"name", "description", "parameters"}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
# Smallest values the SDK allows that Cohere refuses: a tool names its function.
MEMBERS = {"tools": [TOOL], "tool_choice": "NONE"}


def request_types() -> dict:
    raw = typing.get_type_hints(v2_client.V2Client.chat, include_extras=True)
    return {name: walk.unwrap(tp) for name, tp in raw.items() if name not in SDK_ONLY}


def roles() -> dict[str, object]:
    return by_literal(request_types()["messages"], "role")


def contents() -> dict[str, tuple[str, object]]:
    """type → (a role whose content holds it, its shape)."""
    found: dict[str, tuple[str, object]] = {}
    for role, message in roles().items():
        if "content" in hints(message):
            for kind, part in by_literal(hints(message)["content"], "type").items():
                found.setdefault(kind, (role, part))
    return found


def send(gateway: str, lane: str, body: dict) -> httpx.Response:
    body = {"model": lane, **body}
    return httpx.post(f"http://{gateway}/v2/chat", json=body, timeout=30, headers={"authorization": "Bearer unused"})


def check(gateway: str, body: dict, what: str, reported_as: str | None):
    walk.check(lambda lane, b: send(gateway, lane, b), body, what, reported_as, "lane-cohere", "lane-openai")


def conversation(message: dict) -> list[dict]:
    """`message` at a place its role may be."""
    head = [{"role": "user", "content": "hi"}]
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    if message["role"] == "tool":
        return head + [{"role": "assistant", "tool_calls": [call]}, {**message, "tool_call_id": "call_1"}]
    if message["role"] == "assistant":
        return head + [{"content": "hello", **message}, {"role": "user", "content": "go on"}]
    return head + [{"role": "assistant", "content": "hello"}, message, {"role": "user", "content": "go on"}]


def test_the_sdk_has_the_shapes_this_test_walks():
    assert {"user", "assistant", "system", "tool"} <= set(roles())
    assert {"text", "image_url", "document"} <= set(contents())
    assert {"documents", "citation_options", "safety_mode", "thinking"} <= set(request_types())


@pytest.mark.parametrize("member", sorted(set(request_types()) - BASE))
def test_every_request_member_is_modelled_or_reported(gateway, member):
    body = {"messages": [{"role": "user", "content": "hi"}], member: MEMBERS.get(member, value(request_types()[member]))}
    if member == "tool_choice":
        body["tools"] = [TOOL]
    check(gateway, body, f"member {member}", None if member in MODELLED else member)


@pytest.mark.parametrize("role,member", [(role, member) for role, message in sorted(roles().items())
                                         for member in sorted(hints(message))])
def test_every_message_member_is_modelled_or_reported(gateway, role, member):
    message = {**value(roles()[role]), member: value(hints(roles()[role])[member])}
    if member == "tool_calls":
        message[member] = [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        messages = conversation(message)[:-1] + [{"role": "tool", "tool_call_id": "call_1", "content": "done"}]
    else:
        messages = conversation(message)
    reported_as = None if member in MODELLED_MESSAGE_MEMBERS else REPORTED_MESSAGE_MEMBERS.get(member, f"messages.{member}")
    check(gateway, {"messages": messages, "tools": [TOOL]}, f"{role} message member {member}", reported_as)


@pytest.mark.parametrize("kind", sorted(contents()))
def test_every_content_type_is_modelled_or_reported(gateway, kind):
    role, shape = contents()[kind]
    part = value(shape)
    if kind == "image_url":
        part["image_url"]["url"] = "https://example.com/a.png"
    messages = conversation({"role": role, "content": [part]})
    check(gateway, {"messages": messages, "tools": [TOOL]}, f"{role} content {kind}",
          None if kind in MODELLED_CONTENT else f"messages.content.{kind}")


@pytest.mark.parametrize("member", sorted(hints(cohere_types.ToolV2)))
def test_every_tool_member_is_modelled_or_reported(gateway, member):
    tool = {**TOOL, member: TOOL.get(member) or value(hints(cohere_types.ToolV2)[member])}
    body = {"messages": [{"role": "user", "content": "hi [mock:tool=none]"}], "tools": [tool]}
    check(gateway, body, f"tool member {member}", None if member in MODELLED_TOOL_MEMBERS else f"tools.{member}")


@pytest.mark.parametrize("member", sorted(hints(cohere_types.ToolV2Function)))
def test_every_tool_function_member_is_modelled_or_reported(gateway, member):
    function = {**TOOL["function"], member: value(hints(cohere_types.ToolV2Function)[member])}
    if member == "parameters":
        function[member] = TOOL["function"]["parameters"]
    body = {"messages": [{"role": "user", "content": "hi [mock:tool=none]"}],
            "tools": [{"type": "function", "function": function}]}
    check(gateway, body, f"tool function member {member}",
          None if member in MODELLED_FUNCTION_MEMBERS else f"tools.function.{member}")
