#!/usr/bin/env bash
# Prints the path of a promtool (Prometheus' rule checker), fetching it when there is none:
#  - `promtool` on PATH, or $PROMTOOL, is used as it is;
#  - otherwise the Debian package `prometheus` is downloaded with `apt-get download` (no installation, no
#    service started) and only its promtool binary is unpacked into .dev/promtool/. Needs apt-get and a
#    Debian mirror; runs `apt-get update` once when the package is not known yet.
#
#   scripts/promtool.sh               # the path, on stdout (log lines on stderr)
#   "$(scripts/promtool.sh)" check rules ops/prometheus/redfence-rules.yml
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${PROMTOOL:-}" ]; then echo "$PROMTOOL"; exit 0; fi
if command -v promtool >/dev/null 2>&1; then command -v promtool; exit 0; fi
dest=.dev/promtool
bin=$dest/usr/bin/promtool
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then echo "$PWD/$bin"; exit 0; fi

command -v apt-get >/dev/null 2>&1 ||
  { echo "promtool.sh: no promtool on PATH and no apt-get to fetch Debian's prometheus package; install promtool or set PROMTOOL" >&2; exit 1; }
mkdir -p "$dest/download"
log=$dest/apt-get.log
fetch() { (cd "$dest/download" && apt-get download -q prometheus) >>"$log" 2>&1; }
echo "promtool.sh: fetching promtool from the Debian package prometheus (apt-get download)" >&2
if ! fetch; then
  apt-get update -q >>"$log" 2>&1 || true
  fetch || { tail -20 "$log" >&2; echo "promtool.sh: apt-get download prometheus failed (log: $log)" >&2; exit 1; }
fi
deb=$(ls -t "$dest"/download/prometheus_*.deb | head -1)
rm -rf "$dest/usr" "$dest/x"
dpkg-deb -x "$deb" "$dest/x"
mkdir -p "$dest/usr/bin"
mv "$dest/x/usr/bin/promtool" "$bin"
rm -rf "$dest/x" "$dest/download"
"$bin" --version >/dev/null
echo "$PWD/$bin"
