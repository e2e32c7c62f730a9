#!/usr/bin/env python3
"""Compare `edbstress probe` with fio on the same file, alternating, in one run; and
soft-recovery's page reads with fio random reads at recovery's prefetch depth.

Usage: bench/probe_vs_fio.py [--dir DIR] [--size 1GiB] [--runs 5] [--seconds 5]
                             [--patterns randread,randwrite,...] [--recovery-logs 40]

For each pattern, each run does fio then edbstress (fio first in odd runs, edbstress
first in even ones) on one probe file (created by `edbstress probe --keep`; fio uses
the region after its first MiB, where edbstress's signature block lives), then prints
the medians and the ratios edbstress/fio of IOPS and of CPU per I/O. CPU: fio's own
usr+sys of the job, edbstress's getrusage over the measurement (`cpu_seconds`).

Both: O_DIRECT, io_uring, same block size, depth and duration; fio with
norandommap/randrepeat=0 (its cheapest random mode, so the comparison is strict).

Soft recovery (unless --recovery-logs 0): `edbstress run --test soft-recovery` on one
database; its recovery reads per second (RecoveryRead count / replay seconds) are
compared with fio random 32 KiB reads at depth 32 (recovery's prefetch depth, the
cache's write_depth) on the database file itself, read-only.

Needs fio (Debian package `fio`) and a release build (`cargo build --release`).
Keep prepare/checksum comparisons in bench/prepare_checksum_vs_fio.py.
"""

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prepare_checksum_vs_fio import EDB, ROOT, run  # noqa: E402

# name -> (fio rw, block size, depth, extra fio args, edbstress probe args)
PATTERNS = {
    "randread": ("randread", "32k", 32, [], ["--pattern", "randread", "--block-size", "32KiB", "--queue-depth", "32"]),
    "randwrite": ("randwrite", "32k", 32, [], ["--pattern", "randwrite", "--block-size", "32KiB", "--queue-depth", "32"]),
    "read1m": ("read", "1m", 8, [], ["--pattern", "read", "--block-size", "1MiB", "--queue-depth", "8"]),
    "write1m": ("write", "1m", 8, [], ["--pattern", "write", "--block-size", "1MiB", "--queue-depth", "8"]),
    "logwrite4k": ("write", "4k", 1, ["--fdatasync", "1"], ["--pattern", "logwrite", "--block-size", "4KiB"]),
}


def size_bytes(text):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    for suffix, mult in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * mult)
    return int(text)


def fio_job(path, rw, bs, depth, seconds, extra, offset=0, size=None, readonly=False):
    """One fio job; returns (iops, CPU us per I/O of the job, mean latency ms, MiB/s)."""
    cmd = ["fio", "--name", "bench", "--filename", path, "--rw", rw, "--bs", bs,
           "--direct", "1", "--ioengine", "io_uring", "--iodepth", str(depth),
           "--runtime", str(seconds), "--time_based", "--norandommap", "--randrepeat", "0",
           "--offset", str(offset), "--output-format", "json"] + extra
    if size is not None:
        cmd += ["--size", str(size)]
    if readonly:
        cmd += ["--readonly"]
    out, _ = run(cmd)
    job = json.loads(out)["jobs"][0]
    side = job["write"] if "write" in rw else job["read"]
    runtime_s = job["job_runtime"] / 1000.0
    cpu = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime_s
    ios = side.get("total_ios") or side["iops"] * runtime_s
    cpu_us = 1e6 * cpu / ios if ios else float("nan")
    lat_ms = side["lat_ns"]["mean"] / 1e6 if "lat_ns" in side else float("nan")
    return side["iops"], cpu_us, lat_ms, side["bw_bytes"] / 2**20


def probe(path, seconds, args):
    out, _ = run([EDB, "probe", "--file", path, "--keep", "--json", "--duration", f"{seconds}s"] + args)
    r = json.loads(out)
    return r["iops"], r["cpu_us_per_op"], r["avg_latency_ms"]


def compare_patterns(work, size, runs, seconds, names):
    path = os.path.join(work, "edbstress-probe.dat")
    # Creates and fills the file (fio would otherwise lay out its own).
    run([EDB, "probe", "--file", path, "--size", size, "--keep", "--json", "--pattern", "read", "--duration", "1s"])
    region = size_bytes(size) - (1 << 20)
    summary = []
    for name in names:
        rw, bs, depth, extra, pargs = PATTERNS[name]
        rows = []
        for i in range(runs):
            def f():
                return fio_job(path, rw, bs, depth, seconds, extra, offset=1 << 20, size=region)

            def e():
                return probe(path, seconds, pargs)

            if i % 2 == 0:
                fr, er = f(), e()
            else:
                er, fr = e(), f()
            fio_cpu_us, edb_cpu_us = fr[1], er[1]
            # The paired ratio of one run (same minute of a noisy device) as well.
            rows.append((fr[0], er[0], fio_cpu_us, edb_cpu_us, fr[2], er[2], er[0] / fr[0]))
            print(f"{name:11s} run {i + 1}: fio {fr[0]:9.0f} IOPS {fio_cpu_us:6.2f} us CPU/IO {fr[2]:7.3f} ms  |  "
                  f"edbstress {er[0]:9.0f} IOPS {edb_cpu_us:6.2f} us CPU/IO {er[2]:7.3f} ms", flush=True)
        med = [statistics.median(c) for c in zip(*rows)]
        summary.append((name, med))
    return summary


def find_results(results_dir):
    found = glob.glob(os.path.join(results_dir, "**", "results.json"), recursive=True)
    if not found:
        sys.exit(f"no results.json under {results_dir}")
    with open(max(found, key=os.path.getmtime)) as fh:
        return json.load(fh)


def class_entry(io, key):
    """The per-class figures of `key` in a results.json io summary (list or map)."""
    if isinstance(io, dict):
        if key in io:
            return io[key]
        for v in io.values():
            if isinstance(v, dict) and v.get("class") == key:
                return v
    if isinstance(io, list):
        for v in io:
            if isinstance(v, dict) and v.get("class") == key:
                return v
    return None


def compare_recovery(work, runs, seconds, logs):
    rows = []
    for i in range(runs):
        run_dir = os.path.join(work, f"sr{i}")
        db, lg, res = (os.path.join(run_dir, d) for d in ("db", "logs", "results"))
        os.makedirs(run_dir)
        rss_file = os.path.join(run_dir, "maxrss")
        # A 64 MiB cache: the memory goal's limit is then 64 + 6.4 + 64 MiB.
        run(["/usr/bin/time", "-f", "%M", "-o", rss_file,
             EDB, "run", "--test", "soft-recovery", "--databases", "1", "--database-size", "1GiB",
             "--cache-max", "64MiB", "--cache-min", "64MiB",
             "--logs-to-replay", str(logs), "--db-path", db, "--log-path", lg, "--results-dir", res])
        with open(rss_file) as f:
            max_rss_mib = int(f.read().split()[-1]) / 1024
        r = find_results(res)
        inst = r["instances"][0]
        elapsed = inst.get("elapsed_seconds") or float("nan")
        rr = class_entry(inst.get("io", r.get("totals", {}).get("io", {})), "recovery_read") \
            or class_entry(r.get("totals", {}).get("io", {}), "recovery_read") or {}
        reads = rr.get("count", 0)
        reads_per_s = reads / elapsed if elapsed else float("nan")
        read_mbs = reads * rr.get("avg_bytes", 0) / 2**20 / elapsed if elapsed else float("nan")
        logs_per_s = (inst.get("logs_replayed") or 0) / elapsed if elapsed else float("nan")
        dbfile = sorted(glob.glob(os.path.join(db, "*.edb")))[0]
        fr = fio_job(dbfile, "randread", "32k", 32, seconds, [], readonly=True)
        rows.append((fr[0], reads_per_s, logs_per_s, fr[3], read_mbs, max_rss_mib))
        print(f"soft-recovery run {i + 1}: fio randread 32k qd32 {fr[0]:9.0f} IOPS {fr[3]:7.1f} MB/s  |  recovery "
              f"{reads_per_s:9.0f} reads/s {read_mbs:7.1f} MB/s, {logs_per_s:6.2f} logs/s "
              f"({reads} reads in {elapsed:.2f} s), max RSS {max_rss_mib:.1f} MiB", flush=True)
        shutil.rmtree(run_dir)
    return [statistics.median(c) for c in zip(*rows)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="directory on the filesystem under test (default: a temp dir under ./target)")
    ap.add_argument("--size", default="1GiB", help="probe file size")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5, help="duration of each measurement")
    ap.add_argument("--patterns", default=",".join(PATTERNS), help="comma-separated: " + ",".join(PATTERNS))
    ap.add_argument("--recovery-logs", type=int, default=200, help="logs per soft-recovery run (0: skip)")
    args = ap.parse_args()
    if shutil.which("fio") is None:
        sys.exit("fio is not installed: apt-get install fio")
    if not os.path.exists(EDB):
        subprocess.run(["cargo", "build", "--release", "-p", "edbstress-cli"], cwd=ROOT, check=True)
    names = [n for n in args.patterns.split(",") if n]
    for n in names:
        if n not in PATTERNS:
            sys.exit(f"unknown pattern {n}: use {', '.join(PATTERNS)}")
    base = args.dir or os.path.join(ROOT, "target")
    work = tempfile.mkdtemp(prefix="edbstress-bench-", dir=base)
    try:
        summary = compare_patterns(work, args.size, args.runs, args.seconds, names)
        os.remove(os.path.join(work, "edbstress-probe.dat"))
        recovery = None
        if args.recovery_logs > 0:
            recovery = compare_recovery(work, max(1, min(args.runs, 3)), args.seconds, args.recovery_logs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"medians of {args.runs} runs, {args.seconds} s each, O_DIRECT, io_uring")
    print(f"{'pattern':11s} {'fio IOPS':>10s} {'edb IOPS':>10s} {'ratio':>6s} {'paired':>6s}   "
          f"{'fio us/IO':>9s} {'edb us/IO':>9s} {'ratio':>6s}   {'fio ms':>7s} {'edb ms':>7s}")
    for name, (fi, ei, fc, ec, fl, el, paired) in summary:
        print(f"{name:11s} {fi:10.0f} {ei:10.0f} {ei / fi:6.3f} {paired:6.3f}   "
              f"{fc:9.2f} {ec:9.2f} {ec / fc:6.3f}   {fl:7.3f} {el:7.3f}")
    print("(ratio: of the medians; paired: median of each run's edbstress/fio IOPS)")
    if recovery:
        fi, rr, lps, fmb, rmb, rss = recovery
        print(f"soft-recovery: {rr:.0f} reads/s ({rmb:.1f} MB/s) vs fio randread 32k qd32 {fi:.0f} IOPS "
              f"({fmb:.1f} MB/s): ratio {rr / fi:.3f} by I/Os, {rmb / fmb:.3f} by bytes; {lps:.2f} logs replayed/s")
        print(f"soft-recovery max RSS {rss:.1f} MiB (goal: at most 64 MiB cache + 10 % + 64 MiB = 134.4 MiB)")


if __name__ == "__main__":
    main()
