"""Audio input across protocols, through the official SDKs, against the
vendor fake (crates/transport/src/mock_rules.rs: OpenAI answers an audio
part to a model without audio input with a 400, Anthropic refuses a block
type its Messages API does not have, Gemini takes audio on every model;
the fake's reply names the audio its lane heard, `[audio: <MIME type>]`).
An OpenAI `input_audio` part reaches a Gemini lane as `inlineData` audio; a
Gemini SDK audio Part reaches OpenAI's audio model as `input_audio`; a
Converse `audio` block reaches Gemini; an Anthropic lane, which takes no
audio, gets the rest of the request, and the caller is told in
`x-switchyard-dropped` (refused with its own 400 under
`x-switchyard-strict`)."""

import base64

import boto3
import openai
import pytest
from botocore.config import Config
from google import genai
from google.genai import types as gtypes

from conftest import serving

DROPPED = "x-switchyard-dropped"
STRICT = {"x-switchyard-strict": "1"}
# A WAV header and an MP3 (ID3) header: bytes enough for a codec to carry.
WAV = base64.b64decode("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=")
MP3 = base64.b64decode("SUQzBAAAAAAAI1RTU0UAAAAPAAADTGF2ZjU4Ljc2LjEwMAAAAAAAAAAAAAAA")

MODELS = [
    "  audio-preview: { provider: up-openai, model: gpt-4o-audio-preview }",
    "  gemini-flash: { provider: up-gemini, model: gemini-2.5-flash }",
    "  sonnet-4-5: { provider: up-anthropic, model: claude-sonnet-4-5-20250929 }",
]


def with_models(lanes: str) -> str:
    return lanes.replace("models:\n", "models:\n" + "\n".join(MODELS) + "\n", 1)


@pytest.fixture(scope="module")
def vendor(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("audio"), "", config=with_models) as (addr, _):
        yield addr


@pytest.fixture(scope="module")
def chat(vendor):
    with openai.OpenAI(base_url=f"http://{vendor}/v1", api_key="x", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def gemini(vendor):
    return genai.Client(api_key="x", http_options=gtypes.HttpOptions(base_url=f"http://{vendor}", api_version="v1beta"))


def dropped(headers) -> list[str]:
    return [p.strip() for p in (headers.get(DROPPED) or "").split(",") if p.strip()]


def audio_message() -> list[dict]:
    return [{"role": "user", "content": [
        {"type": "text", "text": "what is said?"},
        {"type": "input_audio", "input_audio": {"data": base64.b64encode(WAV).decode(), "format": "wav"}},
    ]}]


def test_openai_input_audio_reaches_gemini_as_inline_data(chat):
    raw = chat.chat.completions.with_raw_response.create(model="gemini-flash", messages=audio_message())
    text = raw.parse().choices[0].message.content
    assert "[gemini gemini-2.5-flash]" in text and "[audio: audio/wav]" in text, text
    assert DROPPED not in raw.headers, raw.headers


def test_gemini_audio_part_reaches_openai_as_input_audio(gemini):
    response = gemini.models.generate_content(
        model="audio-preview",
        contents=["what is said?", gtypes.Part.from_bytes(data=MP3, mime_type="audio/mp3")],
    )
    assert "[openai gpt-4o-audio-preview]" in response.text and "[audio: audio/mp3]" in response.text, response.text
    assert DROPPED not in response.sdk_http_response.headers


def test_converse_audio_reaches_gemini(vendor):
    converse = boto3.client(
        "bedrock-runtime", endpoint_url=f"http://{vendor}", region_name="us-east-1",
        aws_access_key_id="x", aws_secret_access_key="x",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )
    reply = converse.converse(modelId="gemini-flash", messages=[{"role": "user", "content": [
        {"text": "what is said?"}, {"audio": {"format": "mp3", "source": {"bytes": MP3}}}]}])
    text = reply["output"]["message"]["content"][0]["text"]
    assert "[audio: audio/mp3]" in text, text


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_an_anthropic_lane_gets_no_audio(chat, strict):
    """Claude takes no audio (the fake, as Anthropic's API, would refuse the
    block type): the text goes and the part is named; under strict, the
    caller's own 400 names it."""
    if strict:
        with pytest.raises(openai.BadRequestError) as refused:
            chat.chat.completions.create(model="sonnet-4-5", messages=audio_message(), extra_headers=STRICT)
        assert "messages.content.input_audio" in str(refused.value), refused.value
        return
    raw = chat.chat.completions.with_raw_response.create(model="sonnet-4-5", messages=audio_message())
    text = raw.parse().choices[0].message.content
    assert "you said: what is said?" in text and "[audio:" not in text, text
    assert dropped(raw.headers) == ["messages.content.input_audio"], raw.headers


def test_a_gemini_callers_audio_to_anthropic_is_named_in_its_terms(gemini):
    response = gemini.models.generate_content(
        model="sonnet-4-5",
        contents=["what is said?", gtypes.Part.from_bytes(data=MP3, mime_type="audio/mp3")],
    )
    assert "[audio:" not in response.text, response.text
    assert "contents.parts.inlineData" in (response.sdk_http_response.headers.get(DROPPED) or "")
    with pytest.raises(genai.errors.ClientError) as refused:
        gemini.models.generate_content(
            model="sonnet-4-5",
            contents=["what is said?", gtypes.Part.from_bytes(data=MP3, mime_type="audio/mp3")],
            config=gtypes.GenerateContentConfig(http_options=gtypes.HttpOptions(headers=STRICT)),
        )
    assert refused.value.code == 400
