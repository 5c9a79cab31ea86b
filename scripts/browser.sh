#!/usr/bin/env bash
# Chromium for the console's browser tests (test/console/): Debian's package at /usr/bin/chromium,
# installed with apt-get when missing. Idempotent: prints what it found or did.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  echo "browser: /usr/bin/chromium present ($(/usr/bin/chromium --version 2>/dev/null || echo 'version unknown'))"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "browser: /usr/bin/chromium missing and no apt-get here; install Chromium and link it at /usr/bin/chromium" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
echo "browser: installing Debian's chromium with apt-get"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
echo "browser: installed $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
