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
# --test-force-exit: a file whose tests are done exits even if something it made keeps a handle open
# (a client a test forgot to close would otherwise hold the whole run until CI's limit)
"$node" --import tsx --test --test-concurrency="$concurrency" --test-force-exit \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=./scripts/test-durations.mjs --test-reporter-destination="$durations" \
  --test-reporter=./scripts/test-failures.mjs --test-reporter-destination="$failures" "$@" || rc=$?
echo "[test] Node $v, pass '$pass': exit $rc in $(( $(date +%s) - started )) s; slowest files (sum of their tests):"
head -n 8 "$durations" 2>/dev/null | sed 's/^/[test]   /' || true
exit "$rc"
