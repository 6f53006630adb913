#!/usr/bin/env bash
# Installs redis-server and redis-cli (Debian/Ubuntu packages) when missing.
# The Redis tests start their own servers on loopback ports: they need the
# binaries, not a running system server (and fail, rather than skip, when CI
# is set and the binaries are missing).
set -euo pipefail
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    echo "== installing redis-server and redis-tools"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq redis-server redis-tools
fi
redis-server --version
