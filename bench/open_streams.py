#!/usr/bin/env python3
"""Opens many concurrent streaming requests and holds them open (standard library only).

Each connection sends one streaming OpenAI Chat request and reads until the
first body bytes of the reply arrive (the stream is open end to end: caller,
proxy, upstream), then stops reading and holds the connection. When every
stream has been tried it prints one JSON line to stdout
({"open": N, "failed": F, "elapsed_s": S, "errors": [...]}) and waits for a
line on stdin (or EOF), then closes everything and exits.

    python3 open_streams.py --target 127.0.0.1:8080 --count 5000 --model slow-gpt
"""

import argparse
import asyncio
import json
import sys
import time


async def open_one(host, port, request, sem, conns, errors, timeout):
    async with sem:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, limit=1 << 16), timeout)
            writer.write(request)
            await writer.drain()
            # Read until the status line, the headers and the first body
            # bytes have arrived: the upstream has sent its first frame and
            # the proxy has relayed it, so the stream is open end to end.
            data = b""
            deadline = time.monotonic() + timeout
            while True:
                end = data.find(b"\r\n\r\n")
                if end >= 0 and len(data) > end + 4:
                    break
                left = deadline - time.monotonic()
                chunk = await asyncio.wait_for(reader.read(65536), max(left, 0.001))
                if not chunk:
                    raise ConnectionError("closed after %d bytes" % len(data))
                data += chunk
            status = data.split(b" ", 2)[1]
            if status != b"200":
                raise RuntimeError("status %s" % status.decode(errors="replace"))
            conns.append(writer)
            return True
        except Exception as err:  # noqa: BLE001 - every failure is counted and reported
            if len(errors) < 5:
                errors.append("%s: %s" % (type(err).__name__, err))
            return False


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", required=True, help="host:port of the proxy")
    parser.add_argument("--path", default="/v1/chat/completions")
    parser.add_argument("--model", default="slow-gpt")
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--ramp", type=int, default=200, help="connections being opened at once")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per connection to see its first frame")
    args = parser.parse_args()
    host, port = args.target.rsplit(":", 1)
    body = json.dumps(
        {"model": args.model, "stream": True, "messages": [{"role": "user", "content": "hold this stream open"}]}
    ).encode()
    request = (
        b"POST %s HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
        % (args.path.encode(), args.target.encode(), len(body), body)
    )
    sem = asyncio.Semaphore(args.ramp)
    conns, errors = [], []
    started = time.monotonic()
    results = await asyncio.gather(
        *(open_one(host, int(port), request, sem, conns, errors, args.timeout) for _ in range(args.count))
    )
    opened = sum(results)
    report = {
        "open": opened,
        "failed": args.count - opened,
        "elapsed_s": round(time.monotonic() - started, 3),
        "errors": errors,
    }
    print(json.dumps(report), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.readline)
    for writer in conns:
        writer.transport.abort()
    print(json.dumps({"closed": len(conns)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
