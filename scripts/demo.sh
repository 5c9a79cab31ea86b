#!/usr/bin/env bash
# The main job, from a fresh clone: installs, builds, starts local Kafka and Redis (unless
# KAFKA_BROKERS / REDIS_URL point at yours), then runs the demo (examples/demo.ts): the per-customer
# totals processor as two exactly-once instances of `redfence run`, one of them SIGKILLed midway, and
# prints its verification table. Exits non-zero if anything does not add up.
# DEMO_RECORDS (20000) and DEMO_CUSTOMERS (1000) size the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
npm run --silent build
bash dev/redis.sh up standalone
bash dev/kafka.sh up 1
node --import tsx examples/demo.ts
