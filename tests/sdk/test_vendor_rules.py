"""What a vendor's model refuses or takes, through the official SDKs, against
a fake that refuses what the vendor refuses (crates/transport/src/mock_rules.rs
for models: OpenAI's reasoning models refuse sampling and levels they lack;
OpenAI's models on Bedrock take `reasoning_effort`, not Claude's thinking;
xAI's reasoning models refuse stop sequences; Claude refuses sampling and
forced tools while it thinks, and its newer models temperature with top_p;
Gemini 2.5 Pro and 3 Pro cannot stop thinking, 3 Pro takes low and high). A translation that sends a
model what it does not take would fail here with the vendor's own 400; the
gateway instead drops it, names it in `x-switchyard-dropped` (the model fact
that says so has its source in crates/config/src/model_facts.json), and
refuses it under `x-switchyard-strict`."""

import json

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as gtypes

from conftest import serving

DROPPED = "x-switchyard-dropped"
STRICT = {"x-switchyard-strict": "1"}
THOUGHT = "the user wants a deterministic answer"

# Lanes on the vendor fake named by their vendors' real model ids: the
# model facts fill in what each takes.
MODELS = [
    "  o4-mini: { provider: up-openai, model: o4-mini-2025-04-16 }",
    "  gpt-5-1: { provider: up-responses, model: gpt-5.1 }",
    "  gpt-oss: { provider: up-bedrock, model: openai.gpt-oss-120b-1:0 }",
    "  grok: { provider: up-bedrock, model: xai.grok-4 }",
    "  command-reasoning: { provider: up-cohere, model: command-a-reasoning-08-2025 }",
    "  sonnet-4-5: { provider: up-anthropic, model: claude-sonnet-4-5-20250929 }",
    "  bedrock-haiku: { provider: up-bedrock, model: us.anthropic.claude-haiku-4-5-20251001-v1:0 }",
    "  gemini-2-5-pro: { provider: up-gemini, model: gemini-2.5-pro }",
    "  gemini-3-pro: { provider: up-gemini, model: gemini-3-pro-preview }",
]


def with_models(lanes: str) -> str:
    return lanes.replace("models:\n", "models:\n" + "\n".join(MODELS) + "\n", 1)


@pytest.fixture(scope="module")
def vendor(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("vendor-rules"), "", config=with_models) as (addr, _):
        yield addr


@pytest.fixture(scope="module")
def claude(vendor):
    with anthropic.Anthropic(base_url=f"http://{vendor}", api_key="x", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def chat(vendor):
    with openai.OpenAI(base_url=f"http://{vendor}/v1", api_key="x", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def gemini(vendor):
    return genai.Client(api_key="x", http_options=gtypes.HttpOptions(base_url=f"http://{vendor}", api_version="v1beta"))


def dropped(headers) -> list[str]:
    return [p.strip() for p in (headers.get(DROPPED) or "").split(",") if p.strip()]


def test_a_claude_budget_is_a_level_o4_mini_takes(claude):
    """1,024 thinking tokens stand for `minimal`, which o4-mini refuses:
    the nearest level it takes, low, goes instead (said converted)."""
    raw = claude.messages.with_raw_response.create(
        model="o4-mini", max_tokens=2000, messages=[{"role": "user", "content": "hi"}],
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    message = raw.parse()
    assert "[openai o4-mini-2025-04-16] you said: hi" in message.content[-1].text
    assert "thinking.budget_tokens" in dropped(raw.headers), raw.headers


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_sampling_never_reaches_a_reasoning_model(gemini, strict):
    """o4-mini reasons whatever it is asked and refuses temperature and
    top_p: they go unsent and named; under strict, the caller's own 400."""
    config = gtypes.GenerateContentConfig(temperature=0.3, top_p=0.9, max_output_tokens=50)
    if strict:
        config.http_options = gtypes.HttpOptions(headers=STRICT)
        with pytest.raises(genai.errors.ClientError) as refused:
            gemini.models.generate_content(model="o4-mini", contents="hi", config=config)
        assert refused.value.code == 400
        assert "generationConfig.temperature" in str(refused.value), refused.value
        return
    response = gemini.models.generate_content(model="o4-mini", contents="hi", config=config)
    assert "you said: hi" in response.text
    names = dropped(response.sdk_http_response.headers)
    assert "generationConfig.temperature" in names and "generationConfig.topP" in names, names


def test_gpt_5_1_not_reasoning_takes_its_sampling(gemini):
    """gpt-5.1 reasons only when asked: unasked, its temperature goes."""
    config = gtypes.GenerateContentConfig(temperature=0.3, max_output_tokens=50)
    response = gemini.models.generate_content(model="gpt-5-1", contents="hi", config=config)
    assert "you said: hi" in response.text
    assert "generationConfig.temperature" not in dropped(response.sdk_http_response.headers)


def test_openai_models_on_bedrock_get_their_own_effort(claude):
    """Claude's thinking is not a gpt-oss field (Bedrock refuses the key):
    the budget goes as `reasoning_effort`, and the model thinks."""
    raw = claude.messages.with_raw_response.create(
        model="gpt-oss", max_tokens=4000, messages=[{"role": "user", "content": "hi"}],
        thinking={"type": "enabled", "budget_tokens": 2048},
    )
    message = raw.parse()
    assert [block.type for block in message.content] == ["thinking", "text"], message.content


def test_xai_reasoning_models_on_bedrock_take_no_stop_sequences(chat):
    raw = chat.chat.completions.with_raw_response.create(
        model="grok", messages=[{"role": "user", "content": "hi"}], stop=["END"],
    )
    assert "you said: hi" in raw.parse().choices[0].message.content
    assert "stop" in dropped(raw.headers), raw.headers
    with pytest.raises(openai.BadRequestError) as refused:
        chat.chat.completions.create(
            model="grok", messages=[{"role": "user", "content": "hi"}], stop=["END"], extra_headers=STRICT,
        )
    assert "stop" in refused.value.message


def test_a_claude_effort_makes_a_cohere_reasoning_model_think(claude):
    """`output_config.effort` without `thinking` tunes a Claude reply; a
    Cohere reasoning model takes it as `thinking` with the budget it
    stands for, and thinks."""
    raw = claude.messages.with_raw_response.create(
        model="command-reasoning", max_tokens=4000, messages=[{"role": "user", "content": "hi"}],
        extra_body={"output_config": {"effort": "low"}},
    )
    message = raw.parse()
    assert message.content[0].type == "thinking" and message.content[0].thinking == THOUGHT, message.content
    assert "output_config.effort" in dropped(raw.headers), raw.headers


def test_openrouters_reasoning_object_is_read(chat):
    """OpenRouter's `reasoning: {max_tokens}` reaches Claude as its budget."""
    raw = chat.chat.completions.with_raw_response.create(
        model="lane-anthropic", messages=[{"role": "user", "content": "hi"}],
        extra_body={"reasoning": {"max_tokens": 2048}},
    )
    message = raw.parse().choices[0].message
    assert (message.model_extra or {}).get("reasoning_content") == THOUGHT, message
    assert DROPPED not in raw.headers, raw.headers


WEATHER = {
    "type": "function",
    "function": {"name": "weather", "description": "the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


@pytest.mark.parametrize("lane", ["sonnet-4-5", "bedrock-haiku"])
def test_claude_thinking_gets_only_the_sampling_it_takes(chat, lane):
    """While Claude thinks it takes temperature 1 only, top_p from 0.95 and
    no forced tool (the fake refuses each, as Anthropic does): an OpenAI
    caller's are fitted and named, and Claude thinks."""
    raw = chat.chat.completions.with_raw_response.create(
        model=lane, messages=[{"role": "user", "content": "hi"}], reasoning_effort="high",
        temperature=0.3, top_p=0.9, tools=[WEATHER], tool_choice="required",
    )
    message = raw.parse().choices[0].message
    assert (message.model_extra or {}).get("reasoning_content") == THOUGHT, message
    names = dropped(raw.headers)
    assert {"temperature", "top_p", "tool_choice"} <= set(names), names


@pytest.mark.parametrize("lane", ["sonnet-4-5", "bedrock-haiku"])
def test_newer_claude_takes_temperature_or_top_p(gemini, lane):
    """Claude Sonnet and Haiku 4.5 refuse temperature with top_p (the fake
    too): a Gemini caller's temperature goes, its topP is named."""
    config = gtypes.GenerateContentConfig(temperature=0.3, top_p=0.9, max_output_tokens=50)
    response = gemini.models.generate_content(model=lane, contents="hi", config=config)
    assert "you said: hi" in response.text
    assert dropped(response.sdk_http_response.headers) == ["generationConfig.topP"]


@pytest.mark.parametrize("lane", ["gemini-2-5-pro", "gemini-3-pro"])
def test_gemini_pro_models_cannot_stop_thinking(claude, lane):
    """Gemini 2.5 Pro and 3 Pro refuse a thinking budget of 0 (the fake
    too): a Claude caller's thinking off is named, not sent, and the
    model thinks as it does."""
    raw = claude.messages.with_raw_response.create(
        model=lane, max_tokens=500, messages=[{"role": "user", "content": "hi"}], thinking={"type": "disabled"},
    )
    assert "you said: hi" in raw.parse().content[-1].text
    assert "thinking.type" in dropped(raw.headers), raw.headers


def test_gemini_3_pro_gets_a_level_it_takes(chat):
    """Gemini 3 Pro takes low and high: medium goes as the nearest it
    takes, said converted."""
    raw = chat.chat.completions.with_raw_response.create(
        model="gemini-3-pro", messages=[{"role": "user", "content": "hi"}], reasoning_effort="medium",
    )
    message = raw.parse().choices[0].message
    assert (message.model_extra or {}).get("reasoning_content") == THOUGHT, message
    assert dropped(raw.headers) == ["reasoning_effort"], raw.headers
