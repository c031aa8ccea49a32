"""The A2A gateway through the official a2a-sdk (1.x) client, in front of
an agent written with the same SDK's server (a2a_agent.py): the client
reads the agent's card from the gateway (rewritten to point at it), then
sends, streams, reads and cancels tasks there. A key without the agent's
grant, and a key whose budget an earlier task spent, are refused with
A2A's JSON-RPC error shape (the SDK raises its own error), and another
key cannot read a task it did not create.

The same again with the client set to the HTTP+JSON binding (the SDK's
`RestTransport`, picked from the card's interfaces), refusals in that
binding's error shape and statuses; and an agent serving HTTP+JSON only,
reached through the gateway by a JSON-RPC client."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, ClientFactory, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError

from conftest import admin_api, free_port, serving

HERE = Path(__file__).parent


def start_agent(*args: str):
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "a2a_agent.py"), str(port), *args])
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/.well-known/agent-card.json", timeout=1).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the agent did not start")
            time.sleep(0.1)
    return port, proc


@pytest.fixture(scope="module")
def agent():
    port, proc = start_agent()
    yield port
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def rest_agent():
    port, proc = start_agent("rest")
    yield port
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def gateway(agent, rest_agent, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("a2a")
    extra = (
        "auth: { mode: keys }\n"
        f"storage: {{ sqlite_path: {workdir / 'switchyard.db'} }}\n"
        "agents:\n"
        f'  research: {{ url: "http://127.0.0.1:{agent}/", timeout: 20s }}\n'
        f'  restful: {{ url: "http://127.0.0.1:{rest_agent}", timeout: 20s }}\n'
    )
    with serving(workdir, extra) as addresses:
        yield addresses


def key(admin: str, spec: dict) -> str:
    return admin_api(admin, "POST", "/api/v1/admin/keys", spec)["key"]


async def client_for(addr: str, bearer: str, streaming: bool, bindings=None, agent: str = "research"):
    """A client as the SDK makes one from the agent's URL: the card read
    from the gateway, the transport chosen from it (among `bindings`)."""
    http = httpx.AsyncClient(headers={"authorization": f"Bearer {bearer}", "x-switchyard-run": "run-sdk"}, timeout=30)
    config = ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=bindings or [])
    client = await create_client(f"http://{addr}/a2a/{agent}", client_config=config)
    return client, http


async def card_of(addr: str, bearer: str):
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {bearer}"}, timeout=30) as http:
        return await A2ACardResolver(http, f"http://{addr}/a2a/research").get_agent_card()


def message(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    )


async def collect(client, request: SendMessageRequest) -> list:
    return [event async for event in client.send_message(request)]


def test_the_sdk_sends_streams_reads_and_cancels_through_the_gateway(gateway):
    addr, admin = gateway
    alice = key(admin, {"name": "alice", "a2a": ["research"]})
    bob = key(admin, {"name": "bob", "a2a": ["research"]})

    async def scenario():
        card = await card_of(addr, alice)
        interfaces = [(i.url, i.protocol_binding) for i in card.supported_interfaces]
        at = f"http://{addr}/a2a/research"
        assert interfaces == [(at, "JSONRPC"), (at, "HTTP+JSON")], interfaces
        assert list(card.security_schemes) == ["switchyard"]
        client, http = await client_for(addr, alice, streaming=False)
        # Sent: a completed task with its artifact, the run identity carried.
        [sent] = await collect(client, message("hello"))
        task = sent.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert task.artifacts[0].parts[0].text == "echo: hello"
        # Read back by its owner.
        read = await client.get_task(GetTaskRequest(id=task.id))
        assert read.id == task.id and read.status.state == TaskState.TASK_STATE_COMPLETED
        # Streamed: the task, its updates, its artifact, as they come.
        streaming, http2 = await client_for(addr, alice, streaming=True)
        events = await collect(streaming, message("stream me"))
        kinds = [e.WhichOneof("payload") for e in events]
        assert "artifact_update" in kinds and kinds[-1] == "status_update", kinds
        last = events[-1].status_update
        assert last.status.state == TaskState.TASK_STATE_COMPLETED
        # The caller's run id reaches the agent (a new task has no id to
        # carry yet: the agent names it).
        assert last.metadata["run"] == "run-sdk" and last.metadata["a2a_task"] == "", last.metadata
        # A slow task, cancelled while it works.
        polling, http3 = await client_for(addr, alice, streaming=False)
        slow = message("slow")
        slow.configuration.return_immediately = True
        [started] = await collect(polling, slow)
        cancelled = await polling.cancel_task(CancelTaskRequest(id=started.task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled
        # Another key finds none of alice's tasks.
        other, http4 = await client_for(addr, bob, streaming=False)
        with pytest.raises(TaskNotFoundError):
            await other.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await other.cancel_task(CancelTaskRequest(id=started.task.id))
        for h in (http, http2, http3, http4):
            await h.aclose()

    asyncio.run(scenario())


def test_a_missing_grant_and_a_spent_budget_are_refused_in_the_agents_error_shape(gateway):
    addr, admin = gateway
    granted = key(admin, {"name": "card-reader", "a2a": ["research"]})
    bare = key(admin, {"name": "bare"})
    spender = key(admin, {"name": "spender", "a2a": ["research"], "budget": {"usd": 0.01, "window": "1d"}})

    async def scenario():
        # The card is read with a granted key; the bare key is then refused
        # by the gateway in JSON-RPC's shape.
        card = await card_of(addr, granted)
        bare_http = httpx.AsyncClient(headers={"authorization": f"Bearer {bare}"}, timeout=30)
        refused = ClientFactory(ClientConfig(httpx_client=bare_http, streaming=False)).create(card)
        with pytest.raises(A2AClientError, match=r"-32040.*may not call agent `research`"):
            await collect(refused, message("hi"))
        await bare_http.aclose()

        spending, http = await client_for(addr, spender, streaming=True)
        await collect(spending, message("charge 0.05"))
        with pytest.raises(A2AClientError, match=r"-32029.*budget"):
            for _ in range(50):
                await collect(spending, message("more"))
                await asyncio.sleep(0.05)
        await http.aclose()

    asyncio.run(scenario())


REST = ["HTTP+JSON"]


def test_the_sdks_http_json_transport_sends_streams_reads_and_cancels(gateway):
    addr, admin = gateway
    alice = key(admin, {"name": "rest-alice", "a2a": ["research"]})
    bob = key(admin, {"name": "rest-bob", "a2a": ["research"]})

    async def scenario():
        client, http = await client_for(addr, alice, streaming=False, bindings=REST)
        # The SDK picked its REST transport from the gateway's card.
        assert type(client._transport).__name__ == "RestTransport", type(client._transport)
        [sent] = await collect(client, message("hello"))
        task = sent.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert task.artifacts[0].parts[0].text == "echo: hello"
        read = await client.get_task(GetTaskRequest(id=task.id))
        assert read.id == task.id and read.status.state == TaskState.TASK_STATE_COMPLETED
        streaming, http2 = await client_for(addr, alice, streaming=True, bindings=REST)
        events = await collect(streaming, message("stream me"))
        kinds = [e.WhichOneof("payload") for e in events]
        assert "artifact_update" in kinds and kinds[-1] == "status_update", kinds
        last = events[-1].status_update
        assert last.status.state == TaskState.TASK_STATE_COMPLETED
        assert last.metadata["run"] == "run-sdk", last.metadata
        slow = message("slow")
        slow.configuration.return_immediately = True
        [started] = await collect(client, slow)
        cancelled = await client.cancel_task(CancelTaskRequest(id=started.task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled
        # Another key's: the SDK's own TaskNotFoundError, read from the
        # binding's error's reason.
        other, http3 = await client_for(addr, bob, streaming=False, bindings=REST)
        with pytest.raises(TaskNotFoundError):
            await other.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await other.cancel_task(CancelTaskRequest(id=started.task.id))
        for h in (http, http2, http3):
            await h.aclose()

    asyncio.run(scenario())


def test_http_json_refusals_reach_the_sdk_as_its_errors(gateway):
    addr, admin = gateway
    granted = key(admin, {"name": "rest-card-reader", "a2a": ["research"]})
    bare = key(admin, {"name": "rest-bare"})
    spender = key(admin, {"name": "rest-spender", "a2a": ["research"], "budget": {"usd": 0.01, "window": "1d"}})

    async def scenario():
        card = await card_of(addr, granted)
        bare_http = httpx.AsyncClient(headers={"authorization": f"Bearer {bare}"}, timeout=30)
        config = ClientConfig(httpx_client=bare_http, streaming=False, supported_protocol_bindings=REST)
        refused = ClientFactory(config).create(card)
        with pytest.raises(A2AClientError, match=r"HTTP Error 403") as caught:
            await collect(refused, message("hi"))
        # The binding's body names the reason for clients that read it.
        body = caught.value.__cause__.response.json()
        assert body["error"]["details"][0]["reason"] == "PERMISSION_DENIED", body
        assert "may not call agent `research`" in body["error"]["message"], body
        await bare_http.aclose()

        spending, http = await client_for(addr, spender, streaming=True, bindings=REST)
        await collect(spending, message("charge 0.05"))
        with pytest.raises(A2AClientError, match=r"HTTP Error 429") as caught:
            for _ in range(50):
                await collect(spending, message("more"))
                await asyncio.sleep(0.05)
        body = caught.value.__cause__.response.json()
        assert body["error"]["details"][0]["reason"] == "QUOTA_EXCEEDED", body
        assert "budget" in body["error"]["message"], body
        await http.aclose()

    asyncio.run(scenario())


def test_an_agent_serving_only_http_json_is_reached_by_a_json_rpc_client(gateway):
    addr, admin = gateway
    alice = key(admin, {"name": "restful-alice", "a2a": ["restful"]})
    bob = key(admin, {"name": "restful-bob", "a2a": ["restful"]})

    async def scenario():
        # The SDK speaks JSON-RPC to the gateway; the gateway speaks
        # HTTP+JSON to the agent, whose own server checks what it is sent.
        client, http = await client_for(addr, alice, streaming=False, bindings=["JSONRPC"], agent="restful")
        assert type(client._transport).__name__ == "JsonRpcTransport", type(client._transport)
        [sent] = await collect(client, message("hello"))
        task = sent.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert task.artifacts[0].parts[0].text == "echo: hello"
        streaming, http2 = await client_for(addr, alice, streaming=True, bindings=["JSONRPC"], agent="restful")
        events = await collect(streaming, message("stream me"))
        last = events[-1].status_update
        assert last.metadata["binding"] == "HTTP+JSON" and last.metadata["run"] == "run-sdk", last.metadata
        read = await client.get_task(GetTaskRequest(id=task.id))
        assert read.id == task.id
        slow = message("slow")
        slow.configuration.return_immediately = True
        [started] = await collect(client, slow)
        cancelled = await client.cancel_task(CancelTaskRequest(id=started.task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled
        other, http3 = await client_for(addr, bob, streaming=False, bindings=REST, agent="restful")
        with pytest.raises(TaskNotFoundError):
            await other.get_task(GetTaskRequest(id=task.id))
        for h in (http, http2, http3):
            await h.aclose()

    asyncio.run(scenario())


def test_the_sdks_0_3_http_json_transport_goes_through_the_gateway(gateway):
    """a2a-sdk's 0.3 REST transport (`/v1/...`, protobuf JSON bodies)
    against the gateway, which reads them as 0.3 JSON-RPC for the agent
    (the SDK's own server, taking 0.3's methods) and writes its answers
    back as protobuf JSON the SDK parses."""
    from a2a.compat.v0_3.rest_transport import CompatRestTransport

    addr, admin = gateway
    alice = key(admin, {"name": "v03-alice", "a2a": ["research"]})
    bob = key(admin, {"name": "v03-bob", "a2a": ["research"]})

    async def scenario():
        card = await card_of(addr, alice)
        url = f"http://{addr}/a2a/research"
        http = httpx.AsyncClient(headers={"authorization": f"Bearer {alice}"}, timeout=30)
        transport = CompatRestTransport(http, card, url)
        sent = await transport.send_message(message("hello"))
        task = sent.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, sent
        assert task.artifacts[0].parts[0].text == "echo: hello", task
        read = await transport.get_task(GetTaskRequest(id=task.id))
        assert read.id == task.id and read.status.state == TaskState.TASK_STATE_COMPLETED, read
        events = [e async for e in transport.send_message_streaming(message("stream me"))]
        kinds = [e.WhichOneof("payload") for e in events]
        assert "artifact_update" in kinds and kinds[-1] == "status_update", kinds
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        other_http = httpx.AsyncClient(headers={"authorization": f"Bearer {bob}"}, timeout=30)
        with pytest.raises(TaskNotFoundError):
            await CompatRestTransport(other_http, card, url).get_task(GetTaskRequest(id=task.id))
        await http.aclose()
        await other_http.aclose()

    asyncio.run(scenario())
