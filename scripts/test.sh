#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs dependencies, builds, starts the local services
# (or uses yours: KAFKA_BROKERS, REDIS_URL, REDIS_CLUSTER_NODES, DATABASE_URL), lints, type-checks,
# then runs the tests against the real services:
#  - the full suite on the main Node line, REDFENCE_TEST_MAIN_NODE (default 24.22.3, the active LTS
#    line; "machine" means the machine's own Node): first the files that mostly wait, several at once,
#    then the serial ones alone (scripts/test-groups.sh says which and why);
#  - on every other version of REDFENCE_TEST_NODES (default: the machine's Node and 22.23.5; set it
#    empty for the main line only) the files of what can differ between versions (AGAIN in
#    scripts/test-groups.sh), and on the machine's Node the packed install, which installs and runs
#    the package on the machine's Node and on every version scripts/dev-node.sh prepared.
# Every pass runs even when an earlier one failed (a failed run says all it can); the exit status is
# the first failure's. Services are left running for the next run; `dev/down` stops them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-groups.sh

# a Kafka binding left swapped by an interrupted run on another Node goes back first
[ ! -d node_modules ] || bash scripts/restore-binding.sh
bash scripts/install.sh
bash scripts/browser.sh
machine=$(node --version | tr -d v)
resolve() { [ "$1" = machine ] && echo "$machine" || echo "$1"; }
main=$(resolve "${REDFENCE_TEST_MAIN_NODE-24.22.3}")
others=()
for v in ${REDFENCE_TEST_NODES-machine 22.23.5}; do
  v=$(resolve "$v")
  [ "$v" = "$main" ] || others+=("$v")
done
# Node 22 and 24 beside the machine's: prepared once (the binary and the Kafka binding for its ABI),
# then reused by every pass and by the packed-install test
prepare=(22.23.5 24.22.3 "$main" "${others[@]}")
mapfile -t prepare < <(printf '%s\n' "${prepare[@]}" | grep -vx "$machine" | sort -u)
bash scripts/dev-node.sh "${prepare[@]}"
npm run --silent build
bash dev/up
npx biome check .
npx tsc -p tsconfig.json --noEmit

mapfile -t files < <(find test -name '*.test.ts' | sort)
serial=$(rf_join "${SERIAL[@]}")
again=$(rf_join "${AGAIN[@]}")
pack='^test/cli/pack\.test\.ts$'
echo "[test] ${#files[@]} test files; main line Node $main, then ${others[*]:-no other version}"
export REDFENCE_TEST_CONCURRENCY=${REDFENCE_TEST_CONCURRENCY:-3}
status=0
failed=()
pass() { # pass <version> <name> <concurrency> <files...>
  local v=$1 name=$2 n=$3; shift 3
  [ $# -gt 0 ] || return 0
  local rc=0
  REDFENCE_TEST_PASS=$name REDFENCE_TEST_CONCURRENCY=$n bash scripts/test-on-node.sh "$v" "$@" || rc=$?
  if [ "$rc" != 0 ]; then
    echo "[test] FAILED: Node $v, pass '$name' (exit $rc)"
    failed+=("$v-$name")
    [ "$status" != 0 ] || status=$rc
  fi
}
pick() { printf '%s\n' "${files[@]}" | grep -E "$1" | grep -Ev "${2:-^$}" || true; }

mapfile -t waiting < <(pick . "$serial")
mapfile -t alone < <(pick "$serial" "$pack")
pass "$main" concurrent "$REDFENCE_TEST_CONCURRENCY" "${waiting[@]}"
pass "$main" serial 1 "${alone[@]}"
for v in "${others[@]}"; do
  mapfile -t some < <(pick "$again" "$serial")
  pass "$v" again "$REDFENCE_TEST_CONCURRENCY" "${some[@]}"
done
# the packed install, on the machine's Node (it covers every prepared version itself)
mapfile -t packed < <(pick "$pack")
pass "$machine" pack 1 "${packed[@]}"
if [ "$status" = 0 ]; then
  echo "[test] all passes green"
else
  # again at the very end, where a cut-off log still shows it
  for f in "${failed[@]}"; do
    echo "[test] FAILED pass Node ${f%%-*}, '${f#*-}'; its failed tests:"
    if [ -s ".dev/test-failures-$f.txt" ]; then sed 's/^/[test]   /' ".dev/test-failures-$f.txt"
    else echo "[test]   (no failed test recorded: the run itself failed)"; fi
  done
fi
exit "$status"
