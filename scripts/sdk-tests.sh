#!/usr/bin/env bash
# Drives a running `switchyard` with the official Python SDKs (openai,
# anthropic, google-genai, cohere, boto3) through every ingress, into every
# lane protocol. Creates target/sdk-venv with pinned versions on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/sdk-venv
if [ ! -x "$venv/bin/pytest" ] || ! cmp -s tests/sdk/requirements.txt "$venv/requirements.txt"; then
  echo "creating $venv (pinned SDKs from tests/sdk/requirements.txt)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
  cp tests/sdk/requirements.txt "$venv/requirements.txt"
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
