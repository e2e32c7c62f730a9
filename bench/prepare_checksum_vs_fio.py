#!/usr/bin/env python3
"""Compare `edbstress prepare` with fio sequential writes and `edbstress checksum` with
fio sequential reads, on the same filesystem, alternating, in one run.

Usage: bench/prepare_checksum_vs_fio.py [--dir DIR] [--size 2GiB] [--runs 3]

Prints each run and the medians, and the ratios edbstress/fio. Both tools use O_DIRECT,
io_uring, 1 MiB requests; fio at iodepth 8 for writes and 16 for reads, like edbstress's
defaults. CPU seconds (user+system) of each checksum run give the checksum GB/s per core.
Needs fio (Debian package `fio`) and a release build (`cargo build --release`).
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EDB = os.path.join(ROOT, "target", "release", "edbstress")


def run(cmd, **kw):
    """Runs a command; returns (stdout, cpu seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, cpu


def fio(name, rw, path, size, depth):
    out, _ = run([
        "fio", "--name", name, "--filename", path, "--size", size, "--rw", rw, "--bs", "1M",
        "--direct", "1", "--ioengine", "io_uring", "--iodepth", str(depth),
        "--output-format", "json",
    ])
    job = json.loads(out)["jobs"][0]
    side = job["write"] if "write" in rw else job["read"]
    return side["bw_bytes"] / 2**20  # MiB/s, the unit edbstress reports as MB/s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="directory on the filesystem under test (default: a temp dir under ./target)")
    ap.add_argument("--size", default="2GiB", help="file size for both tools")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if shutil.which("fio") is None:
        sys.exit("fio is not installed: apt-get install fio")
    if not os.path.exists(EDB):
        subprocess.run(["cargo", "build", "--release", "-p", "edbstress-cli"], cwd=ROOT, check=True)
    base = args.dir or os.path.join(ROOT, "target")
    work = tempfile.mkdtemp(prefix="edbstress-bench-", dir=base)
    fio_file = os.path.join(work, "fio.dat")
    fio_size = args.size.replace("iB", "")  # fio: 2G = 2 GiB (kb_base 1024)
    rows = []
    try:
        for i in range(args.runs):
            fw = fio("seqwrite", "write", fio_file, fio_size, 8)
            db = os.path.join(work, "db")
            out, _ = run([EDB, "prepare", "--databases", "1", "--database-size", args.size,
                          "--db-path", db, "--log-path", os.path.join(work, "logs"), "--json"])
            rep = json.loads(out)["databases"][0]
            pw = rep["bytes_written"] / 2**20 / rep["seconds"]
            fr = fio("seqread", "read", fio_file, fio_size, 16)
            out, cpu = run([EDB, "checksum", "--json", "--db-path", db, "--log-path", os.path.join(work, "logs")])
            ck = json.loads(out)["databases"][0]
            cr = ck["mb_per_sec"]
            per_core = ck["bytes_read"] / 1e9 / cpu if cpu > 0 else float("nan")
            rows.append((fw, pw, fr, cr, per_core))
            print(f"run {i + 1}: fio write {fw:8.1f} MB/s  prepare {pw:8.1f} MB/s  |  "
                  f"fio read {fr:8.1f} MB/s  checksum {cr:8.1f} MB/s  ({per_core:.2f} GB/s per CPU-second)",
                  flush=True)
            shutil.rmtree(db)
            shutil.rmtree(os.path.join(work, "logs"))
            os.remove(fio_file)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = [statistics.median(c) for c in zip(*rows)]
    print()
    print(f"median fio seq write  {med[0]:8.1f} MB/s   prepare  {med[1]:8.1f} MB/s   ratio {med[1] / med[0]:.3f}")
    print(f"median fio seq read   {med[2]:8.1f} MB/s   checksum {med[3]:8.1f} MB/s   ratio {med[3] / med[2]:.3f}")
    print(f"median checksum CPU efficiency: {med[4]:.2f} GB verified per CPU-second (I/O included)")


if __name__ == "__main__":
    main()
