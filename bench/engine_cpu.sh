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
fi
