# Shared helpers for the dev/ service scripts. Source it; do not run it.
# All service data lives under $RF_DEV_DIR (default: <repo>/.dev, git-ignored).
# Ports are non-default so a user's own services are never touched:
#   Kafka single node  : broker 127.0.0.1:19092, controller 19093
#   Kafka three nodes  : brokers 19192/19292/19392, controllers 19193/19293/19393
#   Kafka secured node : SASL_SSL 19492, SSL (client certificate required) 19493, SASL_PLAINTEXT 19494,
#                        controller 19495, INTERNAL plaintext 19496; data under .dev/kafka-secure
#   Redis standalone   : 16379 (replica of it: 16380)
#   Redis Cluster      : 17001-17006 (3 masters + 3 replicas)
#   Redis TLS + ACL    : 16400; TLS cluster 16411-16416 (bus 26411-26416); Sentinel: data 16421/16422, sentinels 16425-16427
#   PostgreSQL         : a private server on 15432 (RF_PG_PORT), data under .dev/postgres, database redfence_test

RF_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RF_DEV_DIR="${RF_DEV_DIR:-$RF_ROOT/.dev}"
mkdir -p "$RF_DEV_DIR"

rf_log() { printf '[dev] %s\n' "$*" >&2; }
rf_die() { printf '[dev] error: %s\n' "$*" >&2; exit 1; }

# rf_wait_until <timeout-seconds> <description> <command...>
# Polls the command every 0.2 s until it succeeds; fails after the timeout.
rf_wait_until() {
  local timeout=$1 what=$2; shift 2
  local deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      rf_log "timed out after ${timeout}s waiting for: $what"
      return 1
    fi
    sleep 0.2
  done
}

# rf_pid_alive <pidfile>: true when the pidfile names a live process.
rf_pid_alive() {
  local f=$1
  [ -f "$f" ] || return 1
  local pid; pid=$(cat "$f" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# rf_stop_pidfile <pidfile> <timeout-seconds>: SIGTERM, wait, then SIGKILL.
rf_stop_pidfile() {
  local f=$1 timeout=${2:-30}
  if rf_pid_alive "$f"; then
    local pid; pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$(( $(date +%s) + timeout ))
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$(date +%s)" -ge "$deadline" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
      sleep 0.2
    done
  fi
  rm -f "$f"
}

# rf_port_open <port>: true when something listens on 127.0.0.1:<port>.
rf_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
