#!/usr/bin/env bash
# Drives a running `switchyard` with the official Python SDKs (openai,
# anthropic, google-genai, cohere, boto3) through every ingress, into every
# lane protocol, with the coding agents themselves (Claude Code's and
# Codex's CLIs, tests/sdk/test_agents.py) and with the JS SDKs
# (test_commit_point.py, test_sdk_shapes_ts.py). Creates target/sdk-venv
# with pinned versions, and installs tests/agents' pinned npm packages (the
# CLIs, the SDKs, the TypeScript compiler), on first use.
# Select tests the pytest way: ./scripts/sdk-tests.sh -k claude_code
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/sdk-venv
if [ ! -x "$venv/bin/pytest" ] || ! cmp -s tests/sdk/requirements.txt "$venv/requirements.txt"; then
  echo "creating $venv (pinned SDKs from tests/sdk/requirements.txt)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
  cp tests/sdk/requirements.txt "$venv/requirements.txt"
fi

# The agents' CLIs ship native binaries inside their npm packages; npm
# installs the one for this platform from the lock file.
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "npm is missing: install the Debian packages nodejs and npm (apt-get install -y nodejs npm)" >&2
    exit 1
  fi
  echo "installing nodejs and npm"
  if [ ! -e /tmp/.switchyard-apt-updated ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && touch /tmp/.switchyard-apt-updated
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
agents=tests/agents/node_modules
if [ ! -d "$agents" ] || ! cmp -s tests/agents/package-lock.json "$agents/.package-lock.json.installed"; then
  echo "installing tests/agents' npm packages (pinned in package-lock.json)"
  (cd tests/agents && npm ci --no-audit --no-fund --loglevel=error)
  cp tests/agents/package-lock.json "$agents/.package-lock.json.installed"
fi

# The binary is built where cargo puts it: CARGO_TARGET_DIR (or its config)
# is honoured, and SDK_CARGO_PROFILE picks a profile other than dev (two
# checkouts sharing one target dir each need their own profile directory,
# or one's build overwrites the other's artifacts).
profile="${SDK_CARGO_PROFILE:-dev}"
cargo build --locked --profile "$profile" -p switchyard
target_dir="$(cargo metadata --locked --no-deps --format-version 1 \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
if [ "$profile" = dev ]; then out=debug; else out="$profile"; fi
SWITCHYARD_BIN="$target_dir/$out/switchyard" "$venv/bin/pytest" -q tests/sdk "$@"
