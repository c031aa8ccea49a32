"""Reasoning through the OpenAI SDKs, from lanes that think: the Chat
Completions caller gets the reasoning text in `reasoning_content` and signed
reasoning in `thinking_blocks`, streamed and not, and a Responses caller gets
reasoning items whose `encrypted_content` carries the signature. Echoed back
in a tool loop, the signed reasoning reaches the lane (the mock says
"(reasoning kept)" when the history carries the signature it gave)."""

import openai
import pytest

from sdk_support import MOCK_SIGNATURE as SIGNATURE, MOCK_THOUGHT as THOUGHT, QUESTION, TOOL_RESULT, SCHEMA

# Lanes whose protocol carries a reasoning signature back to the caller.
SIGNING_LANES = ["anthropic", "bedrock"]
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather", "parameters": SCHEMA}}]
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "description": "weather", "parameters": SCHEMA}]


@pytest.fixture(scope="module")
def client(gateway):
    with openai.OpenAI(base_url=f"http://{gateway}/v1", api_key="x", max_retries=0) as made:
        yield made


def extra(obj, name):
    """A field the OpenAI SDK does not model, as it parsed it."""
    return (getattr(obj, "model_extra", None) or {}).get(name)


def chat_turn(client, model, messages, stream):
    """(reasoning text, thinking blocks, the assistant message to echo, its text)."""
    kwargs = dict(model=model, messages=messages, tools=CHAT_TOOLS, reasoning_effort="medium")
    if not stream:
        message = client.chat.completions.create(**kwargs).choices[0].message
        echoed = message.model_dump(exclude_none=True)
        return extra(message, "reasoning_content"), extra(message, "thinking_blocks") or [], echoed, message.content or ""
    reasoning, blocks, text, calls = "", [], "", {}
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        reasoning += extra(delta, "reasoning_content") or ""
        blocks += extra(delta, "thinking_blocks") or []
        text += delta.content or ""
        for call in delta.tool_calls or []:
            slot = calls.setdefault(call.index, {"id": None, "type": "function", "function": {"name": None, "arguments": ""}})
            slot["id"] = call.id or slot["id"]
            slot["function"]["name"] = call.function.name or slot["function"]["name"]
            slot["function"]["arguments"] += call.function.arguments or ""
    echoed = {"role": "assistant", "content": text or None, "thinking_blocks": blocks}
    if calls:
        echoed["tool_calls"] = [calls[i] for i in sorted(calls)]
    return reasoning, blocks, echoed, text


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("lane", ["anthropic", "bedrock", "gemini", "cohere", "responses"])
def test_chat_callers_get_the_lanes_reasoning(client, lane, stream):
    reasoning, blocks, _, _ = chat_turn(client, f"lane-{lane}", [{"role": "user", "content": QUESTION}], stream)
    assert reasoning == THOUGHT, f"reasoning_content {reasoning!r}"
    if lane in SIGNING_LANES:
        assert blocks == [{"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}], blocks


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("lane", SIGNING_LANES)
def test_chat_callers_echo_signed_reasoning_back_in_a_tool_loop(client, lane, stream):
    question = {"role": "user", "content": QUESTION}
    _, _, assistant, _ = chat_turn(client, f"lane-{lane}", [question], stream)
    call = assistant["tool_calls"][0]
    result = {"role": "tool", "tool_call_id": call["id"], "content": TOOL_RESULT}
    _, _, _, text = chat_turn(client, f"lane-{lane}", [question, assistant, result], stream)
    assert TOOL_RESULT in text and "(reasoning kept)" in text, f"second turn {text!r}"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("lane", SIGNING_LANES)
def test_responses_callers_round_trip_encrypted_reasoning(client, lane, stream):
    kwargs = dict(model=f"lane-{lane}", tools=RESPONSES_TOOLS, reasoning={"effort": "medium"})
    question = [{"role": "user", "content": QUESTION}]
    if stream:
        with client.responses.stream(input=question, **kwargs) as s:
            first = s.get_final_response()
    else:
        first = client.responses.create(input=question, **kwargs)
    reasoning = [item for item in first.output if item.type == "reasoning"]
    assert reasoning and reasoning[0].encrypted_content == SIGNATURE, first.output
    call = next(item for item in first.output if item.type == "function_call")
    items = question + [item.model_dump(exclude_none=True) for item in first.output]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": TOOL_RESULT})
    if stream:
        with client.responses.stream(input=items, **kwargs) as s:
            second = s.get_final_response()
    else:
        second = client.responses.create(input=items, **kwargs)
    assert "(reasoning kept)" in second.output_text, second.output_text


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_signed_reasoning_keeps_a_conversation_on_its_vendors_lanes(client, gateway, stream):
    """The `mixed` pool spreads requests over OpenAI, Gemini and Anthropic
    lanes; a conversation carrying Claude's signed thinking only ever goes
    to the Anthropic one (an Anthropic SDK caller and a Chat caller with
    `thinking_blocks` alike)."""
    import anthropic

    claude = anthropic.Anthropic(base_url=f"http://{gateway}", api_key="x", max_retries=0)
    history = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE},
            {"type": "text", "text": "let me check"},
        ]},
        {"role": "user", "content": "and tomorrow?"},
    ]
    chat_history = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "let me check",
         "thinking_blocks": [{"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}]},
        {"role": "user", "content": "and tomorrow?"},
    ]
    for _ in range(4):
        if stream:
            with claude.messages.stream(model="mixed", max_tokens=64, messages=history) as s:
                text = s.get_final_message().content[-1].text
            chunks = client.chat.completions.create(model="mixed", messages=chat_history, stream=True)
            chat_text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        else:
            text = claude.messages.create(model="mixed", max_tokens=64, messages=history).content[-1].text
            chat_text = client.chat.completions.create(model="mixed", messages=chat_history).choices[0].message.content
        assert text.startswith("[anthropic wire-anthropic]"), text
        assert chat_text.startswith("[anthropic wire-anthropic]"), chat_text


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_anthropic_betas_reach_anthropic_lanes_and_are_reported_elsewhere(gateway, stream):
    """The Anthropic SDK's `betas` reach an Anthropic lane as its
    `anthropic-beta` header (the mock names what it got); a lane of another
    protocol cannot take them and the reply says so."""
    import anthropic

    claude = anthropic.Anthropic(base_url=f"http://{gateway}", api_key="x", max_retries=0)
    betas = ["interleaved-thinking-2025-05-14", "context-1m-2025-08-07"]
    kwargs = dict(max_tokens=64, messages=[{"role": "user", "content": QUESTION}], betas=betas)
    if stream:
        with claude.beta.messages.stream(model="lane-anthropic", **kwargs) as s:
            text = s.get_final_message().content[-1].text
    else:
        text = claude.beta.messages.create(model="lane-anthropic", **kwargs).content[-1].text
    assert text.endswith("[anthropic-beta: " + ",".join(betas) + "]"), text
    raw = claude.beta.messages.with_raw_response.create(model="lane-openai", **kwargs)
    assert raw.headers.get("x-switchyard-dropped") == "anthropic-beta", dict(raw.headers)
    assert "anthropic-beta" not in raw.parse().content[-1].text
