"""Tool use: every ingress SDK into every lane protocol, non-streaming and
streaming. The mock calls the first tool with arguments filled from its schema
({"city": "mock"}); given the tool's result it answers
"[<lane> <model>] tool <name> returned: <result>", and a Gemini lane adds
whether the call came back with the thought signature it gave it."""

import pytest

from sdk_support import END_STOP, INGRESSES, PROTOCOLS, TOOL_RESULT, TOOL_STOP, stop_name


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
        assert stop_name(first.stop) == TOOL_STOP[ingress], f"stop reason {first.stop!r} for a tool call"

    with recorder.capture():
        second = driver.tool_result(model, first, stream)
        assert "returned" in second.text, f"second turn text {second.text!r}"
        assert TOOL_RESULT in second.text, f"tool result not delivered upstream: {second.text!r}"
        assert f"[{lane} wire-{lane}]" in second.text, f"second turn text {second.text!r}"
        assert second.calls == [], f"tool called again instead of answering: {second.calls!r}"
        if lane == "gemini":
            # The SDK sent back only id, name and arguments (Gemini's own
            # part aside): the gateway kept the call's thought signature and
            # put it back, so Gemini did not get the placeholder.
            assert "(signed)" in second.text, f"Gemini got the call back without its signature: {second.text!r}"
        assert stop_name(second.stop) == END_STOP[ingress], f"stop reason {second.stop!r} after the tool result"
