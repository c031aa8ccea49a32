"""Retention through the official SDKs: a gateway whose `support` group
keeps `redacted` text; every SDK, streamed and not, sends an email address
for an end user (named by the `x-switchyard-user` header, the way any SDK
can). The request's kept text opens in the admin API masked on both sides,
a stream is kept as one whole reply, and erasing the end user removes it.
(The purge, and PostgreSQL, are tested in crates/gateway/tests/retention.rs.)"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from conftest import admin_api, serving
from sdk_support import INGRESSES, Recorder, make_drivers

KEY = "6b" * 32


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("retention")
    extra = "auth: { mode: keys }\n"
    extra += f"storage: {{ sqlite_path: {workdir / 'switchyard.db'} }}\n"
    extra += "governance: { ledger_flush_interval: 20ms }\n"
    extra += "retention: { key: ${SWITCHYARD_RETENTION_KEY}, days: 30 }\n"
    extra += "groups:\n  support: { retention: redacted }\n"
    with serving(workdir, extra, env={"SWITCHYARD_RETENTION_KEY": KEY}) as addresses:
        yield addresses


class EndUser(Recorder):
    """Names the end user on every request an SDK sends."""

    def __init__(self, user: str) -> None:
        super().__init__()
        self.user = user

    def httpx_hook(self, request) -> None:
        request.headers["x-switchyard-user"] = self.user
        super().httpx_hook(request)

    def botocore_hook(self, request, **kw):
        request.headers["x-switchyard-user"] = self.user
        return super().botocore_hook(request, **kw)


def kept_text(admin: str, key_id: str, present: bool = True) -> dict | None:
    """The kept text of the key's newest request (`None`: none, after a while)."""
    for _ in range(200 if present else 10):
        rows = admin_api(admin, "GET", f"/api/v1/admin/requests?key={key_id}&limit=1")["data"]
        if rows:
            detail = admin_api(admin, "GET", f"/api/v1/admin/requests/{rows[0]['id']}")
            if detail.get("kept") is not None:
                return detail["kept"]
        time.sleep(0.02)
    return None


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("ingress", INGRESSES)
def test_kept_redacted_and_erased_through_every_sdk(kept, ingress, stream):
    addr, admin = kept
    key = admin_api(admin, "POST", "/api/v1/admin/keys",
                    {"name": "kept", "group": "support", "issue_aws_credential": True})
    user = f"user-{uuid.uuid4()}"
    drivers = make_drivers(addr, EndUser(user), key["key"], (key["aws_access_key_id"], key["aws_secret_access_key"]))
    result = drivers[ingress].chat("lane-anthropic", "write to ada@example.com today", stream)
    assert "ada@example.com" in result.text, "the caller's own text is not masked: only what is kept"
    text = kept_text(admin, key["id"])
    assert text is not None, "the request's text was kept"
    assert text["retention"] == "redacted"
    shown = json.dumps(text)
    assert "[EMAIL_1]" in shown and "ada@example.com" not in shown, shown
    assert text["reply"] is not None, "the reply is kept with the request"
    assert "[EMAIL_1]" in json.dumps(text["reply"]), "the reply is masked too (the mock echoes the address)"
    if stream:
        assert isinstance(text["reply"], dict), f"a stream is kept as one whole reply: {shown}"
    erased = admin_api(admin, "DELETE", f"/api/v1/admin/users/{user}/content")
    # A Responses caller's conversation was stored for the same end user: erased with the text.
    stored = 1 if ingress == "openai-responses" else 0
    assert erased == {"erased": 1, "responses": stored}
    assert kept_text(admin, key["id"], present=False) is None
    again = admin_api(admin, "DELETE", f"/api/v1/admin/users/{user}/content")
    assert again == {"erased": 0, "responses": 0}
