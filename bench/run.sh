#!/usr/bin/env bash
# Switchyard end-to-end benchmark: direct vs nginx vs Switchyard, side by side.
#
#   bench/run.sh                 # everything (~4-5 minutes), writes bench/results/latest.{md,json}
#   bench/run.sh --only stream   # only the cases whose id contains "stream" (baselines always run)
#   BENCH_STREAMS=0 bench/run.sh # skip the open-streams test
#
# Environment: BENCH_SKIP_BUILD=1 (use the existing binary), SWITCHYARD_BIN=path,
# BENCH_PROXY_CPU / BENCH_CLIENT_CPU (default 0 / 1), BENCH_C1_SECS, BENCH_C64_SECS,
# BENCH_WARMUP_SECS, BENCH_TTFB_N, BENCH_STREAMS (default 5000), BENCH_GATEWAY_LOG (default info),
# BENCH_DUPLEX_TURNS (default 3000; 0 skips the duplex case), BENCH_DUPLEX_ROUNDS, BENCH_DUPLEX_SOCKETS.
# See bench/README.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
cd "$repo"

proxy_cpu="${BENCH_PROXY_CPU:-0}"
client_cpu="${BENCH_CLIENT_CPU:-1}"
streams="${BENCH_STREAMS:-5000}"

die() { echo "bench: $*" >&2; exit 1; }

if [ "$(nproc)" -lt 2 ]; then
    die "needs two cores (proxy on one, load generator and upstream on the other); nproc is $(nproc)"
fi

# Public tools: wrk and nginx from Debian, taskset from util-linux, python3.
missing=()
for tool in wrk nginx taskset python3; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || missing+=("$tool")
done
export PATH="$PATH:/usr/sbin"
if [ "${#missing[@]}" -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
        pkgs=()
        for tool in "${missing[@]}"; do
            case "$tool" in
                taskset) pkgs+=(util-linux) ;;
                python3) pkgs+=(python3) ;;
                *) pkgs+=("$tool") ;;
            esac
        done
        echo "bench: installing ${pkgs[*]} with apt-get" >&2
        apt-get install -y "${pkgs[@]}" >/dev/null || { apt-get update >/dev/null && apt-get install -y "${pkgs[@]}" >/dev/null; }
    else
        die "missing ${missing[*]}: apt-get install -y wrk nginx util-linux python3"
    fi
fi

# The release binary (the workspace release profile has fat LTO and codegen-units = 1).
bin="${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/switchyard}"
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ] && [ -z "${SWITCHYARD_BIN:-}" ]; then
    echo "bench: cargo build --release -p switchyard" >&2
    cargo build --release -p switchyard
fi
[ -x "$bin" ] || die "no switchyard binary at $bin"

# File descriptors: the open-streams test holds 2 x BENCH_STREAMS sockets in the proxy.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
need=$((2 * streams + 512))
if [ "$streams" -gt 0 ] && [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
    die "open-streams test needs ulimit -n >= $need (have $(ulimit -n)); raise the hard limit or set BENCH_STREAMS lower"
fi

# The fleet cases govern through PostgreSQL and Redis on loopback, started
# on the client core (throwaway data, stopped on exit).
eval "$(taskset -c "$client_cpu" "$repo/scripts/services.sh" start)"
trap '"$repo/scripts/services.sh" stop "$SWITCHYARD_TEST_SERVICES_DIR"' EXIT
export BENCH_POSTGRES_URL="$SWITCHYARD_TEST_POSTGRES_URL" BENCH_REDIS_URL="$SWITCHYARD_TEST_REDIS_URL"

# The driver, and so wrk, the upstream and the Python clients it starts, on the
# client core; it starts the proxies with taskset -c $proxy_cpu.
taskset -c "$client_cpu" python3 "$here/bench.py" --switchyard "$bin" \
    --proxy-cpu "$proxy_cpu" --client-cpu "$client_cpu" "$@"
