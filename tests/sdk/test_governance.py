"""Virtual keys through the official SDKs: a second gateway with
`auth: { mode: keys }`, keys minted over the admin API with curl-like calls,
and every SDK presenting its key its own way (boto3 signing with a minted AWS
pair). A wrong key raises each SDK's authentication error; a spent budget its
quota (or rate-limit) error; a rate limit its rate-limit error with
Retry-After."""

from __future__ import annotations

import time

import pytest

from conftest import admin_api
from sdk_support import INGRESSES, Recorder, error_facts, make_drivers


def new_key(admin: str, **spec) -> dict:
    return admin_api(admin, "POST", "/api/v1/admin/keys", {"name": "sdk", "issue_aws_credential": True, **spec})


def drivers_for(addr: str, key: dict):
    return make_drivers(addr, Recorder(), key["key"], (key["aws_access_key_id"], key["aws_secret_access_key"]))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("ingress", INGRESSES)
def test_a_virtual_key_works_through_every_sdk(governed, ingress, stream):
    addr, admin = governed
    drivers = drivers_for(addr, new_key(admin))
    result = drivers[ingress].chat("lane-anthropic", "hello with a key", stream)
    assert "hello with a key" in result.text


@pytest.mark.parametrize("ingress", INGRESSES)
def test_a_wrong_key_is_each_sdks_authentication_error(governed, ingress):
    addr, admin = governed
    wrong = {"key": "sy-" + "0" * 43, "aws_access_key_id": "AKSYNOTAKEY000000000", "aws_secret_access_key": "x" * 40}
    with pytest.raises(Exception) as caught:
        drivers_for(addr, wrong)[ingress].chat("lane-openai", "hi", False)
    facts = error_facts(ingress, caught.value)
    assert facts.own, f"not the SDK's own error: {caught.value!r}"
    assert facts.status == (403 if ingress == "bedrock" else 401), facts.described
    if ingress.startswith("openai"):
        import openai

        assert isinstance(caught.value, openai.AuthenticationError)
    if ingress == "anthropic":
        import anthropic

        assert isinstance(caught.value, anthropic.AuthenticationError)
    if ingress == "bedrock":
        assert facts.kind == "UnrecognizedClientException", facts.described
    # A key whose AWS secret is wrong is a signature error, not an unknown key.
    if ingress == "bedrock":
        key = new_key(admin)
        bad = dict(key, aws_secret_access_key="y" * 40)
        with pytest.raises(Exception) as caught:
            drivers_for(addr, bad)[ingress].chat("lane-openai", "hi", False)
        assert error_facts(ingress, caught.value).kind == "InvalidSignatureException"


@pytest.mark.parametrize("ingress", INGRESSES)
def test_a_spent_budget_is_each_sdks_quota_error(governed, ingress):
    addr, admin = governed
    # The first request's reservation alone is larger than this budget.
    key = new_key(admin, budget={"usd": 0.000001, "window": "total"})
    with pytest.raises(Exception) as caught:
        drivers_for(addr, key)[ingress].chat("lane-openai", "hi", False)
    facts = error_facts(ingress, caught.value)
    assert facts.own, repr(caught.value)
    assert "budget" in facts.message, facts.message
    if ingress == "bedrock":
        assert (facts.status, facts.kind) == (400, "ServiceQuotaExceededException"), facts.described
        return
    assert facts.status == 429, facts.described
    if ingress.startswith("openai"):
        import openai

        assert isinstance(caught.value, openai.RateLimitError)
        assert caught.value.code == "insufficient_quota", caught.value.body
    if ingress == "gemini":
        assert facts.kind == "RESOURCE_EXHAUSTED"


@pytest.mark.parametrize("ingress", INGRESSES)
def test_a_rate_limit_is_each_sdks_rate_limit_error_with_retry_after(governed, ingress):
    addr, admin = governed
    drivers = drivers_for(addr, new_key(admin, limits={"rpm": 1}))
    drivers[ingress].chat("lane-openai", "first", False)
    with pytest.raises(Exception) as caught:
        drivers[ingress].chat("lane-openai", "second", False)
    facts = error_facts(ingress, caught.value)
    assert facts.own, repr(caught.value)
    assert facts.status == 429, facts.described
    assert int(facts.headers["retry-after"]) >= 1, facts.headers
    if ingress == "bedrock":
        assert facts.kind == "ThrottlingException", facts.described


def test_spend_appears_in_the_admin_api(governed):
    addr, admin = governed
    key = new_key(admin)
    drivers = drivers_for(addr, key)
    drivers["openai-chat"].chat("lane-cohere", "bill me", False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rows = admin_api(admin, "GET", f"/api/v1/admin/requests?key={key['id']}")["data"]
        if rows:
            break
        time.sleep(0.05)
    assert rows and rows[0]["lane"] == "lane-cohere" and rows[0]["usd"] > 0, rows
    spend = admin_api(admin, "GET", "/api/v1/admin/spend?by=key")["data"]
    assert any(line["value"] == key["id"] and line["usd"] > 0 for line in spend), spend
