"""Prompt-cache markers the IR has no place for, through the official SDKs:
an Anthropic `cache_control` on a `tool_use` block, and a Converse
`cachePoint` after reasoning or a tool call. Neither is lost unsaid: a lane
of another protocol gets the rest of the request and the caller reads the
marker's path in `x-switchyard-dropped` (a strict pool refuses with a 400
naming it)."""

import boto3
import anthropic
import pytest
from botocore.config import Config

DROPPED = "x-switchyard-dropped"


def dropped(headers) -> list[str]:
    return [p.strip() for p in (headers.get(DROPPED) or "").split(",") if p.strip()]


def claude_tool_loop() -> list[dict]:
    return [
        {"role": "user", "content": "what is the weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"},
             "cache_control": {"type": "ephemeral"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny"}]},
    ]


TOOLS = [{"name": "weather", "description": "the weather", "input_schema": {"type": "object"}}]


def test_a_marked_tool_call_is_named_on_an_openai_lane(gateway):
    claude = anthropic.Anthropic(base_url=f"http://{gateway}", api_key="x", max_retries=0)
    raw = claude.messages.with_raw_response.create(
        model="lane-openai", max_tokens=100, tools=TOOLS, messages=claude_tool_loop())
    assert raw.parse().content, raw.parse()
    assert "messages.content.tool_use.cache_control" in dropped(raw.headers), raw.headers


def test_a_strict_pool_refuses_a_marked_tool_call_naming_it(gateway):
    claude = anthropic.Anthropic(base_url=f"http://{gateway}", api_key="x", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(model="strict-openai", max_tokens=100, tools=TOOLS, messages=claude_tool_loop())
    assert "messages.content.tool_use.cache_control" in str(refused.value), refused.value


def test_a_cache_point_after_a_tool_call_is_named_on_an_anthropic_lane(gateway):
    converse = boto3.client(
        "bedrock-runtime", endpoint_url=f"http://{gateway}", region_name="us-east-1",
        aws_access_key_id="x", aws_secret_access_key="x",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )
    reply = converse.converse(
        modelId="lane-anthropic",
        messages=[
            {"role": "user", "content": [{"text": "what is the weather in Paris?"}]},
            {"role": "assistant", "content": [
                {"toolUse": {"toolUseId": "t1", "name": "weather", "input": {"city": "Paris"}}},
                {"cachePoint": {"type": "default"}},
            ]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "sunny"}]}}]},
        ],
        toolConfig={"tools": [{"toolSpec": {"name": "weather", "inputSchema": {"json": {"type": "object"}}}}]},
    )
    assert reply["output"]["message"]["content"], reply
    headers = reply["ResponseMetadata"]["HTTPHeaders"]
    assert "messages.content.cachePoint" in dropped(headers), headers
