#!/usr/bin/env bash
# Prints the path of a binary of Debian's `prometheus` package (`promtool` or `prometheus`, the server),
# fetching it when there is none:
#  - $PROMTOOL / $PROMETHEUS, or the name on PATH, is used as it is;
#  - otherwise the Debian package `prometheus` is downloaded with `apt-get download` (no installation, no
#    service started) and only its promtool and prometheus binaries are unpacked into .dev/prometheus-deb/
#    (one download serves both). Needs apt-get and a Debian mirror; runs `apt-get update` once when the
#    package is not known yet.
#
#   scripts/prometheus-deb.sh promtool      # the path, on stdout (log lines on stderr)
#   scripts/prometheus-deb.sh prometheus
set -euo pipefail
cd "$(dirname "$0")/.."

name=${1:-}
case "$name" in
  promtool) given=${PROMTOOL:-} ;;
  prometheus) given=${PROMETHEUS:-} ;;
  *) echo "usage: scripts/prometheus-deb.sh promtool|prometheus" >&2; exit 2 ;;
esac
if [ -n "$given" ]; then echo "$given"; exit 0; fi
if command -v "$name" >/dev/null 2>&1; then command -v "$name"; exit 0; fi
dest=.dev/prometheus-deb
bin=$dest/usr/bin/$name
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then echo "$PWD/$bin"; exit 0; fi

command -v apt-get >/dev/null 2>&1 ||
  { echo "prometheus-deb.sh: no $name on PATH and no apt-get to fetch Debian's prometheus package; install it or set ${name^^}" >&2; exit 1; }
mkdir -p "$dest"
# one fetch at a time (two test files may ask at once)
exec 9>"$dest/.lock"
flock 9
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then echo "$PWD/$bin"; exit 0; fi
mkdir -p "$dest/download"
log=$dest/apt-get.log
fetch() { (cd "$dest/download" && apt-get download -q prometheus) >>"$log" 2>&1; }
echo "prometheus-deb.sh: fetching $name from the Debian package prometheus (apt-get download)" >&2
if ! fetch; then
  apt-get update -q >>"$log" 2>&1 || true
  fetch || { tail -20 "$log" >&2; echo "prometheus-deb.sh: apt-get download prometheus failed (log: $log)" >&2; exit 1; }
fi
deb=$(ls -t "$dest"/download/prometheus_*.deb | head -1)
rm -rf "$dest/usr" "$dest/x"
dpkg-deb -x "$deb" "$dest/x"
mkdir -p "$dest/usr/bin"
mv "$dest/x/usr/bin/promtool" "$dest/x/usr/bin/prometheus" "$dest/usr/bin/"
rm -rf "$dest/x" "$dest/download"
"$bin" --version >/dev/null
echo "$PWD/$bin"
