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


def test_a_cut_stream_without_continuation_ends_in_the_callers_error(gateway):
    client = anthropic.Anthropic(base_url=f"http://{gateway}", api_key="x", max_retries=0)
    with pytest.raises(anthropic.APIStatusError):
        with client.messages.stream(model="cut-anthropic", max_tokens=256,
                                    messages=[{"role": "user", "content": asked(10)}]) as s:
            s.get_final_message()
