#!/usr/bin/env bash
# Fuzzes the protocol codecs (and the guardrails' screen) with cargo-fuzz (libFuzzer): every target in
# fuzz/fuzz_targets, one after another, each for a number of seconds.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      (default: 60 s, all targets)
#
# Works on the stable toolchain: RUSTC_BOOTSTRAP=1 unlocks the nightly flags
# (-Zsanitizer=address) that cargo fuzz passes. Installs cargo-fuzz on first
# use. Seeds fuzz/corpus/<target>/ with the golden fixtures under
# crates/protocol-*/tests/fixtures, prefixed with the selector bytes each
# target reads. A crash leaves its input in fuzz/artifacts/<target>/ and makes
# the script fail; reproduce it with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run <target> fuzz/artifacts/<target>/<file>
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(protocol_readers stream_decoders frames_and_scan governance_inputs admission_numbers operation_readers mcp_messages guardrail_encodings)
fi

export RUSTC_BOOTSTRAP=1
# One build job and one fuzz process: the fuzzer shares the machine.
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== cargo install cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

# The index of each protocol in Protocol::ALL (the targets' first byte).
protocol_index() {
    case "$1" in
        openai) echo 0 ;;
        responses) echo 1 ;;
        anthropic) echo 2 ;;
        gemini) echo 3 ;;
        cohere) echo 4 ;;
        bedrock) echo 5 ;;
        *) echo "unknown protocol $1" >&2; return 1 ;;
    esac
}

# Writes the bytes given as octal escapes ($1), then the file $2, to $3.
seed() {
    { printf "$1"; cat "$2"; } > "$3"
}

seed_corpus() {
    mkdir -p fuzz/corpus/protocol_readers fuzz/corpus/stream_decoders fuzz/corpus/frames_and_scan
    local dir protocol index file name size split
    for dir in crates/protocol-*/tests/fixtures; do
        protocol="${dir#crates/protocol-}"
        protocol="${protocol%%/*}"
        index="$(protocol_index "$protocol")"
        for file in "$dir"/*; do
            name="$protocol-$(basename "$file")"
            cp "$file" "fuzz/corpus/frames_and_scan/$name"
            case "$(basename "$file")" in
                stream_*.events.json) ;;
                stream_*)
                    # Selector, then the split point: mid-body (capped at
                    # 255) and right at the start.
                    size="$(wc -c < "$file")"
                    split=$((size / 2 > 255 ? 255 : size / 2))
                    seed "$(printf '\\%03o\\%03o' "$index" "$split")" "$file" "fuzz/corpus/stream_decoders/$name.mid"
                    seed "$(printf '\\%03o\\%03o' "$index" 1)" "$file" "fuzz/corpus/stream_decoders/$name.start"
                    ;;
                *.json)
                    # The error readers see status selector + 300.
                    seed "$(printf '\\%03o' "$index")" "$file" "fuzz/corpus/protocol_readers/$name"
                    ;;
            esac
        done
    done
}

seed_corpus

status=0
for target in "${targets[@]}"; do
    echo "== cargo fuzz run $target (${seconds}s)"
    # -max_len: the largest fixture is under 7 KiB; leave room to grow.
    if ! cargo fuzz run "$target" -j1 -- -max_total_time="$seconds" -max_len=16384 -print_final_stats=1; then
        echo "!! $target failed: see fuzz/artifacts/$target/" >&2
        status=1
    fi
done
exit "$status"
