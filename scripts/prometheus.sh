#!/usr/bin/env bash
# Prints the path of a Prometheus server binary: $PROMETHEUS, `prometheus` on PATH, or the one unpacked
# from Debian's prometheus package (scripts/prometheus-deb.sh; nothing installed, no service started).
# The console's alert tests run it on a free loopback port with a rules file derived from the shipped one.
#
#   "$(scripts/prometheus.sh)" --config.file=prometheus.yml --storage.tsdb.path=data --web.listen-address=127.0.0.1:0
exec bash "$(dirname "$0")/prometheus-deb.sh" prometheus
