"""Guardrails through every official SDK, streamed and not: a refused
request reaches each SDK as its protocol's 400 naming the policy and rule
(never the text); a request's email and key are masked before the lane
sees them (the mock echoes what it got); a card number in the reply, which
the mock streams in four chunks, never reaches the caller unmasked; signed
thinking is never rewritten: a mask over a word of it refuses the turn in
progress, and leaves a past turn's thinking out."""

import time

import anthropic
import pytest

INGRESSES = ["openai-chat", "openai-responses", "anthropic", "gemini", "cohere", "bedrock"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("ingress", INGRESSES)
def test_a_blocked_request_is_refused_in_the_callers_protocol(drivers, ingress, stream):
    with pytest.raises(Exception) as refused:
        drivers[ingress].chat("guarded", "please say the Forbidden-Phrase", stream)
    message = str(refused.value)
    assert "policy `words`" in message, message
    assert "forbidden-phrase" not in message.lower(), f"the matched text leaked: {message}"
    if ingress == "bedrock":
        assert "ValidationException" in message, message


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("ingress", INGRESSES)
def test_a_request_is_masked_before_the_lane_sees_it(drivers, ingress, stream):
    said = "mail ann@example.com twice ann@example.com key AKIAIOSFODNN7EXAMPLE"
    result = drivers[ingress].chat("guarded", said, stream)
    assert "mail [EMAIL_1] twice [EMAIL_1] key [SECRET_1]" in result.text, result.text
    assert "ann@example.com" not in result.text and "AKIA" not in result.text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("ingress", INGRESSES)
def test_a_card_in_the_reply_never_leaks_even_split_across_chunks(drivers, ingress, stream):
    result = drivers[ingress].chat("guarded", "card 4111 1111 1111 1111 end", stream)
    assert "card [CARD_1] end" in result.text, result.text
    assert "4111" not in result.text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("ingress", INGRESSES)
def test_a_reversible_mask_gives_the_caller_its_value_back(drivers, ingress, stream):
    # The lane sees `[EMAIL_1]` (crates/gateway/tests/guardrails.rs checks
    # what the upstream got); the mock echoes it and the caller reads the value.
    result = drivers[ingress].chat("private", "mail ann@example.com today", stream)
    assert "mail ann@example.com today" in result.text, result.text
    assert "[EMAIL_1]" not in result.text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("ingress", INGRESSES)
def test_a_moderator_flags_and_its_silence_follows_on_error(drivers, ingress, stream):
    driver = drivers[ingress]
    with pytest.raises(Exception) as refused:
        driver.chat("checked", "something bad", stream)
    assert "policy `checked` (rule `moderator`)" in str(refused.value), str(refused.value)
    assert driver.chat("checked", "something fine", stream).text
    started = time.monotonic()
    assert driver.chat("lenient", "hello", stream).text, "on_error: allow lets it pass"
    assert time.monotonic() - started < 2.5, "bounded by the moderator's timeout"
    with pytest.raises(Exception) as unmoderated:
        driver.chat("strict", "hello", stream)
    assert "policy `strict`" in str(unmoderated.value), str(unmoderated.value)


LOOKUP = {"name": "lookup", "description": "look it up",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def claude_turn(client, model, messages, stream):
    """One Anthropic SDK turn that thinks, offered a tool: the reply's
    content blocks (as dicts to send back) and its headers."""
    kwargs = dict(model=model, max_tokens=2048, thinking={"type": "enabled", "budget_tokens": 1024},
                  tools=[LOOKUP], messages=messages)
    if stream:
        with client.messages.stream(**kwargs) as s:
            message, headers = s.get_final_message(), s.response.headers
    else:
        raw = client.messages.with_raw_response.create(**kwargs)
        message, headers = raw.parse(), raw.headers
    return [block.model_dump(exclude_none=True) for block in message.content], headers


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_signed_thinking_is_never_rewritten(gateway, stream):
    """The mock's signed thinking ("...a deterministic answer") and its tool
    call come back with the tool's result (an email). A pool whose request
    policy masks "deterministic" would change that thinking under its
    signature in the tool loop in progress: the turn is refused in
    Anthropic's shape, naming the policy (not the vendor's 400 for a broken
    signature). Without that policy the result's email is masked and the
    turn served: the lane, which refuses thinking whose text is not the
    text it signed, got it byte for byte and says it kept it. A turn later
    the thinking is a past turn's, which Anthropic lets go: the policy's
    pool leaves it out (naming it in x-switchyard-omitted) and serves."""
    claude = anthropic.Anthropic(base_url=f"http://{gateway}", api_key="x", max_retries=0)
    question = {"role": "user", "content": "what now?"}
    blocks, _ = claude_turn(claude, "thinking-pii", [question], stream)
    assert blocks[0]["type"] == "thinking" and "deterministic" in blocks[0]["thinking"], blocks
    call = next(block for block in blocks if block["type"] == "tool_use")
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"],
                                           "content": "mail ann@example.com"}]}
    loop = [question, {"role": "assistant", "content": blocks}, result]
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude_turn(claude, "thinking-plans", loop, stream)
    message = str(refused.value)
    assert "policy `plans`" in message and "would alter signed reasoning" in message, message
    assert "Invalid `signature`" not in message and "ann@example.com" not in message, message

    served, _ = claude_turn(claude, "thinking-pii", loop, stream)
    assert "returned: mail [EMAIL_1] (reasoning kept)" in served[-1]["text"], served

    later = loop + [{"role": "assistant", "content": served},
                    {"role": "user", "content": "mail ann@example.com [mock:tool=none]"}]
    answered, headers = claude_turn(claude, "thinking-plans", later, stream)
    assert "you said: mail [EMAIL_1]" in answered[-1]["text"], answered
    assert headers.get("x-switchyard-omitted") == "messages.1.content.0, messages.3.content.0", dict(headers)
