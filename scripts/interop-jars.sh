#!/usr/bin/env bash
# Fetches the jars of the JVM programs the tests run (test/interop/java/pom.xml: Spring Kafka, Kafka
# Streams, Kafka Connect, all from Maven Central) into $RF_DEV_DIR/interop/libs-<pom hash> and compiles
# test/interop/java/*.java (DlqInterop: the dead-letter writers; StreamsScenarios: Kafka Streams on the
# streams scenarios) into $RF_DEV_DIR/interop/classes-<source hash>, one classpath for both.
# Idempotent: a second run only compares two hashes. Prints the Java classpath on stdout (logs on
# stderr). dev/up runs it, so a clean clone has the jars before the tests; test/dead-letter/interop.test.ts
# and test/topology/kstreams.ts run it too (a no-op then). Nothing it writes is committed (.dev is git-ignored).
set -euo pipefail
# shellcheck source=dev/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../dev" && pwd)/lib.sh"

src_dir="$RF_ROOT/test/interop/java"
pom="$src_dir/pom.xml"
source_files=("$src_dir/DlqInterop.java" "$src_dir/StreamsScenarios.java")
dir="$RF_DEV_DIR/interop"
pom_sum=$(sha256sum "$pom" | cut -c1-16)
src_sum=$(cat "$pom" "${source_files[@]}" | sha256sum | cut -c1-16)
libs="$dir/libs-$pom_sum"
classes="$dir/classes-$src_sum"

command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 \
  || rf_die "interop: java and javac (17 or later) are needed on PATH"

if [ ! -f "$libs/.complete" ] || [ ! -f "$classes/.complete" ]; then
  mkdir -p "$dir"
  exec 9>"$dir/.lock"
  flock -w 600 9 || rf_die "interop: another scripts/interop-jars.sh holds $dir/.lock"
fi

if [ ! -f "$libs/.complete" ]; then
  command -v mvn >/dev/null 2>&1 || rf_die "interop: mvn not found on PATH; Maven fetches the jars once"
  tmp="$dir/.libs.tmp.$$"
  log="$dir/mvn.log"
  rm -rf "$tmp"
  rf_log "interop: fetching the Spring Kafka, Kafka Streams and Kafka Connect jars into $libs ..."
  t0=$(date +%s)
  if ! mvn -q -B -f "$pom" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$tmp" >"$log" 2>&1; then
    rm -rf "$tmp"
    tail -n 40 "$log" >&2 || true
    rf_die "interop: Maven could not fetch the jars (log: $log)"
  fi
  for jar in spring-kafka kafka-streams connect-runtime kafka-clients jackson-databind; do
    compgen -G "$tmp/$jar-[0-9]*.jar" >/dev/null || { rm -rf "$tmp"; rf_die "interop: $jar is missing after Maven (log: $log)"; }
  done
  touch "$tmp/.complete"
  rm -rf "$libs"
  mv "$tmp" "$libs"
  rf_log "interop: $(find "$libs" -name '*.jar' | wc -l) jars in $(( $(date +%s) - t0 )) s"
fi

if [ ! -f "$classes/.complete" ]; then
  tmp="$dir/.classes.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  javac -nowarn --release 17 -encoding UTF-8 -cp "$libs/*" -d "$tmp" "${source_files[@]}" >&2 \
    || { rm -rf "$tmp"; rf_die "interop: javac failed on ${source_files[*]}"; }
  touch "$tmp/.complete"
  rm -rf "$classes"
  mv "$tmp" "$classes"
fi

echo "$libs/*:$classes"
