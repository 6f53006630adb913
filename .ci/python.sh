#!/usr/bin/env bash
# The Python package: lints of its crate, a release wheel built by maturin
# (from the package registry) in a fresh virtual environment, installed
# there, and its tests (the API, RedisEngine against redis-server processes
# the tests start on loopback ports, and real Scrapy crawls of a site served
# on 127.0.0.1 by the tests themselves, alone and as a fleet sharing Redis).
# Exits non-zero on any failure, including a pytest run that collected no
# test (exit 5) and a missing redis-server (CI is set for pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The CLI's build tree (scripts/test.sh's `cargo test` built the binary there).
cli_target=${CARGO_TARGET_DIR:-$root/target}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/python/target}
export CARGO_TERM_COLOR=never

echo "== python: cargo fmt --check, clippy (python/)"
(cd python && cargo fmt -- --check && cargo clippy --all-targets --quiet -- -D warnings)

echo "== python: a fresh virtual environment"
python3 --version
if ! python3 -c 'import ensurepip' 2>/dev/null; then
    # Debian ships venv's pip bootstrap separately.
    apt-get install -y -qq python3-venv >/dev/null
fi
python3 -m venv "$work/venv"
py=$work/venv/bin/python
"$py" -m pip install --quiet --upgrade pip
"$py" -m pip install --quiet maturin pytest scrapy mypy
"$py" -m pip list 2>/dev/null | grep -iE '^(maturin|pytest|scrapy|mypy) '

echo "== python: build the wheel and install it"
"$work/venv/bin/maturin" build --release --quiet -m python/Cargo.toml --out "$work/wheels"
"$py" -m pip install --quiet "$work"/wheels/timebloom-*.whl
# The installed package, not the source folder, is what the tests import.
# The wheel has the Redis engine (the crate builds timebloom with `redis`).
(cd "$work" && "$py" -c 'import timebloom, timebloom.scrapy; timebloom.RedisEngine; print("installed", timebloom.__file__)')

echo "== python: the timebloom CLI (tests/test_lock_cross.py runs it beside the package)"
# Built already by the Rust tests (then this does nothing), else built here.
CARGO_TARGET_DIR=$cli_target cargo build --quiet --all-features --bin timebloom
export TIMEBLOOM_BIN=$cli_target/debug/timebloom

echo "== python: the type stubs match the module (mypy stubtest)"
(cd "$work" && "$py" -m mypy.stubtest timebloom)

echo "== python: redis-server for the Redis tests"
scripts/install-redis.sh

echo "== python: pytest"
# Run from outside python/ so that `import timebloom` finds the wheel. With
# CI set, a missing redis-server fails the Redis tests instead of skipping.
cd "$work"
CI="${CI:-1}" "$work/venv/bin/pytest" -q -p no:cacheprovider "$root/python/tests"
