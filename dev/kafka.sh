#!/usr/bin/env bash
# dev/kafka.sh: a real Apache Kafka (KRaft) for development and tests, without Docker.
# The broker's jars come from Maven Central (dev/kafka/pom.xml) and run on the machine's Java 17+.
# Everything it writes lives under "$RF_DEV_DIR/kafka" (default <repo>/.dev/kafka, git-ignored); the
# secured node's data, certificates and passwords under "$RF_DEV_DIR/kafka-secure".
# Run `dev/kafka.sh --help` for the commands.
set -euo pipefail

# shellcheck source=dev/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

KF_CONF_DIR="$RF_ROOT/dev/kafka"
KF_POM="$KF_CONF_DIR/pom.xml"
KF_LOG4J_CONF="$KF_CONF_DIR/log4j2.yaml"
KF_DIR="$RF_DEV_DIR/kafka"
KF_SECURE_DIR="$RF_DEV_DIR/kafka-secure"
# the secured node's listeners (cluster "s")
KF_S_SASL_SSL=19492
KF_S_SSL=19493
KF_S_SASL_PLAIN=19494
KF_S_CONTROLLER=19495
KF_S_INTERNAL=19496

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KF_LIBS="$KF_DIR/libs-$KAFKA_VERSION"
KF_READY_TIMEOUT="${KAFKA_READY_TIMEOUT:-180}"   # seconds from start to ready
KF_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-60}"      # seconds from SIGTERM to SIGKILL
KF_TOOL_OPTS="${KAFKA_TOOL_OPTS:--Xms32m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
read -r -a KF_TOOL_JVM <<<"$KF_TOOL_OPTS"
KF_JAVA="${KAFKA_JAVA:-java}"

usage() {
  cat <<'EOF'
Usage: dev/kafka.sh <command> [args]

A local Apache Kafka in KRaft mode (combined broker+controller nodes), data under $RF_DEV_DIR/kafka.
Clusters: "1" = one node     broker 127.0.0.1:19092, controller 127.0.0.1:19093, RF 1
          "3" = three nodes  brokers 127.0.0.1:19192/19292/19392, controllers 19193/19293/19393,
                             RF 3, min.insync.replicas 2, static quorum
          "s" = one secured node, data, certificates and passwords under $RF_DEV_DIR/kafka-secure:
                             SASL_SSL 127.0.0.1:19492 (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
                             SSL 19493 (client certificate required), SASL_PLAINTEXT 19494 (PLAIN,
                             SCRAM-SHA-256/512, OAUTHBEARER with unsecured JWTs), controller 19495,
                             INTERNAL PLAINTEXT 19496 (inter-broker, readiness, dev tools)
                             user "redfence": PLAIN password in secrets/plain.password, SCRAM-SHA-256
                             and -512 password in secrets/scram.password; tls/ holds ca.crt, client.crt,
                             client.key, client-enc.key (encrypted, secrets/key.password), other-ca.crt
                             and other-client.{crt,key} (a CA and a client the broker does not trust)
All three may run at the same time.

Commands:
  prepare              fetch the broker's jars with Maven into $RF_DEV_DIR/kafka/libs-<version> (once)
  up [1|3|s]           prepare, format, start the cluster (default 1) and wait until it answers
                       metadata requests; does nothing when it already runs and is healthy
  down [1|3|s|all] [--wipe]
                       SIGTERM the nodes (default all), wait (SIGKILL after 60 s); --wipe also
                       deletes that cluster's data (never the jar cache; for s also its
                       certificates and passwords)
  status               one line per node: running/paused/stopped, pid, ports, ready or not
  bootstrap [1|3|s]    print the bootstrap servers (KAFKA_BROKERS when that is set; s: SASL_SSL)
  stop-node <id>       cluster 3: SIGTERM node <id> and wait until it has exited
  kill-node <id>       cluster 3: SIGKILL node <id>
  start-node <id>      cluster 3: start node <id> and wait until it is ready
  pause-node <id>      cluster 3: SIGSTOP node <id>
  resume-node <id>     cluster 3: SIGCONT node <id>
  pause | resume       cluster 1: SIGSTOP / SIGCONT its one node (a broker that stops answering)
  tool <MainClass> [args...]
                       run a Kafka class with the broker's classpath, e.g.
                       dev/kafka.sh tool org.apache.kafka.tools.TopicCommand \
                         --bootstrap-server 127.0.0.1:19092 --list
  -h, --help           this text

Environment:
  KAFKA_BROKERS        set: you bring your own Kafka; up/down do nothing, bootstrap prints it
  RF_DEV_DIR           data root (default <repo>/.dev)
  KAFKA_VERSION        Kafka version (default 4.4.0)
  KAFKA_LOG4J_VERSION  log4j2 version of that Kafka (known versions are filled in)
  KAFKA_HEAP           broker heap (default 512m for cluster 1, 384m per node for cluster 3;
                       the secured node: KAFKA_SECURE_HEAP, default 320m)
  KAFKA_READY_TIMEOUT  seconds to wait for readiness (default 180)
  KAFKA_STOP_TIMEOUT   seconds from SIGTERM to SIGKILL (default 60)
  KAFKA_JAVA           java executable (default: java on PATH)
  KAFKA_TOOL_OPTS      JVM options for `tool` (default: small heap, fast start)
EOF
}

kf_log() { rf_log "kafka: $*"; }
kf_now_ms() { date +%s%3N; }
kf_secs_since() { # <start-ms> -> "12.3"
  local d=$(( $(kf_now_ms) - $1 ))
  printf '%d.%d' $(( d / 1000 )) $(( (d % 1000) / 100 ))
}

# ---------------------------------------------------------------- versions and tools

kf_log4j_version() {
  if [ -n "${KAFKA_LOG4J_VERSION:-}" ]; then echo "$KAFKA_LOG4J_VERSION"; return; fi
  # log4j2 shipped with each Kafka release (read from Kafka's sources)
  case "$KAFKA_VERSION" in
    4.0.*|4.1.0) echo 2.24.3 ;;
    4.1.2|4.2.0) echo 2.25.3 ;;
    4.2.1|4.3.*) echo 2.25.4 ;;
    4.4.*)       echo 2.25.5 ;;
    *) rf_die "kafka: no known log4j2 version for Kafka $KAFKA_VERSION; set KAFKA_LOG4J_VERSION" ;;
  esac
}

kf_require_java() {
  command -v "$KF_JAVA" >/dev/null 2>&1 \
    || rf_die "kafka: '$KF_JAVA' not found on PATH; Kafka $KAFKA_VERSION needs Java 17 or later (or set KAFKA_JAVA)"
  local line major
  line=$("$KF_JAVA" -version 2>&1 | head -n 1) || true
  major=$(printf '%s\n' "$line" | sed -nE 's/.*version "([0-9]+)(\.([0-9]+))?.*/\1 \3/p')
  case "$major" in
    "1 "*) major=${major#1 } ;;   # 1.8 -> 8
    *) major=${major%% *} ;;
  esac
  [ -n "$major" ] || rf_die "kafka: cannot read the version of '$KF_JAVA' ($line)"
  [ "$major" -ge 17 ] || rf_die "kafka: Kafka $KAFKA_VERSION needs Java 17 or later; '$KF_JAVA' is $line"
}

KF_LOCKED=""
kf_lock() { # serialise commands that change state (fd 9 is closed for the brokers)
  [ -z "$KF_LOCKED" ] || return 0
  KF_LOCKED=1
  mkdir -p "$KF_DIR"
  exec 9>"$KF_DIR/.lock"
  flock -w 600 9 || rf_die "kafka: another dev/kafka.sh holds $KF_DIR/.lock"
}

kf_marker_text() {
  local sum
  sum=$(sha256sum "$KF_POM" | cut -d' ' -f1)
  printf 'kafka=%s log4j=%s pom=%s\n' "$KAFKA_VERSION" "$(kf_log4j_version)" "$sum"
}

kf_libs_ready() {
  [ -f "$KF_LIBS/.complete" ] && [ "$(cat "$KF_LIBS/.complete")" = "$(kf_marker_text)" ]
}

# kf_prepare [quiet]: materialise the classpath once; later calls are a file comparison.
kf_prepare() {
  local quiet=${1:-}
  if kf_libs_ready; then
    [ -n "$quiet" ] || kf_log "jars for Kafka $KAFKA_VERSION already in $KF_LIBS"
    return 0
  fi
  kf_lock
  if kf_libs_ready; then return 0; fi   # another process finished it meanwhile
  command -v mvn >/dev/null 2>&1 \
    || rf_die "kafka: mvn not found on PATH; Maven is needed once to fetch the Kafka jars from Maven Central"
  local log4j tmp out t0
  log4j=$(kf_log4j_version)
  tmp="$KF_DIR/.libs-$KAFKA_VERSION.tmp.$$"
  out="$KF_DIR/mvn-$KAFKA_VERSION.log"
  rm -rf "$tmp"
  kf_log "fetching Kafka $KAFKA_VERSION (+ kafka-tools, log4j2 $log4j) with Maven into $KF_LIBS ..."
  t0=$(kf_now_ms)
  if ! mvn -q -B -f "$KF_POM" \
      -Dkafka.version="$KAFKA_VERSION" -Dlog4j.version="$log4j" \
      org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$tmp" >"$out" 2>&1; then
    rm -rf "$tmp"
    tail -n 40 "$out" >&2 || true
    rf_die "kafka: Maven could not fetch the Kafka $KAFKA_VERSION jars (log: $out)"
  fi
  local jar
  for jar in "kafka_2.13-$KAFKA_VERSION.jar" "kafka-tools-$KAFKA_VERSION.jar" \
             "kafka-clients-$KAFKA_VERSION.jar" "log4j-slf4j-impl-$log4j.jar" "log4j-core-$log4j.jar"; do
    [ -f "$tmp/$jar" ] || { rm -rf "$tmp"; rf_die "kafka: Maven finished but $jar is missing (log: $out)"; }
  done
  kf_marker_text >"$tmp/.complete"
  rm -rf "$KF_LIBS"
  mv "$tmp" "$KF_LIBS"
  kf_log "Maven step took $(kf_secs_since "$t0") s ($(find "$KF_LIBS" -name '*.jar' | wc -l) jars, $(du -sh "$KF_LIBS" | cut -f1))"
}

# ---------------------------------------------------------------- topology

kf_check_cluster() {
  case "${1:-}" in 1|3|s) ;; *) rf_die "kafka: cluster must be 1, 3 or s, not '${1:-}'" ;; esac
}
kf_nodes() { if [ "$1" = 3 ]; then echo "1 2 3"; else echo 1; fi; }
# kf_bport: the PLAINTEXT port the readiness probe speaks to (for s: its INTERNAL listener)
kf_bport() {
  case "$1" in 3) echo $(( 19092 + 100 * $2 )) ;; s) echo "$KF_S_INTERNAL" ;; *) echo 19092 ;; esac
}
kf_cport() {
  case "$1" in 3) echo $(( 19093 + 100 * $2 )) ;; s) echo "$KF_S_CONTROLLER" ;; *) echo 19093 ;; esac
}
kf_ports() { # <cluster> <node>: every port the node listens on
  if [ "$1" = s ]; then echo "$KF_S_SASL_SSL $KF_S_SSL $KF_S_SASL_PLAIN $KF_S_CONTROLLER $KF_S_INTERNAL"
  else echo "$(kf_bport "$1" "$2") $(kf_cport "$1" "$2")"; fi
}
kf_cluster_dir() { if [ "$1" = s ]; then echo "$KF_SECURE_DIR"; else echo "$KF_DIR/cluster-$1"; fi; }
kf_node_dir() { echo "$(kf_cluster_dir "$1")/node-$2"; }
kf_pidfile() { echo "$(kf_node_dir "$1" "$2")/kafka.pid"; }
kf_logfile() { echo "$(kf_node_dir "$1" "$2")/kafka.log"; }
kf_bootstrap() {
  local c=$1 i out=""
  if [ "$c" = s ]; then echo "127.0.0.1:$KF_S_SASL_SSL"; return; fi
  for i in $(kf_nodes "$c"); do out="${out:+$out,}127.0.0.1:$(kf_bport "$c" "$i")"; done
  echo "$out"
}
kf_voters() {
  local i out=""
  for i in 1 2 3; do out="${out:+$out,}$i@127.0.0.1:$(kf_cport 3 "$i")"; done
  echo "$out"
}
kf_heap() {
  if [ "$1" = s ]; then echo "${KAFKA_SECURE_HEAP:-320m}"
  elif [ -n "${KAFKA_HEAP:-}" ]; then echo "$KAFKA_HEAP"
  elif [ "$1" = 3 ]; then echo 384m
  else echo 512m; fi
}

# kf_pid <cluster> <node>: prints the pid when the pid file names a live broker of that node
# (the command line is checked, so a recycled pid is never taken for a broker).
kf_pid() {
  local f pid cmdline
  f=$(kf_pidfile "$1" "$2")
  rf_pid_alive "$f" || return 1
  pid=$(cat "$f")
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ "$cmdline" == *"$(kf_node_dir "$1" "$2")/server.properties"* ]] || return 1
  echo "$pid"
}
kf_paused() { # <pid>: true when the process is stopped (SIGSTOP)
  local state
  state=$(sed -nE 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
  [ "$state" = T ] || [ "$state" = t ]
}

# kf_broker_ids <port> [timeout]: one Metadata request (v4, no topics) in plain bash; prints the
# ids of the live (registered, unfenced) brokers, one per line. Fails when nothing answers.
kf_broker_ids() {
  local port=$1 to=${2:-5}
  (
    exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
    # size 23 | api_key 3 (Metadata) | version 4 | correlation 1 | client "rf-ready" | topics [] | no auto-create
    printf '\x00\x00\x00\x17\x00\x03\x00\x04\x00\x00\x00\x01\x00\x08rf-ready\x00\x00\x00\x00\x00' >&3
    local -a h b
    read -r -a h <<<"$(timeout "$to" head -c 4 <&3 | od -An -v -tu1 | tr '\n' ' ')"
    [ "${#h[@]}" -eq 4 ] || exit 1
    local size=$(( (h[0] << 24) | (h[1] << 16) | (h[2] << 8) | h[3] ))
    [ "$size" -ge 12 ] && [ "$size" -le 1048576 ] || exit 1
    read -r -a b <<<"$(timeout "$to" head -c "$size" <&3 | od -An -v -tu1 | tr '\n' ' ')"
    [ "${#b[@]}" -eq "$size" ] || exit 1
    # correlation id (4) | throttle_time_ms (4) | brokers: count (4), then per broker
    # node_id (4) | host (int16 length + bytes) | port (4) | rack (int16 length, -1 = null, + bytes)
    [ "$(( (b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3] ))" -eq 1 ] || exit 1
    local n=$(( (b[8] << 24) | (b[9] << 16) | (b[10] << 8) | b[11] )) o=12 k len
    [ "$n" -le 1000 ] || exit 1
    for (( k = 0; k < n; k++ )); do
      [ $(( o + 12 )) -le "$size" ] || exit 1
      echo $(( (b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3] ))
      o=$(( o + 4 )); len=$(( (b[o] << 8) | b[o + 1] )); o=$(( o + 2 + len + 4 ))
      len=$(( (b[o] << 8) | b[o + 1] )); o=$(( o + 2 ))
      [ "$len" -eq 65535 ] || o=$(( o + len ))
    done
  )
}
kf_node_ready() { # <cluster> <node>: its log says started and its own metadata lists it
  local c=$1 i=$2
  grep -q 'Kafka Server started' "$(kf_logfile "$c" "$i")" 2>/dev/null || return 1
  rf_port_open "$(kf_bport "$c" "$i")" || return 1
  local ids
  ids=$(kf_broker_ids "$(kf_bport "$c" "$i")" "${3:-5}") || return 1
  [[ $'\n'"$ids"$'\n' == *$'\n'"$i"$'\n'* ]]
}
kf_cluster_complete() { # <cluster>: node 1's metadata lists every node
  local c=$1 ids want
  ids=$(kf_broker_ids "$(kf_bport "$c" 1)" | sort -n | tr '\n' ' ') || return 1
  want="$(kf_nodes "$c") "
  [ "$ids" = "$want" ]
}

kf_port_owner() { # <port>: a short description of who listens there
  if command -v ss >/dev/null 2>&1; then
    ss -Hltnp "sport = :$1" 2>/dev/null | sed -nE 's/.*users:\(\((.*)\)\).*/\1/p' | head -n 1 || true
  fi
}

kf_check_ports() { # <cluster> <node>: dies when a port of that (not running) node is taken
  local port owner
  for port in $(kf_ports "$1" "$2"); do
    if rf_port_open "$port"; then
      owner=$(kf_port_owner "$port")
      rf_die "kafka: port 127.0.0.1:$port (cluster $1 node $2) is taken by another process${owner:+ ($owner)}; stop it first"
    fi
  done
}

KF_LAUNCHED=()   # cluster:node pairs this invocation started

kf_fail_start() { # <cluster> <node> <message>: show the log, stop what this run started, fail
  local log
  log=$(kf_logfile "$1" "$2")
  if [ -f "$log" ]; then
    printf '[dev] ---- last 40 lines of %s ----\n' "$log" >&2
    tail -n 40 "$log" >&2 || true
    printf '[dev] ----\n' >&2
  fi
  if [ "${#KF_LAUNCHED[@]}" -gt 0 ]; then
    kf_log "stopping the nodes this run started: ${KF_LAUNCHED[*]}"
    KF_STOP_TIMEOUT=15 kf_stop TERM "${KF_LAUNCHED[@]}" || true
  fi
  rf_die "kafka: $3"
}

# ---------------------------------------------------------------- start and stop

kf_cluster_id() { # <cluster>: generated once, kept in the cluster's data dir
  local c=$1 f id meta
  f="$(kf_cluster_dir "$c")/cluster.id"
  if [ ! -s "$f" ]; then
    # data formatted earlier but the id file lost: take the id the data carries
    meta=$(find "$(kf_cluster_dir "$c")" -path '*/data/meta.properties' 2>/dev/null | head -n 1) || true
    if [ -n "$meta" ]; then
      id=$(sed -n 's/^cluster\.id=//p' "$meta")
    else
      # 16 random bytes, unpadded base64url (22 characters), not starting with '-'
      id=-
      while [ "${id#-}" != "$id" ]; do
        id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
      done
    fi
    mkdir -p "$(kf_cluster_dir "$c")"
    echo "$id" >"$f"
  fi
  cat "$f"
}

# ---------------------------------------------------------------- the secured node's material

kf_s_secret() { # <name>: the password in $KF_SECURE_DIR/secrets/<name>.password, made once (mode 600)
  local f="$KF_SECURE_DIR/secrets/$1.password"
  if [ ! -s "$f" ]; then
    mkdir -p "$KF_SECURE_DIR/secrets"; chmod 700 "$KF_SECURE_DIR/secrets"
    (umask 077; openssl rand -hex 24 >"$f.tmp" && mv "$f.tmp" "$f")
  fi
  cat "$f"
}

# kf_s_material: passwords, a CA, the broker's certificate (PKCS12 keystore), a truststore with the
# CA, a client certificate (its key plain and encrypted), and a second CA + client the broker does not
# trust. Made once; never committed (the directory is under RF_DEV_DIR).
kf_s_material() {
  command -v openssl >/dev/null 2>&1 || rf_die "kafka: openssl not found; install it (apt-get install openssl)"
  command -v keytool >/dev/null 2>&1 || rf_die "kafka: keytool not found; it comes with the JDK (apt-get install openjdk-17-jdk-headless)"
  local tls="$KF_SECURE_DIR/tls" data
  data="$(kf_node_dir s 1)/data/meta.properties"
  if [ -f "$data" ] && [ ! -s "$KF_SECURE_DIR/secrets/scram.password" ]; then
    rf_die "kafka: $KF_SECURE_DIR holds formatted data but not its SCRAM password; run 'dev/kafka.sh down s --wipe' first"
  fi
  local p
  for p in admin plain scram store key; do kf_s_secret "$p" >/dev/null; done
  if [ -s "$tls/server.p12" ] && [ -s "$tls/truststore.p12" ] && [ -s "$tls/client-enc.key" ] \
      && [ -s "$tls/other-client.crt" ]; then
    return 0
  fi
  kf_log "secured node: generating a CA, broker and client certificates under $tls"
  rm -rf "$tls"; mkdir -p "$tls"; chmod 700 "$tls"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  (
    cd "$tls"
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 3650 -subj "/CN=redfence dev Kafka CA" 2>/dev/null
    openssl req -x509 "${ec[@]}" -keyout other-ca.key -out other-ca.crt -days 3650 -subj "/CN=redfence other CA" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
    openssl req "${ec[@]}" -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile server.ext -out server.crt 2>/dev/null
    openssl req "${ec[@]}" -keyout client.key -out client.csr -subj "/CN=redfence" 2>/dev/null
    openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out client.crt 2>/dev/null
    openssl pkcs8 -topk8 -in client.key -out client-enc.key -v2 aes-256-cbc -passout "file:$KF_SECURE_DIR/secrets/key.password"
    openssl req "${ec[@]}" -keyout other-client.key -out other-client.csr -subj "/CN=redfence" 2>/dev/null
    openssl x509 -req -in other-client.csr -CA other-ca.crt -CAkey other-ca.key -CAcreateserial -days 3650 -out other-client.crt 2>/dev/null
    openssl pkcs12 -export -in server.crt -inkey server.key -certfile ca.crt -name broker \
      -out server.p12 -passout "file:$KF_SECURE_DIR/secrets/store.password"
    keytool -importcert -noprompt -alias ca -file ca.crt -keystore truststore.p12 -storetype PKCS12 \
      -storepass:file "$KF_SECURE_DIR/secrets/store.password" >/dev/null 2>&1
    rm -f ./*.csr ./*.srl server.ext
    chmod 600 ./*.key ./*.p12
  ) || rf_die "kafka: generating the secured node's certificates failed"
  [ -s "$tls/truststore.p12" ] || rf_die "kafka: keytool did not write $tls/truststore.p12"
}

kf_render_props() { # <cluster> <node>: writes server.properties from the template
  local c=$1 i=$2 dir tmpl text
  dir=$(kf_node_dir "$c" "$i")
  case "$c" in
    3) tmpl="$KF_CONF_DIR/node.properties.tmpl" ;;
    s) tmpl="$KF_CONF_DIR/secure.properties.tmpl" ;;
    *) tmpl="$KF_CONF_DIR/single.properties.tmpl" ;;
  esac
  text=$(cat "$tmpl")
  if [ "$c" = s ]; then
    text=${text//@SASL_SSL_PORT@/$KF_S_SASL_SSL}
    text=${text//@SSL_PORT@/$KF_S_SSL}
    text=${text//@SASL_PLAIN_PORT@/$KF_S_SASL_PLAIN}
    text=${text//@INTERNAL_PORT@/$KF_S_INTERNAL}
    text=${text//@TLS_DIR@/$KF_SECURE_DIR/tls}
    text=${text//@STORE_PASSWORD@/$(kf_s_secret store)}
    text=${text//@ADMIN_PASSWORD@/$(kf_s_secret admin)}
    text=${text//@PLAIN_PASSWORD@/$(kf_s_secret plain)}
  fi
  text=${text//@NODE_ID@/$i}
  text=${text//@BROKER_PORT@/$(kf_bport "$c" "$i")}
  text=${text//@CONTROLLER_PORT@/$(kf_cport "$c" "$i")}
  text=${text//@LOG_DIRS@/$dir/data}
  text=${text//@VOTERS@/$(kf_voters)}
  (umask 077; printf '%s\n' "$text" >"$dir/server.properties.tmp")
  mv -f "$dir/server.properties.tmp" "$dir/server.properties"
}

kf_format() { # <cluster> <node>
  local c=$1 i=$2 dir id out
  dir=$(kf_node_dir "$c" "$i")
  [ -f "$dir/data/meta.properties" ] && return 0
  id=$(kf_cluster_id "$c")
  local -a args=(format -t "$id" -c "$dir/server.properties" --ignore-formatted)
  [ "$c" = 3 ] || args+=(--standalone)
  if [ "$c" = s ]; then
    # the SCRAM credentials of `redfence`, stored in the metadata log at format time
    local pw; pw=$(kf_s_secret scram)
    args+=(--add-scram "SCRAM-SHA-256=[name=redfence,password=$pw]" --add-scram "SCRAM-SHA-512=[name=redfence,password=$pw]")
  fi
  if ! out=$("$KF_JAVA" "${KF_TOOL_JVM[@]}" -cp "$KF_LIBS/*" -Dlog4j2.configurationFile="$KF_LOG4J_CONF" \
      kafka.tools.StorageTool "${args[@]}" 2>&1); then
    printf '%s\n' "$out" >&2
    rf_die "kafka: formatting the storage of cluster $c node $i failed"
  fi
}

# kf_launch <cluster> <node>: start one node in the background (no waiting). Prints nothing when
# the node already runs.
kf_launch() {
  local c=$1 i=$2 dir pidfile log pid
  dir=$(kf_node_dir "$c" "$i")
  pidfile=$(kf_pidfile "$c" "$i")
  log=$(kf_logfile "$c" "$i")
  if pid=$(kf_pid "$c" "$i"); then
    if kf_paused "$pid"; then
      kf_log "cluster $c node $i (pid $pid) was paused: resuming it"
      kill -CONT "$pid"
    fi
    return 0
  fi
  rm -f "$pidfile"
  kf_check_ports "$c" "$i"
  [ "$c" != s ] || kf_s_material
  mkdir -p "$dir/data" "$dir/logs"
  [ "$c" != s ] || chmod 700 "$(kf_cluster_dir s)"
  kf_render_props "$c" "$i"
  kf_format "$c" "$i"
  [ -f "$log" ] && mv -f "$log" "$log.prev"
  local heap
  heap=$(kf_heap "$c")
  # setsid: own session, so the broker outlives this script and the caller's terminal/job.
  # fd 9 (the lock) is closed so a running broker never holds it.
  # shellcheck disable=SC2016 # $$ and $@ belong to the inner bash
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' kafka-node "$pidfile" \
    "$KF_JAVA" "-Xms$heap" "-Xmx$heap" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$KF_LOG4J_CONF" -Dkafka.logs.dir="$dir/logs" \
    -cp "$KF_LIBS/*" kafka.Kafka "$dir/server.properties" \
    </dev/null >>"$log" 2>&1 9>&- &
  KF_LAUNCHED+=("$c:$i")
  rf_wait_until 10 "pid file of cluster $c node $i" test -s "$pidfile" \
    || kf_fail_start "$c" "$i" "cluster $c node $i did not start"
}

kf_wait_node() { # <cluster> <node> <deadline-seconds-since-epoch>
  local c=$1 i=$2 deadline=$3 pid
  while :; do
    pid=$(kf_pid "$c" "$i") || kf_fail_start "$c" "$i" \
      "cluster $c node $i exited while starting (log: $(kf_logfile "$c" "$i"))"
    kf_node_ready "$c" "$i" && return 0
    [ "$(date +%s)" -lt "$deadline" ] || kf_fail_start "$c" "$i" \
      "cluster $c node $i (pid $pid) not ready after ${KF_READY_TIMEOUT}s (log: $(kf_logfile "$c" "$i"))"
    sleep 0.2
  done
}

kf_cluster_healthy() { # <cluster>: every node runs, none paused, every node ready, metadata complete
  local c=$1 i pid
  for i in $(kf_nodes "$c"); do
    pid=$(kf_pid "$c" "$i") || return 1
    ! kf_paused "$pid" || return 1
    kf_node_ready "$c" "$i" 2 || return 1
  done
  kf_cluster_complete "$c"
}

kf_up() {
  local c=${1:-1} i t0 deadline
  kf_check_cluster "$c"
  # the secured node is started even then: the security tests need its listeners and users
  if [ -n "${KAFKA_BROKERS:-}" ] && [ "$c" != s ]; then
    kf_log "KAFKA_BROKERS is set ($KAFKA_BROKERS): using that Kafka, not starting one"
    return 0
  fi
  if kf_cluster_healthy "$c"; then
    kf_log "cluster $c already running and healthy: $(kf_bootstrap "$c")"
    return 0
  fi
  kf_require_java
  kf_prepare quiet
  kf_lock
  t0=$(kf_now_ms)
  # every port of a node that is not ours must be free before any node starts
  for i in $(kf_nodes "$c"); do kf_pid "$c" "$i" >/dev/null || kf_check_ports "$c" "$i"; done
  for i in $(kf_nodes "$c"); do kf_launch "$c" "$i"; done
  deadline=$(( $(date +%s) + KF_READY_TIMEOUT ))
  for i in $(kf_nodes "$c"); do kf_wait_node "$c" "$i" "$deadline"; done
  until kf_cluster_complete "$c"; do
    [ "$(date +%s)" -lt "$deadline" ] || kf_fail_start "$c" 1 \
      "cluster $c: node 1 does not list all of $(kf_nodes "$c") as live brokers after ${KF_READY_TIMEOUT}s"
    sleep 0.2
  done
  kf_log "cluster $c ready in $(kf_secs_since "$t0") s: $(kf_bootstrap "$c")"
}

# kf_stop <signal> <cluster:node>...: signal the nodes together, wait for all of them (one shared
# deadline; SIGKILL after KF_STOP_TIMEOUT), remove the pid files.
kf_stop() {
  local sig=$1; shift
  local cn c i pid t0 deadline alive killed=""
  local -a pids=() names=()
  t0=$(kf_now_ms)
  for cn in "$@"; do
    c=${cn%%:*}; i=${cn##*:}
    if pid=$(kf_pid "$c" "$i"); then
      pids+=("$pid"); names+=("cluster $c node $i (pid $pid)")
      kill "-$sig" "$pid" 2>/dev/null || true
      [ "$sig" = KILL ] || kill -CONT "$pid" 2>/dev/null || true   # a paused node must run to exit
    else
      rm -f "$(kf_pidfile "$c" "$i")"
    fi
  done
  [ "${#pids[@]}" -gt 0 ] || return 1
  deadline=$(( $(date +%s) + KF_STOP_TIMEOUT ))
  while :; do
    alive=""
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive="$alive $pid"; done
    [ -n "$alive" ] || break
    if [ -z "$killed" ] && [ "$(date +%s)" -ge "$deadline" ]; then
      kf_log "still running after ${KF_STOP_TIMEOUT}s, sending SIGKILL to:$alive"
      for pid in $alive; do kill -KILL "$pid" 2>/dev/null || true; done
      killed=1
    fi
    sleep 0.2
  done
  for cn in "$@"; do rm -f "$(kf_pidfile "${cn%%:*}" "${cn##*:}")"; done
  local joined
  joined=$(printf '%s; ' "${names[@]}")
  kf_log "stopped (SIG$sig${killed:+, then SIGKILL}) in $(kf_secs_since "$t0") s: ${joined%; }"
}

kf_down() {
  local target=all wipe="" a c i
  local -a clusters targets=()
  for a in "$@"; do
    case "$a" in
      --wipe) wipe=1 ;;
      1|3|s|all) target=$a ;;
      *) rf_die "kafka: down takes [1|3|s|all] [--wipe], not '$a'" ;;
    esac
  done
  if [ "$target" = all ]; then clusters=(1 3 s); else clusters=("$target"); fi
  if [ -n "${KAFKA_BROKERS:-}" ]; then
    if [ "$target" = all ] || [ "$target" = s ]; then
      clusters=(s)
      kf_log "KAFKA_BROKERS is set ($KAFKA_BROKERS): stopping only the secured node"
    else
      kf_log "KAFKA_BROKERS is set ($KAFKA_BROKERS): not stopping anything"
      return 0
    fi
  fi
  kf_lock
  for c in "${clusters[@]}"; do
    for i in $(kf_nodes "$c"); do targets+=("$c:$i"); done
  done
  kf_stop TERM "${targets[@]}" || kf_log "cluster(s) ${clusters[*]}: nothing running"
  if [ -n "$wipe" ]; then
    for c in "${clusters[@]}"; do
      rm -rf "$(kf_cluster_dir "$c")"
      kf_log "wiped $(kf_cluster_dir "$c")"
    done
  fi
}

kf_status() {
  local c i pid state where
  if [ -n "${KAFKA_BROKERS:-}" ]; then
    echo "KAFKA_BROKERS is set: $KAFKA_BROKERS (not managed by dev/kafka.sh)"
  fi
  for c in 1 3 s; do
    for i in $(kf_nodes "$c"); do
      where="broker 127.0.0.1:$(kf_bport "$c" "$i") controller 127.0.0.1:$(kf_cport "$c" "$i")"
      [ "$c" != s ] || where="SASL_SSL 127.0.0.1:$KF_S_SASL_SSL SSL $KF_S_SSL SASL_PLAINTEXT $KF_S_SASL_PLAIN controller $KF_S_CONTROLLER internal $KF_S_INTERNAL"
      if pid=$(kf_pid "$c" "$i"); then
        if kf_paused "$pid"; then state="paused   pid $pid"
        elif kf_node_ready "$c" "$i" 1; then state="running  pid $pid"
        else state="running  pid $pid (not ready)"; fi
      else
        state="stopped"
        local port
        for port in $(kf_ports "$c" "$i"); do
          if rf_port_open "$port"; then state="stopped  (port taken by another process)"; break; fi
        done
      fi
      printf 'cluster %s node %s: %-36s %s\n' "$c" "$i" "$state" "$where"
    done
  done
}

kf_node_cmd() { # <command> <id>
  local cmd=$1 i=${2:-} pid
  case "$i" in 1|2|3) ;; *) rf_die "kafka: $cmd needs a node id of cluster 3 (1, 2 or 3), not '$i'" ;; esac
  [ -z "${KAFKA_BROKERS:-}" ] || rf_die "kafka: KAFKA_BROKERS is set; $cmd works only on the local 3-node cluster"
  case "$cmd" in
    stop-node)
      kf_lock
      kf_stop TERM "3:$i" || kf_log "cluster 3 node $i is not running"
      ;;
    kill-node)
      kf_lock
      kf_stop KILL "3:$i" || kf_log "cluster 3 node $i is not running"
      ;;
    start-node)
      local t0
      [ -d "$(kf_cluster_dir 3)" ] || rf_die "kafka: cluster 3 does not exist; run 'dev/kafka.sh up 3' first"
      if pid=$(kf_pid 3 "$i") && ! kf_paused "$pid" && kf_node_ready 3 "$i" 2; then
        kf_log "cluster 3 node $i already running (pid $pid) and ready"
        return 0
      fi
      kf_require_java
      kf_prepare quiet
      kf_lock
      t0=$(kf_now_ms)
      kf_launch 3 "$i"
      kf_wait_node 3 "$i" $(( $(date +%s) + KF_READY_TIMEOUT ))
      kf_log "cluster 3 node $i ready in $(kf_secs_since "$t0") s (pid $(kf_pid 3 "$i"))"
      ;;
    pause-node|resume-node)
      pid=$(kf_pid 3 "$i") || rf_die "kafka: cluster 3 node $i is not running"
      if [ "$cmd" = pause-node ]; then kill -STOP "$pid"; else kill -CONT "$pid"; fi
      kf_log "cluster 3 node $i (pid $pid): ${cmd%-node}d"
      ;;
  esac
}

kf_tool() {
  [ $# -ge 1 ] || rf_die "kafka: tool needs a main class, e.g. org.apache.kafka.tools.TopicCommand"
  kf_require_java
  kf_prepare quiet
  exec "$KF_JAVA" "${KF_TOOL_JVM[@]}" -Dlog4j2.configurationFile="$KF_LOG4J_CONF" -cp "$KF_LIBS/*" "$@"
}

main() {
  local cmd=${1:-} pid
  [ $# -eq 0 ] || shift
  case "$cmd" in
    prepare) kf_require_java; kf_prepare ;;
    up) [ $# -le 1 ] || rf_die "kafka: up takes [1|3|s]"; kf_up "${1:-1}" ;;
    down) kf_down "$@" ;;
    status) kf_status ;;
    bootstrap)
      if [ -n "${KAFKA_BROKERS:-}" ]; then echo "$KAFKA_BROKERS"
      else kf_check_cluster "${1:-1}"; kf_bootstrap "${1:-1}"; fi
      ;;
    stop-node|kill-node|start-node|pause-node|resume-node) kf_node_cmd "$cmd" "${1:-}" ;;
    pause|resume)
      [ -z "${KAFKA_BROKERS:-}" ] || rf_die "kafka: KAFKA_BROKERS is set; $cmd works only on the local cluster"
      pid=$(kf_pid 1 1) || rf_die "kafka: cluster 1 is not running"
      if [ "$cmd" = pause ]; then kill -STOP "$pid"; else kill -CONT "$pid"; fi
      kf_log "cluster 1 node 1 (pid $pid): ${cmd}d"
      ;;
    tool) kf_tool "$@" ;;
    -h|--help|help) usage ;;
    "") usage >&2; exit 2 ;;
    *) rf_die "kafka: unknown command '$cmd' (see dev/kafka.sh --help)" ;;
  esac
}

main "$@"
