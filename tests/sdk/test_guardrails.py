"""Guardrails through every official SDK, streamed and not: a refused
request reaches each SDK as its protocol's 400 naming the policy and rule
(never the text); a request's email and key are masked before the lane
sees them (the mock echoes what it got); a card number in the reply, which
the mock streams in four chunks, never reaches the caller unmasked."""

import time

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
