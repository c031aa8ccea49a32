#!/usr/bin/env python3
"""A tiny slow-streaming OpenAI Chat Completions upstream (standard library only).

Used by the open-streams test: `switchyard mock-upstream` answers at once, so
a stream through the gateway would finish in microseconds and hold no state.
This server answers every POST with an SSE stream that sends its first frame
at once and then one frame every --interval seconds for --frames frames, so
thousands of streams stay open through the proxy for as long as the test
needs. It speaks just enough HTTP/1.1 (keep-alive, Content-Length request
bodies, chunked replies) for a proxy's pooled client. GET /healthz answers ok.

    python3 slow_upstream.py --listen 127.0.0.1:9100 --interval 1 --frames 600

With --tail-share P the first content comes late: after --tail-secs for a
share P of the streams (drawn from a seeded generator), else after a draw
of 5-15 ms: a heavy-tailed first token, for the hedging measurement.
"""

import argparse
import asyncio
import json
import random
import sys

HEADERS = (
    b"HTTP/1.1 200 OK\r\n"
    b"content-type: text/event-stream\r\n"
    b"cache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n"
    b"\r\n"
)


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def frame(model: str, delta: dict, finish=None) -> bytes:
    body = {
        "id": "chatcmpl-slow",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return chunk(b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n")


class Stats:
    open = 0
    served = 0


async def read_request(reader: asyncio.StreamReader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    method, path, _ = lines[0].split(b" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return method, path, body


async def handle(reader, writer, interval: float, frames: int, tail=None):
    try:
        while True:
            try:
                method, path, body = await read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError, ValueError):
                return
            if method == b"GET":
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
                continue
            try:
                model = json.loads(body).get("model", "slow")
            except ValueError:
                model = "slow"
            Stats.open += 1
            try:
                writer.write(HEADERS + frame(model, {"role": "assistant", "content": ""}))
                await writer.drain()
                if tail is not None:
                    rng, share, secs = tail
                    await asyncio.sleep(secs if rng.random() < share else rng.uniform(0.005, 0.015))
                for i in range(frames):
                    await asyncio.sleep(interval)
                    writer.write(frame(model, {"content": "tok%d " % i}))
                    await writer.drain()
                writer.write(frame(model, {}, "stop") + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
                await writer.drain()
                Stats.served += 1
            finally:
                Stats.open -= 1
    except (ConnectionError, OSError):
        return
    finally:
        writer.close()


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:9100")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between frames")
    parser.add_argument("--frames", type=int, default=600, help="frames per stream after the first")
    parser.add_argument("--tail-share", type=float, default=None, help="share of streams whose first content is late")
    parser.add_argument("--tail-secs", type=float, default=1.0, help="how late it is")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    tail = None if args.tail_share is None else (random.Random(args.seed), args.tail_share, args.tail_secs)
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, args.interval, args.frames, tail), host, int(port), backlog=4096, limit=1 << 20
    )
    print("slow upstream listening on %s" % args.listen, file=sys.stderr, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
