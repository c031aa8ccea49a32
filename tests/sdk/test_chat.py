"""Plain chat: every ingress SDK into every lane protocol, non-streaming and
streaming. The mock answers "[<lane protocol> wire-<lane protocol>] you said: <text>"."""

import pytest

from sdk_support import END_STOP, INGRESSES, PROTOCOLS, stop_name


def check_reply(result, lane, ingress):
    assert f"[{lane} wire-{lane}]" in result.text, f"reply text {result.text!r} does not name the lane"
    assert "you said: hello" in result.text, f"reply text {result.text!r} does not echo the prompt"
    assert result.calls == [], f"unexpected tool calls {result.calls!r}"
    assert stop_name(result.stop) == END_STOP[ingress], f"stop reason {result.stop!r}"
    # the mock always reports at least one input and one output token
    assert result.input_tokens is not None and result.output_tokens is not None, (
        f"usage missing: input={result.input_tokens!r} output={result.output_tokens!r}"
    )
    assert result.input_tokens >= 1 and result.output_tokens >= 1, (
        f"usage lost in translation: input={result.input_tokens!r} output={result.output_tokens!r}"
    )


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("lane", PROTOCOLS)
@pytest.mark.parametrize("ingress", INGRESSES)
def test_chat(drivers, recorder, ingress, lane, stream):
    with recorder.capture():
        result = drivers[ingress].chat(f"lane-{lane}", "hello", stream)
        check_reply(result, lane, ingress)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_anthropic_path_route(drivers, recorder, stream):
    """base_url http://addr/lane-openai: the path names the lane, the body's model is ignored."""
    with recorder.capture():
        result = drivers["anthropic-path"].chat("claude-ignored-by-the-path-route", "hello", stream)
        check_reply(result, "openai", "anthropic-path")
