#!/usr/bin/env bash
# A/B CPU per request of two gateway setups in interleaved rounds; see bench/ab.py.
#   bench/ab.sh --case 1-passthrough --a quiet --b open
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-$(dirname "$here")/target}/release/switchyard}"
[ -x "$bin" ] || { echo "ab: no switchyard binary at $bin (cargo build --release -p switchyard)" >&2; exit 1; }
export PATH="$PATH:/usr/sbin"
exec taskset -c "${BENCH_CLIENT_CPU:-1}" python3 "$here/ab.py" --switchyard "$bin" "$@"
