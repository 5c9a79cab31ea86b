#!/usr/bin/env bash
# dev/redis-secure.sh - Redis instances with TLS, ACL users and Sentinel, for the connectivity tests.
# dev/redis.sh hands its tls, tls-cluster, sentinel and secure groups to this script (and `all` includes them).
#
#   up     [tls|tls-cluster|sentinel|secure]   start (idempotent), wait until ready; secure = all three
#   down   [tls|tls-cluster|sentinel|secure] [--wipe]   stop; --wipe also deletes data, certificates, passwords
#   status                                     one line per instance
#   primary                                    host:port of the current Sentinel primary
#
# Instances (127.0.0.1, maxmemory-policy noeviction, no RDB snapshots, the `default` user disabled):
#   tls          16400               TLS only (tls-auth-clients optional: a client certificate, when sent, must be signed by the CA)
#   tls-cluster  16411..16416        TLS only, 3 masters + 3 replicas, TLS on the bus (ports 26411..26416) and replication
#   sentinel     16421 primary, 16422 replica (ACL, no TLS); sentinels 16425 16426 16427 (quorum 2, master name
#                "rfprimary", requirepass), down-after 2000 ms
# Users on every data node: `redfence` (the least-privilege rule set of docs/operations.md, RF_ACL below) and
# `admin` (+@all, used for replication, Sentinel and these scripts).
# Under $RF_DEV_DIR/redis/secure/ (never committed): tls/ca.crt, server.{crt,key}, client.{crt,key}, and
# other-ca.crt (a CA that signed nothing here); redfence.password, admin.password, sentinel.password (random,
# made once, mode 600); one directory per instance (tls-16400, cluster-16411, sentinel-16425, ...).
set -euo pipefail
# shellcheck source=dev/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REDIS_SERVER_BIN=${REDIS_SERVER_BIN:-redis-server}
REDIS_CLI_BIN=${REDIS_CLI_BIN:-redis-cli}
SDIR="$RF_DEV_DIR/redis/secure"
TLS="$SDIR/tls"
HOST=127.0.0.1
TLS_PORT=16400
TLS_CLUSTER_PORTS=(16411 16412 16413 16414 16415 16416)
SENTINEL_DATA_PORTS=(16421 16422)
SENTINEL_PORTS=(16425 16426 16427)
MASTER_NAME=rfprimary
READY_TIMEOUT=${RF_REDIS_READY_TIMEOUT:-60}
SELF="dev/redis-secure.sh"
# The runtime's least-privilege rule set; docs/operations.md shows the same line (a test compares them).
RF_ACL='resetkeys ~rf:* resetchannels -@all +evalsha +eval +script|load +hgetall +zadd +zrange +get +incr +hget +hset +hdel +hkeys +hincrby +hincrbyfloat +pexpire +zscore +zrem +hmget +pexpireat +zrangebyscore +wait +ping +info +config|get +cluster|slots +cluster|info'

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

need_tools() {
  command -v "$REDIS_SERVER_BIN" >/dev/null 2>&1 || rf_die "redis-server not found; install it (apt-get install redis-server)"
  command -v "$REDIS_CLI_BIN" >/dev/null 2>&1 || rf_die "redis-cli not found; install it (apt-get install redis-tools)"
  if ! command -v openssl >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      rf_log "openssl missing: installing it with apt-get"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssl >&2 || rf_die "apt-get install openssl failed"
    else
      rf_die "openssl not found; install it (apt-get install openssl)"
    fi
  fi
}

# ---------------------------------------------------------------- secrets and certificates

secret() { # <name>: the password in $SDIR/<name>.password, made once
  local f="$SDIR/$1.password"
  if [ ! -s "$f" ]; then (umask 077; openssl rand -hex 24 >"$f.tmp" && mv "$f.tmp" "$f"); fi
  cat "$f"
}

make_certs() {
  [ -s "$TLS/server.crt" ] && [ -s "$TLS/client.crt" ] && [ -s "$TLS/other-ca.crt" ] && return 0
  rf_log "generating a CA, server and client certificates under $TLS"
  mkdir -p "$TLS"; chmod 700 "$TLS"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  (
    cd "$TLS"
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 3650 -subj "/CN=redfence dev CA" 2>/dev/null
    openssl req -x509 "${ec[@]}" -keyout other-ca.key -out other-ca.crt -days 3650 -subj "/CN=redfence other CA" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
    openssl req "${ec[@]}" -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile server.ext -out server.crt 2>/dev/null
    openssl req "${ec[@]}" -keyout client.key -out client.csr -subj "/CN=redfence" 2>/dev/null
    openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out client.crt 2>/dev/null
    rm -f ./*.csr ./*.srl server.ext
    chmod 600 ./*.key
  )
}

# ---------------------------------------------------------------- instances

dir_of() { echo "$SDIR/$1"; } # <name>
pid_of() { # <name>: the pid of our live server, else fails
  local f pid; f="$(dir_of "$1")/redis.pid"
  [ -f "$f" ] || return 1
  pid=$(cat "$f" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q redis-server || return 1
  echo "$pid"
}

# scli <port> <tls|plain|sentinel> args...: redis-cli as admin (the password through the environment, not argv)
scli() {
  local p=$1 how=$2; shift 2
  case $how in
    tls) REDISCLI_AUTH=$(secret admin) timeout 5 "$REDIS_CLI_BIN" -h "$HOST" -p "$p" --user admin --tls --cacert "$TLS/ca.crt" "$@" 2>/dev/null ;;
    plain) REDISCLI_AUTH=$(secret admin) timeout 5 "$REDIS_CLI_BIN" -h "$HOST" -p "$p" --user admin "$@" 2>/dev/null ;;
    sentinel) REDISCLI_AUTH=$(secret sentinel) timeout 5 "$REDIS_CLI_BIN" -h "$HOST" -p "$p" "$@" 2>/dev/null ;;
  esac
}

common_conf() { # <name> <port> <tls|plain>
  local d; d=$(dir_of "$1")
  echo "# generated by $SELF"
  echo "bind $HOST"
  echo "daemonize yes"
  echo "pidfile $d/redis.pid"
  echo "logfile $d/redis.log"
  echo "dir $d"
  echo "maxmemory-policy noeviction"
  echo "save \"\""
  echo "appendonly no"
  echo "repl-diskless-sync yes"
  echo "repl-diskless-sync-delay 0"
  if [ "$3" = tls ]; then
    echo "port 0"
    echo "tls-port $2"
    echo "tls-cert-file $TLS/server.crt"
    echo "tls-key-file $TLS/server.key"
    echo "tls-ca-cert-file $TLS/ca.crt"
    echo "tls-auth-clients optional"
    echo "tls-replication yes"
  else
    echo "port $2"
  fi
  echo "user default off"
  echo "user admin on >$(secret admin) ~* &* +@all"
  echo "user redfence on >$(secret redfence) $RF_ACL"
  echo "masteruser admin"
  echo "masterauth $(secret admin)"
}

write_conf() { # <name> <port> <tls|plain> [extra lines...]
  local name=$1 port=$2 how=$3 d; shift 3; d=$(dir_of "$name")
  mkdir -p "$d"; chmod 700 "$d"
  { common_conf "$name" "$port" "$how"; for l in "$@"; do echo "$l"; done; } >"$d/redis.conf.tmp"
  chmod 600 "$d/redis.conf.tmp"; mv "$d/redis.conf.tmp" "$d/redis.conf"
}

launch() { # <name> <port> [--sentinel]: start from its config unless running (does not wait)
  local name=$1 port=$2 out d; d=$(dir_of "$name")
  pid_of "$name" >/dev/null && return 0
  rf_port_open "$port" && rf_die "port $port (for $name) is in use by another process"
  rm -f "$d/redis.pid"
  out=$("$REDIS_SERVER_BIN" "$d/redis.conf" "${@:3}" 2>&1 8>&- 9>&-) || { tail -n 20 "$d/redis.log" >&2 || true; rf_die "$name failed to start: $out"; }
}

pong() { [ "$(scli "$1" "$2" PING | tr -d '\r')" = PONG ]; } # <port> <how>
wait_pong() { # <name> <port> <how>
  rf_wait_until "$READY_TIMEOUT" "$1 on $2 answers PING" pong "$2" "$3" || { tail -n 20 "$(dir_of "$1")/redis.log" >&2 || true; rf_die "$1 on $2 is not ready"; }
}

# ---------------------------------------------------------------- groups

up_tls() {
  if ! pid_of "tls-$TLS_PORT" >/dev/null; then write_conf "tls-$TLS_PORT" "$TLS_PORT" tls; launch "tls-$TLS_PORT" "$TLS_PORT"; fi
  wait_pong "tls-$TLS_PORT" "$TLS_PORT" tls
}

cluster_ok() {
  local p ci
  for p in "${TLS_CLUSTER_PORTS[@]}"; do
    ci=$(scli "$p" tls CLUSTER INFO | tr -d '\r')
    grep -qx 'cluster_state:ok' <<<"$ci" && grep -qx 'cluster_slots_ok:16384' <<<"$ci" && grep -qx 'cluster_known_nodes:6' <<<"$ci" || return 1
  done
}

up_tls_cluster() {
  local p fresh=0 seeds=()
  for p in "${TLS_CLUSTER_PORTS[@]}"; do
    if ! pid_of "cluster-$p" >/dev/null; then
      write_conf "cluster-$p" "$p" tls "cluster-enabled yes" "tls-cluster yes" "cluster-config-file $(dir_of "cluster-$p")/nodes.conf" \
        "cluster-node-timeout 2000" "cluster-replica-validity-factor 0"
      launch "cluster-$p" "$p"
    fi
  done
  for p in "${TLS_CLUSTER_PORTS[@]}"; do
    wait_pong "cluster-$p" "$p" tls
    [ "$(scli "$p" tls CLUSTER INFO | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')" = 1 ] && fresh=$((fresh + 1))
    seeds+=("$HOST:$p")
  done
  if [ "$fresh" = 6 ]; then
    rf_log "creating the TLS cluster on ${TLS_CLUSTER_PORTS[*]}"
    REDISCLI_AUTH=$(secret admin) timeout 120 "$REDIS_CLI_BIN" --user admin --tls --cacert "$TLS/ca.crt" \
      --cluster create "${seeds[@]}" --cluster-replicas 1 --cluster-yes >"$SDIR/cluster-create.log" 2>&1 8>&- 9>&- ||
      { tail -n 30 "$SDIR/cluster-create.log" >&2; rf_die "redis-cli --cluster create failed"; }
  elif [ "$fresh" != 0 ]; then
    rf_die "the TLS cluster is half formed; run: $SELF down tls-cluster --wipe && $SELF up tls-cluster"
  fi
  rf_wait_until "$READY_TIMEOUT" "TLS cluster state ok on every node" cluster_ok || rf_die "the TLS cluster did not become healthy"
}

sentinels_agree() {
  local p m
  for p in "${SENTINEL_PORTS[@]}"; do
    m=$(scli "$p" sentinel SENTINEL MASTER "$MASTER_NAME" | tr -d '\r' | paste -sd' ')
    [[ $m =~ num-slaves\ 1( |$) ]] && [[ $m =~ num-other-sentinels\ 2( |$) ]] && [[ $m =~ flags\ master( |$) ]] || return 1
  done
}

up_sentinel() {
  local p i=0 running=0
  for p in "${SENTINEL_DATA_PORTS[@]}" "${SENTINEL_PORTS[@]}"; do pid_of "sentinel-$p" >/dev/null && running=$((running + 1)); done
  if [ "$running" = 0 ]; then # a fresh start: 16421 is the primary (a later failover may have swapped them)
    write_conf "sentinel-${SENTINEL_DATA_PORTS[0]}" "${SENTINEL_DATA_PORTS[0]}" plain "replica-announce-ip $HOST"
    write_conf "sentinel-${SENTINEL_DATA_PORTS[1]}" "${SENTINEL_DATA_PORTS[1]}" plain "replica-announce-ip $HOST" \
      "replicaof $HOST ${SENTINEL_DATA_PORTS[0]}"
    for p in "${SENTINEL_PORTS[@]}"; do
      local d; d=$(dir_of "sentinel-$p"); mkdir -p "$d"; chmod 700 "$d"
      {
        echo "port $p"; echo "bind $HOST"; echo "daemonize yes"; echo "pidfile $d/redis.pid"; echo "logfile $d/redis.log"; echo "dir $d"
        echo "requirepass $(secret sentinel)"
        echo "sentinel announce-ip $HOST"
        echo "sentinel monitor $MASTER_NAME $HOST ${SENTINEL_DATA_PORTS[0]} 2"
        echo "sentinel auth-user $MASTER_NAME admin"
        echo "sentinel auth-pass $MASTER_NAME $(secret admin)"
        echo "sentinel down-after-milliseconds $MASTER_NAME 2000"
        echo "sentinel failover-timeout $MASTER_NAME 10000"
        echo "sentinel parallel-syncs $MASTER_NAME 1"
      } >"$d/redis.conf"
      chmod 600 "$d/redis.conf"
    done
  fi
  for p in "${SENTINEL_DATA_PORTS[@]}"; do launch "sentinel-$p" "$p"; done
  for p in "${SENTINEL_DATA_PORTS[@]}"; do wait_pong "sentinel-$p" "$p" plain; done
  for p in "${SENTINEL_PORTS[@]}"; do launch "sentinel-$p" "$p" --sentinel; i=$((i + 1)); done
  for p in "${SENTINEL_PORTS[@]}"; do wait_pong "sentinel-$p" "$p" sentinel; done
  rf_wait_until "$READY_TIMEOUT" "3 sentinels agree on $MASTER_NAME with 1 replica" sentinels_agree || rf_die "the sentinels did not agree"
}

names_of() { # <group>: instance names
  case $1 in
    tls) echo "tls-$TLS_PORT" ;;
    tls-cluster) printf 'cluster-%s\n' "${TLS_CLUSTER_PORTS[@]}" ;;
    sentinel) printf 'sentinel-%s\n' "${SENTINEL_PORTS[@]}" "${SENTINEL_DATA_PORTS[@]}" ;;
  esac
}

cmd_down() { # <group> <wipe>
  local g n groups=("$1")
  [ "$1" = secure ] && groups=(tls tls-cluster sentinel)
  for g in "${groups[@]}"; do
    for n in $(names_of "$g"); do
      rf_stop_pidfile "$(dir_of "$n")/redis.pid" 10
      [ "$2" = yes ] && rm -rf -- "${SDIR:?}/$n"
    done
  done
  if [ "$2" = yes ] && [ "$1" = secure ]; then rm -rf -- "${SDIR:?}"; fi
  if [ "${2:-no}" = yes ]; then rf_log "down $1 (wiped)"; else rf_log "down $1"; fi
}

cmd_status() {
  local n port
  for n in $(names_of tls) $(names_of tls-cluster) $(names_of sentinel); do
    port=${n##*-}
    if pid_of "$n" >/dev/null; then printf '%-16s %-6s running\n' "$n" "$port"; else printf '%-16s %-6s stopped\n' "$n" "$port"; fi
  done
}

main() {
  local cmd=${1:-} wipe=no rest=() arg
  [ -n "$cmd" ] || usage
  shift
  for arg in "$@"; do
    case $arg in --wipe) wipe=yes ;; -h | --help) usage 0 ;; -*) rf_die "unknown option: $arg" ;; *) rest+=("$arg") ;; esac
  done
  local target=${rest[0]:-secure}
  case $target in tls | tls-cluster | sentinel | secure) ;; *) rf_die "unknown group: $target (tls|tls-cluster|sentinel|secure)" ;; esac
  mkdir -p "$SDIR"; chmod 700 "$SDIR"
  exec 8>"$SDIR/.lock"; flock 8 2>/dev/null || true
  case $cmd in
    up)
      need_tools; make_certs
      case $target in
        tls) up_tls ;;
        tls-cluster) up_tls_cluster ;;
        sentinel) up_sentinel ;;
        secure) up_tls; up_tls_cluster; up_sentinel ;;
      esac
      cmd_status ;;
    down) cmd_down "$target" "$wipe" ;;
    status) cmd_status ;;
    primary) scli "${SENTINEL_PORTS[0]}" sentinel SENTINEL GET-MASTER-ADDR-BY-NAME "$MASTER_NAME" | tr -d '\r' | paste -sd: ;;
    help) usage 0 ;;
    *) rf_log "unknown command: $cmd"; usage ;;
  esac
}

main "$@"
