#!/usr/bin/env python3
"""The crash-test harness: 21 fault scenarios, scored.

Independent of Switchyard's own test code: its own fault-injecting upstream
(a raw asyncio HTTP server speaking OpenAI Chat Completions and Anthropic
Messages, so it can reset, stall and send broken frames), its own client
(http.client), its own checks. It starts the binary with a config whose
pools each put one fault in front of a healthy lane, drives each scenario
as a caller would, and scores it: a pass is rescued (or, where no rescue is
right, answered honestly) with every conduct check clean.

Scenarios 8-10 and 17-21 hold the gateway to its commit point
(docs/guarantees.md) through callers of every dialect with a stream (OpenAI
Chat, Anthropic Messages, Responses, Gemini, Cohere v2, Bedrock
ConverseStream, each read as its SDK judges an ending): a stream cut,
stalled or malformed mid-answer and continued by a lane that goes on as
asked, or by a lane that restarts, answers something else, or goes on
without the quoted words; a short answer cut after every byte and continued
by each of those lanes and by lanes that go on as asked (instruction,
prefill, a lane that refuses prefill), or not continued; a primary's outage
that ends. Every stream must be the whole answer once with a success ending,
or its dialect's terminal error after a part of the answer, and open with
its lifecycle frame; never repeated or altered text with a success ending.

    python3 tests/crash/harness.py --bin target/debug/switchyard

Standard library only; about 40 s. Exits non-zero unless all 21 pass.
"""

import argparse
import asyncio
import http.client
import json
import logging
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ADMIN_TOKEN = "crash-admin-token-0123456789abcdef"
# Every healthy answer: long enough that a cut lands mid-answer.
ANSWER = "Switchyard keeps the answer whole when an upstream breaks. " * 3
CUT_AT = 40  # characters a breaking lane sends before it breaks
# An answer that never repeats itself (a restart is told from a
# continuation by its words), asked for with [story]; and a short one cut
# after every byte, asked for with [short]. [cut=N] sets where a breaking
# lane breaks.
STORY = ("Harbor cranes lift the red containers at dawn, while gulls circle over the quiet water and the night "
         "shift walks home past the shuttered fish market, counting the hours until the ferry returns.")
SHORT = "The quick brown fox jumps over the lazy dog."
STORY_CUT = 100
# What a lane that answers something else says when asked to go on.
UNRELATED = "Sure! Here is something else entirely."


# ---------------------------------------------------------------------------
# The fault upstream.
# ---------------------------------------------------------------------------


class Upstream:
    """Per-model behaviour, hit counts, and the flapping lane's switch."""

    def __init__(self):
        self.hits = {}
        self.requests = []  # (model, body) of every call, in order
        self.flappy_down = False
        self.outage_down = False
        self.lock = threading.Lock()

    def hit(self, model, body):
        with self.lock:
            self.hits[model] = self.hits.get(model, 0) + 1
            self.requests.append((model, body))
            return self.hits[model]

    def count(self, model):
        with self.lock:
            return self.hits.get(model, 0)


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def head(status, content_type, extra=(), chunked=True, length=None):
    reason = {200: "OK", 400: "Bad Request", 429: "Too Many Requests", 500: "Internal Server Error",
              503: "Service Unavailable"}[status]
    lines = ["HTTP/1.1 %d %s" % (status, reason), "content-type: %s" % content_type]
    lines += ["%s: %s" % kv for kv in extra]
    lines.append("transfer-encoding: chunked" if chunked else "content-length: %d" % length)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def json_reply(status, body, extra=()):
    data = json.dumps(body).encode()
    return head(status, "application/json", extra, chunked=False, length=len(data)) + data


def openai_error(status, message, code, kind="server_error", extra=()):
    return json_reply(status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, extra)


def text_of(message):
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return content or ""


def prompt_of(body):
    """The caller's question: the first user turn's text."""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            return text_of(message)
    return ""


def answer_of(body):
    """The whole answer to this conversation's question."""
    prompt = prompt_of(body)
    if "[story]" in prompt:
        return STORY
    if "[short]" in prompt:
        return SHORT
    return ANSWER


def cut_of(body):
    """Where a breaking lane breaks: [cut=N] in the question, else CUT_AT."""
    prompt = prompt_of(body)
    start = prompt.find("[cut=")
    if start >= 0:
        return int(prompt[start + 5:prompt.index("]", start)])
    return STORY_CUT if "[story]" in prompt else CUT_AT


def remaining(body, anthropic, model=""):
    """The text this call should produce, as a model that does what it is
    asked: the whole answer; asked to go on by prefill (an assistant turn
    last), the rest; asked by an instruction turn that quotes the last words
    between <<< and >>>, those words and then the rest. Asked by
    instruction, the lanes that misbehave as some models do: `restart`
    starts the answer again, `unrelated` answers something else, `bare`
    goes on without the quoted words (a seam the gateway cannot prove)."""
    answer = answer_of(body)
    messages = body.get("messages", [])
    so_far = None
    for message in messages:
        if message.get("role") == "assistant":
            so_far = text_of(message)
    if so_far is None:
        return answer
    quoted = None
    if messages[-1].get("role") == "user":
        instruction = text_of(messages[-1])
        start, end = instruction.find("<<<"), instruction.rfind(">>>")
        if start >= 0 and end > start:
            quoted = instruction[start + 3:end]
    if quoted is not None and model == "restart":
        return answer
    if quoted is not None and model == "unrelated":
        return UNRELATED
    if quoted is None or model == "bare":
        quoted = ""
    if answer.startswith(so_far):
        return quoted + answer[len(so_far):]
    stripped = so_far.rstrip()
    if answer.startswith(stripped):
        return quoted + answer[len(stripped):]
    return answer


def usage_tokens(text):
    return max(1, len(text) // 4)


def openai_frames(text, model, finish=True, done=True, usage=True, role=True):
    frames = []

    def frame(delta, finish_reason=None, extra=None):
        body = {"id": "chatcmpl-crash", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        if extra:
            body.update(extra)
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    if role:
        frames.append(frame({"role": "assistant", "content": ""}))
    for start in range(0, len(text), 16):
        frames.append(frame({"content": text[start:start + 16]}))
    if finish:
        frames.append(frame({}, "stop"))
    if usage:
        frames.append(b"data: " + json.dumps({
            "id": "chatcmpl-crash", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
            "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": usage_tokens(text),
                                     "total_tokens": 12 + usage_tokens(text)}}).encode() + b"\n\n")
    if done:
        frames.append(b"data: [DONE]\n\n")
    return frames


def anthropic_frames(text, model, finish=True):
    def event(name, body):
        return b"event: " + name.encode() + b"\ndata: " + json.dumps(body).encode() + b"\n\n"

    frames = [
        event("message_start", {"type": "message_start", "message": {
            "id": "msg_crash", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        event("content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}}),
    ]
    for start in range(0, len(text), 16):
        frames.append(event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                    "delta": {"type": "text_delta", "text": text[start:start + 16]}}))
    if finish:
        frames += [
            event("content_block_stop", {"type": "content_block_stop", "index": 0}),
            event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                    "usage": {"output_tokens": usage_tokens(text)}}),
            event("message_stop", {"type": "message_stop"}),
        ]
    return frames


def whole(text, model, anthropic):
    if anthropic:
        return json_reply(200, {"id": "msg_crash", "type": "message", "role": "assistant", "model": model,
                                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                                "stop_sequence": None,
                                "usage": {"input_tokens": 12, "output_tokens": usage_tokens(text)}})
    return json_reply(200, {"id": "chatcmpl-crash", "object": "chat.completion", "created": 1700000000, "model": model,
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                         "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 12, "completion_tokens": usage_tokens(text),
                                      "total_tokens": 12 + usage_tokens(text)}})


def reset(writer):
    """Closes with a TCP reset (SO_LINGER 0), as a crashed upstream does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def read_request(reader):
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.split(b"\r\n")
    method, path, _ = lines[0].split(b" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return method.decode(), path.decode(), body


async def serve(upstream, reader, writer):
    try:
        while True:
            try:
                method, path, raw = await read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError, ValueError):
                return
            if method == "GET":
                writer.write(json_reply(200, {"ok": True}))
                await writer.drain()
                continue
            body = json.loads(raw or b"{}")
            model = body.get("model", "")
            anthropic = path.endswith("/v1/messages")
            stream = bool(body.get("stream"))
            hit = upstream.hit(model, body)
            keep = await behave(upstream, writer, model, body, anthropic, stream, hit)
            if not keep:
                return
    except (ConnectionError, OSError):
        return
    finally:
        try:
            writer.close()
        except Exception:  # noqa: BLE001 - a reset transport may refuse
            pass


async def send_stream(writer, frames, content_type="text/event-stream", end=True):
    writer.write(head(200, content_type))
    for frame in frames:
        writer.write(chunk(frame))
        await writer.drain()
    if end:
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def answer(writer, model, body, anthropic, stream):
    text = remaining(body, anthropic, model)
    if not stream:
        writer.write(whole(text, model, anthropic))
        await writer.drain()
    elif anthropic:
        await send_stream(writer, anthropic_frames(text, model))
    else:
        await send_stream(writer, openai_frames(text, model))
    return True


async def behave(upstream, writer, model, body, anthropic, stream, hit):
    """One call's fault, by model. Returns whether the connection lives on."""
    if model == "ratelimit_ra":
        writer.write(openai_error(429, "Rate limit reached", "rate_limit_exceeded", "requests", [("retry-after", "30")]))
    elif model == "ratelimit":
        writer.write(openai_error(429, "Rate limit reached", "rate_limit_exceeded", "requests"))
    elif model in ("once500",) and hit == 1:
        writer.write(openai_error(500, "The server had an error while processing your request", None))
    elif model in ("down503", "broken"):
        code = 503 if model == "down503" else 500
        writer.write(openai_error(code, "The engine is currently overloaded", None))
    elif model == "flappy" and upstream.flappy_down:
        writer.write(openai_error(503, "The engine is currently overloaded", None))
    elif model == "outage" and upstream.outage_down:
        writer.write(openai_error(503, "The engine is currently overloaded", None))
    elif model == "reset":
        reset(writer)
        return False
    elif model == "silent":
        await asyncio.sleep(120)
        return False
    elif model == "slowfirst":
        # The head and a role frame at once; the content ten seconds later.
        frames = openai_frames(remaining(body, anthropic), model)
        writer.write(head(200, "text/event-stream") + chunk(frames[0]))
        await writer.drain()
        await asyncio.sleep(10)
        for frame in frames[1:]:
            writer.write(chunk(frame))
        writer.write(b"0\r\n\r\n")
    elif model in ("cut", "stall", "malformed", "anth_cut"):
        text = remaining(body, anthropic)[:cut_of(body)]
        frames = anthropic_frames(text, model, finish=False) if anthropic else openai_frames(
            text, model, finish=False, done=False, usage=False)
        await send_stream(writer, frames, end=False)
        if "[cut=" in prompt_of(body):
            # Closed mid-body (a FIN, no last chunk): nothing sent can be
            # lost to a reset, so the cut lands after exactly N bytes with
            # no pause (the every-byte scenario makes hundreds).
            return False
        await asyncio.sleep(0.05)
        if model == "stall":
            await asyncio.sleep(120)
            return False
        if model == "malformed":
            writer.write(chunk(b'data: {"id":"chatcmpl-crash","choices":[{"index":0,"delta":{"content":"x\n\n'))
            writer.write(chunk(b"data: }}}not json at all\n\n"))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return False
        reset(writer)
        return False
    elif model == "nodone":
        # A whole answer, its finish and usage, and no [DONE]; the
        # connection stays open.
        await send_stream(writer, openai_frames(remaining(body, anthropic), model, done=False), end=False)
        await asyncio.sleep(120)
        return False
    elif model == "small":
        writer.write(openai_error(400, "This model's maximum context length is 1000 tokens. However, your messages "
                                  "resulted in 5000 tokens.", "context_length_exceeded", "invalid_request_error"))
    elif model == "filtered":
        writer.write(json_reply(400, {"error": {
            "message": "The response was filtered due to the prompt triggering the content management policy.",
            "type": None, "param": "prompt", "code": "content_filter", "status": 400}}))
    elif model == "anth_noprefill" and body.get("messages", [{}])[-1].get("role") == "assistant":
        writer.write(json_reply(400, {"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "This model does not support assistant message prefill. "
                       "The conversation must end with a user message."}}))
    else:
        return await answer(writer, model, body, anthropic, stream)
    await writer.drain()
    return True


def start_upstream(upstream):
    # Writes to a connection the gateway has dropped are expected here.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port = []

    async def main():
        server = await asyncio.start_server(lambda r, w: serve(upstream, r, w), "127.0.0.1", 0, limit=1 << 22)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        async with server:
            await server.serve_forever()

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    ready.wait(10)
    return port[0]


# ---------------------------------------------------------------------------
# The gateway under test.
# ---------------------------------------------------------------------------

FAULT_MODELS = ["good", "ratelimit_ra", "ratelimit", "once500", "down503", "reset", "silent", "slowfirst", "cut",
                "stall", "malformed", "nodone", "filtered", "flappy", "broken", "restart", "unrelated", "bare",
                "outage"]
# Breaking lanes whose every break must reach the continuation (the
# scenarios count each).
PATIENT = "breaker: { consecutive_failures: 100000, min_requests: 100000 }"

POOLS = {
    "s01-429-retry-after": "members: [{ model: ratelimit_ra, weight: 1000 }, { model: good, weight: 1 }]",
    "s02-429-bare": "members: [{ model: ratelimit, weight: 1000 }, { model: good, weight: 1 }]",
    "s03-500-once": "failover: { retries: 1 }, members: [{ model: once500, weight: 1000 }, { model: good, weight: 1 }]",
    "s04-503-persistent": "breaker: { consecutive_failures: 3, base_cooldown: 60s }, "
                          "members: [{ model: down503, weight: 1000 }, { model: good, weight: 1 }]",
    "s05-reset": "members: [{ model: reset, weight: 1000 }, { model: good, weight: 1 }]",
    "s06-no-response": "members: [{ model: silent, weight: 1000 }, { model: good, weight: 1 }]",
    "s07-slow-first-token": "failover: { first_token: 1s }, "
                            "members: [{ model: slowfirst, weight: 1000 }, { model: good, weight: 1 }]",
    "s08-stream-cut": "stream_failure: continue, members: [{ model: cut, weight: 1000 }, { model: good, weight: 1 }]",
    "s09-stall": "stream_failure: continue, members: [{ model: stall, weight: 1000 }, { model: good, weight: 1 }]",
    "s10-malformed": "stream_failure: continue, "
                     "members: [{ model: malformed, weight: 1000 }, { model: good, weight: 1 }]",
    "s11-missing-done": "members: [{ model: nodone }]",
    "s12-context-length": "members: [{ model: small, weight: 1000 }, { model: large, weight: 1 }]",
    "s13-content-filter": "members: [{ model: filtered, weight: 1000 }, { model: good, weight: 1 }]",
    "s14-no-prefill-fallback": "stream_failure: continue, "
                               "members: [{ model: anth_cut, weight: 1000 }, { model: anth_noprefill, weight: 1 }]",
    "s15-flapping": "breaker: { consecutive_failures: 2, base_cooldown: 500ms, max_cooldown: 1s }, "
                    "members: [{ model: flappy, weight: 1000 }, { model: good, weight: 1 }]",
    "s16-accounting": "members: [{ model: broken, weight: 1000 }, { model: good, weight: 1 }]",
    "s17-restart": "stream_failure: continue, %s, "
                   "members: [{ model: cut, weight: 1000 }, { model: restart, weight: 1 }]" % PATIENT,
    "s18-unrelated": "stream_failure: continue, %s, "
                     "members: [{ model: cut, weight: 1000 }, { model: unrelated, weight: 1 }]" % PATIENT,
    "s19-bare": "stream_failure: continue, %s, members: [{ model: cut, weight: 1000 }, { model: bare, weight: 1 }]"
                % PATIENT,
    "s20-cut-instruction": "stream_failure: continue, %s, "
                           "members: [{ model: cut, weight: 1000 }, { model: good, weight: 1 }]" % PATIENT,
    "s20-cut-prefill": "stream_failure: continue, %s, "
                       "members: [{ model: cut, weight: 1000 }, { model: anth_good, weight: 1 }]" % PATIENT,
    "s20-cut-noprefill": "stream_failure: continue, %s, "
                         "members: [{ model: cut, weight: 1000 }, { model: anth_noprefill, weight: 1 }]" % PATIENT,
    "s20-cut-restart": "stream_failure: continue, %s, "
                       "members: [{ model: cut, weight: 1000 }, { model: restart, weight: 1 }]" % PATIENT,
    "s20-cut-bare": "stream_failure: continue, %s, "
                    "members: [{ model: cut, weight: 1000 }, { model: bare, weight: 1 }]" % PATIENT,
    "s20-cut-unrelated": "stream_failure: continue, %s, "
                         "members: [{ model: cut, weight: 1000 }, { model: unrelated, weight: 1 }]" % PATIENT,
    "s20-cut-end": "%s, members: [{ model: cut, weight: 1000 }, { model: good, weight: 1 }]" % PATIENT,
    "s21-outage": "breaker: { consecutive_failures: 2, base_cooldown: 250ms, max_cooldown: 2s }, "
                  "members: [{ model: outage, weight: 1000 }, { model: good, weight: 1 }]",
}


def config(port, admin_port, upstream_port, db):
    timeouts = "timeouts: { response_headers: 1s, stream_idle: 1s }"
    lines = [
        "listen: 127.0.0.1:%d" % port,
        "admin_listen: 127.0.0.1:%d" % admin_port,
        "admin: { tokens: [%s] }" % ADMIN_TOKEN,
        "auth: { mode: keys }",
        'storage: { sqlite_path: "%s" }' % db,
        "governance: { ledger_flush_interval: 20ms }",
        "providers:",
        '  faulty: { protocol: openai, base_url: "http://127.0.0.1:%d", %s }' % (upstream_port, timeouts),
        '  faulty-claude: { protocol: anthropic, base_url: "http://127.0.0.1:%d", %s }' % (upstream_port, timeouts),
        "models:",
    ]
    lines += ["  %s: { provider: faulty }" % m for m in FAULT_MODELS]
    lines += [
        "  small: { provider: faulty, context_window: 1000 }",
        "  large: { provider: faulty, model: good, context_window: 200000 }",
        "  anth_cut: { provider: faulty-claude }",
        "  anth_noprefill: { provider: faulty-claude }",
        "  anth_good: { provider: faulty-claude, model: good }",
        "rate_card:",
        "  good: { input_utok: 1, output_utok: 2 }",
        "  broken: { input_utok: 100, output_utok: 200 }",
        "pools:",
    ]
    lines += ["  %s: { %s }" % (name, body) for name, body in POOLS.items()]
    return "\n".join(lines) + "\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    def __init__(self, binary, upstream_port, tmp):
        self.port, self.admin_port = free_port(), free_port()
        path = os.path.join(tmp, "crash.yaml")
        with open(path, "w") as f:
            f.write(config(self.port, self.admin_port, upstream_port, os.path.join(tmp, "crash.db")))
        self.log = open(os.path.join(tmp, "gateway.log"), "wb")
        env = dict(os.environ, SWITCHYARD_LOG=os.environ.get("SWITCHYARD_LOG", "info"))
        self.proc = subprocess.Popen([binary, "serve", "--config", path], stdout=self.log, stderr=self.log, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    break
            except OSError:
                if self.proc.poll() is not None:
                    raise SystemExit("the gateway exited; see %s" % self.log.name)
                time.sleep(0.05)
        key = self.admin("POST", "/api/v1/admin/keys", {"name": "crash-test"})
        self.key = key["key"]
        self.key_id = key["id"]

    def admin(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.admin_port, path), data=data, method=method,
                                     headers={"authorization": "Bearer " + ADMIN_TOKEN,
                                              "content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"null")

    def chat(self, pool, stream=False, timeout=30):
        """One OpenAI Chat Completions call: (status, headers, body text, elapsed s)."""
        body = {"model": pool, "messages": [{"role": "user", "content": "Tell me the line."}], "max_tokens": 200}
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        started = time.monotonic()
        try:
            conn.request("POST", "/v1/chat/completions", json.dumps(body),
                         {"content-type": "application/json", "authorization": "Bearer " + self.key})
            resp = conn.getresponse()
            data = resp.read().decode("utf-8", "replace")
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data, time.monotonic() - started
        finally:
            conn.close()

    def stream(self, dialect, pool, prompt, timeout=30):
        """One streamed call in `dialect`: (status, headers, Read)."""
        path, body, reader = dialect_request(dialect, pool, prompt)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("POST", path, json.dumps(body),
                         {"content-type": "application/json", "authorization": "Bearer " + self.key})
            resp = conn.getresponse()
            data = resp.read()
            headers = {k.lower(): v for k, v in resp.getheaders()}
            if resp.status != 200:
                return resp.status, headers, Read(ending="status %d: %s" % (resp.status, data[:120]))
            return resp.status, headers, reader(data if dialect == "bedrock" else data.decode("utf-8", "replace"))
        finally:
            conn.close()

    def lane(self, pool, lane):
        stats = self.admin("GET", "/stats")
        for p in stats["pools"]:
            if p["pool"] == pool:
                for entry in p["lanes"]:
                    if entry["lane"] == lane:
                        return entry
        return {}

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def read_stream(text):
    """An OpenAI stream as the caller sees it: (content, [DONE] count, error
    frames, usage)."""
    content, done, errors, usage = [], 0, [], None
    for line in text.split("\n"):
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            done += 1
            continue
        try:
            frame = json.loads(payload)
        except ValueError:
            errors.append("unparseable frame: " + payload[:80])
            continue
        if "error" in frame:
            errors.append(frame["error"])
        for choice in frame.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                content.append(piece)
        if frame.get("usage"):
            usage = frame["usage"]
    return "".join(content), done, errors, usage


# ---------------------------------------------------------------------------
# Callers of every dialect with a stream, and how each reads its ending.
# ---------------------------------------------------------------------------


def sse_events(text):
    """An SSE body as (event name or None, data) pairs."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if name is not None or data:
            events.append((name, "\n".join(data)))
    return events


def json_or_none(data):
    try:
        return json.loads(data)
    except ValueError:
        return None


class Read:
    """One caller's stream, as its SDK would judge it: the text, how it
    ended (`success`, `error`, or what was wrong), and its first frame."""

    def __init__(self, text="", ending="none", first=None):
        self.text, self.ending, self.first = text, ending, first

    def __repr__(self):
        return "%s ending after %r (first frame %s)" % (self.ending, self.text[:60], self.first)


def ending(success, error, what):
    """`success` with a clean end and no error, `error` with the error and
    no clean end; anything else is named."""
    if success and not error:
        return "success"
    if error and not success:
        return "error"
    return what


def read_openai(body):
    content, done, errors, _ = read_stream(body)
    frames = [json_or_none(d) for _, d in sse_events(body) if d != "[DONE]"]
    finished = any(c.get("finish_reason") for f in frames if f for c in f.get("choices") or [])
    first = None
    if frames and frames[0] and (frames[0].get("choices") or [{}])[0].get("delta", {}).get("role"):
        first = "role"
    return Read(content, ending(done == 1 and finished, errors and done == 0,
                                "%d [DONE], %d errors, finish %s" % (done, len(errors), finished)), first)


def read_anthropic(body):
    events = sse_events(body)
    names = [name for name, _ in events]
    text = ""
    for name, data in events:
        frame = json_or_none(data) or {}
        if name == "content_block_delta" and frame.get("delta", {}).get("type") == "text_delta":
            text += frame["delta"]["text"]
    stops, errors = names.count("message_stop"), names.count("error")
    return Read(text, ending(stops == 1, errors >= 1 and stops == 0, "%d message_stop, %d error" % (stops, errors)),
                names[0] if names else None)


def read_responses(body):
    frames = [json_or_none(d) or {} for _, d in sse_events(body)]
    kinds = [f.get("type") for f in frames]
    text = "".join(f.get("delta", "") for f in frames if f.get("type") == "response.output_text.delta")
    completed = kinds.count("response.completed")
    failed = kinds.count("response.failed") + kinds.count("error")
    return Read(text, ending(completed == 1, failed >= 1 and completed == 0,
                             "%d response.completed, %d failed/error" % (completed, failed)),
                kinds[0] if kinds else None)


def read_gemini(body):
    frames = [json_or_none(d) for _, d in sse_events(body)]
    text, finished, errors = "", 0, 0
    for frame in frames:
        if not isinstance(frame, dict):
            errors += 1
            continue
        if "error" in frame:
            errors += 1
        for candidate in frame.get("candidates") or []:
            for part in (candidate.get("content") or {}).get("parts") or []:
                if "text" in part and not part.get("thought"):
                    text += part["text"]
            if candidate.get("finishReason"):
                finished += 1
    return Read(text, ending(finished == 1, errors >= 1 and finished == 0,
                             "%d finishReason, %d error" % (finished, errors)), "chunk" if frames else None)


def read_cohere(body):
    frames = [json_or_none(d) or {} for _, d in sse_events(body)]
    kinds = [f.get("type") for f in frames]
    text = "".join(((f.get("delta") or {}).get("message") or {}).get("content", {}).get("text", "")
                   for f in frames if f.get("type") == "content-delta")
    ends = [((f.get("delta") or {}).get("finish_reason")) for f in frames if f.get("type") == "message-end"]
    return Read(text, ending(len(ends) == 1 and ends[0] != "ERROR", ends == ["ERROR"], "message-end %s" % ends),
                kinds[0] if kinds else None)


def eventstream_frames(data):
    """AWS event-stream messages as (headers, payload) pairs."""
    frames, at = [], 0
    while at + 12 <= len(data):
        total, header_len = struct.unpack(">II", data[at:at + 8])
        headers, h = {}, at + 12
        while h < at + 12 + header_len:
            name_len = data[h]
            name = data[h + 1:h + 1 + name_len].decode()
            kind = data[h + 1 + name_len]
            h += 2 + name_len
            if kind in (6, 7):
                (size,) = struct.unpack(">H", data[h:h + 2])
                value = data[h + 2:h + 2 + size]
                headers[name] = value.decode() if kind == 7 else value
                h += 2 + size
            else:
                h += {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}[kind]
        frames.append((headers, data[at + 12 + header_len:at + total - 4]))
        at += total
    return frames


def read_bedrock(raw):
    frames = eventstream_frames(raw)
    text, stops, errors = "", 0, 0
    for headers, payload in frames:
        if headers.get(":message-type") in ("exception", "error"):
            errors += 1
            continue
        kind = headers.get(":event-type")
        body = json_or_none(payload) or {}
        if kind == "contentBlockDelta":
            text += (body.get("delta") or {}).get("text", "")
        elif kind == "messageStop":
            stops += 1
    first = frames[0][0].get(":event-type") if frames else None
    return Read(text, ending(stops == 1, errors >= 1 and stops == 0, "%d messageStop, %d exception" % (stops, errors)),
                first)


def dialect_request(dialect, pool, prompt):
    """(path, body, reader) of one streamed call in `dialect`."""
    if dialect == "openai":
        return "/v1/chat/completions", {"model": pool, "messages": [{"role": "user", "content": prompt}],
                                        "max_tokens": 200, "stream": True}, read_openai
    if dialect == "anthropic":
        return "/v1/messages", {"model": pool, "messages": [{"role": "user", "content": prompt}],
                                "max_tokens": 200, "stream": True}, read_anthropic
    if dialect == "responses":
        return "/v1/responses", {"model": pool, "input": prompt, "max_output_tokens": 200,
                                 "stream": True}, read_responses
    if dialect == "gemini":
        return "/v1beta/models/%s:streamGenerateContent?alt=sse" % pool, {
            "contents": [{"role": "user", "parts": [{"text": prompt}]}],
            "generationConfig": {"maxOutputTokens": 200}}, read_gemini
    if dialect == "cohere":
        return "/v2/chat", {"model": pool, "messages": [{"role": "user", "content": prompt}],
                            "max_tokens": 200, "stream": True}, read_cohere
    return "/model/%s/converse-stream" % pool, {"messages": [{"role": "user", "content": [{"text": prompt}]}],
                                                "inferenceConfig": {"maxTokens": 200}}, read_bedrock


# Every caller dialect that streams; its terminal error is what `read_*` calls `error`.
DIALECTS = ["openai", "anthropic", "responses", "gemini", "cohere", "bedrock"]


# ---------------------------------------------------------------------------
# The scenarios. Each returns a list of failed checks (empty: a pass).
# ---------------------------------------------------------------------------


class Checks:
    def __init__(self):
        self.failed = []
        self.note = None  # what a scenario measured, printed with its score

    def check(self, ok, what):
        if not ok:
            self.failed.append(what)
        return ok


def whole_reply(c, reply, what="the caller"):
    status, _, body, _ = reply
    if not c.check(status == 200, "%s got %d, not 200: %s" % (what, status, body[:200])):
        return
    text = json.loads(body)["choices"][0]["message"]["content"]
    c.check(text == ANSWER, "%s got a different answer: %r" % (what, text[:80]))


def whole_stream(c, reply, what="the stream"):
    status, _, body, _ = reply
    if not c.check(status == 200, "%s got %d: %s" % (what, status, body[:200])):
        return None
    content, done, errors, usage = read_stream(body)
    c.check(content == ANSWER, "%s's text is not the whole answer once: %r" % (what, content))
    c.check(done == 1, "%s has %d [DONE]" % (what, done))
    c.check(not errors, "%s carries errors: %s" % (what, errors))
    c.check(usage is not None and usage.get("completion_tokens", 0) > 0, "%s has no usage: %s" % (what, usage))
    return usage


def s01(g, up):
    c = Checks()
    for n in range(3):
        whole_reply(c, g.chat("s01-429-retry-after"), "request %d" % n)
    c.check(up.count("ratelimit_ra") == 1, "the limited lane was called %d times, not once: its Retry-After "
                                           "(30 s) was not honoured" % up.count("ratelimit_ra"))
    c.check(g.lane("s01-429-retry-after", "ratelimit_ra").get("upstream_failures") == 0,
            "a rate limit counted as a lane failure")
    return c.failed


def s02(g, up):
    c = Checks()
    for n in range(3):
        whole_reply(c, g.chat("s02-429-bare"), "request %d" % n)
    c.check(up.count("ratelimit") <= 3, "the limited lane was hammered: %d calls for 3 requests" % up.count("ratelimit"))
    c.check(g.lane("s02-429-bare", "ratelimit").get("upstream_failures") == 0, "a rate limit counted as a failure")
    return c.failed


def s03(g, up):
    c = Checks()
    good_before = up.count("good")
    reply = g.chat("s03-500-once")
    whole_reply(c, reply)
    c.check(reply[1].get("x-switchyard-lane") == "once500", "not rescued on the same lane by its retry: %s"
            % reply[1].get("x-switchyard-lane"))
    good = up.count("good") - good_before
    c.check(up.count("once500") == 2 and good == 0, "calls: once500 %d, good %d (want 2 and 0)"
            % (up.count("once500"), good))
    return c.failed


def s04(g, up):
    c = Checks()
    for n in range(10):
        whole_reply(c, g.chat("s04-503-persistent", stream=n % 2 == 1), "request %d" % n) if n % 2 == 0 else \
            whole_stream(c, g.chat("s04-503-persistent", stream=True), "stream %d" % n)
    c.check(up.count("down503") == 3, "the dead lane got %d calls; its breaker (3 failures) should stop them at 3"
            % up.count("down503"))
    c.check(g.lane("s04-503-persistent", "down503").get("breaker") == "open", "the dead lane's breaker is not open")
    return c.failed


def s05(g, up):
    c = Checks()
    whole_reply(c, g.chat("s05-reset"), "a reply")
    whole_stream(c, g.chat("s05-reset", stream=True), "a stream")
    c.check(g.lane("s05-reset", "reset").get("upstream_failures", 0) >= 1, "the resets were not counted")
    return c.failed


def s06(g, up):
    c = Checks()
    reply = g.chat("s06-no-response")
    whole_reply(c, reply)
    c.check(reply[3] < 3.0, "took %.1f s with a 1 s header timeout" % reply[3])
    return c.failed


def s07(g, up):
    c = Checks()
    reply = g.chat("s07-slow-first-token", stream=True)
    whole_stream(c, reply)
    c.check(reply[3] < 3.0, "took %.1f s with a 1 s first-token deadline" % reply[3])
    c.check(g.lane("s07-slow-first-token", "slowfirst").get("upstream_failures", 0) >= 1,
            "the slow lane's breaker did not hear of it")
    return c.failed


def continued(pool, lane):
    def scenario(g, up):
        c = Checks()
        good_before = up.count("good")
        reply = g.chat(pool, stream=True)
        usage = whole_stream(c, reply)
        c.check(reply[3] < 4.0, "took %.1f s" % reply[3])
        c.check(up.count("good") == good_before + 1, "the continuation was asked %d times"
                % (up.count("good") - good_before))
        # Usage adds both parts: more than the continuation alone produced.
        rest = usage_tokens(ANSWER[CUT_AT:])
        c.check(usage is not None and usage.get("completion_tokens", 0) > rest,
                "usage counts only the second part: %s" % usage)
        c.check(g.lane(pool, lane).get("upstream_failures", 0) >= 1, "the broken lane's breaker did not hear of it")
        # The same break under every other caller dialect: rescued whole.
        for dialect in DIALECTS[1:]:
            undamaged(c, g.stream(dialect, pool, "Tell me the line."), ANSWER, "%s caller" % dialect, "success")
        return c.failed
    return scenario


def s11(g, up):
    c = Checks()
    reply = g.chat("s11-missing-done", stream=True)
    whole_stream(c, reply)
    c.check(reply[3] < 0.8, "a complete stream waited %.1f s for its missing [DONE]" % reply[3])
    c.check(g.lane("s11-missing-done", "nodone").get("upstream_failures") == 0, "a complete answer counted as a failure")
    return c.failed


def s12(g, up):
    c = Checks()
    reply = g.chat("s12-context-length")
    whole_reply(c, reply)
    c.check(reply[1].get("x-switchyard-lane") == "large", "not moved to the larger lane: %s"
            % reply[1].get("x-switchyard-lane"))
    c.check(g.lane("s12-context-length", "small").get("upstream_failures") == 0,
            "a context overflow counted against the lane")
    return c.failed


def s13(g, up):
    c = Checks()
    good_before = up.count("good")
    status, _, body, _ = g.chat("s13-content-filter")
    c.check(status == 400, "a content filter answered %d, not the vendor's 400" % status)
    try:
        error = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        error = {}
    c.check("content management policy" in str(error.get("message")), "the vendor's reason is lost: %s" % body[:200])
    c.check(up.count("good") == good_before, "the filtered prompt was sent on to another lane")
    c.check(g.lane("s13-content-filter", "filtered").get("upstream_failures") == 0,
            "the caller's content counted against the lane")
    return c.failed


def s14(g, up):
    c = Checks()
    whole_stream(c, g.chat("s14-no-prefill-fallback", stream=True), "the first stream")
    prefills = [b for m, b in up.requests if m == "anth_noprefill" and b["messages"][-1]["role"] == "assistant"]
    c.check(len(prefills) <= 1, "the refusing lane was sent %d prefills" % len(prefills))
    whole_stream(c, g.chat("s14-no-prefill-fallback", stream=True), "the second stream")
    again = [b for m, b in up.requests if m == "anth_noprefill" and b["messages"][-1]["role"] == "assistant"]
    c.check(len(again) == len(prefills), "a lane known to refuse prefill was sent another")
    c.check(g.lane("s14-no-prefill-fallback", "anth_noprefill").get("upstream_failures") == 0,
            "the refusal counted against the fallback lane")
    return c.failed


def s15(g, up):
    c = Checks()
    bad = []
    served_by = []
    for phase in range(4):
        up.flappy_down = phase % 2 == 0
        phase_end = time.monotonic() + 2.0
        while time.monotonic() < phase_end:
            status, headers, body, _ = g.chat("s15-flapping")
            if status != 200 or json.loads(body)["choices"][0]["message"]["content"] != ANSWER:
                bad.append(status)
            served_by.append((phase, headers.get("x-switchyard-lane")))
            time.sleep(0.05)
    c.check(not bad, "%d requests failed while the primary flapped: %s" % (len(bad), bad[:5]))
    last_up = [lane for phase, lane in served_by if phase == 3]
    c.check(last_up[-5:] == ["flappy"] * 5, "the recovered primary did not come back: %s" % last_up[-5:])
    return c.failed


def s16(g, up):
    c = Checks()
    reply = g.chat("s16-accounting")
    whole_reply(c, reply)
    request_id = reply[1].get("x-request-id")
    row = None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and row is None:
        rows = g.admin("GET", "/api/v1/admin/requests?key=%s" % g.key_id)["data"]
        row = next((r for r in rows if r.get("request_id") == request_id and r.get("pool") == "s16-accounting"), None)
        time.sleep(0.05)
    if not c.check(row is not None, "no ledger row for request %s" % request_id):
        return c.failed
    c.check(row["lane"] == "good" and row["status"] == 200, "the row names %s/%s" % (row["lane"], row["status"]))
    c.check(row.get("failovers") == 1, "failovers %s, not 1" % row.get("failovers"))
    attempts = [(a.get("lane"), a.get("status"), a.get("failure")) for a in row.get("attempts") or []]
    c.check(attempts[:1] == [("broken", 500, "upstream_error")] and len(attempts) == 2,
            "the attempts do not show the failed lane then the answer: %s" % attempts)
    spend = g.admin("GET", "/api/v1/admin/spend?by=lane&from=0")["data"]
    lanes = {r.get("value"): r for r in spend}
    c.check("broken" not in lanes or not lanes["broken"].get("usd"), "the failed lane was billed: %s" % lanes.get("broken"))
    c.check(lanes.get("good", {}).get("usd", 0) > 0, "the lane that answered was not billed: %s" % spend)
    return c.failed


# What each dialect's stream opens with: sent before any text, never held
# back while a continuation's seam is checked.
LIFECYCLE = {"openai": "role", "anthropic": "message_start", "responses": "response.created",
             "gemini": "chunk", "cohere": "message-start", "bedrock": "messageStart"}


def undamaged(c, reply, answer, what, expect=None):
    """The commit point's promise, for one stream: the whole answer once
    with a success ending, or the dialect's terminal error after a part of
    the answer; never repeated or altered text with a success ending.
    `expect` (`success` or `error`) also says which. Returns the ending."""
    status, _, read = reply
    c.check(read.first == LIFECYCLE[what.split()[0]] or status != 200,
            "%s opened with %s, not its lifecycle frame" % (what, read.first))
    if read.ending == "success":
        c.check(read.text == answer, "%s ended as a success with damaged text: %r" % (what, read.text))
    elif read.ending == "error":
        c.check(answer.startswith(read.text), "%s sent text that is not the answer's start before its error: %r"
                % (what, read.text))
    else:
        c.check(False, "%s ended neither whole nor with its terminal error: %r" % (what, read))
    if expect is not None:
        c.check(read.ending == expect, "%s: want %s, got %r" % (what, expect, read))
    return read.ending


def misbehaving(pool, lane, expect):
    """A stream broken after STORY_CUT characters, continued by `lane`
    (which misbehaves when asked by instruction), through every dialect."""
    def scenario(g, up):
        c = Checks()
        request_ids = {}
        for dialect in DIALECTS:
            asked = up.count(lane)
            reply = g.stream(dialect, pool, "[story] Tell me the story.")
            request_ids[reply[1].get("x-request-id")] = dialect
            undamaged(c, reply, STORY, "%s caller" % dialect, expect)
            c.check(up.count(lane) == asked + 1, "%s caller: the continuing lane was asked %d times"
                    % (dialect, up.count(lane) - asked))
            if expect == "error":
                c.check(reply[2].text == STORY[:STORY_CUT], "%s caller: the text before the error is not what the "
                        "broken lane sent: %r" % (dialect, reply[2].text))
        # Billed once per part: the broken part (206) at its lane, the
        # continuation at its own (200, or 502 when refused); no row twice.
        billed = {}
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            rows = g.admin("GET", "/api/v1/admin/requests?key=%s&limit=200" % g.key_id)["data"]
            billed = {}
            for row in rows:
                if row.get("request_id") in request_ids:
                    billed.setdefault(row["request_id"], []).append((row.get("lane"), row.get("status")))
            if len(billed) == len(request_ids) and all(len(parts) >= 2 for parts in billed.values()):
                break
            time.sleep(0.05)
        ending = 200 if expect == "success" else 502
        for request_id, dialect in request_ids.items():
            parts = sorted(billed.get(request_id, []), key=lambda part: part[1])
            c.check(parts == sorted([("cut", 206), (lane, ending)], key=lambda part: part[1]),
                    "%s caller: the ledger rows are %s, not the broken part and the continuation once each"
                    % (dialect, parts))
        return c
    return scenario


# The pools whose first lane breaks after every byte of SHORT, by the lane
# that goes on (how it is asked, and whether it is right to), and one that
# does not continue streams (after the first byte, the terminal error).
EVERY_CUT = [("s20-cut-instruction", "rescued"), ("s20-cut-prefill", "rescued"), ("s20-cut-noprefill", "rescued"),
             ("s20-cut-restart", "undamaged"), ("s20-cut-bare", "undamaged"), ("s20-cut-unrelated", "undamaged"),
             ("s20-cut-end", "ended")]


def every_cut_expects(kind, cut):
    """What a stream cut after `cut` bytes must come to: `rescued`, the
    whole answer; `ended` (no continuation), the whole answer from the next
    lane when nothing reached the caller, else the terminal error;
    `undamaged`, either, never damaged text with a success ending."""
    if kind == "rescued" or (kind == "ended" and cut == 0):
        return "success"
    return "error" if kind == "ended" else None


def s20(g, up):
    """Every cut point 0..len(SHORT) of a short answer, every continuing
    lane, every dialect: a lane that goes on as asked rescues every stream;
    any other ends whole or with the terminal error, never damaged."""
    c = Checks()
    tally = {}
    for pool, kind in EVERY_CUT:
        for dialect in DIALECTS:
            for cut in range(len(SHORT) + 1):
                reply = g.stream(dialect, pool, "[short] [cut=%d] Say the line." % cut)
                end = undamaged(c, reply, SHORT, "%s caller, %s, cut after %d bytes" % (dialect, pool, cut),
                                every_cut_expects(kind, cut))
                tally[(pool, end)] = tally.get((pool, end), 0) + 1
    c.note = ", ".join("%s %s %d" % (pool[4:], end, n) for (pool, end), n in sorted(tally.items()))
    return c


OUTAGE_DOWN = 10.0  # seconds down: doubled uncapped, the cooldown would outlast it by 2.6 s or more
OUTAGE_CAP = 2.0  # the pool's max_cooldown
OUTAGE_SLACK = 0.5  # the gap to the next request, and scheduling


def s21(g, up):
    """A primary down long enough that its cooldown reaches the cap, then
    healthy: every stream meanwhile is whole (the fallback serves), and the
    primary serves again within the cap (jitter never lengthens a capped
    cooldown) plus the gap to the next request, and keeps its share. The
    same outage with the default cap (20 s: cooldowns 0.25, 0.5, ... 8 s)
    keeps the primary out past the scenario's end."""
    c = Checks()
    n, bad = 0, []
    up.outage_down = True
    down_until = time.monotonic() + OUTAGE_DOWN
    try:
        while time.monotonic() < down_until:
            dialect = DIALECTS[n % len(DIALECTS)]
            n += 1
            status, _, read = g.stream(dialect, "s21-outage", "Tell me the line.")
            if read.ending != "success" or read.text != ANSWER:
                bad.append((dialect, status, repr(read)))
            time.sleep(0.05)
        c.check(g.lane("s21-outage", "outage").get("breaker") in ("open", "half_open"),
                "the primary's breaker did not open during the outage")
    finally:
        up.outage_down = False
    recovered = time.monotonic()
    served = []
    while time.monotonic() < recovered + OUTAGE_CAP + 3.0 and served[-5:] != ["outage"] * 5:
        dialect = DIALECTS[n % len(DIALECTS)]
        n += 1
        status, headers, read = g.stream(dialect, "s21-outage", "Tell me the line.")
        if read.ending != "success" or read.text != ANSWER:
            bad.append((dialect, status, repr(read)))
        served.append(headers.get("x-switchyard-lane"))
        if served[-1] == "outage" and served.count("outage") == 1:
            back = time.monotonic() - recovered
        time.sleep(0.05)
    c.check(not bad, "%d streams were not whole during the outage: %s" % (len(bad), bad[:3]))
    if c.check("outage" in served, "the recovered primary never served again: %s" % served[-5:]):
        c.note = "primary back %.2f s after it recovered (bound %.1f s)" % (back, OUTAGE_CAP + OUTAGE_SLACK)
        c.check(back <= OUTAGE_CAP + OUTAGE_SLACK, "the primary served again %.2f s after it recovered; the bound is "
                "the %.1f s cooldown cap plus %.1f s" % (back, OUTAGE_CAP, OUTAGE_SLACK))
        c.check(served[-5:] == ["outage"] * 5, "the recovered primary did not keep its share: %s" % served[-5:])
    return c


SCENARIOS = [
    ("429 with Retry-After", s01),
    ("429 without Retry-After", s02),
    ("a 500 once", s03),
    ("a persistent 503", s04),
    ("a connection reset", s05),
    ("no response", s06),
    ("a slow first token", s07),
    ("a stream cut mid-answer", continued("s08-stream-cut", "cut")),
    ("a stream that stalls", continued("s09-stall", "stall")),
    ("a malformed chunk", continued("s10-malformed", "malformed")),
    ("a missing [DONE]", s11),
    ("context length exceeded", s12),
    ("a content filter", s13),
    ("a fallback that refuses prefill", s14),
    ("a flapping primary", s15),
    ("fail-over accounting", s16),
    ("a continuation that restarts", misbehaving("s17-restart", "restart", "success")),
    ("a continuation of something else", misbehaving("s18-unrelated", "unrelated", "error")),
    ("a continuation without the anchor", misbehaving("s19-bare", "bare", "error")),
    ("a cut after every byte", s20),
    ("an outage that ends", s21),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("SWITCHYARD_BIN", "target/debug/switchyard"))
    ap.add_argument("-k", help="run only scenarios whose name contains this")
    args = ap.parse_args()
    upstream = Upstream()
    upstream_port = start_upstream(upstream)
    tmp = tempfile.mkdtemp(prefix="switchyard-crash-")
    gateway = Gateway(args.bin, upstream_port, tmp)
    results = []
    try:
        for n, (name, scenario) in enumerate(SCENARIOS, 1):
            if args.k and args.k not in name:
                continue
            started = time.monotonic()
            note = None
            try:
                failed = scenario(gateway, upstream)
                if isinstance(failed, Checks):
                    failed, note = failed.failed, failed.note
            except Exception as err:  # noqa: BLE001 - a crash in a scenario is its failure
                failed = ["raised %s: %s" % (type(err).__name__, err)]
            results.append((n, name, failed, time.monotonic() - started))
            mark = "pass" if not failed else "FAIL"
            print("%2d. %-34s %s  (%.1f s)" % (n, name, mark, results[-1][3]), flush=True)
            if note:
                print("      %s" % note, flush=True)
            for what in failed:
                print("      - %s" % what, flush=True)
    finally:
        gateway.stop()
    passed = sum(1 for r in results if not r[2])
    print("score: %d of %d" % (passed, len(results)))
    if passed != len(results):
        print("gateway log: %s" % os.path.join(tmp, "gateway.log"))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
