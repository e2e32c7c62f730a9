#!/usr/bin/env bash
# CPU cost of the transactional engine per database I/O: a database much larger than
# the cache, the Exchange 2010 operation mix, N sessions; prints transactions/s, I/O
# rates and µs of CPU per transactional I/O. Also prints fio's CPU per I/O for random
# 32 KiB reads with the same number of synchronous threads on the same file, as the
# floor the kernel and device set on this machine.
#
# Reads, deletes and replaces pick messages uniformly over the whole database (since
# 2026-11-26; before, nearly all of them hit each mailbox's first message: a 96 % hit
# ratio, ~0.5 misses per transaction). The hit ratio printed is the measured phase's;
# with a 2 GiB database and a 64 MiB cache expect ~94 % (interior pages stay cached)
# and ~0.9 misses per transaction. It also prints context switches per transaction.
# The engine has no database maintenance (BDM is the workload's), so none runs here.
#
# Then fio's CPU per read in two models on the same file, each with SESSIONS reads
# outstanding, unthrottled (both then run at the rate the device's latency allows, and
# fio's rate control, which sleeps, stays out of the figures): one thread per
# outstanding read (SESSIONS threads at queue depth 1, how sessions with a thread each
# read) and one io_uring ring per core (2 threads at queue depth SESSIONS/2, how
# sessions running as tasks read). The difference is what the thread-per-session model
# costs per read on this machine.
#
# The engine's sessions run as tasks on one thread per CPU, as in `edbstress run`
# (since 2026-11-26); ENGINE_CPU_TASK_THREADS=N runs them on N threads, and
# ENGINE_CPU_TASK_THREADS=0 gives each session a thread of its own (the model before).
#
# Usage: bench/engine_cpu.sh [DIR] [DB_GIB] [CACHE_MIB] [SECONDS] [SESSIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/bench-engine}
db_gib=${2:-4}
cache_mib=${3:-64}
seconds=${4:-20}
sessions=${5:-16}
cargo build --release -q -p edbstress-engine --example engine_cpu
mkdir -p "$dir"
./target/release/examples/engine_cpu "$dir" "$db_gib" "$cache_mib" "$seconds" "$sessions"
if command -v fio >/dev/null; then
  fio --name=floor --filename="$dir/db/edbstress001.edb" --readonly --rw=randread --bs=32k \
      --direct=1 --ioengine=psync --numjobs="$sessions" --group_reporting --runtime=10 \
      --time_based --output-format=json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
iops = j["read"]["iops"]
cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100 * int(sys.argv[1])
print(f"fio psync randread 32k x{sys.argv[1]}: {iops:.0f} IOPS, {1e6 * cpu / iops:.1f} us of CPU per I/O")
' "$sessions"
  per_core=$(( (sessions + 1) / 2 ))
  if command -v /usr/bin/time >/dev/null; then
    model() { # NAME JOBS DEPTH: fio unthrottled; prints "user sys reads"
      /usr/bin/time -o "$dir/fio.time" -f "%U %S" \
        fio --name="$1" --filename="$dir/db/edbstress001.edb" --readonly --rw=randread \
          --bs=32k --direct=1 --ioengine=io_uring --thread --numjobs="$2" --iodepth="$3" \
          --group_reporting --runtime=10 --time_based \
          --output-format=json >"$dir/fio.json" 2>/dev/null
      python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print(*open(sys.argv[2]).read().split(), j["read"]["total_ios"])
' "$dir/fio.json" "$dir/fio.time"
    }
    threads=$(model per-thread "$sessions" 1)
    ring=$(model per-core 2 "$per_core")
    python3 -c '
import sys
n, d = sys.argv[1], sys.argv[2]
tu, ts, ti = map(float, sys.argv[3].split())
ru, rs, ri = map(float, sys.argv[4].split())
print(f"fio io_uring randread 32k, {n} reads outstanding, CPU per read (user + system):")
print(f"  {n} threads at depth 1 (thread per session): {1e6*(tu+ts)/ti:.1f} us ({1e6*tu/ti:.1f} + {1e6*ts/ti:.1f}; {ti/10:.0f} reads/s)")
print(f"  2 threads at depth {d} (ring per core):        {1e6*(ru+rs)/ri:.1f} us ({1e6*ru/ri:.1f} + {1e6*rs/ri:.1f}; {ri/10:.0f} reads/s)")
print(f"  thread per session costs {1e6*((tu+ts)/ti-(ru+rs)/ri):.1f} us more per read (ratio {((tu+ts)/ti)/((ru+rs)/ri):.2f})")
' "$sessions" "$per_core" "$threads" "$ring"
  else
    echo "SKIPPED the fio model comparison: /usr/bin/time is missing (Debian package: time)"
  fi
fi
