"""Everything boto3 can put in a bedrock-runtime `Converse` request is
modelled by the gateway or reported, never refused nor lost in silence.

The walk of `test_sdk_shapes.py` (shared in `sdk_walk`) over botocore's
service model, the pinned SDK's own statement of the request: every
`ConverseRequest` member, `Message` role, `ContentBlock` union member
(and `ToolResultContentBlock`'s), `SystemContentBlock`, `Tool`,
`ToolSpecification`, `InferenceConfiguration` and `ToolChoice` member.
Each smallest value is sent by boto3 itself (its parameter validation
and serializer) to a Bedrock lane (whose fake takes what Bedrock's reader
takes) and to an OpenAI lane, which must answer 200 and, for what the IR
does not model, name it in `x-switchyard-dropped`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import boto3
import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import sdk_walk as walk
from sdk_support import MOCK_SIGNATURE, MOCK_THOUGHT
from sdk_walk import aws_value, aws_with_member

BASE = {"modelId", "messages"}
MODELLED = {"system", "inferenceConfig", "toolConfig", "additionalModelRequestFields", "outputConfig",
            "requestMetadata"}
MODELLED_BLOCKS = {"text", "image", "document", "audio", "toolUse", "toolResult", "reasoningContent", "cachePoint",
                   "citationsContent", "guardContent"}
MODELLED_RESULT_BLOCKS = {"json", "text", "image", "document"}
# A tool result's block the IR does not model is reported as the message's
# own block type would be.
RESULT_BLOCKS_REPORTED_AS = "messages.content"
MODELLED_SYSTEM_BLOCKS = {"text", "cachePoint", "guardContent"}
MODELLED_TOOLS = {"toolSpec", "cachePoint"}
MODELLED_TOOL_SPEC = {"name", "description", "inputSchema", "strict"}
MODELLED_INFERENCE = {"maxTokens", "temperature", "topP", "stopSequences"}
MODELLED_TOOL_CHOICE = {"auto", "any", "tool"}
ASSISTANT_BLOCKS = {"toolUse", "reasoningContent", "citationsContent"}
# Smallest values the service model allows that Bedrock refuses.
BLOCKS = {
    "image": {"format": "png", "source": {"bytes": b"\x89PNG"}},
    "document": {"format": "pdf", "name": "notes", "source": {"bytes": b"%PDF-1.4"}},
    "citationsContent": {"content": [{"text": "x"}], "citations": []},
    # Signed reasoning goes back as the lane signed it (the fake refuses a
    # signature it did not give, as Bedrock does).
    "reasoningContent": {"reasoningText": {"text": MOCK_THOUGHT, "signature": MOCK_SIGNATURE}},
    "toolAddition": {"tool": {"name": "g"}},
    "toolRemoval": {"tool": {"name": "g"}},
}
TOOL = {"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object", "properties": {}}}}}


@functools.cache
def model():
    return botocore.session.get_session().get_service_model("bedrock-runtime")


def shape(name: str):
    return model().shape_for(name)


def request_shape():
    return model().operation_model("Converse").input_shape


@dataclass
class Answer:
    """A Converse answer as `sdk_walk.check` reads one."""
    status_code: int
    text: str
    headers: dict = field(default_factory=dict)


@functools.cache
def client(gateway: str):
    return boto3.client("bedrock-runtime", endpoint_url=f"http://{gateway}", region_name="us-east-1",
                        aws_access_key_id="x", aws_secret_access_key="x",
                        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))


def send(gateway: str, lane: str, body: dict) -> Answer:
    try:
        reply = client(gateway).converse(modelId=lane, **body)
    except ClientError as err:
        meta = err.response.get("ResponseMetadata", {})
        return Answer(meta.get("HTTPStatusCode", 0), str(err), meta.get("HTTPHeaders", {}))
    meta = reply["ResponseMetadata"]
    return Answer(meta["HTTPStatusCode"], "", meta["HTTPHeaders"])


def check(gateway: str, body: dict, what: str, reported_as: str | None):
    walk.check(lambda lane, b: send(gateway, lane, b), body, what, reported_as, "lane-bedrock", "lane-openai")


def hi(text: str = "hi") -> list[dict]:
    return [{"role": "user", "content": [{"text": text}]}]


def block_value(union, member: str) -> dict:
    return {member: BLOCKS[member]} if member in BLOCKS else aws_with_member(union, member)


def test_the_service_model_has_the_shapes_this_test_walks():
    assert {"system", "inferenceConfig", "toolConfig", "guardrailConfig"} <= set(request_shape().members)
    assert {"text", "image", "toolUse", "toolResult", "reasoningContent", "video"} <= set(shape("ContentBlock").members)
    assert {"user", "assistant"} <= set(shape("ConversationRole").enum)


@pytest.mark.parametrize("member", sorted(set(request_shape().members) - BASE))
def test_every_request_member_is_modelled_or_reported(gateway, member):
    body = {"messages": hi(), member: aws_value(request_shape().members[member])}
    check(gateway, body, f"member {member}", None if member in MODELLED else member)


@pytest.mark.parametrize("role", shape("ConversationRole").enum)
def test_every_role_is_carried(gateway, role):
    messages = hi() + [{"role": "assistant", "content": [{"text": "hello"}]},
                       {"role": role, "content": [{"text": "a note"}]}]
    if role != "user":
        messages += hi("go on")
    check(gateway, {"messages": messages}, f"role {role}", None)


@pytest.mark.parametrize("member", list(shape("ContentBlock").members))
def test_every_content_block_is_modelled_or_reported(gateway, member):
    block = block_value(shape("ContentBlock"), member)
    if member == "toolResult":
        block["toolResult"]["toolUseId"] = "tooluse_1"
        call = {"toolUse": {"toolUseId": "tooluse_1", "name": "f", "input": {}}}
        messages = hi() + [{"role": "assistant", "content": [call]}, {"role": "user", "content": [block]}]
    elif member == "toolUse":
        block["toolUse"].update(toolUseId="tooluse_1", name="f")
        result = {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "done"}]}}
        messages = hi() + [{"role": "assistant", "content": [block]}, {"role": "user", "content": [result]}]
    elif member in ASSISTANT_BLOCKS:
        messages = hi() + [{"role": "assistant", "content": [block, {"text": "hello"}]}] + hi("go on")
    elif member == "cachePoint":
        messages = [{"role": "user", "content": [{"text": "hi"}, block]}]
    else:
        messages = [{"role": "user", "content": [{"text": "hi"}, block]}]
    body = {"messages": messages, "toolConfig": {"tools": [TOOL]}}
    check(gateway, body, f"content block {member}",
          None if member in MODELLED_BLOCKS else f"messages.content.{member}")


@pytest.mark.parametrize("member", list(shape("ToolResultContentBlock").members))
def test_every_tool_result_block_is_modelled_or_reported(gateway, member):
    block = block_value(shape("ToolResultContentBlock"), member)
    call = {"toolUse": {"toolUseId": "tooluse_1", "name": "f", "input": {}}}
    result = {"toolResult": {"toolUseId": "tooluse_1", "content": [block]}}
    messages = hi() + [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    check(gateway, {"messages": messages, "toolConfig": {"tools": [TOOL]}}, f"tool result block {member}",
          None if member in MODELLED_RESULT_BLOCKS else f"{RESULT_BLOCKS_REPORTED_AS}.{member}")


@pytest.mark.parametrize("member", list(shape("SystemContentBlock").members))
def test_every_system_block_is_modelled_or_reported(gateway, member):
    system = [{"text": "be brief"}, aws_with_member(shape("SystemContentBlock"), member)]
    check(gateway, {"messages": hi(), "system": system}, f"system block {member}",
          None if member in MODELLED_SYSTEM_BLOCKS else f"system.{member}")


@pytest.mark.parametrize("member", list(shape("Tool").members))
def test_every_tool_member_is_modelled_or_reported(gateway, member):
    tool = TOOL if member == "toolSpec" else aws_with_member(shape("Tool"), member)
    tools = [TOOL, tool] if member == "cachePoint" else [tool]
    check(gateway, {"messages": hi("hi [mock:tool=none]"), "toolConfig": {"tools": tools}}, f"tool {member}",
          None if member in MODELLED_TOOLS else "toolConfig.tools")


@pytest.mark.parametrize("member", list(shape("ToolSpecification").members))
def test_every_tool_spec_member_is_modelled_or_reported(gateway, member):
    spec = {**TOOL["toolSpec"], member: aws_value(shape("ToolSpecification").members[member])}
    spec["inputSchema"] = TOOL["toolSpec"]["inputSchema"]
    body = {"messages": hi("hi [mock:tool=none]"), "toolConfig": {"tools": [{"toolSpec": spec}]}}
    check(gateway, body, f"toolSpec member {member}",
          None if member in MODELLED_TOOL_SPEC else f"toolConfig.tools.toolSpec.{member}")


@pytest.mark.parametrize("member", list(shape("InferenceConfiguration").members))
def test_every_inference_member_is_modelled_or_reported(gateway, member):
    config = {member: aws_value(shape("InferenceConfiguration").members[member])}
    check(gateway, {"messages": hi(), "inferenceConfig": config}, f"inferenceConfig.{member}",
          None if member in MODELLED_INFERENCE else f"inferenceConfig.{member}")


@pytest.mark.parametrize("member", list(shape("ToolChoice").members))
def test_every_tool_choice_is_modelled_or_reported(gateway, member):
    choice = aws_with_member(shape("ToolChoice"), member)
    if member == "tool":
        choice["tool"]["name"] = "f"
    body = {"messages": hi("hi [mock:tool=none]"), "toolConfig": {"tools": [TOOL], "toolChoice": choice}}
    check(gateway, body, f"toolChoice {member}",
          None if member in MODELLED_TOOL_CHOICE else f"toolConfig.toolChoice.{member}")
