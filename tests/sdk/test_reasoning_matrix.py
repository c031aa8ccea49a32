"""No silent drop of reasoning: every caller's SDK asks for reasoning in its
own protocol's terms, into every lane protocol, streamed and not, and the
lane reasons (the mock thinks when asked, so the caller's reply carries
reasoning in its own shape). A form a lane has to convert (an effort as a
budget) is reported in `x-switchyard-dropped`."""

from __future__ import annotations

import httpx
import pytest

from sdk_support import PROTOCOLS, QUESTION


class Headers:
    """The last response's headers, from an httpx response hook."""

    def __init__(self) -> None:
        self.last: dict[str, str] = {}

    def hook(self, response) -> None:
        self.last = {k.lower(): v for k, v in response.headers.items()}


def openai_chat(gateway, lane, stream, seen):
    import openai

    client = openai.OpenAI(base_url=f"http://{gateway}/v1", api_key="x", max_retries=0,
                           http_client=openai.DefaultHttpxClient(event_hooks={"response": [seen.hook]}))
    kwargs = dict(model=f"lane-{lane}", messages=[{"role": "user", "content": QUESTION}], reasoning_effort="high")
    if not stream:
        message = client.chat.completions.create(**kwargs).choices[0].message
        return bool((message.model_extra or {}).get("reasoning_content"))
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    return any((c.choices and (c.choices[0].delta.model_extra or {}).get("reasoning_content")) for c in chunks)


def openai_responses(gateway, lane, stream, seen):
    import openai

    client = openai.OpenAI(base_url=f"http://{gateway}/v1", api_key="x", max_retries=0,
                           http_client=openai.DefaultHttpxClient(event_hooks={"response": [seen.hook]}))
    kwargs = dict(model=f"lane-{lane}", input=QUESTION, reasoning={"effort": "high"})
    if stream:
        with client.responses.stream(**kwargs) as s:
            final = s.get_final_response()
    else:
        final = client.responses.create(**kwargs)
    return any(item.type == "reasoning" for item in final.output)


def anthropic_messages(gateway, lane, stream, seen):
    import anthropic

    client = anthropic.Anthropic(base_url=f"http://{gateway}", api_key="x", max_retries=0,
                                 http_client=anthropic.DefaultHttpxClient(event_hooks={"response": [seen.hook]}))
    kwargs = dict(model=f"lane-{lane}", max_tokens=4096, messages=[{"role": "user", "content": QUESTION}],
                  thinking={"type": "enabled", "budget_tokens": 2048})
    if stream:
        with client.messages.stream(**kwargs) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    return any(block.type in ("thinking", "redacted_thinking") for block in message.content)


def gemini(gateway, lane, stream, seen):
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="x", http_options=types.HttpOptions(
        base_url=f"http://{gateway}", api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1),
        client_args={"event_hooks": {"response": [seen.hook]}}))
    config = types.GenerateContentConfig(
        thinking_config=types.ThinkingConfig(thinking_budget=2048, include_thoughts=True))
    if stream:
        chunks = list(client.models.generate_content_stream(model=f"lane-{lane}", contents=QUESTION, config=config))
    else:
        chunks = [client.models.generate_content(model=f"lane-{lane}", contents=QUESTION, config=config)]
    parts = [p for c in chunks for cand in (c.candidates or []) for p in ((cand.content and cand.content.parts) or [])]
    return any(p.thought for p in parts)


def cohere_chat(gateway, lane, stream, seen):
    import cohere

    http = httpx.Client(timeout=60, event_hooks={"response": [seen.hook]})
    client = cohere.ClientV2(api_key="x", base_url=f"http://{gateway}", max_retries=0, httpx_client=http)
    kwargs = dict(model=f"lane-{lane}", messages=[{"role": "user", "content": QUESTION}],
                  thinking={"type": "enabled", "token_budget": 2048})
    if stream:
        events = list(client.chat_stream(**kwargs))
        return any(getattr(getattr(getattr(e, "delta", None), "message", None), "content", None) is not None
                   and getattr(e.delta.message.content, "thinking", None) for e in events)
    reply = client.chat(**kwargs)
    return any(getattr(item, "type", None) == "thinking" for item in (reply.message.content or []))


def bedrock(gateway, lane, stream, seen):
    import boto3
    from botocore.config import Config

    client = boto3.client("bedrock-runtime", endpoint_url=f"http://{gateway}", region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x",
                          config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
    kwargs = dict(modelId=f"lane-{lane}", messages=[{"role": "user", "content": [{"text": QUESTION}]}],
                  inferenceConfig={"maxTokens": 4096},
                  additionalModelRequestFields={"thinking": {"type": "enabled", "budget_tokens": 2048}})
    if stream:
        r = client.converse_stream(**kwargs)
        seen.last = {k.lower(): v for k, v in r["ResponseMetadata"]["HTTPHeaders"].items()}
        return any("reasoningContent" in e.get("contentBlockDelta", {}).get("delta", {}) for e in r["stream"])
    r = client.converse(**kwargs)
    seen.last = {k.lower(): v for k, v in r["ResponseMetadata"]["HTTPHeaders"].items()}
    return any("reasoningContent" in block for block in r["output"]["message"]["content"])


CALLERS = {
    "openai-chat": openai_chat,
    "openai-responses": openai_responses,
    "anthropic": anthropic_messages,
    "gemini": gemini,
    "cohere": cohere_chat,
    "bedrock": bedrock,
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("lane", PROTOCOLS)
@pytest.mark.parametrize("caller", list(CALLERS))
def test_reasoning_reaches_every_lane(gateway, caller, lane, stream):
    seen = Headers()
    reasoned = CALLERS[caller](gateway, lane, stream, seen)
    dropped = seen.last.get("x-switchyard-dropped", "")
    # Every lane protocol can think, with no capabilities declared: the
    # mapping always arrives (a form it had to convert is reported).
    assert reasoned, f"lane-{lane} was not asked to reason (dropped: {dropped!r})"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("lane", ["anthropic", "bedrock"])
def test_claude_thinking_rules_hold_whatever_the_caller_sent(gateway, lane, stream):
    """While a Claude lane thinks it takes no temperature but 1 and no
    top_k, and max_tokens must exceed the thinking budget: what the caller
    sent that breaks a rule is left out or raised, and reported, rather than
    refused by the vendor."""
    import openai
    from google import genai
    from google.genai import types

    seen = Headers()
    client = openai.OpenAI(base_url=f"http://{gateway}/v1", api_key="x", max_retries=0,
                           http_client=openai.DefaultHttpxClient(event_hooks={"response": [seen.hook]}))
    kwargs = dict(model=f"lane-{lane}", messages=[{"role": "user", "content": QUESTION}],
                  reasoning_effort="high", temperature=0.3, max_completion_tokens=1000)
    if stream:
        list(client.chat.completions.create(stream=True, **kwargs))
    else:
        client.chat.completions.create(**kwargs)
    dropped = seen.last.get("x-switchyard-dropped", "")
    assert "temperature" in dropped and "max_completion_tokens" in dropped, dropped

    seen = Headers()
    gemini_client = genai.Client(api_key="x", http_options=types.HttpOptions(
        base_url=f"http://{gateway}", api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1),
        client_args={"event_hooks": {"response": [seen.hook]}}))
    config = types.GenerateContentConfig(temperature=0.3, top_k=5, max_output_tokens=8192,
                                         thinking_config=types.ThinkingConfig(thinking_budget=2048))
    if stream:
        list(gemini_client.models.generate_content_stream(model=f"lane-{lane}", contents=QUESTION, config=config))
    else:
        gemini_client.models.generate_content(model=f"lane-{lane}", contents=QUESTION, config=config)
    dropped = seen.last.get("x-switchyard-dropped", "")
    assert "generationConfig.temperature" in dropped and "generationConfig.topK" in dropped, dropped
    assert "maxOutputTokens" not in dropped, f"8192 is above the 2048 budget: nothing to raise ({dropped})"
