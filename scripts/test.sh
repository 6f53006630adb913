#!/usr/bin/env bash
# Runs every test of timebloom on a fresh Debian machine with the Rust
# toolchain and Python 3: the Rust suite with every feature (the Redis mode
# included, against redis-server instances the tests start on loopback), and
# the Python package's suite (built in a virtual environment).
#
#   scripts/test.sh            # everything (installs redis-server if missing)
#   SKIP_PYTHON=1 scripts/test.sh
#
# Long tests run a quick mode by default; TIMEBLOOM_FULL=1 runs their full
# counts (see README.md).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-redis.sh

echo "== cargo test --all-features"
CI="${CI:-1}" cargo test --all-features

# The build without the redis feature: its command line refuses --redis and
# says so in --help (the rest of the suite is the same code). The binary
# needs the `cli` feature.
echo "== cargo test --no-default-features --features cli --test cli_redis"
CI="${CI:-1}" cargo test --no-default-features --features cli --test cli_redis

if [ -z "${SKIP_PYTHON:-}" ] && [ -f .ci/python.sh ]; then
    echo "== python package"
    bash .ci/python.sh
fi
