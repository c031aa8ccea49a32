"""What a lane's protocol cannot carry, through each official SDK: a lenient
pool serves the request and names the caller's own fields in the
`x-switchyard-dropped` response header; a strict pool (`translation:
strict`), or `x-switchyard-strict: 1` on the request, refuses it with the
SDK's own 400 error naming those fields. Each case uses a parameter the
caller's protocol has and the lane's protocol lacks, beside one both carry
(which must not be named)."""

import pytest

from sdk_support import error_facts

DROPPED = "x-switchyard-dropped"
HI = "hi"


def openai_chat(drivers, model, extra_headers=None, stream=False):
    client = drivers["openai-chat"].client
    kwargs = dict(model=model, messages=[{"role": "user", "content": HI}], seed=7, temperature=0.5)
    if extra_headers:
        kwargs["extra_headers"] = extra_headers
    if stream:
        with client.chat.completions.with_streaming_response.create(stream=True, **kwargs) as r:
            for _ in r.iter_lines():
                pass
            return r.headers
    return client.chat.completions.with_raw_response.create(**kwargs).headers


def openai_responses(drivers, model, extra_headers=None):
    client = drivers["openai-responses"].client
    kwargs = dict(model=model, input=HI, user="user-7", temperature=0.5)
    if extra_headers:
        kwargs["extra_headers"] = extra_headers
    return client.responses.with_raw_response.create(**kwargs).headers


def anthropic(drivers, model, extra_headers=None):
    client = drivers["anthropic"].client
    # API parameters this SDK version has no arguments for go in extra_body
    kwargs = dict(
        model=model,
        max_tokens=50,
        messages=[{"role": "user", "content": HI}],
        extra_body={"top_k": 5, "temperature": 0.5},
    )
    if extra_headers:
        kwargs["extra_headers"] = extra_headers
    return client.messages.with_raw_response.create(**kwargs).headers


def gemini(drivers, model, extra_headers=None):
    driver = drivers["gemini"]
    t = driver.types
    config = t.GenerateContentConfig(top_k=5, temperature=0.5)
    if extra_headers:
        config.http_options = t.HttpOptions(headers=extra_headers)
    response = driver.client.models.generate_content(model=model, contents=HI, config=config)
    return response.sdk_http_response.headers


def cohere(drivers, model, extra_headers=None):
    client = drivers["cohere"].client
    kwargs = dict(model=model, messages=[{"role": "user", "content": HI}], seed=7, temperature=0.5)
    if extra_headers:
        kwargs["request_options"] = {"additional_headers": extra_headers}
    return client.with_raw_response.chat(**kwargs).headers


def bedrock(drivers, model, extra_headers=None):
    client = drivers["bedrock"].client
    handlers = []
    if extra_headers:
        def add(request, **_):
            for name, value in extra_headers.items():
                request.headers[name] = value
        client.meta.events.register("before-sign.bedrock-runtime.Converse", add)
        handlers.append(add)
    try:
        r = client.converse(
            modelId=model,
            messages=[{"role": "user", "content": [{"text": HI}]}],
            inferenceConfig={"temperature": 0.5},
            additionalModelRequestFields={"top_k": 5},
        )
    finally:
        for handler in handlers:
            client.meta.events.unregister("before-sign.bedrock-runtime.Converse", handler)
    return r["ResponseMetadata"]["HTTPHeaders"]


# (ingress, call, lane protocol, the caller's field the lane lacks)
CASES = [
    ("openai-chat", openai_chat, "anthropic", "seed"),
    ("openai-responses", openai_responses, "gemini", "user"),
    ("anthropic", anthropic, "openai", "top_k"),
    ("gemini", gemini, "openai", "generationConfig.topK"),
    ("cohere", cohere, "anthropic", "seed"),
    ("bedrock", bedrock, "openai", "additionalModelRequestFields.top_k"),
]
IDS = [f"{ingress}-{lane}" for ingress, _, lane, _ in CASES]


def header(headers, name):
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


@pytest.mark.parametrize(("ingress", "call", "lane", "field"), CASES, ids=IDS)
def test_dropped_fields_are_named_in_a_header(drivers, recorder, ingress, call, lane, field):
    with recorder.capture():
        headers = call(drivers, f"lane-{lane}")
        assert header(headers, DROPPED) == field, f"{DROPPED}: {header(headers, DROPPED)!r}"
        # The same protocol carries everything: no header.
        same = {"openai-chat": "openai", "openai-responses": "responses"}.get(ingress, ingress)
        headers = call(drivers, f"lane-{same}")
        assert header(headers, DROPPED) is None, f"same-protocol hop reported {header(headers, DROPPED)!r}"


def test_the_header_comes_with_a_stream_too(drivers, recorder):
    with recorder.capture():
        headers = openai_chat(drivers, "lane-anthropic", stream=True)
        assert header(headers, DROPPED) == "seed"


@pytest.mark.parametrize("how", ["pool", "header"])
@pytest.mark.parametrize(("ingress", "call", "lane", "field"), CASES, ids=IDS)
def test_strict_translation_is_the_sdks_own_400(drivers, recorder, ingress, call, lane, field, how):
    model, extra = (f"strict-{lane}", None) if how == "pool" else (f"lane-{lane}", {"x-switchyard-strict": "1"})
    with recorder.capture():
        with pytest.raises(Exception) as caught:
            call(drivers, model, extra)
        facts = error_facts(ingress, caught.value)
        assert facts.own, f"not the SDK's own error type: {facts.described}: {caught.value}"
        assert facts.status == 400, f"{facts.described} reports {facts.status!r}"
        assert field in facts.message, f"{facts.described}: {facts.message!r} does not name {field}"
        assert "temperature" not in facts.message, f"a carried field is named: {facts.message!r}"
