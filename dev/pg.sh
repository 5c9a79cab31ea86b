#!/usr/bin/env bash
# dev/pg.sh - the PostgreSQL database for tests: a private server started from the installed binaries.
#
#   up      start the private server (initdb on first use), create database redfence_test (idempotent)
#   down    [--wipe]  stop the private server (fast shutdown); --wipe deletes its data
#   reset   drop (WITH FORCE) and recreate redfence_test
#   status  running? database present?
#   url     postgres://postgres@127.0.0.1:15432/redfence_test (or $DATABASE_URL)
#
# The private server: data and log in $RF_DEV_DIR/postgres/, port RF_PG_PORT (default 15432), listening
# on 127.0.0.1 only (no Unix socket), superuser postgres with trust authentication from 127.0.0.1 only.
# Binaries (initdb, pg_ctl, postgres, psql): PG_BINDIR, else initdb on PATH, else the newest
# /usr/lib/postgresql/<version>/bin; none there: 'up' installs the Debian package postgresql (apt-get).
# As root the server runs as the unprivileged user RF_PG_OS_USER (default postgres).
# The machine's own PostgreSQL server (e.g. on 5432), if any, is never used, started or stopped here.
# If DATABASE_URL is set, that database is the user's: 'up'/'status' only check that it connects,
# 'down' stops nothing, 'reset' refuses to drop it.
set -euo pipefail
# shellcheck source=dev/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PORT=${RF_PG_PORT:-15432}
HOST=127.0.0.1
DB=redfence_test
OS_USER=${RF_PG_OS_USER:-postgres}
PG_LIBDIR=${RF_PG_LIBDIR:-/usr/lib/postgresql}
WAIT=${RF_PG_WAIT_TIMEOUT:-30}
PDIR="$RF_DEV_DIR/postgres"
DATA="$PDIR/data"
LOG="$PDIR/postgres.log"
SELF="dev/pg.sh"
BIN=""

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

redact() { sed -E 's#(://[^:/@]+):[^@]*@#\1:***@#' <<<"$1"; }

# ---------------------------------------------------------------- the user's database (DATABASE_URL)

user_psql() {
  local p; p=$(command -v psql || true)
  [ -n "$p" ] || { find_bindir && p="$BIN/psql"; } || true
  [ -n "$p" ] && [ -x "$p" ] || rf_die "psql not found; install the PostgreSQL client (apt-get install postgresql-client)"
  "$p" -X "$DATABASE_URL" -tAc 'select 1'
}

check_url() {
  local err
  rf_wait_until "$WAIT" "DATABASE_URL to accept connections" user_psql ||
    { err=$(user_psql 2>&1 || true); rf_die "cannot connect with DATABASE_URL: $err"; }
}

# ---------------------------------------------------------------- binaries

has_bins() { [ -x "$1/initdb" ] && [ -x "$1/pg_ctl" ] && [ -x "$1/postgres" ]; }

# find_bindir: sets BIN to a directory holding initdb, pg_ctl and postgres; fails when there is none.
find_bindir() {
  if [ -n "${PG_BINDIR:-}" ]; then
    has_bins "$PG_BINDIR" || rf_die "PG_BINDIR=$PG_BINDIR holds no initdb, pg_ctl and postgres"
    BIN=$PG_BINDIR; return 0
  fi
  local found d
  if found=$(command -v initdb 2>/dev/null); then
    d=$(dirname "$(readlink -f "$found")")
    if has_bins "$d"; then BIN=$d; return 0; fi
  fi
  for d in $(ls -d "$PG_LIBDIR"/*/bin 2>/dev/null | sort -V -r); do
    if has_bins "$d"; then BIN=$d; return 0; fi
  done
  return 1
}

install_pg() {
  local sudo=() log="$PDIR/apt-get.log"
  command -v apt-get >/dev/null 2>&1 ||
    rf_die "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found, and no apt-get to install them: install PostgreSQL and put its bin directory on PATH (or set PG_BINDIR)"
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo -n)
    else rf_die "PostgreSQL server binaries not found; install them: sudo apt-get install postgresql (or set PG_BINDIR)"; fi
  fi
  rf_log "PostgreSQL server binaries not found: installing the Debian package postgresql (apt-get update; apt-get install postgresql)"
  rf_log "(a server the package sets up for the machine is left alone: the tests use their own on port $PORT)"
  if ! { "${sudo[@]}" apt-get update -q && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q postgresql; } >"$log" 2>&1; then
    rf_log "apt-get failed; last 20 lines of $log:"; tail -n 20 "$log" >&2
    exit 1
  fi
  find_bindir || rf_die "installed postgresql, but found no initdb/pg_ctl/postgres on PATH or in $PG_LIBDIR/*/bin"
}

need_bins() { find_bindir || install_pg; }

psql_bin() { if [ -x "$BIN/psql" ]; then echo "$BIN/psql"; else command -v psql || rf_die "psql not found next to $BIN/initdb or on PATH"; fi; }

# ---------------------------------------------------------------- the private server

# as_server <cmd...>: runs a server binary as the unprivileged user when we are root (initdb and
# postgres refuse to run as root), from / (its home may not be readable).
as_server() {
  if [ "$(id -u)" = 0 ]; then (cd / && "$RUNUSER" -u "$OS_USER" -- "$@"); else "$@"; fi
}
RUNUSER=$(command -v runuser || ls /usr/sbin/runuser /sbin/runuser 2>/dev/null | head -n1 || true)

check_os_user() {
  [ "$(id -u)" = 0 ] || return 0
  id "$OS_USER" >/dev/null 2>&1 ||
    rf_die "running as root: the server needs an unprivileged user, and '$OS_USER' does not exist (create it, or set RF_PG_OS_USER)"
  [ -n "$RUNUSER" ] || rf_die "running as root: runuser (util-linux) is needed to start the server as '$OS_USER'"
  mkdir -p "$PDIR"
  chown "$OS_USER" "$PDIR"
  as_server test -w "$PDIR" ||
    rf_die "user '$OS_USER' cannot reach $PDIR (a parent directory is not searchable by others); move the checkout or set RF_DEV_DIR"
}

# admin <sql...>: psql as postgres against the private server's maintenance database
admin() {
  env -u PGHOST -u PGHOSTADDR -u PGPORT -u PGUSER -u PGDATABASE -u PGSERVICE -u PGOPTIONS \
    "$(psql_bin)" -X -q -v ON_ERROR_STOP=1 -tA "postgresql://postgres@$HOST:$PORT/postgres" "$@"
}

answers() { admin -c 'select 1' >/dev/null 2>&1; }

# our_pid: the postmaster of OUR data directory (its pid file, a live process started on it), else fails.
our_pid() {
  local f="$DATA/postmaster.pid" pid
  [ -f "$f" ] || return 1
  pid=$(head -n1 "$f" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DATA" || return 1
  echo "$pid"
}

# the port our server was started on (line 4 of its pid file)
our_port() { sed -n 4p "$DATA/postmaster.pid" 2>/dev/null; }

port_holder() {
  local line; line=$(ss -ltnpH "sport = :$1" 2>/dev/null | head -n1 || true)
  if [[ $line =~ \(\"([^\"]+)\",pid=([0-9]+) ]]; then echo "pid ${BASH_REMATCH[2]} (${BASH_REMATCH[1]})"; else echo "an unknown process"; fi
}

# state: running | stopped | foreign (the port is held by something that is not our server)
state() {
  if our_pid >/dev/null; then echo running
  elif rf_port_open "$PORT"; then echo foreign
  else echo stopped
  fi
}

init_data() {
  [ -f "$DATA/PG_VERSION" ] && return 0
  if [ -e "$DATA" ]; then
    rf_die "$DATA exists but holds no database cluster (an interrupted initdb?); run: $SELF down --wipe && $SELF up"
  fi
  rf_log "initdb $DATA (superuser postgres, trust from $HOST only)"
  if ! as_server "$BIN/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --no-locale >"$PDIR/initdb.log" 2>&1; then
    rf_log "initdb failed; last 20 lines of $PDIR/initdb.log:"; tail -n 20 "$PDIR/initdb.log" >&2
    exit 1
  fi
  echo "host all all $HOST/32 trust" >"$DATA/pg_hba.conf"
  echo "include 'redfence.conf'" >>"$DATA/postgresql.conf"
}

write_conf() {
  {
    echo "# generated by $SELF, rewritten by every 'up'"
    echo "listen_addresses = '$HOST'"
    echo "port = $PORT"
    echo "unix_socket_directories = ''"
  } >"$DATA/redfence.conf"
  [ "$(id -u)" != 0 ] || chown "$OS_USER" "$DATA/redfence.conf"
}

start_server() {
  case $(state) in
    running)
      if [ "$(our_port)" != "$PORT" ]; then
        rf_die "the private server runs on port $(our_port), not $PORT (RF_PG_PORT); run: $SELF down && $SELF up"
      fi
      rf_log "PostgreSQL (private) already running on $HOST:$PORT"
      return 0 ;;
    foreign)
      rf_die "port $PORT is in use by $(port_holder "$PORT"), not by this checkout's server; free it or set RF_PG_PORT to another port" ;;
  esac
  check_os_user
  init_data
  write_conf
  rf_log "starting PostgreSQL (private) on $HOST:$PORT, data $DATA"
  if ! as_server "$BIN/pg_ctl" start -D "$DATA" -l "$LOG" -w -t "$WAIT" -s 9>&-; then
    rf_log "pg_ctl start failed; last 30 lines of $LOG:"; tail -n 30 "$LOG" >&2 || true
    exit 1
  fi
  rf_wait_until "$WAIT" "PostgreSQL on $HOST:$PORT to accept connections" answers ||
    rf_die "PostgreSQL started but does not accept connections on $HOST:$PORT (see $LOG)"
}

db_exists() { [ "$(admin -c "select 1 from pg_database where datname = '$DB'")" = 1 ]; }

create_db() {
  local err
  if ! err=$(admin -c "create database $DB" 2>&1); then
    db_exists || rf_die "could not create database $DB: $err" # a concurrent 'up' may have won the race
  fi
}

lock() { mkdir -p "$PDIR"; exec 9>"$PDIR/.lock"; flock 9 2>/dev/null || true; }

# ---------------------------------------------------------------- commands

cmd_up() {
  if [ -n "${DATABASE_URL:-}" ]; then
    check_url
    rf_log "DATABASE_URL is set: using $(redact "$DATABASE_URL") (connects; nothing started or created)"
    return 0
  fi
  lock
  need_bins
  start_server
  if db_exists; then rf_log "database $DB already exists"
  else create_db; rf_log "created database $DB"; fi
  cmd_url
}

cmd_down() {
  local wipe=$1
  if [ -n "${DATABASE_URL:-}" ]; then rf_log "DATABASE_URL is set: that database is yours, nothing to stop"; return 0; fi
  lock
  if our_pid >/dev/null; then
    find_bindir || rf_die "the private server runs, but its pg_ctl is gone (set PG_BINDIR)"
    as_server "$BIN/pg_ctl" stop -D "$DATA" -m fast -w -t "$WAIT" -s ||
      rf_die "pg_ctl stop failed (see $LOG)"
    rf_log "stopped PostgreSQL (private, port $PORT)"
  else
    rf_log "PostgreSQL (private) is not running"
  fi
  if [ "$wipe" = yes ]; then
    case $DATA in "$RF_DEV_DIR"/?*) rm -rf -- "$DATA" ;; *) rf_die "refusing to delete '$DATA'" ;; esac
    rf_log "deleted $DATA"
  fi
}

cmd_reset() {
  [ -z "${DATABASE_URL:-}" ] || rf_die "DATABASE_URL is set: that database is yours, reset will not drop it"
  cmd_up >/dev/null
  admin -c "drop database if exists $DB with (force)" >/dev/null
  create_db
  rf_log "dropped and recreated database $DB"
}

cmd_status() {
  if [ -n "${DATABASE_URL:-}" ]; then
    if user_psql >/dev/null 2>&1; then
      echo "postgres  DATABASE_URL  reachable  $(redact "$DATABASE_URL")"
    else
      echo "postgres  DATABASE_URL  unreachable  $(redact "$DATABASE_URL")"; return 1
    fi
    return 0
  fi
  case $(state) in
    running) ;;
    foreign) echo "postgres  $HOST:$PORT  port taken by $(port_holder "$PORT"), not this checkout's server"; return 1 ;;
    *) echo "postgres  $HOST:$PORT  stopped  (start: $SELF up)"; return 1 ;;
  esac
  find_bindir || true
  local ver; ver=$(admin -c 'show server_version' 2>/dev/null || echo "?")
  if db_exists 2>/dev/null; then
    echo "postgres  $HOST:$PORT  running (server $ver, pid $(our_pid))  database $DB present  $(cmd_url)"
  else
    echo "postgres  $HOST:$PORT  running (server $ver, pid $(our_pid))  database $DB missing (run: $SELF up)"
  fi
}

cmd_url() {
  if [ -n "${DATABASE_URL:-}" ]; then echo "$DATABASE_URL"; else echo "postgres://postgres@$HOST:$PORT/$DB"; fi
}

wipe=no
for arg in "${@:2}"; do
  case $arg in
    --wipe) wipe=yes ;;
    -h | --help) usage 0 ;;
    *) rf_die "unknown argument: $arg" ;;
  esac
done
case ${1:-} in
  up) cmd_up ;;
  down) cmd_down "$wipe" ;;
  reset) cmd_reset ;;
  status) cmd_status ;;
  url) cmd_url ;;
  help | -h | --help) usage 0 ;;
  *) usage ;;
esac
