"""Everything Google's official Gen AI Python SDK can put in a
`generateContent` request is modelled by the gateway or reported, never
refused nor lost in silence.

The walk of `test_sdk_shapes.py` (shared in `sdk_walk`) over the SDK's
own request types: `GenerateContentConfig` fields, `Content` roles,
`Part` fields and `Tool` fields (their `*Dict` forms). Each smallest
value is turned into the body the SDK sends by the SDK's own converter
(snake_case to the wire's camelCase, config fields to `generationConfig`
or the top level) and goes to a Gemini lane (whose fake takes what
Gemini's reader takes) and to an OpenAI lane, which must answer 200 and,
for what the IR does not model, name its wire path in
`x-switchyard-dropped`.
"""

from __future__ import annotations

import httpx
import pytest

from google.genai import _api_client, _common, models
from google.genai import types as genai

import sdk_walk as walk
from sdk_walk import hints, value

# Config fields the IR models, by wire path.
MODELLED_CONFIG = {
    "generationConfig.maxOutputTokens", "generationConfig.temperature", "generationConfig.topP",
    "generationConfig.topK", "generationConfig.stopSequences", "generationConfig.seed",
    "generationConfig.frequencyPenalty", "generationConfig.presencePenalty", "generationConfig.responseMimeType",
    "generationConfig.responseJsonSchema", "generationConfig.responseSchema", "generationConfig.thinkingConfig",
    "systemInstruction", "tools", "toolConfig",
    "generationConfig.candidateCount", "generationConfig.responseLogprobs",
}
# Config fields the SDK keeps to itself (its own behaviour, not the body).
SDK_ONLY_CONFIG = {
    "automatic_function_calling": "the SDK's own loop over function calls",
    "automatic_continuation": "the SDK's own follow-up requests",
    "http_options": "the SDK's transport options",
    "should_return_http_response": "what the SDK hands back",
}
MODELLED_PARTS = {"text", "inlineData", "fileData", "functionCall", "functionResponse", "thought", "thoughtSignature",
                  # read as text (a fenced block, the output): readable by any lane
                  "executableCode", "codeExecutionResult"}
MODELLED_TOOLS = {"functionDeclarations"}
# Smallest values the SDK allows that Gemini refuses: data says what it is.
PARTS = {
    "inline_data": {"mime_type": "image/png", "data": b"\x89PNG"},
    "file_data": {"mime_type": "application/pdf", "file_uri": "https://example.com/a.pdf"},
    "function_call": {"name": "f", "args": {}},
    "function_response": {"name": "f", "response": {"result": "done"}},
    "thought_signature": b"sig",
}
CONFIG = {"response_schema": {"type": "OBJECT"}, "response_mime_type": "application/json",
          "response_modalities": ["TEXT"], "speech_config": "Kore"}
# A part that holds its data alone (a oneof); the rest ride beside text.
DATA_PARTS = {"text", "inline_data", "file_data", "function_call", "function_response", "executable_code",
              "code_execution_result", "tool_call", "tool_response"}
MODEL_PARTS = {"function_call", "thought", "thought_signature", "executable_code", "code_execution_result",
               "tool_call"}

CLIENT = _api_client.BaseApiClient(api_key="unused", vertexai=False)


def wire(lane: str, contents, config) -> dict:
    """The body the SDK sends for `generate_content(lane, contents, config)`."""
    params = genai._GenerateContentParameters(model=lane, contents=contents, config=config)
    body = models._GenerateContentParameters_to_mldev(CLIENT, params)
    body = _common.encode_unserializable_types(_common.convert_to_dict(body))
    body.pop("_url", None)
    body.pop("model", None)
    return body


def send(gateway: str, lane: str, request) -> httpx.Response:
    contents, config = request
    return httpx.post(f"http://{gateway}/v1beta/models/{lane}:generateContent", json=wire(lane, contents, config),
                      timeout=30, headers={"x-goog-api-key": "unused"})


def check(gateway: str, contents, config, what: str, reported_as: str | None):
    walk.check(lambda lane, r: send(gateway, lane, r), (contents, config), what, reported_as, "lane-gemini",
               "lane-openai")


def config_path(member: str, config: dict) -> str | None:
    """Where the SDK puts a config field on the wire, None where it sends nothing."""
    bare = wire("m", "hi", None)
    body = wire("m", "hi", config)
    for key in sorted(body):
        if key == "generationConfig":
            for inner in sorted(body[key]):
                if inner not in bare.get(key, {}):
                    return f"generationConfig.{inner}"
        elif key not in bare:
            return key
    return None


def sdk_refuses(config: dict) -> str | None:
    """The SDK's own refusal of a field for the Gemini API (Vertex only)."""
    try:
        wire("m", "hi", config)
    except ValueError as err:
        return str(err)
    return None


def config_members() -> list[str]:
    return sorted(hints(genai.GenerateContentConfigDict))


def test_the_sdk_has_the_shapes_this_test_walks():
    assert {"temperature", "safety_settings", "cached_content", "thinking_config"} <= set(config_members())
    assert {"text", "inline_data", "function_call", "executable_code"} <= set(hints(genai.PartDict))
    assert {"function_declarations", "google_search", "code_execution"} <= set(hints(genai.ToolDict))


@pytest.mark.parametrize("member", config_members())
def test_every_config_field_is_modelled_or_reported(gateway, member):
    config = {member: CONFIG.get(member, value(hints(genai.GenerateContentConfigDict)[member]))}
    refusal = sdk_refuses(config)
    if refusal is not None:
        assert "not in Gemini Developer API mode" in refusal, refusal
        return  # the SDK itself never sends it to the Gemini API
    path = config_path(member, config)
    if path is None:
        assert member in SDK_ONLY_CONFIG, f"config field {member} puts nothing on the wire: say why"
        return
    check(gateway, "hi", config, f"config field {member} ({path})", None if path in MODELLED_CONFIG else path)


@pytest.mark.parametrize("role", ["user", "model"])
def test_every_role_is_carried(gateway, role):
    contents = [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "hello"}]},
                {"role": role, "parts": [{"text": "a note"}]}, {"role": "user", "parts": [{"text": "go on"}]}]
    check(gateway, contents, None, f"role {role}", None)


@pytest.mark.parametrize("member", sorted(hints(genai.PartDict)))
def test_every_part_field_is_modelled_or_reported(gateway, member):
    field = PARTS.get(member, value(hints(genai.PartDict)[member]))
    part = {member: field} if member in DATA_PARTS else {"text": "x", member: field}
    if member == "function_call":
        contents = [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [part]},
                    {"role": "user", "parts": [{"function_response": PARTS["function_response"]}]}]
    elif member == "function_response":
        contents = [{"role": "user", "parts": [{"text": "hi"}]},
                    {"role": "model", "parts": [{"function_call": PARTS["function_call"]}]},
                    {"role": "user", "parts": [part]}]
    elif member in MODEL_PARTS:
        contents = [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [part]},
                    {"role": "user", "parts": [{"text": "go on"}]}]
    else:
        contents = [{"role": "user", "parts": [part]}]
    wire_name = camel(member)
    check(gateway, contents, None, f"part field {member}",
          None if wire_name in MODELLED_PARTS else f"contents.parts.{wire_name}")


@pytest.mark.parametrize("member", sorted(hints(genai.ToolDict)))
def test_every_tool_field_is_modelled_or_reported(gateway, member):
    field = value(hints(genai.ToolDict)[member])
    if member == "function_declarations":
        field = [{"name": "f", "description": "d"}]
    config = {"tools": [{member: field}]}
    refusal = sdk_refuses(config)
    if refusal is not None:
        assert "not in Gemini Developer API mode" in refusal or "not supported in Gemini API" in refusal, refusal
        return
    wire_name = camel(member)
    contents = [{"role": "user", "parts": [{"text": "hi [mock:tool=none]"}]}]
    check(gateway, contents, config, f"tool field {member}",
          None if wire_name in MODELLED_TOOLS else "tools")


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)

