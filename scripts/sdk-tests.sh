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

cargo build --locked -p switchyard
SWITCHYARD_BIN="$PWD/target/debug/switchyard" "$venv/bin/pytest" -q tests/sdk "$@"
