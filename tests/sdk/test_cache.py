"""The response cache through the official SDKs: an answer stored for an
OpenAI caller is a hit for an Anthropic caller asking the same (in its own
shape), a stream is replayed as a stream, and `Cache-Control: no-cache`
bypasses."""

import uuid

import anthropic
import openai


def question() -> str:
    return f"what does the cache keep? {uuid.uuid4()}"


def test_a_hit_from_another_dialect(gateway):
    asked = question()
    chat = openai.OpenAI(base_url=f"http://{gateway}/v1", api_key="x", max_retries=0)
    first = chat.chat.completions.with_raw_response.create(
        model="cached", max_tokens=100, messages=[{"role": "user", "content": asked}])
    assert first.headers["x-switchyard-cache"] == "miss"
    text = first.parse().choices[0].message.content
    claude = anthropic.Anthropic(base_url=f"http://{gateway}", api_key="x", max_retries=0)
    again = claude.messages.with_raw_response.create(
        model="cached", max_tokens=100, messages=[{"role": "user", "content": asked}])
    assert again.headers["x-switchyard-cache"] == "hit"
    assert int(again.headers["age"]) >= 0
    assert [b.text for b in again.parse().content if b.type == "text"] == [text]


def test_a_stream_is_replayed_as_a_stream(gateway):
    asked = question()
    chat = openai.OpenAI(base_url=f"http://{gateway}/v1", api_key="x", max_retries=0)

    def streamed():
        raw = chat.chat.completions.with_raw_response.create(
            model="cached", max_tokens=100, stream=True, messages=[{"role": "user", "content": asked}])
        chunks = list(raw.parse())
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return raw.headers["x-switchyard-cache"], text, len(chunks)

    (first, text, count), (second, replayed, replay_count) = streamed(), streamed()
    assert (first, second) == ("miss", "hit")
    assert replayed == text and text
    assert replay_count == count, "the replay keeps the stream's chunks"


def test_no_cache_bypasses(gateway):
    asked = question()
    chat = openai.OpenAI(base_url=f"http://{gateway}/v1", api_key="x", max_retries=0)
    for expected in ("miss", "hit"):
        reply = chat.chat.completions.with_raw_response.create(
            model="cached", max_tokens=100, messages=[{"role": "user", "content": asked}])
        assert reply.headers["x-switchyard-cache"] == expected
    bypassed = chat.chat.completions.with_raw_response.create(
        model="cached", max_tokens=100, messages=[{"role": "user", "content": asked}],
        extra_headers={"cache-control": "no-cache"})
    assert bypassed.headers["x-switchyard-cache"] == "bypass"
