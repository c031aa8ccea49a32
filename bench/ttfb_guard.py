#!/usr/bin/env python3
"""Added time to first content under a masking policy, against its bound.

A stream screened by a reply policy may release no text that could still
become a match: it holds back the rules' reach (the policy of 20 regexes
the bench uses reaches 10 bytes). Its first content therefore waits for
that many more bytes of text from the upstream, and no longer. This script
measures it on a paced upstream (bench/slow_upstream.py: a 5-byte delta
every --interval), interleaving a plain pool and a guarded pool on the same
lane, and prints each one's median time to first content, the difference,
and the bound: the time the upstream takes to send the reach's bytes
(ceil(reach / 5) intervals).

    python3 bench/ttfb_guard.py --interval 0.02 --rounds 40
"""

import argparse
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402

REACH = 10  # `AAA-[0-9]{6}`: the policy's longest match
DELTA = 5  # bytes of text per upstream frame ("tok0 ")


def first_content_ms(port, pool):
    """Milliseconds from sending a streamed request to the first frame with text."""
    body = ('{"model":"%s","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}' % pool).encode()
    head = ("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            "content-length: %d\r\nconnection: close\r\n\r\n" % len(body)).encode()
    with socket.create_connection(("127.0.0.1", port)) as conn:
        started = time.perf_counter()
        conn.sendall(head + body)
        seen = b""
        while True:
            data = conn.recv(65536)
            if not data:
                raise RuntimeError("%s: the stream ended before any text" % pool)
            seen += data
            if b'"content":"tok' in seen:
                return (time.perf_counter() - started) * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--interval", type=float, default=0.02, help="seconds between the upstream's deltas")
    ap.add_argument("--rounds", type=int, default=40)
    opts = ap.parse_args()
    sy = os.environ.get("SWITCHYARD_BIN", os.path.join(bench.REPO, "target", "release", "switchyard"))
    tmp = tempfile.mkdtemp(prefix="switchyard-ttfb-guard-")
    slow, gw = bench.free_port(), bench.free_port()
    procs = bench.Procs()
    try:
        procs.start([sys.executable, os.path.join(HERE, "slow_upstream.py"), "--listen", "127.0.0.1:%d" % slow,
                     "--interval", str(opts.interval), "--frames", "12"])
        bench.wait_http(slow)
        conf = os.path.join(tmp, "gateway.yaml")
        with open(conf, "w") as f:
            f.write("listen: 127.0.0.1:%d\nadmin_listen: 127.0.0.1:%d\n" % (gw, bench.free_port()))
            f.write("providers:\n  slow: { protocol: openai, base_url: \"http://127.0.0.1:%d\" }\n" % slow)
            f.write("models:\n  paced: { provider: slow }\n")
            f.write("pools:\n  plain: { members: [{ model: paced }] }\n"
                    "  guarded: { policies: [twenty], members: [{ model: paced }] }\n")
            f.write(bench.TWENTY_REGEXES)
        procs.start([sy, "serve", "--config", conf])
        bench.wait_http(gw)
        for pool in ("plain", "guarded"):
            first_content_ms(gw, pool)  # warm the upstream connection
        times = {"plain": [], "guarded": []}
        for _ in range(opts.rounds):
            for pool in ("plain", "guarded"):
                times[pool].append(first_content_ms(gw, pool))
        plain, guarded = statistics.median(times["plain"]), statistics.median(times["guarded"])
        bound = math.ceil(REACH / DELTA) * opts.interval * 1000
        print("time to first content, median of %d interleaved rounds, a %d-byte delta every %.0f ms:"
              % (opts.rounds, DELTA, opts.interval * 1000))
        print("  plain    %7.1f ms" % plain)
        print("  guarded  %7.1f ms" % guarded)
        print("  added    %7.1f ms   bound: the reach (%d bytes) = %d deltas = %.1f ms" %
              (guarded - plain, REACH, math.ceil(REACH / DELTA), bound))
        print("  within the bound: %s" % ("yes" if guarded - plain <= bound * 1.1 + 2 else "NO"))
    finally:
        procs.stop_all()


if __name__ == "__main__":
    main()
