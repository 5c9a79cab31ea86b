#!/usr/bin/env bash
# Puts the Kafka client's own native binding (the one npm built for the machine's Node) back in place
# after scripts/test-on-node.sh swapped in another Node version's. Does nothing when no swap is left over.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=node_modules/@confluentinc/kafka-javascript/build
if [ -d "$pkg/Release.machine" ]; then
  rm -rf "$pkg/Release"
  mv "$pkg/Release.machine" "$pkg/Release"
  echo "[test] the Kafka binding for $(node --version) is back in place (it was swapped for Node $(cat "$pkg/.redfence-abi" 2>/dev/null || echo '?'))" >&2
fi
rm -f "$pkg/.redfence-abi"
