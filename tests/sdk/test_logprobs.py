"""Log probabilities and several replies across protocols, through the
official SDKs: an OpenAI Chat caller's `logprobs`, `top_logprobs` and `n`
on a Gemini lane, a Gemini caller's `response_logprobs`, `logprobs` and
`candidate_count` on an OpenAI lane, a Cohere caller's `logprobs` on an
OpenAI lane; whole and streamed. The fake vendors answer them as the
vendors do, so each SDK parses the values it would get from its own
vendor: the tokens make the reply's text, every log probability is at most
0, and the alternatives number what was asked."""

HI = "say hi"
DROPPED = "x-switchyard-dropped"


def test_openai_chat_on_a_gemini_lane(drivers):
    client = drivers["openai-chat"].client
    raw = client.chat.completions.with_raw_response.create(
        model="lane-gemini", messages=[{"role": "user", "content": HI}], logprobs=True, top_logprobs=2, n=2
    )
    assert DROPPED not in raw.headers
    completion = raw.parse()
    assert [c.index for c in completion.choices] == [0, 1]
    assert completion.choices[1].message.content.endswith("(choice 1)")
    for choice in completion.choices:
        tokens = choice.logprobs.content
        assert "".join(t.token for t in tokens) == choice.message.content
        assert all(t.logprob <= 0 for t in tokens)
        assert all(len(t.top_logprobs) == 2 for t in tokens)
        assert bytes(tokens[0].bytes) == tokens[0].token.encode()


def test_openai_chat_streamed_on_a_gemini_lane(drivers):
    client = drivers["openai-chat"].client
    stream = client.chat.completions.create(
        model="lane-gemini", messages=[{"role": "user", "content": HI}], logprobs=True, top_logprobs=1, stream=True
    )
    text, tokens = "", []
    for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            if choice.logprobs and choice.logprobs.content:
                tokens += choice.logprobs.content
    assert text and "".join(t.token for t in tokens) == text
    assert all(t.logprob <= 0 and len(t.top_logprobs) == 1 for t in tokens)


def test_gemini_on_an_openai_lane(drivers):
    driver = drivers["gemini"]
    t = driver.types
    config = t.GenerateContentConfig(response_logprobs=True, logprobs=3, candidate_count=2)
    response = driver.client.models.generate_content(model="lane-openai", contents=HI, config=config)
    assert DROPPED not in (response.sdk_http_response.headers or {})
    assert len(response.candidates) == 2
    for candidate in response.candidates:
        result = candidate.logprobs_result
        text = "".join(part.text for part in candidate.content.parts)
        assert "".join(c.token for c in result.chosen_candidates) == text
        assert all(c.log_probability <= 0 for c in result.chosen_candidates)
        assert all(len(top.candidates) == 3 for top in result.top_candidates)


def test_gemini_streamed_on_an_openai_lane(drivers):
    driver = drivers["gemini"]
    config = driver.types.GenerateContentConfig(response_logprobs=True, logprobs=2)
    text, chosen = "", []
    for chunk in driver.client.models.generate_content_stream(model="lane-openai", contents=HI, config=config):
        for candidate in chunk.candidates or []:
            for part in (candidate.content.parts if candidate.content else None) or []:
                text += part.text or ""
            if candidate.logprobs_result:
                chosen += candidate.logprobs_result.chosen_candidates or []
    assert text and "".join(c.token for c in chosen) == text
    assert all(c.log_probability <= 0 for c in chosen)


def test_cohere_on_an_openai_lane(drivers):
    client = drivers["cohere"].client
    response = client.chat(model="lane-openai", messages=[{"role": "user", "content": HI}], logprobs=True)
    text = "".join(part.text for part in response.message.content)
    assert response.logprobs and "".join(item.text for item in response.logprobs) == text
    assert all(len(item.logprobs) == 1 and item.logprobs[0] <= 0 for item in response.logprobs)


def test_cohere_streamed_on_an_openai_lane(drivers):
    client = drivers["cohere"].client
    text, items = "", []
    for event in client.chat_stream(model="lane-openai", messages=[{"role": "user", "content": HI}], logprobs=True):
        if event.type == "content-delta":
            text += event.delta.message.content.text or ""
            if event.logprobs:
                items.append(event.logprobs)
    assert text and "".join(item.text for item in items) == text
    assert all(item.logprobs[0] <= 0 for item in items)
