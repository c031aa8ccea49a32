#!/usr/bin/env bash
# The crash-test harness (tests/crash/harness.py): 21 fault scenarios
# against the binary, through its own fault-injecting upstream, scored;
# fails unless every one passes. Python's standard library only.
set -euo pipefail
cd "$(dirname "$0")/.."

profile="${SDK_CARGO_PROFILE:-dev}"
cargo build --locked --profile "$profile" -p switchyard
target_dir="$(cargo metadata --locked --no-deps --format-version 1 \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
if [ "$profile" = dev ]; then out=debug; else out="$profile"; fi
python3 tests/crash/harness.py --bin "$target_dir/$out/switchyard" "$@"
