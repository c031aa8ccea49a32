"""Budgets that shape traffic, through the official OpenAI SDK: a key on a
spent budget with `on_exhaust: { downgrade: <pool> }` is served by the
cheaper pool and told so (`x-switchyard-route-policy: downgraded`);
without one it gets the SDK's quota error; a per-model daily token quota
refuses only that model."""

from __future__ import annotations

import openai
import pytest

from conftest import admin_api, serving
from sdk_support import PROTOCOLS


@pytest.fixture(scope="module")
def priced(tmp_path_factory):
    """A gateway with keys where `lane-openai` is dear and `lane-anthropic`
    cheap: (data address, admin address)."""
    workdir = tmp_path_factory.mktemp("budgets")
    cheap = {p: "{ input_utok: 1, output_utok: 1 }" for p in PROTOCOLS}
    cheap["openai"] = "{ input_utok: 1000, output_utok: 2000 }"
    extra = "rate_card:\n" + "".join(f"  lane-{p}: {price}\n" for p, price in cheap.items())
    extra += "auth: { mode: keys }\n"
    extra += f"storage: {{ sqlite_path: {workdir / 'switchyard.db'} }}\n"
    with serving(workdir, extra) as addresses:
        yield addresses


def client(addr: str, admin: str, **spec) -> openai.OpenAI:
    key = admin_api(admin, "POST", "/api/v1/admin/keys", {"name": "budgets", **spec})
    return openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key["key"], max_retries=0)


def ask(sdk: openai.OpenAI, model: str, max_tokens: int):
    return sdk.chat.completions.with_raw_response.create(
        model=model, max_tokens=max_tokens, messages=[{"role": "user", "content": "hello"}]
    )


def test_a_spent_budget_with_a_downgrade_is_served_by_the_cheaper_pool_and_told_so(priced):
    addr, admin = priced
    # $1: 1000 output tokens of lane-openai ($2) do not fit; of lane-anthropic they do.
    budget = {"usd": 1.0, "window": "total", "on_exhaust": {"downgrade": "lane-anthropic"}}
    raw = ask(client(addr, admin, budget=budget), "lane-openai", 1000)
    assert raw.headers["x-switchyard-route-policy"] == "downgraded"
    assert raw.headers["x-switchyard-downgrade"].startswith("spent; bucket=key:")
    completion = raw.parse()
    assert "hello" in completion.choices[0].message.content
    assert completion.usage.total_tokens > 0


def test_a_spent_budget_without_a_downgrade_is_the_sdks_quota_error(priced):
    addr, admin = priced
    sdk = client(addr, admin, budget={"usd": 1.0, "window": "total"})
    with pytest.raises(openai.RateLimitError) as caught:
        ask(sdk, "lane-openai", 1000)
    assert caught.value.status_code == 429
    assert caught.value.code == "insufficient_quota", caught.value.body
    assert "budget" in caught.value.message


def test_a_per_model_daily_token_quota_refuses_only_that_model(priced):
    addr, admin = priced
    sdk = client(addr, admin, limits={"per_model": {"lane-openai": {"tpd": 400}}})
    # The first request holds about 392 of the 400 tokens and uses a few.
    assert ask(sdk, "lane-openai", 390).parse().choices
    with pytest.raises(openai.RateLimitError) as caught:
        ask(sdk, "lane-openai", 390)
    assert "`lane-openai`" in caught.value.message and "quota" in caught.value.message, caught.value.message
    for _ in range(3):
        assert ask(sdk, "lane-anthropic", 390).parse().choices
