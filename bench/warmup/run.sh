#!/usr/bin/env bash
# Warm-up benchmark: how long a Performance test takes to attain its prerequisites (fill
# each database cache to 90 %) at an older commit that warmed at the target rate, and at
# HEAD, which warms closed loop as fast as the storage allows. Both binaries (the same
# cargo profile) run the same 5-minute mailbox-profile Performance test on the same
# setup, one after the other, each on databases of its own in the same directory (the
# first run's files are deleted before the second starts). The warm-up lasts from the
# test log's "Attaining prerequisites: filling" line to the line that ends it ("Database
# Cache Size, Last: ...", or the timeout's "Caches did not reach ..."); the bench prints
# both durations and their ratio.
#
# The default setup shows the old behaviour: 500 mailboxes × 0.12 IOPS (a target of 60
# transactional IOPS), two databases of 3 GiB with direct I/O, a 400 MiB cache (12,800
# pages of 32 KiB to fill): at the target rate that is minutes of reads. About 20 minutes
# in all (two builds if not built yet, two 5-minute tests, the old warm-up), 7 GiB of
# disk at a time. Not part of the test suite.
#
# Usage: bench/warmup/run.sh [DIR]
#   DIR  where the databases, logs and results go (default: a new directory under
#        /tmp); the databases and logs are deleted afterwards, the results kept in DIR
# Environment: WARMUP_OLD_COMMIT (a1ee211, the last commit that warmed at the target
#   rate), WARMUP_OLD_TREE (/tmp/wt-warmup-old, its git worktree, added if missing),
#   WARMUP_PROFILE (test: the cargo profile of both builds), WARMUP_RUN_OPTIONS (more
#   `edbstress run` options for both runs, e.g. "--database-size 2GiB")
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
old_commit=${WARMUP_OLD_COMMIT:-a1ee211}
old_tree=${WARMUP_OLD_TREE:-/tmp/wt-warmup-old}
profile=${WARMUP_PROFILE:-test}
case "$profile" in
  test | dev) out_dir=debug ;;
  *) out_dir=$profile ;;
esac
dir=${1:-$(mktemp -d /tmp/warmup-bench.XXXXXX)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

echo "== machine: $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg); free under $dir: $(df -h --output=avail "$dir" | tail -1 | tr -d ' ')"
if [ ! -e "$old_tree/.git" ]; then
  git worktree add --detach "$old_tree" "$old_commit"
fi
echo "== building $old_commit ($old_tree) and HEAD ($(git rev-parse --short HEAD)), profile $profile"
(cd "$old_tree" && git checkout -q --detach "$old_commit" && cargo build -q --profile "$profile" -p edbstress-cli)
cargo build -q --profile "$profile" -p edbstress-cli
# Copies: a build in either tree while the bench runs does not change what it measures.
mkdir -p "$dir/bin"
cp "$old_tree/target/$out_dir/edbstress" "$dir/bin/edbstress-old"
cp "$repo/target/$out_dir/edbstress" "$dir/bin/edbstress-new"
old_bin="$dir/bin/edbstress-old"
new_bin="$dir/bin/edbstress-new"

# The same test for both: 5 minutes measured, the databases created by the run itself.
run_options=(run --test performance --profile exchange2013 --mailboxes 500
  --iops-per-mailbox 0.12 --databases 2 --database-size 3GiB --cache-max 400MiB
  --cache-min 200MiB --duration 5m --warmup-timeout 10m --no-verify)
# shellcheck disable=SC2206 # split on purpose: more options
run_options+=(${WARMUP_RUN_OPTIONS:-})

# Seconds between the log lines that start and end the warm-up of the run under $1.
warmup_seconds() {
  local log
  log=$(ls "$1"/*/test.log | head -1)
  local start end
  start=$(grep -m1 'Attaining prerequisites: filling' "$log" | cut -c1-19)
  end=$(grep -m1 -E 'Database Cache Size, Last:|Caches did not reach|Attaining prerequisites ended' "$log" | cut -c1-19)
  if [ -z "$start" ] || [ -z "$end" ]; then
    echo "no warm-up found in $log" >&2
    return 1
  fi
  echo $(($(date -d "$end" +%s) - $(date -d "$start" +%s)))
}

run_one() { # name binary
  local name=$1 bin=$2
  echo "== $name: $bin ${run_options[*]}"
  local status=0
  "$bin" "${run_options[@]}" --db-path "$dir/$name/db" --log-path "$dir/$name/logs" \
    --results-dir "$dir/$name/results" > "$dir/$name.out" 2>&1 || status=$?
  # 0 pass, 1 fail (latency on a shared machine): both measured a warm-up.
  if [ "$status" -gt 1 ]; then
    cat "$dir/$name.out" >&2
    return 1
  fi
  grep -h -E 'Attaining prerequisites|Database Cache Size, Last:|Caches did not reach' "$dir/$name"/results/*/test.log | sed 's/^/   /'
  rm -rf "$dir/$name/db" "$dir/$name/logs"
}

trap 'rm -rf "$dir"/old/db "$dir"/old/logs "$dir"/new/db "$dir"/new/logs' EXIT
run_one old "$old_bin"
run_one new "$new_bin"
old_s=$(warmup_seconds "$dir/old/results")
new_s=$(warmup_seconds "$dir/new/results")
echo "== warm-up at $old_commit: ${old_s} s"
echo "== warm-up at HEAD ($(git rev-parse --short HEAD)): ${new_s} s"
awk -v o="$old_s" -v n="$new_s" 'BEGIN {
  if (o > 0) printf "== ratio HEAD / old: %.3f (goal: below 0.25)\n", n / o
}'
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg); results kept under $dir/{old,new}/results"
