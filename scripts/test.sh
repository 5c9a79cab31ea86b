#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs dependencies, builds, starts the local services
# (or uses yours: KAFKA_BROKERS, REDIS_URL, REDIS_CLUSTER_NODES, DATABASE_URL), lints, type-checks,
# then runs every test against the real services. Services are left running for the next run;
# `dev/down` stops them.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install.sh
# Node 22 and 24 beside the machine's, for the install test (test/cli/pack.test.ts runs on each)
bash scripts/dev-node.sh
npm run --silent build
bash dev/up
npx biome check .
npx tsc -p tsconfig.json --noEmit

mapfile -t files < <(find test -name '*.test.ts' | sort)
node --import tsx --test --test-concurrency=1 --test-reporter=spec "${files[@]}"
