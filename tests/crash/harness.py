#!/usr/bin/env python3
"""The crash-test harness: 16 fault scenarios, scored.

Independent of Switchyard's own test code: its own fault-injecting upstream
(a raw asyncio HTTP server speaking OpenAI Chat Completions and Anthropic
Messages, so it can reset, stall and send broken frames), its own client
(http.client), its own checks. It starts the binary with a config whose
pools each put one fault in front of a healthy lane, drives each scenario
as a caller would, and scores it: a pass is rescued (or, where no rescue is
right, answered honestly) with every conduct check clean.

    python3 tests/crash/harness.py --bin target/debug/switchyard

Standard library only. Exits non-zero unless all 16 pass.
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


# ---------------------------------------------------------------------------
# The fault upstream.
# ---------------------------------------------------------------------------


class Upstream:
    """Per-model behaviour, hit counts, and the flapping lane's switch."""

    def __init__(self):
        self.hits = {}
        self.requests = []  # (model, body) of every call, in order
        self.flappy_down = False
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


def remaining(body, anthropic):
    """The text this call should produce: the whole answer, or (asked to go
    on after an assistant turn, by prefill or by instruction) the rest."""
    messages = body.get("messages", [])
    so_far = None
    for message in messages:
        if message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
            so_far = content or ""
    if so_far is None:
        return ANSWER
    if ANSWER.startswith(so_far):
        return ANSWER[len(so_far):]
    stripped = so_far.rstrip()
    if ANSWER.startswith(stripped):
        return ANSWER[len(stripped):]
    return ANSWER


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
    text = remaining(body, anthropic)
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
        text = remaining(body, anthropic)[:CUT_AT]
        frames = anthropic_frames(text, model, finish=False) if anthropic else openai_frames(
            text, model, finish=False, done=False, usage=False)
        await send_stream(writer, frames, end=False)
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
                "stall", "malformed", "nodone", "filtered", "flappy", "broken"]

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
# The scenarios. Each returns a list of failed checks (empty: a pass).
# ---------------------------------------------------------------------------


class Checks:
    def __init__(self):
        self.failed = []

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
            try:
                failed = scenario(gateway, upstream)
            except Exception as err:  # noqa: BLE001 - a crash in a scenario is its failure
                failed = ["raised %s: %s" % (type(err).__name__, err)]
            results.append((n, name, failed, time.monotonic() - started))
            mark = "pass" if not failed else "FAIL"
            print("%2d. %-34s %s  (%.1f s)" % (n, name, mark, results[-1][3]), flush=True)
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
