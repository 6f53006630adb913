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

# The Redis tests start their own servers on loopback ports; they need the
# binaries (and fail, rather than skip, when CI is set and they are missing).
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    echo "== installing redis-server and redis-tools"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq redis-server redis-tools
fi
# The tests start their own servers; a system one is not needed.
redis-server --version

echo "== cargo test --all-features"
CI="${CI:-1}" cargo test --all-features

if [ -z "${SKIP_PYTHON:-}" ] && [ -f .ci/python.sh ]; then
    echo "== python package"
    bash .ci/python.sh
fi
