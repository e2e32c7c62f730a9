#!/usr/bin/env bash
# Fidelity benchmark (issue 19): runs each version profile on small databases much
# larger than the cache (a Performance run, then a SoftRecovery run) and prints the
# workload-shape rows next to the Jetstress reference figures of docs/fidelity.md with
# the relative difference. Not part of the test suite; takes a few minutes per profile.
#
# Usage: bench/fidelity/run.sh [DIR] [PROFILES...]
#   DIR       scratch directory (default target/bench-fidelity); its databases are kept
#             between profiles of the same page size only when sizes match
#   PROFILES  exchange2007 exchange2010 exchange2013 (default: all three)
# Each profile runs open loop at the reference report's transactional IOPS per database
# and its sessions per database (log write sizes and counts depend on the commit rate per
# database, so a closed-loop run at this machine's speed would not be comparable):
#   exchange2013  Dell PS6210E:  1056.7 IOPS / 6 databases = 176 per database, 26 threads / 6
#   exchange2010  Cisco C210:     651.7 IOPS / 8 databases =  81 per database,  3 per database
#   exchange2007  (no report here): 100 per database, 4 per database
# Environment: FIDELITY_DB_SIZE (512MiB), FIDELITY_CACHE (16MiB, total: the issue's setup;
#   the database must dwarf the cache, or transactions hit the cache and every per-I/O
#   ratio inflates),
#   FIDELITY_DURATION (120s), FIDELITY_LOGS (20 log files per instance)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-target/bench-fidelity}
shift || true
profiles=("$@")
[ ${#profiles[@]} -eq 0 ] && profiles=(exchange2007 exchange2010 exchange2013)
db_size=${FIDELITY_DB_SIZE:-512MiB}
cache=${FIDELITY_CACHE:-16MiB}
duration=${FIDELITY_DURATION:-120s}
logs=${FIDELITY_LOGS:-20}
cargo build --release -q -p edbstress-cli
bin=./target/release/edbstress
for profile in "${profiles[@]}"; do
  case $profile in
    exchange2013) iops_per_db=176; threads=9 ;;
    exchange2010) iops_per_db=81; threads=6 ;;
    *) iops_per_db=100; threads=8 ;;
  esac
  work="$dir/$profile"
  # Only a directory this script made (its marker file inside) is ever removed.
  if [ -e "$work" ]; then
    if [ ! -f "$work/.edbstress-bench-fidelity" ]; then
      echo "$work exists and was not made by bench/fidelity: give another DIR" >&2
      exit 2
    fi
    rm -rf "$work"
  fi
  mkdir -p "$work"
  touch "$work/.edbstress-bench-fidelity"
  common=(--profile "$profile" --databases 2 --database-size "$db_size" --cache-max "$cache"
          --cache-min "$cache" --threads "$threads" --copies 2
          --mailboxes $((iops_per_db * 2)) --iops-per-mailbox 1
          --db-path "$work/db" --log-path "$work/logs" --results-dir "$work/results")
  # Loose limits: this measures shape, not the storage's latency.
  printf 'target_margin = 1.05\nwarmup_timeout = "60s"\n[thresholds]\ndb_read_avg_ms = 10000.0\ndb_read_max_ms = 100000.0\nlog_write_avg_ms = 10000.0\nlog_write_max_ms = 100000.0\npage_fault_stalls_per_sec = 1000000.0\n' > "$work/limits.toml"
  # BDM as the profile sets it (on for 2010/2013, off for 2007, as the reports ran).
  "$bin" run --config "$work/limits.toml" "${common[@]}" --duration "$duration" \
    --sample-interval 5s --no-verify --json > "$work/performance.json" || true
  "$bin" run --config "$work/limits.toml" "${common[@]}" --test soft-recovery \
    --logs-to-replay "$logs" --json > "$work/soft_recovery.json" || true
  python3 bench/fidelity/compare.py "$profile" "$work/performance.json" "$work/soft_recovery.json"
done
