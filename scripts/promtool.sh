#!/usr/bin/env bash
# Prints the path of a promtool (Prometheus' rule checker): $PROMTOOL, `promtool` on PATH, or the one
# unpacked from Debian's prometheus package (scripts/prometheus-deb.sh).
#
#   scripts/promtool.sh               # the path, on stdout (log lines on stderr)
#   "$(scripts/promtool.sh)" check rules ops/prometheus/redfence-rules.yml
exec bash "$(dirname "$0")/prometheus-deb.sh" promtool
