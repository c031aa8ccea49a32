#!/usr/bin/env bash
# Instructions per request of gateway setups under valgrind; see bench/instructions.py.
#   bench/instructions.sh --case 1-passthrough --setups quiet,open,access_line,traced
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-$(dirname "$here")/target}/release/switchyard}"
[ -x "$bin" ] || { echo "instructions: no switchyard binary at $bin (cargo build --release -p switchyard)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "instructions: needs valgrind (apt-get install -y valgrind)" >&2; exit 1; }
exec python3 "$here/instructions.py" --switchyard "$bin" "$@"
