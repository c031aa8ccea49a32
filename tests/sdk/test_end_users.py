"""End users through the official SDKs: each SDK names the end user its own
way (OpenAI `user`, Anthropic `metadata.user_id`, Bedrock
`requestMetadata.user`; Gemini and Cohere, which have no such field, send
the operator's `x-switchyard-user` header through the SDK's own header
option). Their spend is grouped by end user over the admin API, and an
end-user budget inside a key refuses one end user with each SDK's own
quota error while another end user, with an override, is served."""

from __future__ import annotations

import time

import pytest

from conftest import admin_api
from sdk_support import INGRESSES, error_facts

HEADER = "x-switchyard-user"


def new_key(admin: str, **spec) -> dict:
    return admin_api(admin, "POST", "/api/v1/admin/keys", {"name": "end-users", "issue_aws_credential": True, **spec})


def ask_as(ingress: str, addr: str, key: dict, user: str, text: str) -> str:
    """One chat by `user` through `ingress`'s official SDK; the reply's text."""
    model = "lane-openai"
    if ingress.startswith("openai"):
        import openai

        client = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key["key"], max_retries=0)
        if ingress == "openai-chat":
            reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], user=user)
            return reply.choices[0].message.content or ""
        return client.responses.create(model=model, input=text, user=user).output_text
    if ingress == "anthropic":
        import anthropic

        client = anthropic.Anthropic(base_url=f"http://{addr}", api_key=key["key"], max_retries=0)
        message = client.messages.create(
            model=model, max_tokens=64, messages=[{"role": "user", "content": text}], metadata={"user_id": user}
        )
        return "".join(block.text for block in message.content if block.type == "text")
    if ingress == "gemini":
        from google import genai
        from google.genai import types

        client = genai.Client(
            api_key=key["key"],
            http_options=types.HttpOptions(
                base_url=f"http://{addr}",
                api_version="v1beta",
                headers={HEADER: user},
                retry_options=types.HttpRetryOptions(attempts=1),
            ),
        )
        return client.models.generate_content(model=model, contents=text).text or ""
    if ingress == "cohere":
        import cohere

        client = cohere.ClientV2(api_key=key["key"], base_url=f"http://{addr}", max_retries=0)
        reply = client.chat(
            model=model,
            messages=[{"role": "user", "content": text}],
            request_options={"additional_headers": {HEADER: user}},
        )
        return "".join(part.text for part in reply.message.content or [] if getattr(part, "text", None))
    if ingress == "bedrock":
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "bedrock-runtime",
            endpoint_url=f"http://{addr}",
            region_name="us-east-1",
            aws_access_key_id=key["aws_access_key_id"],
            aws_secret_access_key=key["aws_secret_access_key"],
            config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
        )
        reply = client.converse(
            modelId=model, messages=[{"role": "user", "content": [{"text": text}]}], requestMetadata={"user": user}
        )
        return "".join(block.get("text", "") for block in reply["output"]["message"]["content"])
    raise AssertionError(ingress)


@pytest.mark.parametrize("ingress", INGRESSES)
def test_each_sdk_names_its_end_user_and_spend_is_grouped_by_them(governed, ingress):
    addr, admin = governed
    key = new_key(admin)
    user = f"alice-{ingress}"
    assert "spent by an end user" in ask_as(ingress, addr, key, user, "spent by an end user")
    deadline = time.monotonic() + 10
    lines: list = []
    while time.monotonic() < deadline:
        lines = admin_api(admin, "GET", f"/api/v1/admin/spend?by=user&key={key['id']}")["data"]
        if lines:
            break
        time.sleep(0.05)
    assert [line["value"] for line in lines] == [user], lines
    assert lines[0]["usd"] > 0 and lines[0]["requests"] == 1, lines
    rows = admin_api(admin, "GET", f"/api/v1/admin/requests?key={key['id']}")["data"]
    assert rows and rows[0].get("end_user") == user, rows


@pytest.mark.parametrize("ingress", INGRESSES)
def test_an_end_user_budget_refuses_with_each_sdks_quota_error(governed, ingress):
    addr, admin = governed
    # Each end user of this key may spend next to nothing; one has more.
    key = new_key(admin, end_users={"budget": {"usd": 0.000001, "window": "total"}})
    admin_api(
        admin,
        "PUT",
        f"/api/v1/admin/keys/{key['id']}/end-users/vip",
        {"budget": {"usd": 10.0, "window": "total"}},
    )
    with pytest.raises(Exception) as caught:
        ask_as(ingress, addr, key, "capped", "hi")
    facts = error_facts(ingress, caught.value)
    assert facts.own, repr(caught.value)
    assert "end user `capped`" in facts.message, facts.message
    if ingress == "bedrock":
        assert (facts.status, facts.kind) == (400, "ServiceQuotaExceededException"), facts.described
    else:
        assert facts.status == 429, facts.described
    # The override serves its end user; the key itself is not spent.
    assert "served anyway" in ask_as(ingress, addr, key, "vip", "served anyway")
