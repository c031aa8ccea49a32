#!/usr/bin/env python3
"""Instructions per request: the gateway runs under valgrind (cachegrind,
no cache simulation) while a client sends N requests one after another;
the same with no requests gives the fixed cost (boot, shutdown), and the
difference over N is what one request costs, in instructions. Unlike CPU
time this does not move with a shared machine's load, so it can tell a
1 % change; it does not see what instructions cost (cache misses,
syscalls' time in the kernel), so it complements `bench/run.sh`, never
replaces it.

    bench/instructions.sh --case 1-passthrough --setups quiet,open,access_line,traced
    bench/instructions.sh --duplex http,socket --text stream64 -n 500

`--duplex` counts Responses turns instead of a case's requests (bench/duplex.py's,
to the gpt-4o-mini lane): over a socket (one `response.create` each, on a socket
opened in the fixed run too) and over an HTTP stream, one binary, the open setup.

Setups: bench.py's SETUPS. Standard library only; needs valgrind.
"""

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import duplex  # noqa: E402


def instructions(out_file):
    with open(out_file) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError("no summary in %s" % out_file)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--switchyard", required=True)
    ap.add_argument("--b-bin", help="a second binary, measured with every setup too")
    ap.add_argument("--case", default="1-passthrough")
    ap.add_argument("--setups", default="open")
    ap.add_argument("-n", type=int, default=2000, help="requests per measurement")
    ap.add_argument("--log", default="info")
    ap.add_argument("--no-embed-lane", action="store_true",
                    help="leave the embed lane out of the config (for a --b-bin from before operations)")
    ap.add_argument("--keep", action="store_true", help="keep the cachegrind outputs (for cg_annotate)")
    ap.add_argument("--callgrind", action="store_true",
                    help="run callgrind instead (inclusive costs with callgrind_annotate --inclusive=yes; slower)")
    ap.add_argument("--duplex", help="http,socket: Responses turns over an HTTP stream and over a socket instead of --case")
    ap.add_argument("--text", default="stream20", choices=[name for name, _ in bench.DUPLEX_TURNS],
                    help="the duplex turn's text (20 or 64 deltas)")
    opts = ap.parse_args()

    if opts.duplex:
        text = dict(bench.DUPLEX_TURNS)[opts.text]
        title, ingress, path, body = "Responses %s turn" % opts.text, "responses", None, None
        opts.setups = opts.duplex
    else:
        case = bench.case_request(opts.case)
        if case is None:
            sys.exit("instructions: no case %s" % opts.case)
        title, ingress, path, body = case

    tmp = tempfile.mkdtemp(prefix="switchyard-instr-")
    procs = bench.Procs()
    try:
        up_port = bench.free_port()
        mock = procs.start([opts.switchyard, "mock-upstream", "--listen", "127.0.0.1:%d" % up_port])
        bench.wait_http(up_port, proc=mock)
        gw_port, gw_admin = bench.free_port(), bench.free_port()
        if "jwt" in opts.setups.split(","):
            bench.ensure_jwks(procs)
        env = dict(os.environ, SWITCHYARD_LOG=opts.log)

        def measure(binary, setup, n):
            conf = os.path.join(tmp, "%s.yaml" % setup)
            with open(conf, "w") as f:
                # A duplex "setup" is the transport; the config is the open one.
                f.write(bench.gateway_config("open" if opts.duplex else setup, tmp, gw_port, gw_admin, up_port,
                                             bench.free_port(), embed=not opts.no_embed_lane))
            out = os.path.join(tmp, "cg-%s-%d-%d.out" % (setup, n, time.monotonic_ns()))
            if opts.callgrind:
                tool = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out]
            else:
                tool = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=" + out]
            if setup == "tls":
                bench.TLS_PORTS.add(gw_port)
            else:
                bench.TLS_PORTS.discard(gw_port)
            gw = procs.start(tool + [binary, "serve", "--config", conf], env=env)
            bench.wait_http(gw_port, proc=gw, timeout=60)
            headers = {}
            if opts.duplex:
                asyncio.run(duplex.sequential(gw_port, setup, bench.OPENAI_MODEL, text, n))
                return stop(gw, out)
            if setup in bench.GOVERNED_SETUPS:
                headers = bench.key_headers(gw_admin, ingress, "instr", setup=setup)
            if path == "/mcp":
                # Opened in the fixed run too, so only the calls are counted.
                headers = bench.mcp_session(gw_port, headers)
            client = bench.RawClient(gw_port)
            client.connect()
            for _ in range(n):
                status, _, answer = client.post(path, body, headers)[:3]
                if status != 200:
                    raise RuntimeError("%s: status %s: %r" % (setup, status, answer[:500]))
            client.close()
            return stop(gw, out)

        def stop(gw, out):
            time.sleep(0.5)  # let queued work (exports, log lines) run before the count stops
            gw.send_signal(signal.SIGTERM)
            gw.wait(timeout=60)
            return instructions(out)

        binaries = [("", opts.switchyard)] + ([("b:", opts.b_bin)] if opts.b_bin else [])
        results = {}
        print("%s: instructions per request over %d requests" % (title, opts.n))
        for setup in opts.setups.split(","):
            for label, binary in binaries:
                fixed = measure(binary, setup, 0)
                loaded = measure(binary, setup, opts.n)
                per = (loaded - fixed) / opts.n
                results[label + setup] = per
                print("  %-16s %10.0f instructions/request" % (label + setup, per), flush=True)
        first = next(iter(results.values()))
        for key, per in results.items():
            print("  %-16s %.3f× %s" % (key, per / first, next(iter(results))))
        if opts.keep:
            print("cachegrind outputs in %s" % tmp)
    finally:
        procs.stop_all()


if __name__ == "__main__":
    main()
