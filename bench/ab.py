#!/usr/bin/env python3
"""A/B: the gateway's CPU per request under two setups, measured in
interleaved rounds (A B A B ...) so that the machine's drift hits both
alike; reports each round's ratio and their median. Use it to state what a
feature costs when one bench run is too noisy to tell.

    bench/ab.sh --case 1-passthrough --a quiet --b open          # setups
    bench/ab.sh --case 1-passthrough --a before --a-bin OLD_BINARY --b open   # binary to binary

Setups: `open` (the bench's gateway config), or another of bench.py's
SETUPS (see its TELEMETRY and GOVERNED_EXTRA). Standard
library only; reuses bench.py's servers and measurements.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--switchyard", required=True)
    ap.add_argument("--a-bin", help="binary for A (default: --switchyard)")
    ap.add_argument("--b-bin", help="binary for B (default: --switchyard)")
    ap.add_argument("--case", default="1-passthrough", help="a case id of bench.py's CASES")
    ap.add_argument("--a", default="open")
    ap.add_argument("--b", default="open")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--secs", type=float, default=4.0, help="c=64 seconds per measurement")
    ap.add_argument("--proxy-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--log", default="info", help="gateway log level (SWITCHYARD_LOG)")
    opts = ap.parse_args()

    case = bench.case_request(opts.case)
    if case is None:
        sys.exit("ab: no case %s" % opts.case)
    title, ingress, path, body = case

    tmp = tempfile.mkdtemp(prefix="switchyard-ab-")
    procs = bench.Procs()
    wrk = bench.Wrk(tmp)
    P, C = opts.proxy_cpu, opts.client_cpu
    try:
        up_port = bench.free_port()
        mock = procs.start([opts.switchyard, "mock-upstream", "--listen", "127.0.0.1:%d" % up_port], cpu=C)
        bench.wait_http(up_port, proc=mock)
        gw_port, gw_admin = bench.free_port(), bench.free_port()
        confs = {}
        for setup in {opts.a, opts.b}:
            confs[setup] = os.path.join(tmp, "%s.yaml" % setup)
            with open(confs[setup], "w") as f:
                f.write(bench.gateway_config(setup, tmp, gw_port, gw_admin, up_port, bench.free_port()))
        env = dict(os.environ, SWITCHYARD_LOG=opts.log)

        def one(binary, setup):
            gw = procs.start([binary, "serve", "--config", confs[setup]], cpu=P, env=env)
            try:
                bench.wait_http(gw_port, proc=gw)
                headers = None
                if setup in bench.GOVERNED_SETUPS:
                    headers = bench.key_headers(gw_admin, ingress, "ab")
                wrk.run(gw_port, path, body, 64, 1, "warm-up", headers=headers)
                c0 = bench.cpu_seconds(gw.pid)
                r = wrk.run(gw_port, path, body, 64, opts.secs, setup, headers=headers)
                return (bench.cpu_seconds(gw.pid) - c0) / r["requests"] * 1e6
            finally:
                procs.stop(gw)
                time.sleep(0.2)

        a_bin = opts.a_bin or opts.switchyard
        b_bin = opts.b_bin or opts.switchyard
        ratios = []
        print("%s: A=%s B=%s, %d rounds of %.0fs at c=64" % (title, opts.a, opts.b, opts.rounds, opts.secs))
        for n in range(opts.rounds):
            # Alternate which goes first, so warm-up order favours neither.
            if n % 2 == 0:
                a = one(a_bin, opts.a)
                bb = one(b_bin, opts.b)
            else:
                bb = one(b_bin, opts.b)
                a = one(a_bin, opts.a)
            ratios.append(bb / a)
            print("  round %d: A %.1f µs/req, B %.1f µs/req, B/A %.3f" % (n + 1, a, bb, bb / a), flush=True)
        print("median B/A %.3f (min %.3f, max %.3f)" % (statistics.median(ratios), min(ratios), max(ratios)))
    finally:
        procs.stop_all()


if __name__ == "__main__":
    main()
