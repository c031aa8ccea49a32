"""Everything OpenAI's official Python SDK can put in a Chat Completions or
a Responses request is modelled by the gateway or reported, never refused
nor lost in silence.

The walk of `test_sdk_shapes.py` (shared in `sdk_walk`) over the SDK's
own request types: Chat's `CompletionCreateParams` members, every
`ChatCompletionMessageParam` role and its members, every content part and
tool type; Responses' `ResponseCreateParams` members, every input item,
message role and content type, every tool type. Each smallest value goes
to a lane of the same protocol (whose fake takes what OpenAI's reader
takes) and to an Anthropic lane, which must answer 200 and, for what the
IR does not model, name it in `x-switchyard-dropped`.
"""

from __future__ import annotations

import httpx
import pytest

from openai.types.chat import ChatCompletionMessageParam
from openai.types.chat import completion_create_params as chat_create
from openai.types.responses import response_create_params as responses_create

import sdk_walk as walk
from sdk_walk import by_literal, hints, value

CROSS = "lane-anthropic"

# ------------------------------------------------------------------ Chat

# Members every request has.
CHAT_BASE = {"model", "messages"}
# What the Chat reader takes into the IR: they cross, or their own loss is
# named under another path.
CHAT_MODELLED = {
    "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "frequency_penalty", "presence_penalty",
    "stop", "response_format", "reasoning_effort", "tools", "tool_choice", "parallel_tool_calls", "user", "metadata",
    "n",
}
# Transport, not content: the writer of every protocol says it for itself.
CHAT_TRANSPORT = {
    "stream_options": "how a stream is framed (usage is always asked of a lane and given to the caller)",
}
CHAT_MODELLED_PARTS = {"text", "image_url", "file", "refusal"}
# A message's members the IR models (its role and content; a tool
# message's call id; an assistant's calls and refusal, a function
# message's name as its call's).
CHAT_MODELLED_MESSAGE_MEMBERS = {
    "role", "content", "tool_call_id", "tool_calls", "function_call", "refusal",
}
# A function message's name is its result's tool name (and call id).
CHAT_MODELLED_BY_ROLE = {("function", "name")}
CHAT_MODELLED_TOOLS = {"function"}
# A part's smallest value the SDK allows but OpenAI refuses: a file names one.
CHAT_PARTS = {"file": {"type": "file", "file": {"file_id": "file-abc"}}}


def chat_send(gateway: str, lane: str, body: dict) -> httpx.Response:
    body = {"model": lane, **body}
    return httpx.post(f"http://{gateway}/v1/chat/completions", json=body, timeout=30,
                      headers={"authorization": "Bearer unused"})


def chat_check(gateway: str, body: dict, what: str, reported_as: str | None):
    walk.check(lambda lane, b: chat_send(gateway, lane, b), body, what, reported_as, "lane-openai", CROSS)


def chat_roles() -> dict[str, object]:
    return by_literal(ChatCompletionMessageParam, "role")


def chat_parts() -> dict[str, object]:
    found: dict[str, object] = {}
    for message in chat_roles().values():
        if "content" in hints(message):
            for kind, part in by_literal(hints(message)["content"], "type").items():
                found.setdefault(kind, part)
    return found


def chat_members() -> list[str]:
    return sorted(set(hints(chat_create.CompletionCreateParamsBase)) - CHAT_BASE)


def chat_conversation(message: dict) -> list[dict]:
    """`message` at a place its role may be."""
    role = message["role"]
    head = [{"role": "user", "content": "hi"}]
    if role == "tool":
        call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        return head + [{"role": "assistant", "tool_calls": [call]}, {**message, "tool_call_id": "call_1"}]
    if role == "function":
        call = {"name": message["name"], "arguments": "{}"}
        return head + [{"role": "assistant", "function_call": call}, message]
    if role == "assistant":
        return head + [{"content": "hello", **message}, {"role": "user", "content": "go on"}]
    return head + [{"role": "assistant", "content": "hello"}, message, {"role": "user", "content": "go on"}]


def test_the_chat_types_hold_the_shapes_this_test_walks():
    assert {"system", "developer", "user", "assistant", "tool", "function"} <= set(chat_roles())
    assert {"text", "image_url", "input_audio", "file", "refusal"} <= set(chat_parts())
    assert {"function", "custom"} <= set(by_literal(hints(chat_create.CompletionCreateParamsBase)["tools"], "type"))


@pytest.mark.parametrize("member", chat_members())
def test_every_chat_member_is_modelled_or_reported(gateway, member):
    body = {"messages": [{"role": "user", "content": "hi"}],
            member: value(hints(chat_create.CompletionCreateParamsBase)[member])}
    reported_as = None if member in CHAT_MODELLED | set(CHAT_TRANSPORT) else member
    chat_check(gateway, body, f"member {member}", reported_as)


@pytest.mark.parametrize("role,member", [(role, member) for role, message in sorted(chat_roles().items())
                                         for member in sorted(hints(message))])
def test_every_chat_message_member_is_modelled_or_reported(gateway, role, member):
    message = {**value(chat_roles()[role]), member: value(hints(chat_roles()[role])[member])}
    if member == "function_call":
        message[member] = {"name": "f", "arguments": "{}"}
    if member == "tool_calls":
        message[member] = [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        messages = chat_conversation(message)[:-1]
        messages.append({"role": "tool", "tool_call_id": "call_1", "content": "done"})
    else:
        messages = chat_conversation(message)
    modelled = member in CHAT_MODELLED_MESSAGE_MEMBERS or (role, member) in CHAT_MODELLED_BY_ROLE
    reported_as = None if modelled else f"messages.{member}"
    chat_check(gateway, {"messages": messages}, f"{role} message member {member}", reported_as)


@pytest.mark.parametrize("kind", sorted(chat_parts()))
def test_every_chat_content_part_is_modelled_or_reported(gateway, kind):
    part = CHAT_PARTS.get(kind) or value(chat_parts()[kind])
    role = "assistant" if kind == "refusal" else "user"
    messages = chat_conversation({"role": role, "content": [part]})
    chat_check(gateway, {"messages": messages}, f"content part {kind}",
               None if kind in CHAT_MODELLED_PARTS else f"messages.content.{kind}")


def part_members(parts: dict[str, object]) -> list[tuple[str, str]]:
    """(part type, member) for every member of every part, an inner
    object's members as `object.member` (`image_url.detail`)."""
    found = []
    for kind, part in sorted(parts.items()):
        for member, tp in sorted(hints(part).items()):
            inner = [shape for shape in walk.shapes(tp) if member == kind]
            if member == "type":
                continue
            if inner:
                found += [(kind, f"{member}.{name}") for name in sorted(hints(inner[0]))]
            else:
                found.append((kind, member))
    return found


def member_value(tp):
    """The smallest value of a part's member; for a `detail`, one other
    than `auto` (what a part without it gets: nothing to carry)."""
    choice = value(tp)
    return "low" if choice == "auto" else choice


def with_part_member(part: dict, shape, member: str) -> dict:
    """`part` with `member` (`image_url.detail`) set."""
    head, _, inner = member.partition(".")
    if not inner:
        return {**part, head: member_value(hints(shape)[head])}
    inner_shape = walk.shapes(hints(shape)[head])[0]
    return {**part, head: {**part[head], inner: member_value(hints(inner_shape)[inner])}}


# A part's members the IR models (a part type's own data).
CHAT_MODELLED_PART_MEMBERS = {"text", "refusal", "image_url.url", "file.file_data", "file.file_id", "file.filename"}


@pytest.mark.parametrize("kind,member", part_members(chat_parts()))
def test_every_chat_part_member_is_modelled_or_reported(gateway, kind, member):
    part = with_part_member(CHAT_PARTS.get(kind) or value(chat_parts()[kind]), chat_parts()[kind], member)
    if member == "file.file_data":
        part["file"] = {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}
    role = "assistant" if kind == "refusal" else "user"
    messages = chat_conversation({"role": role, "content": [{"type": "text", "text": "hi"}, part]})
    if kind not in CHAT_MODELLED_PARTS:
        reported_as = f"messages.content.{kind}"
    else:
        # An inner object is named after its part's type (`image_url.detail`).
        path = member if member.startswith(f"{kind}.") else f"{kind}.{member}"
        reported_as = None if member in CHAT_MODELLED_PART_MEMBERS else f"messages.content.{path}"
    chat_check(gateway, {"messages": messages}, f"content part {kind} member {member}", reported_as)


@pytest.mark.parametrize("kind", sorted(by_literal(hints(chat_create.CompletionCreateParamsBase)["tools"], "type")))
def test_every_chat_tool_type_is_modelled_or_reported(gateway, kind):
    tool = value(by_literal(hints(chat_create.CompletionCreateParamsBase)["tools"], "type")[kind])
    body = {"messages": [{"role": "user", "content": "hi [mock:tool=none]"}], "tools": [tool]}
    chat_check(gateway, body, f"tool type {kind}", None if kind in CHAT_MODELLED_TOOLS else "tools")


@pytest.mark.parametrize("member", sorted(hints(by_literal(
    hints(chat_create.CompletionCreateParamsBase)["tools"], "type")["function"])["function"].__annotations__))
def test_every_chat_function_member_is_modelled_or_reported(gateway, member):
    shape = hints(by_literal(hints(chat_create.CompletionCreateParamsBase)["tools"], "type")["function"])["function"]
    function = {**value(shape), member: value(hints(shape)[member])}
    body = {"messages": [{"role": "user", "content": "hi [mock:tool=none]"}],
            "tools": [{"type": "function", "function": function}]}
    modelled = {"name", "description", "parameters", "strict"}
    chat_check(gateway, body, f"function member {member}",
               None if member in modelled else f"tools.function.{member}")


# ------------------------------------------------------------- Responses

RESPONSES_BASE = {"model", "input"}
RESPONSES_MODELLED = {
    "instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens", "temperature", "top_p",
    "text", "reasoning", "user", "metadata",
}
# The gateway's own state or the vendor's, never a lane's request.
RESPONSES_SERVER_SIDE = {
    "store": "whether the gateway keeps the reply (`responses.store`), answered by the gateway",
    "previous_response_id": "the gateway splices its stored conversation before the input (a 404 for an unknown id)",
    "stream_options": "how a stream is framed, the writer's own",
}
RESPONSES_MODELLED_ITEMS = {"message", "function_call", "function_call_output", "reasoning"}
RESPONSES_MODELLED_CONTENT = {"input_text", "input_image", "input_file", "output_text", "refusal"}
RESPONSES_MODELLED_TOOLS = {"function"}
# Smallest values the SDK allows that OpenAI refuses: an image or a file names one.
RESPONSES_CONTENT = {
    "input_image": {"type": "input_image", "detail": "auto", "image_url": "https://example.com/a.png"},
    "input_file": {"type": "input_file", "file_id": "file-abc"},
}


def responses_send(gateway: str, lane: str, body: dict) -> httpx.Response:
    body = {"model": lane, **body}
    return httpx.post(f"http://{gateway}/v1/responses", json=body, timeout=30,
                      headers={"authorization": "Bearer unused"})


def responses_check(gateway: str, body: dict, what: str, reported_as: str | None):
    walk.check(lambda lane, b: responses_send(gateway, lane, b), body, what, reported_as, "lane-responses", CROSS)


def responses_params() -> dict:
    return hints(responses_create.ResponseCreateParamsBase)


def input_items() -> dict[str, object]:
    return by_literal(responses_params()["input"], "type")


def input_roles() -> dict[str, object]:
    return by_literal(responses_params()["input"], "role")


def input_contents() -> dict[str, object]:
    found: dict[str, object] = {}
    for shape in walk.shapes(responses_params()["input"]):
        if "role" in hints(shape) and "content" in hints(shape):
            for kind, part in by_literal(hints(shape)["content"], "type").items():
                found.setdefault(kind, part)
    return found


def responses_tools() -> dict[str, object]:
    return by_literal(responses_params()["tools"], "type")


def test_the_responses_types_hold_the_shapes_this_test_walks():
    assert {"message", "function_call", "function_call_output", "reasoning", "web_search_call"} <= set(input_items())
    assert {"user", "assistant", "system", "developer"} <= set(input_roles())
    assert {"input_text", "input_image", "input_file", "output_text"} <= set(input_contents())
    assert {"function", "web_search", "mcp"} <= set(responses_tools())


@pytest.mark.parametrize("member", sorted(set(responses_params()) - RESPONSES_BASE - set(RESPONSES_SERVER_SIDE)))
def test_every_responses_member_is_modelled_or_reported(gateway, member):
    body = {"input": "hi", member: value(responses_params()[member])}
    responses_check(gateway, body, f"member {member}", None if member in RESPONSES_MODELLED else member)


@pytest.mark.parametrize("role", sorted(input_roles()))
def test_every_responses_role_is_carried(gateway, role):
    items = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
             {"role": role, "content": "a note"}, {"role": "user", "content": "go on"}]
    responses_check(gateway, {"input": items}, f"role {role}", None)


@pytest.mark.parametrize("kind", sorted(input_items()))
def test_every_responses_input_item_is_modelled_or_reported(gateway, kind):
    item = {**value(input_items()[kind]), "type": kind}
    items = [{"role": "user", "content": "hi"}, item]
    if kind == "function_call":
        item["call_id"] = "call_1"
        items.append({"type": "function_call_output", "call_id": "call_1", "output": "done"})
    elif kind == "function_call_output":
        items[1:] = [{"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
                     {**item, "call_id": "call_1"}]
    elif kind == "reasoning":
        items.append({"role": "user", "content": "go on"})
    responses_check(gateway, {"input": items}, f"input item {kind}",
                    None if kind in RESPONSES_MODELLED_ITEMS else "input")


@pytest.mark.parametrize("kind", sorted(input_contents()))
def test_every_responses_content_type_is_modelled_or_reported(gateway, kind):
    part = RESPONSES_CONTENT.get(kind) or value(input_contents()[kind])
    if kind in ("output_text", "refusal"):
        part = {**part, "annotations": []} if kind == "output_text" else part
        items = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [part]},
                 {"role": "user", "content": "go on"}]
    else:
        items = [{"role": "user", "content": [part]}]
    responses_check(gateway, {"input": items}, f"content {kind}",
                    None if kind in RESPONSES_MODELLED_CONTENT else f"input.content.{kind}")


@pytest.mark.parametrize("kind", sorted(responses_tools()))
def test_every_responses_tool_type_is_modelled_or_reported(gateway, kind):
    tool = {**value(responses_tools()[kind]), "type": kind}
    body = {"input": "hi [mock:tool=none]", "tools": [tool]}
    responses_check(gateway, body, f"tool type {kind}", None if kind in RESPONSES_MODELLED_TOOLS else "tools")


RESPONSES_MODELLED_CONTENT_MEMBERS = {
    "input_text.text", "input_image.image_url", "input_image.file_id", "input_file.file_data", "input_file.file_id",
    "input_file.file_url", "input_file.filename", "output_text.text", "output_text.annotations", "refusal.refusal",
    # a cache breakpoint is the IR's `cache_control`
    "input_text.prompt_cache_breakpoint", "input_image.prompt_cache_breakpoint", "input_file.prompt_cache_breakpoint",
}


@pytest.mark.parametrize("kind,member", part_members(input_contents()))
def test_every_responses_content_member_is_modelled_or_reported(gateway, kind, member):
    part = with_part_member(RESPONSES_CONTENT.get(kind) or value(input_contents()[kind]), input_contents()[kind], member)
    if member == "file_data":
        part = {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}
    if member == "file_url":
        part = {"type": "input_file", "file_url": "https://example.com/a.pdf"}
    if member == "file_id" and kind == "input_image":
        part = {"type": "input_image", "detail": "auto", "file_id": "file-abc"}
    if kind in ("output_text", "refusal"):
        part = {"annotations": [], **part} if kind == "output_text" else part
        items = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [part]},
                 {"role": "user", "content": "go on"}]
    else:
        items = [{"role": "user", "content": [{"type": "input_text", "text": "hi"}, part]}]
    reported_as = None if f"{kind}.{member}" in RESPONSES_MODELLED_CONTENT_MEMBERS else f"input.content.{kind}.{member}"
    responses_check(gateway, {"input": items}, f"content {kind} member {member}", reported_as)


def message_items() -> list[tuple[str, object, str]]:
    """(item shape name, shape, member) for every member of every message item shape."""
    return [(shape.__name__, shape, member) for shape in walk.shapes(responses_params()["input"])
            if "role" in hints(shape) and "content" in hints(shape) for member in sorted(hints(shape))]


RESPONSES_MODELLED_MESSAGE_MEMBERS = {"role", "content", "type"}


@pytest.mark.parametrize("name,shape,member", message_items(), ids=[f"{n}-{m}" for n, _, m in message_items()])
def test_every_responses_message_member_is_modelled_or_reported(gateway, name, shape, member):
    item = {**value(shape), member: value(hints(shape)[member]), "type": "message"}
    if "output_text" in str(hints(shape)["content"]) or item["role"] == "assistant":
        item.update(role="assistant", content=[{"type": "output_text", "text": "hello", "annotations": []}])
    else:
        item.update(role="user", content="a note")
    items = [{"role": "user", "content": "hi"}, item, {"role": "user", "content": "go on"}]
    # A message's own members are reported as every protocol's are, under `messages`.
    reported_as = None if member in RESPONSES_MODELLED_MESSAGE_MEMBERS else f"messages.{member}"
    responses_check(gateway, {"input": items}, f"{name} member {member}", reported_as)
