#!/usr/bin/env bash
# Installs the project's npm dependencies on any machine, including ones where
# @confluentinc/kafka-javascript cannot download its prebuilt librdkafka binary.
#
#  - CKJS_LINKING=dynamic makes the Confluent client build librdkafka from its
#    bundled sources against the system OpenSSL and zlib (about 80 s) instead of
#    downloading a prebuilt binary. Set REDFENCE_CKJS_PREBUILT=1 to skip that
#    on machines that can download the binary.
#  - node-gyp needs Node's C headers. When it cannot download them, npm's
#    `nodedir` is pointed at the headers installed beside the running node
#    (<prefix>/include/node), unless the caller already set npm_config_nodedir.
#  - The install script of the Confluent client is allowed explicitly in
#    package.json ("allowScripts").
# Idempotent: skips the install when node_modules matches package-lock.json.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${REDFENCE_CKJS_PREBUILT:-0}" != "1" ]; then
  export CKJS_LINKING=dynamic
fi

if [ -z "${npm_config_nodedir:-}" ]; then
  prefix=$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")
  if [ -f "$prefix/include/node/node.h" ]; then
    export npm_config_nodedir="$prefix"
  fi
fi

stamp=node_modules/.redfence-install-stamp
if [ -f package-lock.json ] && [ -f "$stamp" ] && cmp -s package-lock.json "$stamp" \
   && [ -f node_modules/@confluentinc/kafka-javascript/build/Release/confluent-kafka-javascript.node ]; then
  echo "install: node_modules is up to date"
  exit 0
fi

start=$(date +%s)
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  npm install --no-audit --no-fund
fi
cp package-lock.json "$stamp"
echo "install: done in $(( $(date +%s) - start )) s"
