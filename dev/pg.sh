#!/usr/bin/env bash
# dev/pg.sh - the PostgreSQL database for tests, on the machine's own server (never started/stopped here).
#
#   up      wait until the server answers, create database redfence_test if missing (idempotent)
#   down    nothing to stop (the machine's server is never stopped here)
#   reset   drop (WITH FORCE) and recreate redfence_test
#   status  server reachable? database present?
#   url     postgres://postgres@127.0.0.1:5432/redfence_test (or $DATABASE_URL)
#
# Server: PGHOST (default 127.0.0.1), PGPORT (5432), PGUSER (postgres); PGPASSWORD etc. pass through.
# If DATABASE_URL is set, that database is the user's: 'up'/'status' only check that it connects,
# 'reset' refuses to drop it.
set -euo pipefail
# shellcheck source=dev/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

export PGHOST=${PGHOST:-127.0.0.1}
export PGPORT=${PGPORT:-5432}
export PGUSER=${PGUSER:-postgres}
export PGCONNECT_TIMEOUT=${PGCONNECT_TIMEOUT:-3}
DB=redfence_test
WAIT=${RF_PG_WAIT_TIMEOUT:-15}
SELF="dev/pg.sh"

usage() { sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

need_psql() {
  command -v psql >/dev/null 2>&1 || rf_die "psql not found; install the PostgreSQL client (apt-get install postgresql-client)"
}

# psql against the maintenance database, quiet, unaligned, stop on error
admin() { psql -X -q -v ON_ERROR_STOP=1 -d postgres -tA "$@"; }

server_answers() {
  if command -v pg_isready >/dev/null 2>&1; then pg_isready -q; else psql -X -d postgres -tAc 'select 1' >/dev/null 2>&1; fi
}

# What to start, named for this machine (Debian pg_lsclusters when available).
start_hint() {
  local hint=""
  if command -v pg_lsclusters >/dev/null 2>&1; then
    hint=$(pg_lsclusters -h 2>/dev/null | awk -v port="$PGPORT" '$3 == port {printf "pg_ctlcluster %s %s start   (cluster %s/%s is %s)", $1, $2, $1, $2, $4; exit}')
    [ -n "$hint" ] || hint="none of its clusters uses port $PGPORT (pg_lsclusters:$(pg_lsclusters -h 2>/dev/null | awk '{printf " %s/%s port %s %s", $1, $2, $3, $4}')) - fix PGPORT, or create one with pg_createcluster"
  fi
  [ -n "$hint" ] || hint="service postgresql start"
  echo "$hint"
}

wait_server() {
  if ! rf_wait_until "$WAIT" "PostgreSQL on $PGHOST:$PGPORT" server_answers; then
    if [ "$PGHOST" = 127.0.0.1 ] || [ "$PGHOST" = localhost ] || [ "${PGHOST#/}" != "$PGHOST" ]; then
      rf_die "PostgreSQL is not answering on $PGHOST:$PGPORT. Start the machine's server: $(start_hint) - or set DATABASE_URL to a database to use"
    fi
    rf_die "PostgreSQL is not answering on $PGHOST:$PGPORT (PGHOST is remote: start it there, or set DATABASE_URL)"
  fi
  local err
  if ! err=$(admin -c 'select 1' 2>&1 >/dev/null); then
    rf_die "PostgreSQL on $PGHOST:$PGPORT answers but user '$PGUSER' cannot connect: $err"
  fi
}

db_exists() { [ "$(admin -c "select 1 from pg_database where datname = '$DB'")" = 1 ]; }

create_db() {
  local err
  if ! err=$(admin -c "create database $DB" 2>&1); then
    db_exists || rf_die "could not create database $DB: $err" # a concurrent 'up' may have won the race
  fi
}

check_url() {
  local err
  rf_wait_until "$WAIT" "DATABASE_URL to accept connections" psql -X "$DATABASE_URL" -tAc 'select 1' ||
    { err=$(psql -X "$DATABASE_URL" -tAc 'select 1' 2>&1 || true); rf_die "cannot connect with DATABASE_URL: $err"; }
}

redact() { sed -E 's#(://[^:/@]+):[^@]*@#\1:***@#' <<<"$1"; }

cmd_up() {
  need_psql
  if [ -n "${DATABASE_URL:-}" ]; then
    check_url
    rf_log "DATABASE_URL is set: using $(redact "$DATABASE_URL") (connects; nothing created)"
    return 0
  fi
  wait_server
  if db_exists; then rf_log "database $DB already exists"
  else create_db; rf_log "created database $DB"; fi
  cmd_url
}

cmd_reset() {
  need_psql
  [ -z "${DATABASE_URL:-}" ] || rf_die "DATABASE_URL is set: that database is yours, reset will not drop it"
  wait_server
  admin -c "drop database if exists $DB with (force)" >/dev/null
  create_db
  rf_log "dropped and recreated database $DB"
}

cmd_status() {
  need_psql
  if [ -n "${DATABASE_URL:-}" ]; then
    if psql -X "$DATABASE_URL" -tAc 'select 1' >/dev/null 2>&1; then
      echo "postgres  DATABASE_URL  reachable  $(redact "$DATABASE_URL")"
    else
      echo "postgres  DATABASE_URL  unreachable  $(redact "$DATABASE_URL")"; return 1
    fi
    return 0
  fi
  if ! server_answers; then
    echo "postgres  $PGHOST:$PGPORT  not answering  (start: $(start_hint))"; return 1
  fi
  local ver; ver=$(admin -c 'show server_version' 2>/dev/null || echo "?")
  if db_exists; then
    echo "postgres  $PGHOST:$PGPORT  running (server $ver)  database $DB present  $(cmd_url)"
  else
    echo "postgres  $PGHOST:$PGPORT  running (server $ver)  database $DB missing (run: $SELF up)"
  fi
}

cmd_url() {
  if [ -n "${DATABASE_URL:-}" ]; then echo "$DATABASE_URL"; else echo "postgres://$PGUSER@$PGHOST:$PGPORT/$DB"; fi
}

case ${1:-} in
  up) cmd_up ;;
  down) rf_log "nothing to stop: $SELF uses the machine's PostgreSQL server, which it never stops (use '$SELF reset' to empty $DB)" ;;
  reset) cmd_reset ;;
  status) cmd_status ;;
  url) cmd_url ;;
  help | -h | --help) usage 0 ;;
  *) usage ;;
esac
