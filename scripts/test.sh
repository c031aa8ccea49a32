#!/usr/bin/env bash
# Every test Switchyard has: formatting, lints, the Rust test suites (with a
# real PostgreSQL for the store and fleet tests), and the conformance suite
# that drives the binary with the official vendor SDKs, and the console
# driven in headless Chromium.
# Works on a fresh machine: it installs what it needs (a Python virtualenv
# with pinned SDKs, Debian's chromium, pinned npm packages) on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

# A full run compiles every crate once: incremental caches (3.6 GB of the
# 9 GB a run left behind) pay back only in edit-compile loops, which call
# cargo directly. Set CARGO_INCREMENTAL=1 to keep them.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

# Property tests explore new cases on every local run; under CI they use a
# fixed seed so a landing is reproducible (export PROPTEST_RNG_SEED to vary it).
if [ "${CI:-}" = "true" ]; then
  export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261129}"
fi

# Real servers for the store and fleet tests: throwaway PostgreSQL on a
# free port (installed from Debian's packages when missing), stopped on exit.
echo "== services"
eval "$(./scripts/services.sh start)"
trap './scripts/services.sh stop "$SWITCHYARD_TEST_SERVICES_DIR"' EXIT

echo "== cargo test"
cargo test --workspace --locked

echo "== SDK conformance"
./scripts/sdk-tests.sh

echo "== crash-test harness: 21 fault scenarios"
./scripts/crash-tests.sh

echo "== console in a real browser"
./scripts/console-tests.sh

# Short runs of the admission fuzz target (the property test runs the same
# checks above), of the readers of operations beyond chat (multipart forms
# included) and of the guardrails under every encoding (the guard crate's
# proptest holds the same property); scripts/fuzz.sh runs every target for
# longer.
echo "== fuzz: admission under arbitrary numbers, operation readers, protocol readers (legacy completions and Realtime events included), MCP messages, A2A messages, guardrail encodings"
./scripts/fuzz.sh "${SWITCHYARD_FUZZ_SECONDS:-30}" admission_numbers operation_readers protocol_readers mcp_messages a2a_messages guardrail_encodings
