#!/usr/bin/env bash
# The runs behind docs/benchmarks.md "Where redfence stands", back to back on one machine:
#   1. bench/processor (passthrough of the client, its promise API, the naive loop, redfence at-least-once,
#      exactly-once (default 100 ms commit interval), exactly-once with 0 ms) then the Kafka Streams peer (1 thread,
#      cache 0), at 10,000 keys and at 1,000,000 keys, RECORDS records each (default 1,000,000);
#   2. end-to-end latency at 2,000 records/s: bench/latency, then the Kafka Streams peer's --latency;
#   3. the streams DSL against Kafka Streams on the same topologies (bench/topology: the fraud topology and
#      a windowed count), at the same key counts and RECORDS records (TOPOLOGY=0 leaves it out);
#   4. failover of the streams DSL against Kafka Streams (bench/topology/failover.ts: a windowed count with
#      KEYS open windows, kill -> first output of the replacement, Redis bytes per window, peak RSS;
#      TOPOLOGY_FAILOVER=0 leaves it out).
# Needs the services (bash dev/up), dist/ (npm run build: step 4 runs the built CLI) and an otherwise idle
# machine. Tables go to stdout and to
# bench/results/stands-<time>/ (git-ignored); each benchmark also writes its own raw JSON.
#   RECORDS=300000 KEYS="10000" bash bench/stands.sh      # a shorter pass
# Redis: a private redis-server of its own on 127.0.0.1:16579 (no replica, no persistence, noeviction),
# stopped at the end, as the Kafka Streams peer runs on the one dev broker with no replica either. The
# dev Redis (bash dev/up) has a replica on this machine whose CPU the master's figures do not show:
# REDIS_URL=redis://127.0.0.1:16379 bash bench/stands.sh measures against it instead.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${REDIS_URL:-}" ]; then
  port=16579
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "[stands] 127.0.0.1:$port already answers; stop it or set REDIS_URL" >&2
    exit 2
  fi
  rdir="$(mktemp -d)"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --maxmemory-policy noeviction \
    --dir "$rdir" --daemonize yes --pidfile "$rdir/redis.pid" --logfile "$rdir/redis.log"
  trap 'redis-cli -p '"$port"' shutdown nosave >/dev/null 2>&1 || true; rm -rf "'"$rdir"'"' EXIT
  for _ in $(seq 1 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  export REDIS_URL="redis://127.0.0.1:$port"
fi
records="${RECORDS:-1000000}"
keys_list="${KEYS:-10000 1000000}"
out="bench/results/stands-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
step() { echo "[stands] $(date -u +%H:%M:%S) $*; load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/log.txt" >&2; }
step "redis $REDIS_URL"

for keys in $keys_list; do
  step "processor, $records records, $keys keys"
  BENCH_RECORDS="$records" BENCH_KEYS="$keys" node --import tsx bench/processor/run.ts | tee "$out/processor-$keys.md"
  step "kafka streams, $records records, $keys keys"
  BENCH_RECORDS="$records" BENCH_KEYS="$keys" BENCH_ONLY='1 thread, cache 0' \
    node --import tsx bench/peers/kafka-streams/run.ts | tee "$out/kafka-streams-$keys.md"
done
if [ "${LATENCY:-1}" != "0" ]; then
  step "latency at 2000 records/s"
  node --import tsx bench/latency/run.ts | tee "$out/latency.md"
  step "kafka streams latency"
  node --import tsx bench/peers/kafka-streams/run.ts --latency | tee "$out/kafka-streams-latency.md"
fi
if [ "${TOPOLOGY:-1}" != "0" ]; then
  for keys in $keys_list; do
    step "topology, $records records, $keys keys"
    BENCH_RECORDS="$records" BENCH_KEYS="$keys" node --import tsx bench/topology/run.ts | tee "$out/topology-$keys.md"
  done
fi
if [ "${TOPOLOGY_FAILOVER:-1}" != "0" ]; then
  step "topology failover, keys $keys_list"
  BENCH_FAILOVER_KEYS="$(echo "$keys_list" | tr ' ' ',')" node --import tsx bench/topology/failover.ts |
    tee "$out/topology-failover.md"
fi
step "done: $out"
