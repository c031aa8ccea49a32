"""The Realtime API through the official OpenAI SDK (`client.realtime`,
over its `websockets` transport) on a `mock://` lane with `operation:
realtime`: a text turn, an audio buffer answered in audio with its
transcript, a browser's client secret minted by the gateway
(`client.realtime.client_secrets.create`) opening a session billed to the
key that minted it, and a spent budget refusing the next generation only
(the socket goes on)."""

from __future__ import annotations

import base64
import time

import openai
import pytest

from conftest import admin_api, serving

REALTIME_LANE = "  rt: { provider: up-openai, model: gpt-realtime, operation: realtime }\n"


@pytest.fixture(scope="module")
def realtime(tmp_path_factory):
    """A gateway with keys and a priced realtime lane `rt`: (data, admin)."""
    workdir = tmp_path_factory.mktemp("realtime")
    extra = "rate_card:\n  rt: { input_utok: 100, output_utok: 100, audio_input_utok: 400, audio_output_utok: 800 }\n"
    extra += "auth: { mode: keys }\n"
    extra += f"storage: {{ sqlite_path: {workdir / 'switchyard.db'} }}\n"
    with serving(workdir, extra, config=lambda lanes: lanes.replace("models:\n", "models:\n" + REALTIME_LANE, 1)) as addresses:
        yield addresses


def client(addr: str, admin: str, **spec) -> tuple[openai.OpenAI, dict]:
    key = admin_api(admin, "POST", "/api/v1/admin/keys", {"name": "realtime", **spec})
    return openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key["key"], max_retries=0), key


def until_done(connection) -> list:
    """Events up to `response.done` or an `error`."""
    events = []
    for event in connection:
        events.append(event)
        if event.type in ("response.done", "error"):
            return events
    raise AssertionError(f"the socket closed: {events}")


def say(connection, text: str) -> None:
    connection.conversation.item.create(
        item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    )


def rows(admin: str, key_id: str, count: int) -> list:
    """The key's ledger rows, once `count` are written (the ledger flushes
    on an interval)."""
    deadline = time.monotonic() + 10
    while True:
        found = admin_api(admin, "GET", f"/api/v1/admin/requests?limit=100&key={key_id}")["data"]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_a_text_turn_and_an_audio_buffer_on_a_realtime_lane(realtime):
    addr, admin = realtime
    sdk, key = client(addr, admin)
    with sdk.realtime.connect(model="rt") as connection:
        created = next(iter(connection))
        assert created.type == "session.created" and created.session.model == "gpt-realtime"
        connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        say(connection, "hello from the sdk")
        connection.response.create()
        events = until_done(connection)
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == "Echo: hello from the sdk", events
        done = events[-1]
        assert done.response.status == "completed" and done.response.usage.output_tokens == 5
        # 200 ms of 24 kHz PCM16 silence, committed and answered in audio.
        connection.input_audio_buffer.append(audio=base64.b64encode(bytes(9600)).decode())
        connection.input_audio_buffer.commit()
        connection.response.create(response={"output_modalities": ["audio"]})
        events = until_done(connection)
        transcript = next(e for e in events if e.type == "conversation.item.input_audio_transcription.completed")
        assert transcript.transcript == "audio of 200 ms"
        spoken = "".join(e.delta for e in events if e.type == "response.output_audio_transcript.delta")
        assert spoken == "Echo: audio of 200 ms"
        audio = b"".join(base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta")
        assert len(audio) == 5 * 4800, len(audio)
        usage = events[-1].response.usage
        assert usage.input_token_details.audio_tokens == 2 and usage.output_token_details.audio_tokens == 5
    # Each response is a ledger row of its own, priced by the card.
    ledger = rows(admin, key["id"], 2)
    assert [r["operation"] for r in ledger] == ["realtime", "realtime"], ledger
    assert all(r["cost_nano"] > 0 and r["status"] == 200 for r in ledger), ledger
    assert sorted(r["audio_output_tokens"] for r in ledger) == [0, 5], ledger


def test_a_client_secret_minted_by_the_gateway_opens_a_session_billed_to_its_key(realtime):
    addr, admin = realtime
    sdk, key = client(addr, admin)
    minted = sdk.realtime.client_secrets.create(
        expires_after={"anchor": "created_at", "seconds": 60}, session={"type": "realtime", "model": "rt"}
    )
    assert minted.value.startswith("sy-ek-") and key["key"] not in minted.value
    browser = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=minted.value, max_retries=0)
    with browser.realtime.connect(model="rt") as connection:
        say(connection, "hi")
        connection.response.create(response={"output_modalities": ["text"]})
        assert until_done(connection)[-1].type == "response.done"
    assert [r["operation"] for r in rows(admin, key["id"], 1)] == ["realtime"]
    # The secret is no API key: the HTTP API refuses it.
    with pytest.raises(openai.AuthenticationError):
        browser.models.list()


def test_a_spent_budget_refuses_the_next_generation_only(realtime):
    addr, admin = realtime
    sdk, _ = client(addr, admin, budget={"usd": 0.3, "window": "1d"})
    with sdk.realtime.connect(model="rt") as connection:
        connection.session.update(session={"type": "realtime", "output_modalities": ["text"], "max_output_tokens": 100})
        served, refused = 0, None
        for n in range(40):
            say(connection, f"turn {n} " + "words " * 200)
            connection.response.create(event_id=f"create-{n}")
            last = until_done(connection)[-1]
            if last.type == "error":
                refused = last
                break
            served += 1
        assert refused is not None and served >= 1
        assert refused.error.code == "insufficient_quota" and refused.error.event_id == f"create-{served}"
        # The socket lives: an item is still taken.
        say(connection, "still here")
        event = next(e for e in connection if e.type != "session.updated")
        assert event.type == "conversation.item.added", event
