#!/usr/bin/env python3
"""A/B of time to first streamed frame between pools of the bench's gateway
config, in interleaved rounds (A B C A B C ...) against one gateway, so the
machine's drift hits each alike: one bench run's TTFB p50 moves by tens of
percent between cases run minutes apart. Prints each round's p50s and the
median of each pool's ratio to the first.

    python3 bench/ttfb_ab.py stream-held stream-hedged chat-alias

Needs target/release/switchyard (or SWITCHYARD_BIN) and taskset; pins the
gateway to cpu 0 and the rest to cpu 1, as bench/run.sh does.
"""

import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402


def main():
    pools = sys.argv[1:] or ["stream-held", "stream-hedged"]
    rounds, n = int(os.environ.get("AB_ROUNDS", "6")), int(os.environ.get("AB_N", "300"))
    sy = os.environ.get("SWITCHYARD_BIN", os.path.join(bench.REPO, "target", "release", "switchyard"))
    tmp = tempfile.mkdtemp(prefix="switchyard-ttfb-ab-")
    up, gw, admin, slow, tail = (bench.free_port() for _ in range(5))
    mock = subprocess.Popen(["taskset", "-c", "1", sy, "mock-upstream", "--listen", "127.0.0.1:%d" % up],
                            stderr=subprocess.DEVNULL)
    gateway = None
    try:
        bench.wait_http(up)
        conf = os.path.join(tmp, "gateway.yaml")
        with open(conf, "w") as f:
            f.write(bench.gateway_config("open", tmp, gw, admin, up, slow, tail=tail))
        gateway = subprocess.Popen(["taskset", "-c", "0", sy, "serve", "--config", conf], stderr=subprocess.DEVNULL,
                                   env=dict(os.environ, SWITCHYARD_LOG="info"))
        bench.wait_http(gw)
        text = bench.BASELINES["stream64-openai"]["text"]
        p50 = {pool: [] for pool in pools}
        for _ in range(rounds):
            for pool in pools:
                path, body = bench.request("openai", pool, text, True)
                p50[pool].append(bench.ttfb(gw, path, body, n, 20)["first_frame_us"]["p50"])
        base = p50[pools[0]]
        for pool in pools:
            ratios = [x / max(b, 1.0) for x, b in zip(p50[pool], base)]
            print("%-16s p50 µs by round %s  median ratio to %s %.3f×" % (
                pool, [round(x) for x in p50[pool]], pools[0], statistics.median(ratios)))
    finally:
        for proc in (gateway, mock):
            if proc is not None:
                proc.terminate()


if __name__ == "__main__":
    main()
