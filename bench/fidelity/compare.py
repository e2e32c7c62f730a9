#!/usr/bin/env python3
"""Prints one profile's workload-shape rows next to the Jetstress reference figures.

Usage: compare.py PROFILE PERFORMANCE_RESULTS.json SOFT_RECOVERY_RESULTS.json

The reference figures and the arithmetic behind each are in docs/fidelity.md
(per database, averaged over the instances of the report's Performance and SoftRecovery
appendices). exchange2010 is compared with the Cisco UCS C210 ESRP (Jetstress 2010),
exchange2013 with the Dell PS6210E ESRP (Jetstress 2013); exchange2007 with the
figures publicly known of Exchange 2007 (docs/fidelity.md), where one is known.
"""
import json
import sys

# row key -> (label, tolerance)
ROWS = [
    ("db_read_bytes", "database read, average bytes", 0.15),
    ("db_write_bytes", "database write, average bytes", 0.15),
    ("read_write_ratio", "transactional reads/s : writes/s", 0.15),
    ("log_write_bytes", "log write, average bytes", 0.15),
    ("log_writes_per_io", "log writes per database read or write", 0.15),
    ("log_bytes_per_io", "log bytes per database read or write", 0.15),
    ("repl_read_bytes", "log replication read, average bytes", 0.15),
    ("repl_per_log_byte", "replication bytes per log byte per extra copy", 0.15),
    ("bdm_reads_per_sec", "BDM reads/s per database", None),
    ("bdm_read_bytes", "BDM read, average bytes", 0.15),
    ("growth_per_io", "database growth per transactional I/O, bytes", 0.30),
    ("sr_reads_per_log", "soft recovery: database reads per replayed log file", 0.15),
    ("sr_read_bytes", "soft recovery: database read, average bytes", 0.15),
    ("sr_seconds_per_log", "soft recovery: seconds per log file (storage-bound)", None),
]

REFERENCE = {
    # Dell EqualLogic PS6210E, Jetstress 2013 (docs/fidelity.md, "exchange2013").
    "exchange2013": {
        "db_read_bytes": 32825, "db_write_bytes": 35970, "read_write_ratio": 2.352,
        "log_write_bytes": 20299, "log_writes_per_io": 0.0715, "log_bytes_per_io": 1451,
        "repl_read_bytes": 232568, "repl_per_log_byte": 0.996, "bdm_reads_per_sec": 8.61,
        "bdm_read_bytes": 261897, "growth_per_io": 333, "sr_reads_per_log": 649,
        "sr_read_bytes": 39862, "sr_seconds_per_log": 2.018,
    },
    # Cisco UCS C210 M2, Jetstress 2010 (docs/fidelity.md, "exchange2010").
    "exchange2010": {
        "db_read_bytes": 34876, "db_write_bytes": 36426, "read_write_ratio": 1.322,
        "log_write_bytes": 4662, "log_writes_per_io": 0.381, "log_bytes_per_io": 1776,
        "repl_read_bytes": 213310, "repl_per_log_byte": 0.863, "bdm_reads_per_sec": 27.29,
        "bdm_read_bytes": 261229, "growth_per_io": 519, "sr_reads_per_log": 804,
        "sr_read_bytes": 41425, "sr_seconds_per_log": 2.843,
    },
    # Exchange 2007 / Jetstress 2007: only the page size is published as a figure
    # that fixes I/O sizes (8 KB pages, ESE 2007 did not coalesce beyond its page
    # in the ESRP 2007 reports' Disk Subsystem tables: ~8-9 KB per transfer);
    # the rest is printed without a reference.
    "exchange2007": {
        "db_read_bytes": 8192, "db_write_bytes": 8192,
    },
}


def io(node, cls):
    return node.get("io", {}).get(cls, {}) or {}


def measure(perf, sr):
    m = {}
    insts = perf.get("instances", []) if perf else []
    n = max(len(insts), 1)
    tot = perf.get("totals", {}) if perf else {}
    dr, dw = io(tot, "db_read"), io(tot, "db_write")
    lw, rr, bdm = io(tot, "log_write"), io(tot, "replication_read"), io(tot, "bdm_read")
    ios = dr.get("per_sec", 0) + dw.get("per_sec", 0)
    if perf:
        m["db_read_bytes"] = dr.get("avg_bytes")
        m["db_write_bytes"] = dw.get("avg_bytes")
        if dw.get("per_sec"):
            m["read_write_ratio"] = dr.get("per_sec", 0) / dw["per_sec"]
        m["log_write_bytes"] = lw.get("avg_bytes")
        if ios:
            m["log_writes_per_io"] = lw.get("per_sec", 0) / ios
            m["log_bytes_per_io"] = lw.get("per_sec", 0) * lw.get("avg_bytes", 0) / ios
        m["repl_read_bytes"] = rr.get("avg_bytes")
        copies = perf.get("parameters", {}).get("copies", 1)
        log_bps = lw.get("per_sec", 0) * lw.get("avg_bytes", 0)
        if copies > 1 and log_bps:
            m["repl_per_log_byte"] = (
                rr.get("per_sec", 0) * rr.get("avg_bytes", 0) / log_bps / (copies - 1))
        m["bdm_reads_per_sec"] = bdm.get("per_sec", 0) / n
        m["bdm_read_bytes"] = bdm.get("avg_bytes")
        sizing = perf.get("sizing", {})
        count = dr.get("count", 0) + dw.get("count", 0)
        # Pages taken from the end of the files (exact); older results: file sizes,
        # which grow in steps of ~1 % of the file.
        allocated = [(i.get("engine") or {}).get("allocated_bytes") for i in insts]
        if all(a is not None for a in allocated) and allocated:
            grown = sum(allocated)
        else:
            grown = sizing.get("final_bytes", 0) - sizing.get("initial_bytes", 0)
        if count:
            m["growth_per_io"] = grown / count
    if sr:
        logs = sum(i.get("logs_replayed") or 0 for i in sr.get("instances", []))
        secs = sum(i.get("elapsed_seconds") or 0 for i in sr.get("instances", []))
        rec = io(sr.get("totals", {}), "recovery_read")
        if logs:
            m["sr_reads_per_log"] = rec.get("count", 0) / logs
            m["sr_seconds_per_log"] = secs / logs
        m["sr_read_bytes"] = rec.get("avg_bytes")
    return m


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"  (no results in {path}: {e})")
        return None


def main():
    profile, perf_path, sr_path = sys.argv[1:4]
    perf, sr = load(perf_path), load(sr_path)
    m = measure(perf, sr)
    ref = REFERENCE.get(profile, {})
    print(f"\n== {profile} ==")
    if perf:
        p = perf.get("parameters", {})
        print(f"   {p.get('databases')} databases of {p.get('database_bytes', 0) >> 20} MiB, "
              f"cache {p.get('cache_max_bytes', 0) >> 20} MiB each, {p.get('threads')} threads, "
              f"{p.get('copies')} copies, BDM {p.get('bdm')}, {perf.get('measured_seconds', 0):.0f} s; "
              f"{perf.get('achieved_transactional_iops', 0):.1f} transactional IOPS")
    print(f"   {'row':<52} {'edbstress':>11} {'reference':>11} {'diff':>8}  verdict")
    failed = 0
    for key, label, tol in ROWS:
        got, want = m.get(key), ref.get(key)
        g = "n/a" if got is None else f"{got:,.4g}" if got < 10 else f"{got:,.0f}"
        w = "-" if want is None else f"{want:,.4g}" if want < 10 else f"{want:,.0f}"
        if got is None or want is None:
            d, verdict = "", ""
        else:
            rel = (got - want) / want
            d = f"{rel:+.1%}"
            if tol is None:
                verdict = "(reported)"
            elif abs(rel) <= tol:
                verdict = f"ok (±{tol:.0%})"
            else:
                verdict = f"OFF (±{tol:.0%})"
                failed += 1
        print(f"   {label:<52} {g:>11} {w:>11} {d:>8}  {verdict}")
    print(f"   rows outside tolerance: {failed}")


if __name__ == "__main__":
    main()
