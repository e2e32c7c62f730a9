#!/usr/bin/env bash
# Fleet scale benchmark: the fleet's own overhead per phase against its host count.
# One real sshd listens on 127.0.1.1–64 (the fleet tests' harness, crates/cli/tests/
# common/sshd.rs), each address a "host" with its own directories; fleets of 8, 16, 32
# and 64 hosts each run a tiny Performance test (4 MiB database, 5 s measured) through
# `edbstress fleet run`, which prints its time per phase: preflight (the checks), start
# (each host's directory and run), wait past the duration (from the end of the measured
# duration to the last run's end: the runs' own shutdown and results), collect (the
# copies back) and aggregate. The table gives them against the host count, and the
# ratio of the 64-host overhead to the 8-host overhead. Every fleet's aggregate is
# checked against its hosts' results.json: the IOPS their sum, each class's p99 the
# hosts' histograms merged, the latency over time the interval histograms merged.
#
# All hosts run on this machine: the runs, both ends of every ssh session and the
# fleet share its cores, so the figures are an upper bound for hosts of their own.
# About 4 minutes on 2 cores (120 runs). Not part of the test suite.
#
# Usage: bench/fleet_scale/run.sh [DIR]
#   DIR  keeps each fleet's directory (DIR/hostsN/out: fleet.log, report.html, hosts/);
#        default: a temporary directory, removed afterwards
# Environment: FLEET_SCALE_HOSTS ("8 16 32 64"), FLEET_SCALE_FLEET_OPTIONS (more
#   `fleet run` options, e.g. "--max-ssh-sessions 64")
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -gt 0 ]; then
  mkdir -p "$1"
  export FLEET_SCALE_DIR
  FLEET_SCALE_DIR=$(cd "$1" && pwd)
fi
echo "== machine: $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== other processes using CPU before:"
ps -eo pcpu,comm --sort=-pcpu | awk 'NR > 1 && $1 > 5 { n[$2]++ } END { for (c in n) print "   " n[c] " × " c }'
cargo test -q -p edbstress-cli --test tests --no-run
cargo test -q -p edbstress-cli --test tests suite::fleet_scale -- --ignored --nocapture --test-threads=1
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
