"""Gemini Live through the official google-genai SDK (`client.aio.live.connect`,
over its `websockets` transport) on a `mock://` lane with `operation: live`:
a text turn, an audio stream answered in audio with its transcripts, each
turn a ledger row of operation `live` priced by the card; a spent budget
refusing the next generation only (Live has no error message: the gateway
closes with 1008 and the reason, which the SDK raises as `APIError`); a
key that may not use the pool refused at `setup`; and an ephemeral token
minted by the gateway (`client.auth_tokens.create`) opening a session
billed to its key while the HTTP API refuses it. The SDK dials Live over
`wss://` only, so the gateway's data listener serves TLS here (the test
fixtures' certificate for `localhost`, its CA given to the SDK as a
deployment's client would hold it)."""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request

import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from conftest import admin_api
from test_tls import context, tls_gateway

LIVE_LANE = "  live: { provider: up-gemini, model: gemini-live-wire, operation: live }\n"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A gateway with keys and a priced live lane `live`: (data, admin)."""
    workdir = tmp_path_factory.mktemp("live")
    extra = "rate_card:\n  live: { input_utok: 100, output_utok: 200, cache_read_utok: 10, audio_input_utok: 400, audio_output_utok: 800 }\n"
    extra += "auth: { mode: keys }\n"
    extra += f"storage: {{ sqlite_path: {workdir / 'switchyard.db'} }}\n"
    # google-genai dials Live over `wss://` only: the data listener serves TLS.
    with tls_gateway(workdir, mtls=False, extra=extra, models=LIVE_LANE) as (url, admin):
        yield url.removeprefix("https://"), admin


def options(addr: str, version: str = "v1beta") -> types.HttpOptions:
    """The gateway's address, and its CA for the SDK's sockets and HTTP."""
    ca = context(False)
    return types.HttpOptions(
        base_url=f"https://{addr}", api_version=version, client_args={"verify": ca}, async_client_args={"ssl": ca}
    )


def client(addr: str, admin: str, **spec) -> tuple[genai.Client, dict]:
    key = admin_api(admin, "POST", "/api/v1/admin/keys", {"name": "live", **spec})
    return genai.Client(api_key=key["key"], http_options=options(addr)), key


async def turn(session) -> list:
    """Messages up to the turn's end."""
    messages = []
    async for message in session.receive():
        messages.append(message)
        if message.server_content and message.server_content.turn_complete:
            return messages
    raise AssertionError(f"the session ended: {messages}")


def rows(admin: str, key_id: str, count: int) -> list:
    """The key's ledger rows, once `count` are written (the ledger flushes
    on an interval)."""
    deadline = time.monotonic() + 10
    while True:
        found = admin_api(admin, "GET", f"/api/v1/admin/requests?limit=100&key={key_id}")["data"]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_a_text_turn_and_an_audio_turn_on_a_live_lane(live):
    addr, admin = live
    sdk, key = client(addr, admin)

    async def talk():
        config = {"response_modalities": ["TEXT"]}
        async with sdk.aio.live.connect(model="live", config=config) as session:
            await session.send_client_content(turns={"role": "user", "parts": [{"text": "hello from the sdk"}]})
            messages = await turn(session)
            text = "".join(m.text for m in messages if m.text)
            assert text == "Echo: hello from the sdk", messages
            usage = messages[-1].usage_metadata
            assert usage.prompt_token_count == 5 and usage.response_token_count == 5, usage
        config = {"response_modalities": ["AUDIO"], "output_audio_transcription": {}, "input_audio_transcription": {}}
        async with sdk.aio.live.connect(model="live", config=config) as session:
            # 320 ms of 16 kHz PCM16 silence, then the end of the stream.
            await session.send_realtime_input(audio=types.Blob(data=bytes(10_240), mime_type="audio/pcm;rate=16000"))
            await session.send_realtime_input(audio_stream_end=True)
            messages = await turn(session)
            heard = "".join(m.server_content.input_transcription.text for m in messages if m.server_content and m.server_content.input_transcription)
            assert heard == "audio of 320 ms", messages
            spoken = "".join(
                m.server_content.output_transcription.text
                for m in messages
                if m.server_content and m.server_content.output_transcription
            )
            assert spoken == "Echo: audio of 320 ms", messages
            audio = b"".join(m.data for m in messages if m.data)
            assert len(audio) == 5 * 9600, len(audio)
            usage = messages[-1].usage_metadata
            assert usage.response_tokens_details[0].modality == types.MediaModality.AUDIO

    asyncio.run(talk())
    # Each turn is a ledger row of its own, priced by the card.
    ledger = rows(admin, key["id"], 2)
    assert [r["operation"] for r in ledger] == ["live", "live"], ledger
    assert all(r["status"] == 200 and not r["estimated"] for r in ledger), ledger
    by_output = sorted(ledger, key=lambda r: r["audio_output_tokens"])
    # Text: 5 in at $100/M, 5 out at $200/M.
    assert by_output[0]["cost_nano"] == 5 * 100_000 + 5 * 200_000, by_output[0]
    # Audio: 8 audio tokens in at $400/M, 25 out at $800/M.
    assert by_output[1]["audio_input_tokens"] == 8 and by_output[1]["audio_output_tokens"] == 25, by_output[1]
    assert by_output[1]["cost_nano"] == 8 * 400_000 + 25 * 800_000, by_output[1]


def test_a_spent_budget_refuses_the_next_generation_only(live):
    addr, admin = live
    sdk, key = client(addr, admin, budget={"usd": 0.3, "window": "1d"})

    async def talk() -> tuple[int, genai_errors.APIError]:
        config = {"response_modalities": ["TEXT"], "max_output_tokens": 100}
        served = 0
        async with sdk.aio.live.connect(model="live", config=config) as session:
            for n in range(40):
                await session.send_client_content(turns={"role": "user", "parts": [{"text": f"turn {n} " + "words " * 200}]})
                try:
                    await turn(session)
                except genai_errors.APIError as refused:
                    return served, refused
                served += 1
        raise AssertionError("the budget never ran out")

    served, refused = asyncio.run(talk())
    assert served >= 1, refused
    assert refused.code == 1008 and "RESOURCE_EXHAUSTED" in str(refused), refused
    # The turns served before are billed, each once; the refused one is not.
    ledger = rows(admin, key["id"], served)
    billed = [r for r in ledger if r["operation"] == "live"]
    assert len(billed) == served and all(r["status"] == 200 for r in billed), ledger


def test_a_key_that_may_not_use_the_pool_is_refused_at_setup(live):
    addr, admin = live
    sdk, _ = client(addr, admin, pools=["lane-openai"])

    async def talk():
        async with sdk.aio.live.connect(model="live", config={"response_modalities": ["TEXT"]}) as session:
            await session.send_client_content(turns={"role": "user", "parts": [{"text": "hi"}]})
            await turn(session)

    with pytest.raises(genai_errors.APIError) as refused:
        asyncio.run(talk())
    assert refused.value.code == 1008 and "PERMISSION_DENIED" in str(refused.value), refused.value


def test_an_ephemeral_token_minted_by_the_gateway_opens_a_session_billed_to_its_key(live):
    addr, admin = live
    sdk, key = client(addr, admin)
    # Ephemeral tokens are v1alpha in google-genai.
    alpha = options(addr, "v1alpha")
    minter = genai.Client(api_key=key["key"], http_options=alpha)
    token = minter.auth_tokens.create(config={"uses": 1, "live_connect_constraints": {"model": "live"}})
    assert token.name.startswith("auth_tokens/sy-ek-") and key["key"] not in token.name, token
    browser = genai.Client(api_key=token.name, http_options=alpha)

    async def talk():
        async with browser.aio.live.connect(model="live", config={"response_modalities": ["TEXT"]}) as session:
            await session.send_client_content(turns={"role": "user", "parts": [{"text": "from a browser"}]})
            return "".join(m.text for m in await turn(session) if m.text)

    assert asyncio.run(talk()) == "Echo: from a browser"
    assert [r["operation"] for r in rows(admin, key["id"], 1)] == ["live"]
    # The token is no API key: the HTTP API refuses it (google-genai will
    # not send it there, so the request is made by hand).
    request = urllib.request.Request(
        f"https://{addr}/v1beta/models/lane-gemini:generateContent",
        data=b'{"contents":[{"parts":[{"text":"hi"}]}]}',
        headers={"x-goog-api-key": token.name, "content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10, context=context(False))
    assert refused.value.code == 401
