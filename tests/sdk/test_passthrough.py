"""The raw route, `/passthrough/{provider}/{path}`, through the official
`openai` SDK: its base URL pointed at the route, the SDK's own methods for
endpoints Switchyard does not model (`models.retrieve`,
`fine_tuning.jobs.list`, `fine_tuning.jobs.create`) and its generic
`client.get` reach a fake vendor on loopback with the operator's key, and
the gateway's refusals are the SDK's own exceptions.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest

from conftest import admin_api, serving

OPERATOR_KEY = "sk-operator-secret-0123456789"


class Vendor(BaseHTTPRequestHandler):
    """Answers every path with a JSON object the SDK's models accept, and
    records what it got: method, path and query, headers, body."""

    got: list[tuple[str, str, dict[str, str], bytes]] = []

    def answer(self):
        length = int(self.headers.get("content-length", 0))
        body = self.rfile.read(length) if length else b""
        Vendor.got.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        path = self.path.split("?")[0]
        if path.startswith("/v1/models/"):
            reply = {"id": path.rsplit("/", 1)[1], "object": "model", "created": 0, "owned_by": "vendor"}
        elif path == "/v1/fine_tuning/jobs" and self.command == "GET":
            reply = {"object": "list", "data": [], "has_more": False}
        elif path == "/v1/fine_tuning/jobs":
            reply = {
                "id": "ftjob-1", "object": "fine_tuning.job", "created_at": 0, "model": "gpt-4o-mini",
                "organization_id": "org-operator", "result_files": [], "status": "queued",
                "training_file": json.loads(body)["training_file"], "seed": 1,
                "error": None, "fine_tuned_model": None, "finished_at": None, "hyperparameters": {},
                "trained_tokens": None, "validation_file": None,
            }
        else:
            reply = {"object": "list", "data": [{"id": "ev-1"}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = answer  # noqa: N815 - http.server's names

    def log_message(self, *_):
        pass


@pytest.fixture(scope="module")
def route(tmp_path_factory):
    """A governed gateway whose provider `vendor` (the fake) opens its raw
    route to fine-tuning and models: (data address, admin address)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Vendor)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    vendor = f"127.0.0.1:{server.server_address[1]}"
    workdir = tmp_path_factory.mktemp("passthrough")
    provider = (
        f"  vendor:\n    protocol: openai\n    base_url: http://{vendor}\n    api_key: {OPERATOR_KEY}\n"
        '    passthrough: { paths: ["/v1/fine_tuning/*", "/v1/models/*"], methods: [GET, POST] }\n'
    )
    extra = f"auth: {{ mode: keys }}\nstorage: {{ sqlite_path: {workdir / 'switchyard.db'} }}\n"
    with serving(workdir, extra, config=lambda lanes: lanes.replace("providers:\n", "providers:\n" + provider, 1)) as addresses:
        yield addresses
    server.shutdown()


def client(addr: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://{addr}/passthrough/vendor/v1", api_key=key, max_retries=0)


def test_the_sdk_reaches_unmodelled_endpoints_with_the_operators_key(route):
    addr, admin = route
    key = admin_api(admin, "POST", "/api/v1/admin/keys", {"name": "ml", "passthrough": ["vendor"]})["key"]
    sdk = client(addr, key)
    Vendor.got.clear()
    assert sdk.models.retrieve("gpt-x").id == "gpt-x"
    assert sdk.fine_tuning.jobs.list(limit=2).data == []
    job = sdk.fine_tuning.jobs.create(model="gpt-4o-mini", training_file="file-abc")
    assert (job.id, job.training_file) == ("ftjob-1", "file-abc")
    events = sdk.get("/fine_tuning/jobs/ftjob-1/events", cast_to=object)
    assert events["data"] == [{"id": "ev-1"}]
    sent = [(method, path) for method, path, _, _ in Vendor.got]
    assert sent == [
        ("GET", "/v1/models/gpt-x"),
        ("GET", "/v1/fine_tuning/jobs?limit=2"),
        ("POST", "/v1/fine_tuning/jobs"),
        ("GET", "/v1/fine_tuning/jobs/ftjob-1/events"),
    ]
    for _, _, headers, _ in Vendor.got:
        assert headers["authorization"] == f"Bearer {OPERATOR_KEY}"
        assert key not in json.dumps(headers)
    assert json.loads(Vendor.got[2][3]) == {"model": "gpt-4o-mini", "training_file": "file-abc"}


def test_the_routes_refusals_are_the_sdks_own_errors(route):
    addr, admin = route
    granted = admin_api(admin, "POST", "/api/v1/admin/keys", {"name": "granted", "passthrough": ["vendor"]})["key"]
    ungranted = admin_api(admin, "POST", "/api/v1/admin/keys", {"name": "plain"})["key"]
    Vendor.got.clear()
    with pytest.raises(openai.PermissionDeniedError):
        client(addr, ungranted).models.retrieve("gpt-x")
    with pytest.raises(openai.NotFoundError):
        client(addr, granted).get("/organization/users", cast_to=object)
    with pytest.raises(openai.BadRequestError):
        client(addr, granted).get("/models/%2e%2e/organization/users", cast_to=object)
    with pytest.raises(openai.AuthenticationError):
        client(addr, "sy-not-a-key-000000000000000000000000000").models.retrieve("gpt-x")
    assert Vendor.got == []
