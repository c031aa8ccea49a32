"""Files, batches and stored responses through the official SDKs.

- `openai`: files.create, batches.create over lanes of three protocols,
  retrieve polled to completion, the output file's contents, cancel;
  responses.create with previous_response_id, retrieve, input_items, delete.
- `anthropic`: messages.batches.create, retrieve, results and cancel.
- A `kill -9` mid-batch: the restarted gateway resumes from the store and
  the output file has every line exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anthropic
import openai
import pytest

from conftest import ADMIN_TOKEN, admin_api, free_port, healthy, lanes_config, serving


class Slow(BaseHTTPRequestHandler):
    """An OpenAI-protocol upstream that takes 50 ms and counts each prompt."""

    seen: dict[str, int] = {}
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        prompt = body["messages"][-1]["content"]
        with Slow.lock:
            Slow.seen[prompt] = Slow.seen.get(prompt, 0) + 1
        time.sleep(0.05)
        reply = {
            "id": "chatcmpl-slow", "object": "chat.completion", "created": 1, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": f"slow: {prompt}"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_):
        pass


def start_slow() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"127.0.0.1:{server.server_address[1]}"


SLOW = start_slow()


def extra(workdir: Path) -> str:
    return (
        "auth: { mode: keys }\n"
        f"storage: {{ sqlite_path: {workdir / 'switchyard.db'} }}\n"
        "governance: { ledger_flush_interval: 20ms }\n"
        "batches: { concurrency: 2, lease: 2s }\n"
    )


def slow_lane(config: str) -> str:
    """Adds the slow upstream as `lane-slow` to a lanes config."""
    config = config.replace("providers:\n", f'providers:\n  up-slow: {{ protocol: openai, base_url: "http://{SLOW}" }}\n', 1)
    return config.replace("models:\n", "models:\n  lane-slow: { provider: up-slow, model: slow-model }\n", 1)


@pytest.fixture(scope="module")
def batching(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("batches")
    with serving(workdir, extra(workdir), config=slow_lane) as addresses:
        yield addresses


def key(admin: str, name: str) -> str:
    return admin_api(admin, "POST", "/api/v1/admin/keys", {"name": name})["key"]


def jsonl(lines: list[dict]) -> bytes:
    return "\n".join(json.dumps(line) for line in lines).encode()


def chat_line(n: int, model: str) -> dict:
    return {
        "custom_id": f"line-{n}",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": f"line {n}"}]},
    }


def poll(client: openai.OpenAI, batch_id: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if batch.status in ("completed", "cancelled", "expired", "failed"):
            return batch
        time.sleep(0.1)
    raise AssertionError(f"batch {batch_id} did not finish: {batch}")


def test_an_openai_batch_over_three_protocols(batching):
    addr, admin = batching
    client = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key(admin, "batcher"))
    models = ["lane-openai", "lane-anthropic", "lane-gemini"]
    lines = [chat_line(n, models[n % 3]) for n in range(9)]
    upload = client.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
    assert upload.purpose == "batch" and upload.bytes == len(jsonl(lines))
    assert client.files.retrieve(upload.id).filename == "in.jsonl"
    batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert batch.status == "in_progress" and batch.request_counts.total == 9
    done = poll(client, batch.id)
    assert done.status == "completed", done
    assert (done.request_counts.completed, done.request_counts.failed) == (9, 0)
    assert done.error_file_id is None
    out = [json.loads(line) for line in client.files.content(done.output_file_id).content.decode().splitlines()]
    assert sorted(line["custom_id"] for line in out) == sorted(f"line-{n}" for n in range(9))
    for line in out:
        n = int(line["custom_id"].split("-")[1])
        reply = line["response"]["body"]["choices"][0]["message"]["content"]
        assert f"you said: line {n}" in reply and models[n % 3].split("-")[1] in reply, line
    assert client.batches.list().data[0].id == batch.id
    # Another key sees neither the batch nor the files.
    stranger = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key(admin, "stranger"))
    with pytest.raises(openai.NotFoundError):
        stranger.batches.retrieve(batch.id)
    with pytest.raises(openai.NotFoundError):
        stranger.files.content(done.output_file_id)
    assert client.files.delete(upload.id).deleted


def test_an_openai_batch_is_cancelled(batching):
    addr, admin = batching
    client = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key(admin, "canceller"))
    upload = client.files.create(file=("slow.jsonl", jsonl([chat_line(1000 + n, "lane-slow") for n in range(40)])), purpose="batch")
    batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    time.sleep(0.15)
    cancelled = client.batches.cancel(batch.id)
    assert cancelled.status in ("cancelling", "cancelled")
    done = poll(client, batch.id)
    assert done.status == "cancelled"
    counts = done.request_counts
    assert counts.completed + counts.failed == 40 and counts.completed < 40, counts
    errors = client.files.content(done.error_file_id).content.decode().splitlines()
    assert any(json.loads(e)["error"]["code"] == "batch_cancelled" for e in errors)


def test_anthropic_message_batches(batching):
    addr, admin = batching
    client = anthropic.Anthropic(base_url=f"http://{addr}", api_key=key(admin, "anthropic-batcher"))
    requests = [
        {"custom_id": f"q{n}", "params": {"model": m, "max_tokens": 16, "messages": [{"role": "user", "content": f"ask {n}"}]}}
        for n, m in enumerate(["lane-anthropic", "lane-openai", "lane-bedrock", "nope"])
    ]
    batch = client.messages.batches.create(requests=requests)
    assert batch.processing_status == "in_progress" and batch.request_counts.processing == 4
    deadline = time.monotonic() + 60
    while client.messages.batches.retrieve(batch.id).processing_status != "ended":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    ended = client.messages.batches.retrieve(batch.id)
    assert (ended.request_counts.succeeded, ended.request_counts.errored) == (3, 1), ended
    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert results["q0"].type == "succeeded" and "you said: ask 0" in results["q0"].message.content[0].text
    assert results["q2"].type == "succeeded"
    assert results["q3"].type == "errored"
    # Cancel: pending requests are canceled.
    slow = [
        {"custom_id": f"s{n}", "params": {"model": "lane-slow", "max_tokens": 8, "messages": [{"role": "user", "content": f"slow {n}"}]}}
        for n in range(30)
    ]
    long = client.messages.batches.create(requests=slow)
    assert client.messages.batches.cancel(long.id).processing_status in ("canceling", "ended")
    while client.messages.batches.retrieve(long.id).processing_status != "ended":
        time.sleep(0.1)
    kinds = [r.result.type for r in client.messages.batches.results(long.id)]
    assert len(kinds) == 30 and "canceled" in kinds
    client.messages.batches.delete(long.id)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(long.id)


def test_a_responses_conversation_with_previous_response_id(batching):
    addr, admin = batching
    client = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key(admin, "conversation"))
    previous = None
    for n, model in enumerate(["lane-anthropic", "lane-gemini", "lane-openai", "lane-cohere", "lane-anthropic"]):
        kwargs = {"previous_response_id": previous} if previous else {}
        reply = client.responses.create(model=model, input=f"turn {n}", **kwargs)
        assert f"you said: turn {n}" in reply.output_text
        for _ in range(100):  # kept behind the answer
            try:
                client.responses.retrieve(reply.id)
                break
            except openai.NotFoundError:
                time.sleep(0.02)
        previous = reply.id
    # Every item used to generate the last response, as OpenAI lists one made
    # with previous_response_id: the earlier turns' inputs and answers and the
    # newest input, newest first (OpenAI's default order).
    items = client.responses.input_items.list(previous)
    texts = [item.content[0].text for item in items.data]
    assert len(texts) == 9 and not items.has_more, texts
    assert texts[0::2] == [f"turn {n}" for n in (4, 3, 2, 1, 0)], texts
    assert all(f"you said: turn {n}" in texts[2 * (4 - n) - 1] for n in (3, 2, 1, 0)), texts
    assert [i.role for i in items.data] == ["user", "assistant"] * 4 + ["user"]
    assert (items.first_id, items.last_id) == (items.data[0].id, items.data[-1].id)
    ascending = client.responses.input_items.list(previous, order="asc")
    assert [item.content[0].text for item in ascending.data] == texts[::-1]
    # Two a page: the SDK's auto-pagination walks them all with `after`.
    first = client.responses.input_items.list(previous, limit=2)
    assert len(first.data) == 2 and first.has_more
    assert [item.content[0].text for item in first] == texts
    after = client.responses.input_items.list(previous, limit=2, after=first.last_id)
    assert [item.content[0].text for item in after.data] == texts[2:4]
    with pytest.raises(openai.BadRequestError):
        client.responses.input_items.list(previous, limit=101)
    # Another key's response is not found, listing included.
    stranger = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key(admin, "stranger"))
    with pytest.raises(openai.NotFoundError):
        stranger.responses.input_items.list(previous)
    assert client.responses.retrieve(previous).previous_response_id is not None
    client.responses.delete(previous)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(previous)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="lane-openai", input="x", previous_response_id=previous)


def start_gateway(binary: str, config: Path, log: Path):
    return subprocess.Popen([binary, "serve", "--config", str(config)], stdout=open(log, "ab"), stderr=subprocess.STDOUT)


def test_a_kill_9_mid_batch_resumes_with_each_line_once(tmp_path):
    binary = os.environ["SWITCHYARD_BIN"]
    addr, admin = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    config = tmp_path / "switchyard.yaml"
    config.write_text(slow_lane(lanes_config(addr, admin)) + extra(tmp_path))
    log = tmp_path / "switchyard.log"

    def up():
        proc = start_gateway(binary, config, log)
        deadline = time.monotonic() + 30
        while not healthy(addr):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        return proc

    proc = up()
    try:
        client = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key(admin, "survivor"))
        total = 60
        upload = client.files.create(file=("kill.jsonl", jsonl([chat_line(2000 + n, "lane-slow") for n in range(total)])), purpose="batch")
        batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
        while client.batches.retrieve(batch.id).request_counts.completed < 10:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc = up()
        done = poll(client, batch.id, timeout=90)
        assert done.status == "completed", done
        assert (done.request_counts.completed, done.request_counts.failed) == (total, 0)
        out = client.files.content(done.output_file_id).content.decode().splitlines()
        ids = [json.loads(line)["custom_id"] for line in out]
        assert len(ids) == total and len(set(ids)) == total, "every line exactly once in the output"
        ran = [Slow.seen.get(f"line {2000 + n}", 0) for n in range(total)]
        assert all(r >= 1 for r in ran), "every line ran"
        # At most the lines in flight at the kill ran twice (concurrency 2).
        assert sum(ran) - total <= 2, ran
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
