#!/usr/bin/env bash
# Runs test files on another Node version (one of those scripts/dev-node.sh unpacks into .dev/node/<v>).
#
#   scripts/test-on-node.sh <version> <test files...>
#
# The Kafka client's native binding is built with nan, so a binary serves one Node ABI. For the run, the
# package's build/Release is swapped for the one dev-node.sh compiled for <version>: the original is
# renamed aside (a rename, so hard-linked copies of node_modules elsewhere are untouched) and put back
# when the run ends, however it ends. A run killed before it could restore is repaired by the next call
# of this script (or of scripts/restore-binding.sh, which scripts/test.sh calls first).
# Every child process the tests start uses process.execPath, so it runs on <version> as well.
set -euo pipefail
cd "$(dirname "$0")/.."

v=${1:?usage: scripts/test-on-node.sh <version> <test files...>}
shift
[ $# -gt 0 ] || { echo "test-on-node.sh: no test files given" >&2; exit 2; }
dir=.dev/node/$v
if [ ! -x "$dir/bin/node" ] || [ ! -f "$dir/kafka/build/Release/confluent-kafka-javascript.node" ]; then
  echo "test-on-node.sh: Node $v is not prepared; run: bash scripts/dev-node.sh $v" >&2
  exit 2
fi

bash scripts/restore-binding.sh
pkg=node_modules/@confluentinc/kafka-javascript/build
mv "$pkg/Release" "$pkg/Release.machine"
trap 'bash scripts/restore-binding.sh' EXIT
cp -a "$dir/kafka/build/Release" "$pkg/Release"
echo "$v" >"$pkg/.redfence-abi"

echo "[test] Node $("$dir/bin/node" --version): ${#} test files"
PATH="$PWD/$dir/bin:$PATH" "$dir/bin/node" --import tsx --test --test-concurrency=1 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=./scripts/test-durations.mjs --test-reporter-destination=".dev/test-durations-$v.txt" "$@"
