#!/usr/bin/env bash
# Drives the console (/ui/ on the admin listener) in a real browser:
# Debian's Chromium, headless, through npm's playwright-core, with axe-core
# for accessibility and the official OpenAI SDK for the key it creates.
# Installs what is missing on first use: the `chromium` package (never a
# browser download of Playwright's own) and tests/console's pinned npm
# packages. Screenshots and page timings go to target/console-artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."

# Installs a Debian package when its binary is missing (as scripts/services.sh does).
need() {
  local binary=$1 package=$2
  if command -v "$binary" >/dev/null 2>&1; then return; fi
  if [ "$(id -u)" != 0 ]; then
    echo "$binary is missing: install the Debian package $package (apt-get install -y $package)" >&2
    exit 1
  fi
  echo "installing $package"
  if [ ! -e /tmp/.switchyard-apt-updated ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && touch /tmp/.switchyard-apt-updated
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
}

need chromium chromium
need node nodejs
need npm npm

modules=tests/console/node_modules
if [ ! -d "$modules" ] || ! cmp -s tests/console/package-lock.json "$modules/.package-lock.json.installed"; then
  echo "installing tests/console's npm packages (pinned in package-lock.json)"
  # PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: playwright-core never downloads one,
  # and nothing here may try; the browser is Debian's.
  (cd tests/console && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
  cp tests/console/package-lock.json "$modules/.package-lock.json.installed"
fi

# The binary, where cargo puts it (as scripts/sdk-tests.sh finds it).
profile="${SDK_CARGO_PROFILE:-dev}"
cargo build --locked --profile "$profile" -p switchyard
target_dir="$(cargo metadata --locked --no-deps --format-version 1 \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
if [ "$profile" = dev ]; then out=debug; else out="$profile"; fi
SWITCHYARD_BIN="$target_dir/$out/switchyard" \
CONSOLE_ARTIFACTS="${CONSOLE_ARTIFACTS:-$target_dir/console-artifacts}" \
  node tests/console/console.test.mjs
