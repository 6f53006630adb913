#!/usr/bin/env bash
# Installs redis-server and redis-cli (Debian/Ubuntu packages) when missing,
# for the tests of the `redis` feature (they start their own servers on
# loopback ports). Then runs those tests.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-redis.sh

echo "== cargo clippy --features redis"
cargo clippy --all-targets --all-features -- -D warnings

echo "== cargo test --features redis (conformance, Cluster, AOF, retries, Sentinel)"
# CI set: a missing redis-server fails these tests instead of skipping them.
CI="${CI:-1}" cargo test --release --features redis --lib --test conformance \
    --test redis_aof --test redis_retry --test redis_connect --test redis_clocks --test redis_growth --test redis_wait --test redis_sentinel --test redis_eviction --test redis_reset --test redis_fpr --test redis_reshard --test redis_keys
