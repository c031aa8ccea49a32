#!/usr/bin/env python3
"""The duplex bench's load client (standard library only): Responses turns
over a WebSocket (`GET /v1/responses`, one `response.create` per turn) or
over HTTP streaming (`POST /v1/responses` with `"stream": true`), and idle
sockets held open.

    duplex.py turns --target 127.0.0.1:8080 --mode socket --model M --text T --conns 8 --turns 2000
    duplex.py idle --target 127.0.0.1:8080 --count 2000

`turns` opens `--conns` connections (sockets or keep-alive HTTP
connections), runs one checked turn on each (its text must come back whole),
prints `{"ready": true}` and waits for a line on stdin; then runs
`--turns` turns spread over the connections, each connection one turn at a
time, and prints one JSON line ({"turns", "failed", "elapsed_s", "errors",
"frames_per_turn"}). The driver reads the gateway's CPU time around that
second phase only, so handshakes and the check are not counted.

`idle` opens `--count` sockets (handshake answered 101), prints
`{"open": N, "failed": F, ...}`, waits for a line on stdin, closes them all
and prints `{"closed": N}`.
"""

import argparse
import asyncio
import base64
import json
import os
import sys
import time

COMPLETED = b'"type":"response.completed"'
ERROR = b'"type":"error"'


class Closed(Exception):
    pass


async def handshake(host, port, path, timeout):
    """A WebSocket opened on `path`: its (reader, writer)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, limit=1 << 20), timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            "GET %s HTTP/1.1\r\nhost: %s:%d\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
            "sec-websocket-key: %s\r\nsec-websocket-version: 13\r\n\r\n" % (path, host, port, key)
        ).encode()
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    status = head.split(b" ", 2)[1]
    if status != b"101":
        writer.transport.abort()
        raise RuntimeError("handshake answered %s" % status.decode(errors="replace"))
    return reader, writer


def frame(payload, opcode=1):
    """A masked client frame (RFC 6455 5.3: a client masks every frame)."""
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = bytes([0x80 | opcode, 0x80 | n])
    elif n < 1 << 16:
        head = bytes([0x80 | opcode, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, 0x80 | 127]) + n.to_bytes(8, "big")
    # XOR by whole integers: the key repeated over the payload.
    key = (mask * (n // 4 + 1))[:n]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big") if n else b""
    return head + mask + masked


async def read_message(reader, writer):
    """The next text message's payload (pings answered, fragments joined)."""
    parts = []
    while True:
        b0, b1 = await reader.readexactly(2)
        n = b1 & 0x7F
        if n == 126:
            n = int.from_bytes(await reader.readexactly(2), "big")
        elif n == 127:
            n = int.from_bytes(await reader.readexactly(8), "big")
        payload = await reader.readexactly(n)
        opcode = b0 & 0x0F
        if opcode == 8:
            raise Closed(payload[2:].decode(errors="replace"))
        if opcode == 9:
            writer.write(frame(payload, opcode=10))
            continue
        if opcode in (1, 2, 0):
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts)


def create_event(model, text):
    return json.dumps({"type": "response.create", "model": model, "input": text}).encode()


def http_request(target, model, text):
    body = json.dumps({"model": model, "input": text, "stream": True}).encode()
    return (
        b"POST /v1/responses HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
        % (target.encode(), len(body), body)
    )


async def socket_turn(conn, event):
    """One turn on a socket: its frames, and the completed event's payload."""
    reader, writer = conn
    writer.write(frame(event))
    frames = 0
    while True:
        message = await read_message(reader, writer)
        frames += 1
        head = message[:48]
        if COMPLETED in head:
            return frames, message
        if ERROR in head:
            raise RuntimeError("error event: %s" % message[:300].decode(errors="replace"))


async def http_turn(conn, request):
    """One streamed turn on a keep-alive connection: its chunks, and the body."""
    reader, writer = conn
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = head.split(b" ", 2)[1]
    if b"transfer-encoding: chunked" not in head.lower():
        raise RuntimeError("status %s, not a chunked stream: %s" % (status.decode(), head[:200]))
    chunks, body = 0, []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        data = await reader.readexactly(size + 2)
        if size == 0:
            break
        chunks += 1
        body.append(data[:-2])
    whole = b"".join(body)
    if status != b"200" or COMPLETED not in whole:
        raise RuntimeError("status %s: %s" % (status.decode(), whole[-300:]))
    return chunks, whole


async def turns(args):
    host, port = args.target.rsplit(":", 1)
    port = int(port)
    if args.mode == "socket":
        event = create_event(args.model, args.text)

        async def opened():
            return await handshake(host, port, "/v1/responses", args.timeout)

        def one(conn):
            return socket_turn(conn, event)
    else:
        request = http_request(args.target, args.model, args.text)

        async def opened():
            return await asyncio.wait_for(asyncio.open_connection(host, port, limit=1 << 20), args.timeout)

        def one(conn):
            return http_turn(conn, request)

    conns = [await opened() for _ in range(args.conns)]
    # One checked turn on each: the whole text comes back.
    want = ("you said: %s" % args.text).encode()
    for conn in conns:
        _, last = await one(conn)
        if want not in last.replace(b"\\n", b" "):
            raise SystemExit("the %s turn did not echo its text: %s" % (args.mode, last[-400:]))
    print(json.dumps({"ready": True}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    left = [args.turns]
    errors, failed, frames = [], [0], [0]

    async def worker(conn):
        while left[0] > 0:
            left[0] -= 1
            try:
                n, _ = await asyncio.wait_for(one(conn), args.timeout)
                frames[0] += n
            except Exception as err:  # noqa: BLE001 - every failure is counted and reported
                failed[0] += 1
                if len(errors) < 5:
                    errors.append("%s: %s" % (type(err).__name__, err))
                return

    started = time.monotonic()
    await asyncio.gather(*(worker(conn) for conn in conns))
    elapsed = time.monotonic() - started
    done = args.turns - max(left[0], 0) - failed[0]
    print(json.dumps({
        "turns": done, "failed": failed[0], "elapsed_s": round(elapsed, 3), "errors": errors,
        "frames_per_turn": frames[0] / max(done, 1),
    }), flush=True)
    for _, writer in conns:
        writer.transport.abort()


async def sequential(port, mode, model, text, n, timeout=60.0):
    """`n` turns one after another on one connection (opened, and closed,
    even when `n` is 0, so a count around it holds the turns alone): for
    bench/instructions.py."""
    if mode == "socket":
        conn = await handshake("127.0.0.1", port, "/v1/responses", timeout)
        event = create_event(model, text)
        turn = lambda: socket_turn(conn, event)  # noqa: E731 - one line, used below
    else:
        conn = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, limit=1 << 20), timeout)
        request = http_request("127.0.0.1:%d" % port, model, text)
        turn = lambda: http_turn(conn, request)  # noqa: E731
    want = ("you said: %s" % text).encode()
    try:
        for _ in range(n):
            _, last = await asyncio.wait_for(turn(), timeout)
            if want not in last:
                raise RuntimeError("the %s turn did not echo its text: %r" % (mode, last[-300:]))
    finally:
        conn[1].transport.abort()


async def idle(args):
    host, port = args.target.rsplit(":", 1)
    sem = asyncio.Semaphore(args.ramp)
    conns, errors = [], []

    async def open_one():
        async with sem:
            try:
                conns.append(await handshake(host, int(port), args.path, args.timeout))
                return True
            except Exception as err:  # noqa: BLE001 - every failure is counted and reported
                if len(errors) < 5:
                    errors.append("%s: %s" % (type(err).__name__, err))
                return False

    started = time.monotonic()
    opened = sum(await asyncio.gather(*(open_one() for _ in range(args.count))))
    print(json.dumps({"open": opened, "failed": args.count - opened, "elapsed_s": round(time.monotonic() - started, 3),
                      "errors": errors}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    for _, writer in conns:
        writer.transport.abort()
    print(json.dumps({"closed": len(conns)}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    t = sub.add_parser("turns")
    t.add_argument("--target", required=True)
    t.add_argument("--mode", choices=("socket", "http"), required=True)
    t.add_argument("--model", required=True)
    t.add_argument("--text", required=True)
    t.add_argument("--conns", type=int, default=8)
    t.add_argument("--turns", type=int, default=2000)
    t.add_argument("--timeout", type=float, default=30.0)
    i = sub.add_parser("idle")
    i.add_argument("--target", required=True)
    i.add_argument("--path", default="/v1/responses")
    i.add_argument("--count", type=int, default=2000)
    i.add_argument("--ramp", type=int, default=100)
    i.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    asyncio.run(turns(args) if args.what == "turns" else idle(args))


if __name__ == "__main__":
    main()
