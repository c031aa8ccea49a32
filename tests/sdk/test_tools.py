"""Tool use: every ingress SDK into every lane protocol, non-streaming and
streaming. The mock calls the first tool with arguments filled from its schema
({"city": "mock"}) under an id of its vendor's form; given the tool's result
it answers "[<lane> <model>] tool <name> returned: <result>", adds
"(own call id)" when the call came back under the id it gave, and a Gemini
lane adds whether the call came back with the thought signature it gave it.

Each SDK is handed the call's id in its own protocol's form (docs/protocols.md,
"Tool-call ids"), whichever vendor made the call."""

import re

import pytest

from sdk_support import END_STOP, INGRESSES, PROTOCOLS, TOOL_RESULT, TOOL_STOP, stop_name

# The id each caller's API documents: its pattern, and its longest.
ID_FORM = {
    "openai-chat": (r"call_[A-Za-z0-9_-]+", 40),
    "openai-responses": (r"call_[A-Za-z0-9_-]+", 64),
    "anthropic": (r"toolu_[A-Za-z0-9_-]+", None),  # ^[a-zA-Z0-9_-]+$, `toolu_` by convention
    "bedrock": (r"tooluse_[A-Za-z0-9_-]+", 64),  # [a-zA-Z0-9_-]+, 1 to 64
    "cohere": (r"[A-Za-z0-9_-]+", None),
    "gemini": (r"[A-Za-z0-9_-]+", None),
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("lane", PROTOCOLS)
@pytest.mark.parametrize("ingress", INGRESSES)
def test_tool_round_trip(drivers, recorder, ingress, lane, stream):
    driver = drivers[ingress]
    model = f"lane-{lane}"
    with recorder.capture():
        first = driver.tool_call(model, stream)
        assert len(first.calls) == 1, f"expected one tool call, got {first.calls!r} (text {first.text!r})"
        call = first.calls[0]
        assert call.name == "get_weather", f"tool call {call!r}"
        assert call.args == {"city": "mock"}, f"tool call arguments {call.args!r} (raw {call.raw_args!r})"
        if ingress != "gemini":  # Gemini function calls need not carry an id
            assert call.id, f"tool call without an id: {call!r}"
        if call.id is not None:
            pattern, longest = ID_FORM[ingress]
            assert re.fullmatch(pattern, call.id), f"{lane}'s call id {call.id!r} is not in {ingress}'s form"
            assert longest is None or len(call.id) <= longest, f"{call.id!r} is longer than {ingress} takes"
        if ingress == "openai-responses":
            # The item's own id is distinct, `fc`-prefixed, at most 64 long.
            assert call.extra and call.extra.startswith("fc") and call.extra != call.id, f"item id {call.extra!r}"
            assert len(call.extra) <= 64, f"item id {call.extra!r}"
        assert stop_name(first.stop) == TOOL_STOP[ingress], f"stop reason {first.stop!r} for a tool call"

    with recorder.capture():
        second = driver.tool_result(model, first, stream)
        assert "returned" in second.text, f"second turn text {second.text!r}"
        assert TOOL_RESULT in second.text, f"tool result not delivered upstream: {second.text!r}"
        assert f"[{lane} wire-{lane}]" in second.text, f"second turn text {second.text!r}"
        assert second.calls == [], f"tool called again instead of answering: {second.calls!r}"
        if lane != "gemini":
            # The lane got its call back under the id it gave (the gateway
            # read back what it minted); Gemini's requests carry no ids.
            assert "(own call id)" in second.text, f"{lane} got a call id it did not give: {second.text!r}"
        if lane == "gemini":
            # The SDK sent back only id, name and arguments (Gemini's own
            # part aside): the gateway kept the call's thought signature and
            # put it back, so Gemini did not get the placeholder.
            assert "(signed)" in second.text, f"Gemini got the call back without its signature: {second.text!r}"
        assert stop_name(second.stop) == END_STOP[ingress], f"stop reason {second.stop!r} after the tool result"
