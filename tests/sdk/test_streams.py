"""Streams that break mid-answer, in a pool that continues them
(`failover: { stream_failure: continue }`): the caller's SDK reads one
whole answer, no text twice, one ending. The `continued` pool's first lane
cuts its stream after N bytes of text (`[mock:cut=N]`); `[mock:plain]`
makes every lane's answer the caller's text alone."""

import anthropic
import openai
import pytest

ANSWER = "The quick brown fox jumps over the lazy dog, twice."
CUTS = [1, 9, 20, len(ANSWER) - 1]


def asked(cut):
    return f"[mock:plain] [mock:cut={cut}] {ANSWER}"


@pytest.mark.parametrize("cut", CUTS)
def test_openai_chat_reads_one_whole_answer(gateway, cut):
    client = openai.OpenAI(base_url=f"http://{gateway}/v1", api_key="x", max_retries=0)
    chunks = list(client.chat.completions.create(
        model="continued", messages=[{"role": "user", "content": asked(cut)}], stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ANSWER
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]


@pytest.mark.parametrize("cut", CUTS)
def test_anthropic_reads_one_whole_answer(gateway, cut):
    client = anthropic.Anthropic(base_url=f"http://{gateway}", api_key="x", max_retries=0)
    with client.messages.stream(model="continued", max_tokens=256,
                                messages=[{"role": "user", "content": asked(cut)}]) as s:
        message = s.get_final_message()
    assert [b.text for b in message.content if b.type == "text"] == [ANSWER]
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 0


# What each SDK reports for a stream that ends in its protocol's error
# without raising: Responses `response.failed`, Cohere `finish_reason: ERROR`.
def saw_the_cut(result_or_error) -> bool:
    if isinstance(result_or_error, Exception):
        return True
    stop = str(getattr(result_or_error.stop, "name", result_or_error.stop) or "").lower()
    return stop in ("failed", "error", "incomplete")


CUT_KINDS = {
    "before-content": ("chat", 0),
    "mid-text": ("chat", 12),
    "mid-tool-call": ("tool", 5),
}


@pytest.mark.parametrize("kind", list(CUT_KINDS))
@pytest.mark.parametrize("ingress", ["openai-chat", "openai-responses", "anthropic", "gemini", "cohere", "bedrock"])
def test_every_sdk_tells_a_cut_stream_from_a_complete_one(drivers, lane_failures, ingress, kind):
    """The contract (docs/protocols.md, "Cut or complete"): a stream cut
    before content, mid-text or mid-tool-call reaches each caller's SDK as
    its protocol's error, never as a clean ending, and the lane's breaker
    counts one failure; the same request uncut ends cleanly."""
    what, cut = CUT_KINDS[kind]
    driver = drivers[ingress]
    failures = lane_failures("cut", "cut-anthropic")
    text = f"[mock:cut={cut}] weather in Paris?"
    try:
        seen = driver.tool_call("cut", True, text) if what == "tool" else driver.chat("cut", text, True)
    except Exception as err:  # noqa: BLE001 - any SDK error is the caller seeing the cut
        seen = err
    assert saw_the_cut(seen), f"{ingress} read a cut stream ({kind}) as complete: {seen!r}"
    assert lane_failures("cut", "cut-anthropic") == failures + 1, "the breaker counts the cut once"
    whole = driver.tool_call("lane-anthropic", True) if what == "tool" else driver.chat("lane-anthropic", "weather in Paris?", True)
    assert not saw_the_cut(whole), f"{ingress} read a whole stream as cut: {whole!r}"


@pytest.mark.parametrize("caller", ["openai-chat", "openai-responses", "anthropic", "gemini", "cohere", "bedrock"])
def test_every_sdk_tells_a_stream_cut_mid_thinking(gateway, lane_failures, monkeypatch, caller):
    """A reasoning stream cut mid-thinking (5 bytes into the lane's
    thinking) reaches each SDK as its protocol's error, not a clean end."""
    import test_reasoning_matrix as matrix

    question = "[mock:cut=5] weather in Paris?"
    monkeypatch.setattr(matrix, "QUESTION", question)
    failures = lane_failures("lane-cutthink", "cutthink-anthropic")
    try:
        if caller == "cohere":
            outcome = cohere_thinking_stream(gateway, question)
        elif caller == "bedrock":
            outcome = bedrock_thinking_stream(gateway, question)
        else:
            outcome = matrix.CALLERS[caller](gateway, "cutthink", True, matrix.Headers())
    except Exception as err:  # noqa: BLE001 - the SDK saw the cut
        outcome = err
    assert isinstance(outcome, Exception) or outcome == "ERROR", (
        f"{caller} read a stream cut mid-thinking as complete ({outcome!r})"
    )
    assert lane_failures("lane-cutthink", "cutthink-anthropic") == failures + 1, "the breaker counts the cut once"
    # The helpers read a whole thinking stream as whole.
    if caller == "cohere":
        assert cohere_thinking_stream(gateway, "weather in Paris?", "lane-anthropic") == "COMPLETE"
    if caller == "bedrock":
        assert bedrock_thinking_stream(gateway, "weather in Paris?", "lane-anthropic")


def cohere_thinking_stream(gateway, question, model="lane-cutthink"):
    """The finish reason Cohere's SDK reads at the end of the whole stream."""
    import cohere

    client = cohere.ClientV2(api_key="x", base_url=f"http://{gateway}", max_retries=0)
    finish = None
    for event in client.chat_stream(model=model, messages=[{"role": "user", "content": question}],
                                    thinking={"type": "enabled", "token_budget": 2048}):
        if event.type == "message-end":
            finish = event.delta.finish_reason
    return finish


def bedrock_thinking_stream(gateway, question, model="lane-cutthink"):
    """Every event of the Converse stream, read to its end (an exception
    frame raises)."""
    import boto3
    from botocore.config import Config

    client = boto3.client("bedrock-runtime", endpoint_url=f"http://{gateway}", region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x",
                          config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
    r = client.converse_stream(modelId=model, messages=[{"role": "user", "content": [{"text": question}]}],
                               inferenceConfig={"maxTokens": 4096},
                               additionalModelRequestFields={"thinking": {"type": "enabled", "budget_tokens": 2048}})
    return list(r["stream"])
