#!/usr/bin/env bash
# Builds the fuzz targets and runs each for N seconds (default 30) on stable
# Rust without a sanitizer. Exits non-zero when a target crashes, panics,
# times out, runs out of memory, or the build fails. For CI:
#
#   fuzz/smoke.sh        # 30 s per target
#   fuzz/smoke.sh 120    # 120 s per target
#   TARGETS="model" fuzz/smoke.sh 10
#
# Each run starts from fuzz/seeds/<target> plus whatever fuzz/corpus/<target>
# holds (new inputs are written there); a crash leaves its input in
# fuzz/artifacts/<target>/. The mutation seed is fixed (FUZZ_SEED, default 1)
# so that a CI run explores the same inputs each time and a red run can be
# replayed; FUZZ_SEED=0 lets libFuzzer pick one (exploratory runs).
set -euo pipefail

secs="${1:-30}"
cd "$(dirname "$0")"
targets="${TARGETS:-open_dir model log_replay manifest segment_header shadow config_text canonical}"

command -v cargo-fuzz >/dev/null || {
    echo "smoke.sh: cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2
    exit 2
}

for t in $targets; do
    cargo fuzz build --sanitizer=none "$t"
done

status=0
for t in $targets; do
    mkdir -p "corpus/$t" "seeds/$t"
    dict=()
    [[ -f "$t.dict" ]] && dict=("-dict=$t.dict")
    echo "== $t: ${secs}s"
    log="$(mktemp)"
    if cargo fuzz run --sanitizer=none "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$secs" -seed="${FUZZ_SEED:-1}" -timeout=60 -rss_limit_mb=2048 "${dict[@]}" \
        >"$log" 2>&1; then
        grep -E '(DONE|^Done [0-9]+ runs)' "$log" || tail -n 3 "$log"
    else
        status=1
        echo "== $t FAILED; the end of its log:" >&2
        tail -n 60 "$log" >&2
    fi
    rm -f "$log"
done
exit "$status"
