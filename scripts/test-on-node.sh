#!/usr/bin/env bash
# Runs test files on one Node version: the machine's, or one of those scripts/dev-node.sh unpacks into
# .dev/node/<v>.
#
#   scripts/test-on-node.sh <version> <test files...>
#
# REDFENCE_TEST_CONCURRENCY (default 1) is how many files run at once; REDFENCE_TEST_PASS (default "all")
# names the pass in its durations file, .dev/test-durations-<version>-<pass>.txt (seconds per file,
# slowest first), whose slowest lines are printed when the pass ends; its failed tests go to
# .dev/test-failures-<version>-<pass>.txt.
#
# The Kafka client's native binding is built with nan, so a binary serves one Node ABI. For a version
# other than the machine's, the package's build/Release is swapped for the one dev-node.sh compiled for
# <version>: the original is renamed aside (a rename, so hard-linked copies of node_modules elsewhere are
# untouched) and put back when the run ends, however it ends. A run killed before it could restore is
# repaired by the next call of this script (or of scripts/restore-binding.sh, which scripts/test.sh calls
# first). Every child process the tests start uses process.execPath, so it runs on <version> as well.
set -euo pipefail
cd "$(dirname "$0")/.."

v=${1:?usage: scripts/test-on-node.sh <version> <test files...>}
shift
[ $# -gt 0 ] || { echo "test-on-node.sh: no test files given" >&2; exit 2; }
bash scripts/restore-binding.sh
if [ "$v" = "$(node --version | tr -d v)" ]; then
  node=$(command -v node)
else
  dir=.dev/node/$v
  if [ ! -x "$dir/bin/node" ] || [ ! -f "$dir/kafka/build/Release/confluent-kafka-javascript.node" ]; then
    echo "test-on-node.sh: Node $v is not prepared; run: bash scripts/dev-node.sh $v" >&2
    exit 2
  fi
  pkg=node_modules/@confluentinc/kafka-javascript/build
  mv "$pkg/Release" "$pkg/Release.machine"
  machine_path=$PATH
  trap 'PATH=$machine_path bash scripts/restore-binding.sh' EXIT
  cp -a "$dir/kafka/build/Release" "$pkg/Release"
  echo "$v" >"$pkg/.redfence-abi"
  export PATH="$PWD/$dir/bin:$PATH"
  node=$PWD/$dir/bin/node
fi

concurrency=${REDFENCE_TEST_CONCURRENCY:-1}
pass=${REDFENCE_TEST_PASS:-all}
durations=.dev/test-durations-$v-$pass.txt
failures=.dev/test-failures-$v-$pass.txt
mkdir -p .dev
rm -f "$failures"
echo "[test] Node $("$node" --version), pass '$pass': $# test files, $concurrency at a time"
started=$(date +%s)
rc=0
# No --test-force-exit: with files in child processes it can cut a file's report short, so the run
# silently counts fewer tests than ran and can lose a failed test's name (nodejs/node#64833; seen here:
# one clean-clone run reported 693 of a pass's 708 tests, the last 15 of one file missing, exit 0).
# A file that leaves a client or timer open would then hold the run: the pass has a bound instead
# (REDFENCE_TEST_PASS_TIMEOUT seconds, default 1500), and says so when it is reached.
bound=${REDFENCE_TEST_PASS_TIMEOUT:-1500}
timeout --kill-after=30 "$bound" "$node" --import tsx --test --test-concurrency="$concurrency" \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=./scripts/test-durations.mjs --test-reporter-destination="$durations" \
  --test-reporter=./scripts/test-failures.mjs --test-reporter-destination="$failures" "$@" || rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "[test] Node $v, pass '$pass' did not end within $bound s: a test file probably left a client or timer open (run the files alone to find it)"
  echo "pass '$pass' did not end within $bound s (REDFENCE_TEST_PASS_TIMEOUT): a file left a handle open?" >> "$failures"
fi
echo "[test] Node $v, pass '$pass': exit $rc in $(( $(date +%s) - started )) s; slowest files (sum of their tests):"
head -n 8 "$durations" 2>/dev/null | sed 's/^/[test]   /' || true
exit "$rc"
