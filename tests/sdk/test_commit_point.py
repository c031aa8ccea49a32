"""The commit point (docs/guarantees.md), as each official SDK sees it: a
stream that broke after its first content and whose continuation cannot be
proven ends with the caller's protocol's terminal error, which the SDK
reports as a failure, never as the answer.

The pools (conftest.py) put a lane that cuts its stream (`[mock:cut=N]`)
before one that misbehaves when asked by instruction to go on:
`continued-restart` starts its answer again in its own words (each lane's
answer names the lane), `continued-unrelated` answers something else. With
`[mock:plain]` every lane's answer is the same, so the restart repeats
exactly what the caller has: that seam is proven and the answer is whole.
Lifecycle frames (the role chunk, `message_start`, `response.created`,
Cohere's `message-start`, Bedrock's `messageStart`) come first, not held
back while the continuation's seam is checked. The JS SDKs (openai,
@anthropic-ai/sdk, pinned in tests/agents) run `tests/agents/commit_point.mjs`."""

import json
import subprocess
from pathlib import Path

import anthropic
import boto3
import cohere
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import EventStreamError
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

UNPROVABLE = ["continued-restart", "continued-unrelated"]
CUT = 12
QUESTION = f"[mock:cut={CUT}] weather in Paris?"
# What the caller has when the first lane breaks: the start of its answer.
SO_FAR = f"[anthropic cut-anthropic] you said: {QUESTION}"[:CUT]


@pytest.mark.parametrize("pool", UNPROVABLE)
def test_openai_chat_raises_and_never_sees_done(gateway, pool):
    client = openai.OpenAI(base_url=f"http://{gateway}/v1", api_key="x", max_retries=0)
    chunks = []
    with pytest.raises(openai.APIError) as raised:
        for chunk in client.chat.completions.create(
                model=pool, messages=[{"role": "user", "content": QUESTION}], stream=True):
            chunks.append(chunk)
    assert "did not continue it where it stopped" in str(raised.value)
    assert chunks and chunks[0].choices[0].delta.role == "assistant", "the role chunk comes first"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == SO_FAR
    assert not [c for c in chunks if c.choices and c.choices[0].finish_reason], "no finish before the error"


@pytest.mark.parametrize("pool", UNPROVABLE)
def test_openai_responses_stream_has_no_completed_response(gateway, pool):
    """The Responses SDK yields the `error` event and `response.failed`
    (it raises on neither); its stream helper raises for want of
    `response.completed`."""
    client = openai.OpenAI(base_url=f"http://{gateway}/v1", api_key="x", max_retries=0)
    with client.responses.stream(model=pool, input=QUESTION) as stream:
        kinds = [event.type for event in stream]
        with pytest.raises(RuntimeError, match="response.completed"):
            stream.get_final_response()
    assert kinds[0] == "response.created"
    assert "error" in kinds and kinds[-1] == "response.failed", kinds
    assert "response.completed" not in kinds


@pytest.mark.parametrize("pool", UNPROVABLE)
def test_anthropic_raises_after_message_start(gateway, pool):
    client = anthropic.Anthropic(base_url=f"http://{gateway}", api_key="x", max_retries=0)
    events = []
    with pytest.raises(anthropic.APIStatusError) as raised:
        with client.messages.stream(model=pool, max_tokens=256,
                                    messages=[{"role": "user", "content": QUESTION}]) as stream:
            for event in stream:
                events.append(event)
    assert "did not continue it where it stopped" in str(raised.value)
    assert events[0].type == "message_start"
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
    assert text == SO_FAR
    assert "message_stop" not in [e.type for e in events]


@pytest.mark.parametrize("pool", UNPROVABLE)
def test_google_genai_raises(gateway, pool):
    client = genai.Client(api_key="x", http_options=genai_types.HttpOptions(
        base_url=f"http://{gateway}", api_version="v1beta", retry_options=genai_types.HttpRetryOptions(attempts=1)))
    chunks = []
    with pytest.raises(genai_errors.APIError):
        for chunk in client.models.generate_content_stream(model=pool, contents=QUESTION):
            chunks.append(chunk)
    assert "".join(chunk.text or "" for chunk in chunks) == SO_FAR
    assert not [c for chunk in chunks for c in chunk.candidates or [] if c.finish_reason], "no finish before the error"


@pytest.mark.parametrize("pool", UNPROVABLE)
def test_cohere_ends_with_finish_reason_error(gateway, pool):
    """Cohere's SDK raises on no in-stream event: its API's failed ending is
    `message-end` with `finish_reason: ERROR`, which the SDK hands over."""
    client = cohere.ClientV2(api_key="x", base_url=f"http://{gateway}", max_retries=0)
    events = list(client.chat_stream(model=pool, messages=[{"role": "user", "content": QUESTION}]))
    assert events[0].type == "message-start"
    assert events[-1].type == "message-end" and events[-1].delta.finish_reason == "ERROR", events[-1]
    assert "".join(e.delta.message.content.text or "" for e in events if e.type == "content-delta") == SO_FAR


@pytest.mark.parametrize("pool", UNPROVABLE)
def test_boto3_raises_an_event_stream_error(gateway, pool):
    client = boto3.client("bedrock-runtime", endpoint_url=f"http://{gateway}", region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x",
                          config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
    reply = client.converse_stream(modelId=pool, messages=[{"role": "user", "content": [{"text": QUESTION}]}])
    events = []
    with pytest.raises(EventStreamError):
        for event in reply["stream"]:
            events.append(event)
    assert "messageStart" in events[0]
    assert "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e) == SO_FAR
    assert not [e for e in events if "messageStop" in e]


def test_a_restart_that_repeats_the_answer_is_proven_and_read_whole(gateway):
    """`[mock:plain]`: the restarting lane's answer is word for word the
    broken lane's, so the repeat is cut at the seam and each SDK reads the
    answer once, ending cleanly (cut 60 bytes in, past the anchor's 48, so
    the seam is proven as a restart, not as an anchor)."""
    answer = "The quick brown fox jumps over the lazy dog, twice, then sleeps in the warm afternoon sun."
    asked = f"[mock:plain] [mock:cut=60] {answer}"
    chat = openai.OpenAI(base_url=f"http://{gateway}/v1", api_key="x", max_retries=0)
    chunks = list(chat.chat.completions.create(
        model="continued-restart", messages=[{"role": "user", "content": asked}], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == answer
    claude = anthropic.Anthropic(base_url=f"http://{gateway}", api_key="x", max_retries=0)
    with claude.messages.stream(model="continued-restart", max_tokens=256,
                                messages=[{"role": "user", "content": asked}]) as stream:
        message = stream.get_final_message()
    assert [b.text for b in message.content if b.type == "text"] == [answer]
    assert message.stop_reason == "end_turn"


JS = Path(__file__).resolve().parents[1] / "agents" / "commit_point.mjs"


def js_sdks(gateway, pool, question):
    """What the JS SDKs read of one streamed answer (commit_point.mjs)."""
    done = subprocess.run(["node", str(JS), gateway, pool, question], capture_output=True, text=True, timeout=60,
                          cwd=JS.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("pool", UNPROVABLE)
def test_js_sdks_throw_their_api_error(gateway, pool):
    seen = js_sdks(gateway, pool, QUESTION)
    chat, claude = seen["openai"], seen["anthropic"]
    assert chat["apiError"] and "did not continue it where it stopped" in chat["error"]["message"], chat
    assert chat["first"] == "assistant" and chat["text"] == SO_FAR and chat["finish"] is None, chat
    assert claude["apiError"] and "did not continue it where it stopped" in claude["error"]["message"], claude
    assert claude["first"] == "message_start" and claude["text"] == SO_FAR and claude["finish"] is None, claude


def test_js_sdks_read_a_proven_restart_whole(gateway):
    answer = "The quick brown fox jumps over the lazy dog, twice, then sleeps in the warm afternoon sun."
    seen = js_sdks(gateway, "continued-restart", f"[mock:plain] [mock:cut=60] {answer}")
    assert seen["openai"] == {"text": answer, "first": "assistant", "finish": "stop", "error": None,
                              "apiError": False}
    assert seen["anthropic"] == {"text": answer, "first": "message_start", "finish": "end_turn", "error": None,
                                 "apiError": False}
