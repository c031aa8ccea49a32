#!/usr/bin/env bash
# A CycloneDX 1.5 SBOM (JSON) of the release build of the `switchyard`
# binary: every crate Cargo.lock pins, with its version, crates.io SHA-256
# checksum, purl and license, each marked by what it is to the binary for
# the target platform (linked in, build-time only, dev-only, another
# platform's), and the build's dependency graph. See scripts/sbom.py.
#   scripts/sbom.sh                          # target/sbom/switchyard.cdx.json, for the host
#   scripts/sbom.sh out.json aarch64-unknown-linux-gnu
# Needs cargo and Python 3.9+ (standard library only); reads no network
# (cargo metadata --offline --locked: the lock is the build's).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/sbom/switchyard.cdx.json}"
target="${2:-$(rustc -vV | sed -n 's/^host: //p')}"
mkdir -p "$(dirname "$out")"
meta="$(mktemp)"
trap 'rm -f "$meta"' EXIT
cargo metadata --format-version 1 --locked --offline --filter-platform "$target" > "$meta"
python3 scripts/sbom.py --metadata "$meta" --lock Cargo.lock --target "$target" --out "$out"
echo "sbom: $out ($(grep -c '"bom-ref"' "$out") entries, target $target)" >&2
