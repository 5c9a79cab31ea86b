#!/usr/bin/env bash
# dev/redis.sh - real redis-server instances for tests, on non-default ports.
# (Over 400 lines: one file owns every instance kind's start, stop and readiness so dev/up and CI have a
# single entry point; the TLS/ACL/Sentinel instances live in dev/redis-secure.sh.)
#
#   up     [standalone|replica|cluster|all] [--aof]   start (idempotent), wait until ready
#   down   [standalone|replica|cluster|all] [--wipe]  SHUTDOWN NOSAVE, wait for exit; --wipe deletes data
#   up|down|status tls|tls-cluster|sentinel|secure    the TLS/ACL/Sentinel instances (dev/redis-secure.sh);
#                                                     `all` includes them (secure) unless RF_REDIS_SECURE=0
#   status                                            one line per instance
#   stop <port> | kill <port> | start <port>          graceful stop / SIGKILL / restart one instance
#   pause <port> | resume <port>                      SIGSTOP / SIGCONT
#   url standalone|replica                            redis://127.0.0.1:16379 / :16380
#   nodes                                             cluster seed list 127.0.0.1:17001,...
#
# Instances (all bound to 127.0.0.1, maxmemory-policy noeviction, no RDB snapshots):
#   standalone  16379   AOF off unless REDIS_AOF=yes or --aof (appendonly yes, appendfsync everysec)
#   replica     16380   replicaof 127.0.0.1 16379
#   cluster     17001..17006, 3 masters + 3 replicas, cluster-node-timeout 2000 (bus ports 27001..27006)
# Data, config, pidfile and log of each: $RF_DEV_DIR/redis/<name>/ (name: standalone, replica, cluster-17001 ...).
# If REDIS_URL is set, standalone/replica are the user's and are never started or stopped here;
# if REDIS_CLUSTER_NODES is set, the same holds for the cluster.
set -euo pipefail
# shellcheck source=dev/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REDIS_SERVER_BIN=${REDIS_SERVER_BIN:-redis-server}
REDIS_CLI_BIN=${REDIS_CLI_BIN:-redis-cli}
RDIR="$RF_DEV_DIR/redis"
HOST=127.0.0.1
STANDALONE_PORT=16379
REPLICA_PORT=16380
CLUSTER_PORTS=(17001 17002 17003 17004 17005 17006)
ALL_PORTS=("$STANDALONE_PORT" "$REPLICA_PORT" "${CLUSTER_PORTS[@]}")
READY_TIMEOUT=${RF_REDIS_READY_TIMEOUT:-60}
SELF="dev/redis.sh"

usage() { sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

# ---------------------------------------------------------------- helpers

need_redis() {
  command -v "$REDIS_SERVER_BIN" >/dev/null 2>&1 ||
    rf_die "redis-server not found (looked for '$REDIS_SERVER_BIN' on PATH); install it (apt-get install redis-server) or set REDIS_SERVER_BIN"
  command -v "$REDIS_CLI_BIN" >/dev/null 2>&1 ||
    rf_die "redis-cli not found (looked for '$REDIS_CLI_BIN' on PATH); install it (apt-get install redis-tools) or set REDIS_CLI_BIN"
}

is_cluster_port() { case $1 in 1700[1-6]) return 0 ;; *) return 1 ;; esac; }

name_of() {
  case $1 in
    "$STANDALONE_PORT") echo standalone ;;
    "$REPLICA_PORT") echo replica ;;
    1700[1-6]) echo "cluster-$1" ;;
    *) rf_die "port $1 is not one of ours (${ALL_PORTS[*]})" ;;
  esac
}

dir_of() { echo "$RDIR/$(name_of "$1")"; }
conf_of() { echo "$(dir_of "$1")/redis.conf"; }
pidfile_of() { echo "$(dir_of "$1")/redis.pid"; }
log_of() { echo "$(dir_of "$1")/redis.log"; }

# cli <port> args... : redis-cli that can never hang (paused nodes, dead sockets).
cli() { local p=$1; shift; timeout 3 "$REDIS_CLI_BIN" -h "$HOST" -p "$p" "$@" 2>/dev/null; }

# info_field <port> <section> <field>
info_field() { cli "$1" INFO "$2" | tr -d '\r' | sed -n "s/^$3://p"; }
cinfo() { cli "$1" CLUSTER INFO | tr -d '\r' | sed -n "s/^$2://p"; }

# proc_state <pid>: the kernel state letter (R S D T Z ...) or nothing when gone.
proc_state() { [ -r "/proc/$1/stat" ] && sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null || true; }

# A pid is "alive" unless gone or a zombie (PID 1 here may not reap daemonized children).
pid_alive() { local s; s=$(proc_state "$1"); [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]; }
pid_gone() { ! pid_alive "$1"; }

# our_pid <port>: the pid of OUR redis-server on that port (pidfile + process title check), else fails.
our_pid() {
  local f pid; f=$(pidfile_of "$1")
  [ -f "$f" ] || return 1
  pid=$(cat "$f" 2>/dev/null) || return 1
  [ -n "$pid" ] && pid_alive "$pid" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "redis-server.*:$1\b" || return 1
  echo "$pid"
}

# port_holder <port>: "pid=N (cmd)" of whatever listens there, best effort.
port_holder() {
  local line; line=$(ss -ltnpH "sport = :$1" 2>/dev/null | head -n1 || true)
  if [[ $line =~ \(\"([^\"]+)\",pid=([0-9]+) ]]; then echo "pid ${BASH_REMATCH[2]} (${BASH_REMATCH[1]})"; else echo "unknown process"; fi
}

# state <port>: running | paused | stopped | dead (stale pidfile) | foreign (port held by someone else)
state() {
  local pid
  if pid=$(our_pid "$1"); then
    if [ "$(proc_state "$pid")" = T ]; then echo paused; else echo running; fi
  elif rf_port_open "$1"; then echo foreign
  elif [ -f "$(pidfile_of "$1")" ]; then echo dead
  else echo stopped
  fi
}

running_cluster_ports() {
  local p; for p in "${CLUSTER_PORTS[@]}"; do [ "$(state "$p")" = running ] && echo "$p"; done; return 0
}

fail_start() { # <port> <message>
  local log; log=$(log_of "$1")
  rf_log "$2"
  if [ -s "$log" ]; then rf_log "last 30 lines of $log:"; tail -n 30 "$log" >&2; fi
  exit 1
}

user_owns_standalone() { [ -n "${REDIS_URL:-}" ]; }
user_owns_cluster() { [ -n "${REDIS_CLUSTER_NODES:-}" ]; }
user_owned_port() { # <port>: true when that instance belongs to the user (env set)
  if is_cluster_port "$1"; then user_owns_cluster; else user_owns_standalone; fi
}

# ---------------------------------------------------------------- config

aof_wanted() { case "${REDIS_AOF:-no}" in yes | 1 | true | on) return 0 ;; *) return 1 ;; esac; }

write_conf() { # <port>
  local port=$1 dir; dir=$(dir_of "$port")
  mkdir -p "$dir"
  {
    echo "# generated by $SELF - rewritten by 'up', reused as is by 'start'"
    echo "port $port"
    echo "bind $HOST"
    echo "daemonize yes"
    echo "pidfile $dir/redis.pid"
    echo "logfile $dir/redis.log"
    echo "dir $dir"
    echo "loglevel notice"
    echo "maxmemory-policy noeviction"
    echo "save \"\""
    echo "repl-diskless-sync yes"
    echo "repl-diskless-sync-delay 0"
    echo "enable-debug-command local"
    if [ "$port" = "$STANDALONE_PORT" ] && aof_wanted; then
      echo "appendonly yes"
      echo "appendfsync everysec"
    else
      echo "appendonly no"
    fi
    if [ "$port" = "$REPLICA_PORT" ]; then
      echo "replicaof $HOST $STANDALONE_PORT"
    fi
    if is_cluster_port "$port"; then
      echo "cluster-enabled yes"
      echo "cluster-config-file $dir/nodes.conf"
      echo "cluster-node-timeout 2000"
      # replicas always try to fail over, however long their primary was away (fault tests)
      echo "cluster-replica-validity-factor 0"
    fi
  } >"$dir/redis.conf.tmp"
  mv "$dir/redis.conf.tmp" "$dir/redis.conf"
}

# ---------------------------------------------------------------- start / wait

# launch <port>: start the instance from its config file unless it already runs. Does not wait.
launch() {
  local port=$1 st out conf pidf
  st=$(state "$port")
  case $st in
    running) return 0 ;;
    paused) rf_die "$(name_of "$port") (port $port) is paused (SIGSTOP); run: $SELF resume $port" ;;
    foreign) rf_die "port $port is already in use by a process that is not ours: $(port_holder "$port") - free it, or point the tests at it with REDIS_URL / REDIS_CLUSTER_NODES" ;;
  esac
  if is_cluster_port "$port" && rf_port_open $((port + 10000)); then
    rf_die "cluster bus port $((port + 10000)) (for node $port) is in use by $(port_holder $((port + 10000)))"
  fi
  conf=$(conf_of "$port"); pidf=$(pidfile_of "$port")
  [ -f "$conf" ] || rf_die "no config for port $port ($conf); run: $SELF up"
  rm -f "$pidf"
  if ! out=$("$REDIS_SERVER_BIN" "$conf" 2>&1 9>&-); then
    fail_start "$port" "redis-server failed to start on port $port: $out"
  fi
}

# wait_ping <port>: until PONG; fails fast when the process died.
wait_ping() {
  local port=$1 pidf deadline pid
  pidf=$(pidfile_of "$port"); deadline=$(($(date +%s) + READY_TIMEOUT))
  while :; do
    [ "$(cli "$port" PING)" = PONG ] && our_pid "$port" >/dev/null && return 0
    if [ -f "$pidf" ]; then
      pid=$(cat "$pidf" 2>/dev/null || true)
      if [ -n "$pid" ] && ! pid_alive "$pid"; then fail_start "$port" "redis-server on port $port exited during startup"; fi
    fi
    [ "$(date +%s)" -lt "$deadline" ] || fail_start "$port" "redis-server on port $port not answering PING after ${READY_TIMEOUT}s"
    sleep 0.1
  done
}

replica_link_up() { [ "$(info_field "$1" replication master_link_status)" = up ]; }

wait_replica_link() { # <port>
  rf_wait_until "$READY_TIMEOUT" "replica on port $1: master_link_status:up" replica_link_up "$1" ||
    fail_start "$1" "replica on port $1 did not sync with its primary"
}

# normalized CLUSTER NODES view: id addr flags(without myself/pfail noise) master slots - sorted
cluster_view() {
  cli "$1" CLUSTER NODES | tr -d '\r' | awk 'NF>=8 {
    f=$3; gsub(/myself,?/, "", f)
    s=$1" "$2" "f" "$4; for (i=9; i<=NF; i++) s=s" "$i; print s }' | sort
}

# cluster_healthy [quiet]: every running cluster node says cluster_state:ok with all 16384 slots
# assigned and ok, all nodes have the identical view, no running node is flagged fail/pfail,
# every running replica has its link to the primary up.
cluster_healthy() {
  local ports p first="" v ids id n=0
  ports=$(running_cluster_ports)
  [ -n "$ports" ] || return 1
  ids=""
  local ci
  for p in $ports; do
    ci=$(cli "$p" CLUSTER INFO | tr -d '\r')
    grep -qx 'cluster_state:ok' <<<"$ci" || return 1
    grep -qx 'cluster_slots_assigned:16384' <<<"$ci" || return 1
    grep -qx 'cluster_slots_ok:16384' <<<"$ci" || return 1
    v=$(cluster_view "$p"); [ -n "$v" ] || return 1
    if [ -z "$first" ]; then first=$v; elif [ "$v" != "$first" ]; then return 1; fi
    id=$(cli "$p" CLUSTER MYID | tr -d '\r'); ids="$ids $id"
    n=$((n + 1))
  done
  for id in $ids; do
    grep "^$id " <<<"$first" | grep -Eq ' [^ ]*(fail|handshake|noaddr)' && return 1
  done
  for p in $ports; do
    if [ "$(info_field "$p" replication role)" = slave ]; then replica_link_up "$p" || return 1; fi
  done
  return 0
}

cluster_diag() {
  local p
  for p in $(running_cluster_ports); do
    rf_log "node $p: cluster_state=$(cinfo "$p" cluster_state) slots_assigned=$(cinfo "$p" cluster_slots_assigned) known_nodes=$(cinfo "$p" cluster_known_nodes)"
  done
  p=$(running_cluster_ports); p=${p%%$'\n'*}
  if [ -n "$p" ]; then rf_log "CLUSTER NODES as seen by $p:"; cli "$p" CLUSTER NODES >&2 || true; fi
}

wait_cluster_healthy() {
  if ! rf_wait_until "$READY_TIMEOUT" "cluster_state:ok on every node, all slots assigned, nodes agree" cluster_healthy; then
    cluster_diag
    rf_die "cluster did not become healthy"
  fi
}

# ---------------------------------------------------------------- up

up_standalone() {
  if user_owns_standalone; then rf_log "REDIS_URL is set ($REDIS_URL): standalone/replica are yours, not starting them"; return 0; fi
  local port=$STANDALONE_PORT want have
  if [ "$(state "$port")" = running ]; then
    want=no; aof_wanted && want=yes
    have=$(cli "$port" CONFIG GET appendonly | sed -n 2p | tr -d '\r')
    if [ "$have" != "$want" ]; then
      rf_log "standalone: switching appendonly $have -> $want on the running server"
      if [ "$want" = yes ]; then cli "$port" CONFIG SET appendfsync everysec >/dev/null; fi
      [ "$(cli "$port" CONFIG SET appendonly "$want" | tr -d '\r')" = OK ] || rf_die "CONFIG SET appendonly $want failed on $port"
    fi
    write_conf "$port"
    rf_log "standalone already running on $port (appendonly $want)"
    return 0
  fi
  write_conf "$port"
  launch "$port"
}

up_replica_launch() {
  user_owns_standalone && return 0
  [ "$(state "$REPLICA_PORT")" = running ] && { rf_log "replica already running on $REPLICA_PORT"; return 0; }
  write_conf "$REPLICA_PORT"
  launch "$REPLICA_PORT"
}

up_cluster_launch() {
  if user_owns_cluster; then rf_log "REDIS_CLUSTER_NODES is set ($REDIS_CLUSTER_NODES): the cluster is yours, not starting it"; return 0; fi
  local p
  for p in "${CLUSTER_PORTS[@]}"; do
    if [ "$(state "$p")" != running ]; then write_conf "$p"; fi
  done
  for p in "${CLUSTER_PORTS[@]}"; do launch "$p"; done
}

up_cluster_finish() {
  user_owns_cluster && return 0
  local p fresh=0 formed=0 known assigned seeds=()
  for p in "${CLUSTER_PORTS[@]}"; do wait_ping "$p"; done
  for p in "${CLUSTER_PORTS[@]}"; do
    known=$(cinfo "$p" cluster_known_nodes); assigned=$(cinfo "$p" cluster_slots_assigned)
    if [ "$known" = 1 ] && [ "$assigned" = 0 ]; then fresh=$((fresh + 1)); else formed=$((formed + 1)); fi
    seeds+=("$HOST:$p")
  done
  if [ "$fresh" = 6 ]; then
    rf_log "creating cluster (3 masters + 3 replicas) on ${CLUSTER_PORTS[*]}"
    local clog="$RDIR/cluster-create.log"
    if ! timeout 120 "$REDIS_CLI_BIN" --cluster create "${seeds[@]}" --cluster-replicas 1 --cluster-yes >"$clog" 2>&1 9>&-; then
      rf_log "redis-cli --cluster create failed; its output:"; tail -n 30 "$clog" >&2
      exit 1
    fi
  elif [ "$fresh" != 0 ]; then
    cluster_diag
    rf_die "cluster is half formed ($formed nodes know a cluster, $fresh are empty, e.g. a data dir was deleted); run: $SELF down cluster --wipe && $SELF up cluster"
  fi
  wait_cluster_healthy
}

cmd_up() {
  local target=$1
  need_redis
  mkdir -p "$RDIR"
  case $target in
    standalone)
      up_standalone
      user_owns_standalone || wait_ping "$STANDALONE_PORT" ;;
    replica)
      up_standalone
      if ! user_owns_standalone; then
        wait_ping "$STANDALONE_PORT"; up_replica_launch; wait_ping "$REPLICA_PORT"; wait_replica_link "$REPLICA_PORT"
      fi ;;
    cluster)
      up_cluster_launch; up_cluster_finish ;;
    all)
      # launch everything first, then wait: the cluster forms while the replica syncs
      up_standalone; up_cluster_launch
      if ! user_owns_standalone; then wait_ping "$STANDALONE_PORT"; up_replica_launch; fi
      up_cluster_finish
      if ! user_owns_standalone; then wait_ping "$REPLICA_PORT"; wait_replica_link "$REPLICA_PORT"; fi ;;
  esac
  cmd_status "$target"
}

# ---------------------------------------------------------------- stop

# stop_ports <graceful|nosave> ports... : shut them down in parallel, wait for exit.
stop_ports() {
  local how=$1; shift
  local p st pid pids=() ports=()
  for p in "$@"; do
    st=$(state "$p")
    case $st in
      running | paused)
        pid=$(our_pid "$p")
        [ "$st" = paused ] && kill -CONT "$pid" 2>/dev/null
        if [ "$how" = graceful ]; then
          cli "$p" SHUTDOWN >/dev/null &
        else
          cli "$p" SHUTDOWN NOSAVE NOW >/dev/null &
        fi
        pids+=("$pid"); ports+=("$p") ;;
      dead) rm -f "$(pidfile_of "$p")" ;;
      foreign) rf_log "port $p is held by a foreign process ($(port_holder "$p")), leaving it alone" ;;
    esac
  done
  wait || true
  local i deadline=$(($(date +%s) + 15))
  for i in "${!pids[@]}"; do
    while pid_alive "${pids[$i]}"; do
      if [ "$(date +%s)" -ge "$deadline" ]; then
        rf_log "port ${ports[$i]} did not exit after SHUTDOWN; sending SIGTERM/SIGKILL"
        rf_stop_pidfile "$(pidfile_of "${ports[$i]}")" 10
        break
      fi
      sleep 0.05
    done
    rm -f "$(pidfile_of "${ports[$i]}")"
  done
}

wipe_ports() {
  local p d
  for p in "$@"; do
    d=$(dir_of "$p")
    case $d in "$RDIR"/?*) rm -rf -- "$d" ;; *) rf_die "refusing to delete '$d'" ;; esac
  done
}

cmd_down() {
  local target=$1 wipe=$2 ports=()
  case $target in
    standalone | replica | all)
      if user_owns_standalone; then
        rf_log "REDIS_URL is set: standalone/replica are yours, not stopping them"
      else
        case $target in
          standalone) ports+=("$STANDALONE_PORT") ;;
          replica) ports+=("$REPLICA_PORT") ;;
          all) ports+=("$REPLICA_PORT" "$STANDALONE_PORT") ;;
        esac
      fi ;;
  esac
  case $target in
    cluster | all)
      if user_owns_cluster; then rf_log "REDIS_CLUSTER_NODES is set: the cluster is yours, not stopping it"
      else ports+=("${CLUSTER_PORTS[@]}"); fi ;;
  esac
  [ ${#ports[@]} -gt 0 ] || return 0
  stop_ports nosave "${ports[@]}"
  if [ "$wipe" = yes ]; then
    wipe_ports "${ports[@]}"
    case $target in cluster | all) rm -f "$RDIR/cluster-create.log" ;; esac
    rf_log "down $target (data wiped)"
  else
    rf_log "down $target"
  fi
}

# ---------------------------------------------------------------- status

status_line() {
  local port=$1 name st role="-" extra="" pid
  name=$(name_of "$port")
  if user_owned_port "$port"; then
    if is_cluster_port "$port"; then extra="REDIS_CLUSTER_NODES is set"; else extra="REDIS_URL is set"; fi
    printf '%-14s %-6s %-8s %s\n' "$name" "$port" external "($extra: not managed here)"
    return 0
  fi
  st=$(state "$port")
  case $st in
    running)
      role=$(info_field "$port" replication role)
      [ "$role" = slave ] && role="replica"
      if is_cluster_port "$port"; then
        local me mid mport slots
        me=$(cli "$port" CLUSTER NODES | tr -d '\r' | awk '$3 ~ /myself/')
        if [ "$role" = replica ]; then
          mid=$(awk '{print $4}' <<<"$me")
          mport=$(cli "$port" CLUSTER NODES | tr -d '\r' | awk -v id="$mid" '$1==id {split($2,a,"[:@]"); print a[2]}')
          role="replica of ${mport:-?}"
        else
          slots=$(awk '{s=""; for (i=9;i<=NF;i++) s=s (s?",":"") $i; print s}' <<<"$me")
          role="master slots ${slots:-none}"
        fi
        extra="cluster_state:$(cinfo "$port" cluster_state)"
      elif [ "$role" = replica ]; then
        role="replica of $(info_field "$port" replication master_port)"
        extra="link $(info_field "$port" replication master_link_status)"
      fi
      [ "$port" = "$STANDALONE_PORT" ] && extra="appendonly $(cli "$port" CONFIG GET appendonly | sed -n 2p | tr -d '\r')" ;;
    paused) pid=$(our_pid "$port"); extra="pid $pid SIGSTOPped (resume: $SELF resume $port)" ;;
    dead) st=stopped; extra="(died or was killed: stale pidfile)" ;;
    foreign) extra="port taken by a process that is not ours: $(port_holder "$port")" ;;
  esac
  printf '%-14s %-6s %-8s %s%s\n' "$name" "$port" "$st" "$role" "${extra:+  $extra}"
}

cmd_status() {
  local target=${1:-all} p ports=()
  case $target in
    standalone) ports=("$STANDALONE_PORT") ;;
    replica) ports=("$STANDALONE_PORT" "$REPLICA_PORT") ;;
    cluster) ports=("${CLUSTER_PORTS[@]}") ;;
    all) ports=("${ALL_PORTS[@]}") ;;
  esac
  for p in "${ports[@]}"; do status_line "$p"; done
}

# ---------------------------------------------------------------- single-instance fault tools

check_managed_port() { # <port>
  [[ ${1:-} =~ ^[0-9]+$ ]] || rf_die "need a port: one of ${ALL_PORTS[*]}"
  name_of "$1" >/dev/null
  if user_owned_port "$1"; then rf_die "port $1 belongs to the user (REDIS_URL / REDIS_CLUSTER_NODES is set); not touching it"; fi
}

cmd_start() {
  local port=$1 n
  need_redis
  if [ "$(state "$port")" = running ]; then rf_log "$(name_of "$port") already running on $port"; fi
  launch "$port"
  wait_ping "$port"
  if [ "$port" = "$REPLICA_PORT" ]; then
    if [ "$(state "$STANDALONE_PORT")" = running ]; then wait_replica_link "$port"
    else rf_log "standalone $STANDALONE_PORT is not running; not waiting for the replica link"; fi
  elif is_cluster_port "$port"; then
    n=$(running_cluster_ports | wc -l)
    if [ "$n" = 6 ]; then wait_cluster_healthy
    else rf_log "only $n of 6 cluster nodes running; waited for PING only"; fi
  fi
  status_line "$port"
}

cmd_kill() {
  local port=$1 pid
  pid=$(our_pid "$port") || { rf_log "$(name_of "$port") on $port is not running (state: $(state "$port"))"; return 0; }
  kill -KILL "$pid"
  rf_wait_until 10 "pid $pid to vanish" pid_gone "$pid" ||
    rf_die "pid $pid still alive after SIGKILL"
  rm -f "$(pidfile_of "$port")"
  rf_log "killed $(name_of "$port") (pid $pid, SIGKILL)"
}

cmd_signal() { # <STOP|CONT> <port>
  local sig=$1 port=$2 pid
  pid=$(our_pid "$port") || rf_die "$(name_of "$port") on $port is not running (state: $(state "$port"))"
  kill -"$sig" "$pid"
  if [ "$sig" = STOP ]; then rf_log "paused $(name_of "$port") (pid $pid)"; else rf_log "resumed $(name_of "$port") (pid $pid)"; fi
}

# ---------------------------------------------------------------- main

lock() { mkdir -p "$RDIR"; exec 9>"$RDIR/.lock"; flock 9 2>/dev/null || true; }

secure_wanted() { [ "${RF_REDIS_SECURE:-1}" != 0 ]; }

main() {
  local cmd=${1:-} target="" wipe=no arg
  [ -n "$cmd" ] || usage
  case $cmd:${2:-} in
    up:tls* | up:sentinel | up:secure | down:tls* | down:sentinel | down:secure | status:tls* | status:sentinel | status:secure)
      exec bash "$(dirname "${BASH_SOURCE[0]}")/redis-secure.sh" "$@" ;;
  esac
  shift
  local rest=()
  for arg in "$@"; do
    case $arg in
      --aof) REDIS_AOF=yes ;;
      --wipe) wipe=yes ;;
      -h | --help) usage 0 ;;
      -*) rf_die "unknown option: $arg" ;;
      *) rest+=("$arg") ;;
    esac
  done
  target=${rest[0]:-}
  case $cmd in
    up | down | status)
      target=${target:-all}
      case $target in standalone | replica | cluster | all) ;; *) rf_die "unknown instance group: $target (standalone|replica|cluster|all)" ;; esac ;;
  esac
  case $cmd in
    up)
      lock; cmd_up "$target"
      if [ "$target" = all ] && secure_wanted; then exec 9>&-; bash "$(dirname "${BASH_SOURCE[0]}")/redis-secure.sh" up secure; fi ;;
    down)
      lock; cmd_down "$target" "$wipe"
      if [ "$target" = all ]; then
        local extra=(); [ "$wipe" = yes ] && extra=(--wipe)
        bash "$(dirname "${BASH_SOURCE[0]}")/redis-secure.sh" down secure "${extra[@]}"
      fi ;;
    status)
      cmd_status "$target"
      if [ "$target" = all ]; then bash "$(dirname "${BASH_SOURCE[0]}")/redis-secure.sh" status; fi ;;
    start) check_managed_port "$target"; lock; cmd_start "$target" ;;
    stop) check_managed_port "$target"; lock; stop_ports graceful "$target"; rf_log "stopped $(name_of "$target") ($target)" ;;
    kill) check_managed_port "$target"; lock; cmd_kill "$target" ;;
    pause) check_managed_port "$target"; cmd_signal STOP "$target" ;;
    resume) check_managed_port "$target"; cmd_signal CONT "$target" ;;
    url)
      case $target in
        standalone) echo "${REDIS_URL:-redis://$HOST:$STANDALONE_PORT}" ;;
        replica)
          user_owns_standalone && rf_die "REDIS_URL is set: there is no managed replica"
          echo "redis://$HOST:$REPLICA_PORT" ;;
        *) rf_die "usage: $SELF url standalone|replica" ;;
      esac ;;
    nodes)
      if user_owns_cluster; then echo "$REDIS_CLUSTER_NODES"
      else local IFS=,; echo "${CLUSTER_PORTS[*]/#/$HOST:}"; fi ;;
    help | -h | --help) usage 0 ;;
    *) rf_log "unknown command: $cmd"; usage ;;
  esac
}

main "$@"
