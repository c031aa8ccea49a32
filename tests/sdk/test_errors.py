"""Upstream errors surface as each SDK's own exception type. The mock answers
`[mock:status=NNN]` in the user text with that status in the lane protocol's
error shape (429 with `retry-after: 1`); the gateway must re-render it in the
caller's protocol."""

import pytest

from sdk_support import INGRESSES, OTHER_LANE, SAME_LANE, error_facts, expected_error, rate_limit_lane

CASES = [(ingress, lanes[ingress]) for ingress in INGRESSES for lanes in (OTHER_LANE, SAME_LANE)]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("status", [400, 429])
@pytest.mark.parametrize(("ingress", "lane"), CASES, ids=[f"{i}-{l}" for i, l in CASES])
def test_upstream_error(drivers, recorder, ingress, lane, status, stream):
    # 400 is the caller's fault and leaves the lane alone; 429 rests the lane,
    # so it goes to a lane of the same protocol kept for this one test.
    model = f"lane-{lane}" if status == 400 else rate_limit_lane(ingress, lane, stream)
    with recorder.capture():
        with pytest.raises(Exception) as caught:
            drivers[ingress].chat(model, f"hello [mock:status={status}]", stream)
        exc = caught.value
        facts = error_facts(ingress, exc)
        assert facts.own, f"not the SDK's own error type: {type(exc).__module__}.{type(exc).__name__}: {exc}"
        assert facts.status == status, f"{facts.described} reports status {facts.status!r}, expected {status}"
        cls, kind = expected_error(ingress, status)
        assert isinstance(exc, cls), f"{facts.described}, expected {cls.__module__}.{cls.__name__}"
        if kind is not None:
            assert facts.kind == kind, f"{facts.described} error type {facts.kind!r}, expected {kind!r}"
        assert f"answered {status}" in facts.message, f"upstream error message lost: {facts.described} {facts.message!r}"
        if status == 429:
            assert "retry-after" in facts.headers, f"429 without retry-after: {facts.headers!r}"
        assert len(recorder.requests) == 1, f"the SDK retried: {len(recorder.requests)} requests"
