#!/usr/bin/env python3
"""edbstress's own I/O latencies next to the kernel's, for the same requests: does the
tool time what the storage did, or add its own delays?

Usage: bench/timing_vs_kernel.py [--dir DIR] [--database-size 2GiB] [--cache 64MiB]
                                 [--threads 16] [--seconds 40] [--fio]
                                 [--run-arg=ARG ...]

Runs one `edbstress run` throughput run (closed loop, BDM off, one copy, io_uring,
--no-verify) on a freshly prepared database in a new directory under DIR and, while its
metrics endpoint says the measured phase is on, records the kernel's io_uring
tracepoints with `perf record` (io_uring_submit_req: the kernel takes the request;
io_uring_complete: its completion is posted). Per request it pairs the two, so the
kernel's time of each request is known, and sorts them into edbstress's classes by the
thread that issued them: reads of the session threads (database reads), writes of the
page writer (database writes) and of the log flusher (log writes). It prints, per class,
edbstress's average latency from results.json beside the kernel's average over the
traced window, and the difference: what edbstress's timing adds (it stamps a request
before the system call that submits it and when it reaps the completion). io_uring
posts a completion from the submitting thread, so a thread that is not running when
the device finishes posts it late: the kernel's time includes that wait, as does
edbstress's; the device's own time is not traced (virtio's batched completions skip
the block layer's per-request tracepoints). It also
prints the requests the kernel held at once (mean, standard deviation, 99th percentile
over time), in all and per class: how steady the load the device saw was.

--fio: then runs fio on a file as large as the database with random 32 KiB reads and
writes in the run's read share at a queue depth of the run's mean kernel depth of
database reads and writes, traced
the same way, and prints the same lines for it: at one mean depth, how the two tools'
requests fare in the kernel, and how steady each one's depth is.

Needs root (tracepoints), `perf` (Debian `linux-perf`) and a kernel with io_uring
tracepoints; exits 2 with the reason when one is missing. Only removes the directory it
created.
"""

import argparse
import collections
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prepare_checksum_vs_fio import EDB, ROOT, run  # noqa: E402
from transactional_vs_fio import fill_file, free_port, measuring, results_json, throughput_run_cmd  # noqa: E402

EVENTS = ["io_uring:io_uring_submit_req", "io_uring:io_uring_complete"]
LINE = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<tid>\d+)\s+\[\d+\]\s+(?P<ts>\d+\.\d+):\s+io_uring:"
                  r"(?P<ev>io_uring_submit_req|io_uring_complete):.*?req (?P<req>0x[0-9a-f]+)"
                  r"(?:.*?opcode (?P<op>\w+))?")


def need(ok, why):
    if not ok:
        print(f"timing_vs_kernel: cannot run: {why}", file=sys.stderr)
        sys.exit(2)


def edbstress_class(comm, op):
    """edbstress's class of a request from its thread's name and opcode (None: other)."""
    reads = op in ("READ", "READV", "READ_FIXED")
    writes = op in ("WRITE", "WRITEV", "WRITE_FIXED")
    if comm.startswith("edbs-pagewriter") and writes:
        return "db_write"
    if comm.startswith("log-flush") and writes:
        return "log_write"
    if comm.startswith("edbstress") and reads:  # session threads keep the process name
        return "db_read"
    return None


def trace(pid, data, until):
    """perf record of the io_uring tracepoints of process `pid` until `until()` is true
    (polled every 0.25 s) or the process ends."""
    cmd = ["perf", "record", "-q", "-m", "16M", "-p", str(pid), "-o", data]
    for e in EVENTS:
        cmd += ["-e", e]
    perf = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while perf.poll() is None and not until():
        time.sleep(0.25)
    if perf.poll() is None:
        perf.send_signal(signal.SIGINT)
    perf.wait()


def depth_shape(edges):
    """Mean, standard deviation and 99th percentile over time (every 100 us) of the
    requests open between paired (time, +1/-1) edges."""
    edges.sort()
    depth = []
    if edges:
        at, d, i = edges[0][0], 0, 0
        while i < len(edges):
            while i < len(edges) and edges[i][0] <= at:
                d += edges[i][1]
                i += 1
            depth.append(d)
            at += 1e-4
    if not depth:
        return (math.nan, math.nan, math.nan)
    mean, sd = statistics.fmean(depth), statistics.pstdev(depth)
    depth.sort()
    return (mean, sd, depth[int(0.99 * (len(depth) - 1))])


def kernel_times(data, classify):
    """Per class: the kernel times (s) of its requests and the shape of its depth over
    time; and the shape of the depth of all requests."""
    out = subprocess.run(["perf", "script", "-i", data], capture_output=True, text=True).stdout
    pending, times = {}, collections.defaultdict(list)
    edges = collections.defaultdict(list)
    for line in out.splitlines():
        m = LINE.search(line)
        if not m:
            continue
        t = float(m["ts"])
        if m["ev"] == "io_uring_submit_req":
            pending[m["req"]] = (t, classify(re.sub(r"\d+$", "", m["comm"].strip()), m["op"]))
        elif m["req"] in pending:
            t0, cls = pending.pop(m["req"])
            times[cls].append(t - t0)
            # Only paired requests: an event perf lost must not leave one open forever.
            edges[cls] += [(t0, 1), (t, -1)]
    shapes = {cls: depth_shape(list(e)) for cls, e in edges.items()}
    return times, shapes, depth_shape([x for e in edges.values() for x in e])


def print_rows(label, reported, kernel):
    times, shapes, shape = kernel
    print(f"{label}: kernel depth mean {shape[0]:.1f}, sd {shape[1]:.1f}, p99 {shape[2]:.0f}")
    for cls in sorted(times, key=lambda c: -len(times[c])):
        if cls is None:
            continue
        k = 1000 * statistics.fmean(times[cls])
        own = reported.get(cls)
        extra = f"  {own:7.3f} ms reported, {own - k:+.3f} ms ({100 * (own / k - 1):+.1f} %)" if own else ""
        d = shapes[cls]
        print(f"  {cls:10s} {len(times[cls]):8d} traced, kernel {k:7.3f} ms{extra}; "
              f"depth mean {d[0]:.1f}, sd {d[1]:.1f}, p99 {d[2]:.0f}")
    other = len(times.get(None, []))
    if other:
        print(f"  {other} other requests traced (growth, log creation, syncs, ...)")


def edbstress_run(work, args):
    res = os.path.join(work, "results")
    port = free_port()
    # io_uring: the tracepoints are io_uring's.
    cmd = throughput_run_cmd(EDB, work, res, port, args, "io_uring")
    with open(os.path.join(work, "run.out"), "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    while measuring(port) is not True:
        if proc.poll() is not None:
            sys.exit(f"edbstress run ended before measuring; see {work}/run.out")
        time.sleep(0.25)
    data = os.path.join(work, "edbstress.perf")
    trace(proc.pid, data, lambda: measuring(port) is not True)
    proc.wait()
    r = results_json(res)
    if proc.returncode not in (0, 1) or r is None:
        sys.exit(f"edbstress run failed (exit {proc.returncode}); see {work}/run.out")
    io = r["totals"]["io"]
    reported = {c: io[c]["avg_latency_ms"] for c in ("db_read", "db_write", "log_write") if io[c]["count"]}
    reads, writes = io["db_read"]["count"], io["db_write"]["count"]
    kernel = kernel_times(data, edbstress_class)
    iops = io["db_read"]["per_sec"] + io["db_write"]["per_sec"]
    return reported, kernel, 100 * reads / max(1, reads + writes), iops


def fio_run(work, args, depth, read_pct):
    size = os.path.getsize(os.path.join(work, "db", "edbstress001.edb"))
    path = os.path.join(work, "fio.dat")
    fill_file(path, size)
    proc = subprocess.Popen(["fio", "--name=db", f"--filename={path}", f"--size={size}", "--rw=randrw",
                             f"--rwmixread={round(read_pct)}", "--bs=32k", f"--iodepth={depth}",
                             "--norandommap", "--randrepeat=0", "--direct=1", "--ioengine=io_uring", "--thread",
                             f"--runtime={args.seconds}", "--time_based", "--output-format=json"],
                            stdout=subprocess.PIPE, text=True)
    time.sleep(2)
    data = os.path.join(work, "fio.perf")
    started = time.monotonic()
    trace(proc.pid, data, lambda: time.monotonic() - started > args.seconds - 4)
    out, _ = proc.communicate()
    job = json.loads(out[out.index("{"):])["jobs"][0]
    reported = {"db_read": job["read"]["lat_ns"]["mean"] / 1e6, "db_write": job["write"]["lat_ns"]["mean"] / 1e6}
    kernel = kernel_times(data, lambda comm, op: "db_read" if op.startswith("READ") else
                          ("db_write" if op.startswith("WRITE") else None))
    iops = job["read"]["iops"] + job["write"]["iops"]
    return reported, kernel, iops


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="directory on the filesystem under test (default: ./target)")
    ap.add_argument("--database-size", default="2GiB")
    ap.add_argument("--cache", default="64MiB")
    ap.add_argument("--threads", default="16", help="sessions: a count, or 'auto' (--auto-tune)")
    ap.add_argument("--sample-interval", type=int, default=5, help="edbstress sampling interval, s")
    ap.add_argument("--seconds", type=int, default=40, help="measured seconds (edbstress's are traced whole, fio's all but 4)")
    ap.add_argument("--fio", action="store_true", help="also fio at the run's mean kernel depth")
    ap.add_argument("--run-arg", action="append", default=[], metavar="ARG",
                    help="one more argument for `edbstress run` (repeat it)")
    args = ap.parse_args()
    need(os.geteuid() == 0, "tracepoints need root")
    need(shutil.which("perf"), "perf is not installed (Debian package linux-perf)")
    need(os.path.isdir("/sys/kernel/tracing/events/io_uring") or os.path.isdir("/sys/kernel/debug/tracing/events/io_uring"),
         "this kernel has no io_uring tracepoints")
    need(not args.fio or shutil.which("fio"), "--fio needs fio (Debian package fio)")
    if not os.path.exists(EDB):
        run(["cargo", "build", "--release", "-q", "-p", "edbstress-cli"], cwd=ROOT)
    base = args.dir or os.path.join(ROOT, "target")
    os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix="timing-vs-kernel-", dir=base)
    try:
        run([EDB, "prepare", "--databases", "1", "--database-size", args.database_size,
             "--db-path", os.path.join(work, "db"), "--log-path", os.path.join(work, "logs")])
        reported, kernel, read_pct, iops = edbstress_run(work, args)
        print(f"{args.threads} sessions, {args.database_size} database, {args.cache} cache, "
              f"{read_pct:.1f} % reads; averages over the measured phase (reported) and the traced "
              f"window (kernel: io_uring_submit_req to io_uring_complete)")
        print_rows(f"edbstress ({iops:.0f} database IOPS)", reported, kernel)
        if args.fio:
            # fio's depth: the database requests edbstress kept in the kernel on average.
            shapes = kernel[1]
            depth = max(1, round(sum(shapes[c][0] for c in ("db_read", "db_write") if c in shapes)))
            f_reported, f_kernel, iops = fio_run(work, args, depth, read_pct)
            print_rows(f"fio at queue depth {depth} ({iops:.0f} IOPS)", f_reported, f_kernel)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
