#!/usr/bin/env bash
# Every test Switchyard has: formatting, lints, the Rust test suites, and the
# conformance suite that drives the binary with the official vendor SDKs.
# Works on a fresh machine: it installs what it needs (a Python virtualenv
# with pinned SDKs) on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test"
cargo test --workspace --locked

echo "== SDK conformance"
./scripts/sdk-tests.sh
