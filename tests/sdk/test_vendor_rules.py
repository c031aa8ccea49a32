"""What a vendor's model refuses or takes, through the official SDKs, against
a fake that refuses what the vendor refuses (crates/transport/src/mock_rules.rs
for models: OpenAI's reasoning models refuse sampling and levels they lack;
OpenAI's models on Bedrock take `reasoning_effort`, not Claude's thinking;
xAI's reasoning models refuse stop sequences; Claude refuses sampling and
forced tools while it thinks, and its newer models temperature with top_p;
Gemini 2.5 Pro and 3 Pro cannot stop thinking, 3 Pro takes low and high;
Claude takes a system message inside the conversation only from Opus 4.8 on,
not Sonnet 5, and answers Anthropic's own `messages: Unexpected role
"system"` otherwise; Bedrock hands `anthropic_beta` only to Claude, and
checks a strict tool's schema). A translation that sends a
model what it does not take would fail here with the vendor's own 400; the
gateway instead drops it, names it in `x-switchyard-dropped` (the model fact
that says so has its source in crates/config/src/model_facts.json), and
refuses it under `x-switchyard-strict`."""

import json

import anthropic
import boto3
import cohere
import openai
import pytest
from botocore.config import Config
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
    "  bedrock-nova: { provider: up-bedrock, model: amazon.nova-pro-v1:0 }",
    "  opus-4-8: { provider: up-anthropic, model: claude-opus-4-8 }",
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
def command(vendor):
    return cohere.ClientV2(api_key="x", base_url=f"http://{vendor}", max_retries=0)


@pytest.fixture(scope="module")
def converse(vendor):
    return boto3.client(
        "bedrock-runtime", endpoint_url=f"http://{vendor}", region_name="us-east-1",
        aws_access_key_id="x", aws_secret_access_key="x",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )


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


BETAS = ["context-management-2025-06-27", "effort-2025-11-24"]
STRICT_TOOL = {
    "name": "weather", "description": "the weather", "strict": True,
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                     "additionalProperties": False},
}


def test_claude_on_bedrock_gets_the_callers_betas_and_strict_tools(claude):
    """The Anthropic SDK's betas (its `anthropic-beta` header) reach Claude
    on Bedrock in `additionalModelRequestFields.anthropic_beta` (the fake
    names the betas it found in the body) and its strict tool as
    `toolSpec.strict`: Bedrock checks a strict tool's schema (the fake too)
    and refuses `minimum`, so a strict tool that arrived unstrict would pass
    where this one is refused. Nothing is reported."""
    raw = claude.beta.messages.with_raw_response.create(
        model="bedrock-haiku", max_tokens=100, betas=BETAS, tools=[STRICT_TOOL],
        messages=[{"role": "user", "content": "hi [mock:tool=none]"}],
    )
    message = raw.parse()
    assert f"[anthropic-beta: {','.join(BETAS)}]" in message.content[-1].text, message.content
    assert DROPPED not in raw.headers, raw.headers
    bounded = json.loads(json.dumps(STRICT_TOOL))
    bounded["input_schema"]["properties"]["days"] = {"type": "integer", "minimum": 1}
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.beta.messages.create(
            model="bedrock-haiku", max_tokens=100, betas=BETAS, tools=[bounded],
            messages=[{"role": "user", "content": "hi"}],
        )
    assert "`minimum`" in str(refused.value), refused.value
    bounded.pop("strict")
    served = claude.beta.messages.create(
        model="bedrock-haiku", max_tokens=100, betas=BETAS, tools=[bounded],
        messages=[{"role": "user", "content": "hi [mock:tool=none]"}],
    )
    assert "you said: hi" in served.content[-1].text


def test_a_bedrock_model_that_is_no_claude_gets_no_betas(claude):
    """Bedrock hands `additionalModelRequestFields` to the model, and only
    Claude's parameters have `anthropic_beta` (the fake refuses the key for
    another model): Nova gets none, and the caller hears it."""
    raw = claude.beta.messages.with_raw_response.create(
        model="bedrock-nova", max_tokens=100, betas=BETAS, messages=[{"role": "user", "content": "hi"}],
    )
    assert "you said: hi" in raw.parse().content[-1].text
    assert dropped(raw.headers) == ["anthropic-beta"], raw.headers


# A system message after the conversation began: each caller protocol's own
# way of saying it, and what it names when the lane's model cannot take it.
LATE = "answer in french"


def chat_late(chat, lane, role, headers=None):
    raw = chat.chat.completions.with_raw_response.create(
        model=lane, extra_headers=headers, messages=[
            {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"},
            {"role": role, "content": LATE},
        ],
    )
    return raw.parse().choices[0].message.content, raw.headers


def responses_late(chat, lane, headers=None):
    raw = chat.responses.with_raw_response.create(
        model=lane, extra_headers=headers, instructions="be brief", input=[
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "again"}, {"role": "developer", "content": LATE},
        ],
    )
    return raw.parse().output_text, raw.headers


def cohere_late(command, lane, headers=None):
    raw = command.with_raw_response.chat(
        model=lane, request_options={"additional_headers": headers or {}}, messages=[
            {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"},
            {"role": "system", "content": LATE},
        ],
    )
    reply = raw.data
    return "".join(part.text for part in reply.message.content or [] if getattr(part, "text", None)), raw.headers


def converse_late(converse, lane, headers=None):
    """Converse's `system` role inside `messages` (AWS's ConversationRole:
    user, assistant, system)."""
    def add(request, **_):
        for name, value in (headers or {}).items():
            request.headers[name] = value
    converse.meta.events.register("before-sign.bedrock-runtime.Converse", add)
    try:
        reply = converse.converse(
            modelId=lane, system=[{"text": "be brief"}], messages=[
                {"role": "user", "content": [{"text": "hi"}]},
                {"role": "assistant", "content": [{"text": "hello"}]},
                {"role": "user", "content": [{"text": "again"}]},
                {"role": "system", "content": [{"text": LATE}]},
            ],
        )
    finally:
        converse.meta.events.unregister("before-sign.bedrock-runtime.Converse", add)
    text = "".join(block.get("text", "") for block in reply["output"]["message"]["content"])
    return text, reply["ResponseMetadata"]["HTTPHeaders"]


CALLERS = {
    "chat-system": (lambda c, lane, h=None: chat_late(c["chat"], lane, "system", h), "messages.system"),
    "chat-developer": (lambda c, lane, h=None: chat_late(c["chat"], lane, "developer", h), "messages.system"),
    "responses": (lambda c, lane, h=None: responses_late(c["chat"], lane, h), "input.system"),
    "cohere": (lambda c, lane, h=None: cohere_late(c["command"], lane, h), "messages.system"),
    "converse": (lambda c, lane, h=None: converse_late(c["converse"], lane, h), "messages.system"),
}


@pytest.fixture(scope="module")
def callers(chat, command, converse):
    return {"chat": chat, "command": command, "converse": converse}


@pytest.mark.parametrize("caller", list(CALLERS))
def test_a_late_system_message_reaches_a_claude_that_takes_it_as_one(callers, caller):
    """Claude Opus 4.8 takes a system message inside the conversation (the
    model facts say so, no config): each caller's late system message goes
    as Anthropic's `{"role": "system"}` where it was, nothing is reported,
    and strict translation has nothing to refuse. The fake answers the last
    user turn."""
    ask, _ = CALLERS[caller]
    text, headers = ask(callers, "opus-4-8")
    assert "you said: again" in text, text
    assert dropped(headers) == [], headers
    text, _ = ask(callers, "opus-4-8", STRICT)
    assert "you said: again" in text, text


@pytest.mark.parametrize("caller", list(CALLERS))
def test_a_late_system_message_joins_the_system_prompt_of_a_claude_without_them(callers, caller):
    """Claude Sonnet 4.5 refuses a system message inside `messages` (the
    fake answers Anthropic's 400, as a regression would meet it): the text
    joins `system` instead, and the caller hears the move in its own terms;
    under strict translation, its own 400."""
    ask, name = CALLERS[caller]
    text, headers = ask(callers, "sonnet-4-5")
    assert "you said: again" in text, text
    assert dropped(headers) == [name], headers
    with pytest.raises(Exception) as refused:
        ask(callers, "sonnet-4-5", STRICT)
    assert name in str(refused.value), refused.value


def test_the_fake_refuses_a_system_message_as_anthropic_does(claude):
    """Same protocol, the request goes as it came: Claude Code's shape (a
    system message at `messages[1]`) reaches Opus 4.8, and reaches Sonnet
    4.5 to be refused with the Messages API's own words."""
    messages = [{"role": "user", "content": "hi"}, {"role": "system", "content": LATE}]
    served = claude.messages.create(model="opus-4-8", max_tokens=50, messages=messages)
    assert "you said: hi" in served.content[-1].text
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(model="sonnet-4-5", max_tokens=50, messages=messages)
    assert 'messages: Unexpected role "system"' in refused.value.message, refused.value.message
