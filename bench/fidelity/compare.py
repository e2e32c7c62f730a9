#!/usr/bin/env python3
"""Prints one profile's workload-shape rows next to the Jetstress reference figures.

Usage: compare.py PROFILE PERFORMANCE_RESULTS.json SOFT_RECOVERY_RESULTS.json
                  [--measure-from SECONDS] [--checkpoint-depth SIZE]

--measure-from: the I/O rows come from the samples after this many seconds of the
measured period (the ramp before them lets the cache and the checkpoint reach their
steady state); growth per I/O is over the whole run. --checkpoint-depth (e.g. 25MiB):
prints the checkpoint window (depth / log bytes per second per database) next to the
cache turnover (cache pages / database reads per second per database), the two time
constants that decide why a page is written.

The reference figures and the arithmetic behind each are in docs/fidelity.md
(per database, averaged over the instances of the report's Performance and SoftRecovery
appendices). exchange2010 is compared with the Cisco UCS C210 ESRP (Jetstress 2010),
exchange2013 (and exchange2016/2019, which Jetstress 2013 tests) with the Dell PS6210E
ESRP (Jetstress 2013); exchange2007 with the Exchange 2007 bands Microsoft published
(docs/fidelity.md; no 2007 ESRP table was readable), judged in or out of the band.
"""
import json
import re
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
    # Exchange 2007 / Jetstress 2007 (docs/fidelity.md, "Exchange 2007"): no 2007
    # report's per-storage-group table is readable here, so the reference is the
    # version-era bands Microsoft published (jetstress-internals.md §5), in RANGES;
    # the value here is the band's middle. Sizes: one 8 KB page per transfer.
    "exchange2007": {
        "db_read_bytes": 8192, "db_write_bytes": 8192, "read_write_ratio": 1.0,
        "log_writes_per_io": 0.375,
    },
}

# Rows whose reference is a published band rather than one report's figure: the
# verdict is "in band" / "OFF (band)", the diff is against the band's middle above.
RANGES = {
    "exchange2007": {
        # database reads : writes "about 1 : 1" (Demartek, Exchange 2003 vs 2007
        # I/O comparison), taken as ±15 %
        "read_write_ratio": (0.85, 1.15),
        # database I/O : log I/O "4 : 1 to 2 : 1" (Jetstress FAQ, bb676291)
        "log_writes_per_io": (0.25, 0.5),
    },
}


def io(node, cls):
    return node.get("io", {}).get(cls, {}) or {}


def totals_after(perf, start):
    """The Total scope's I/O classes over the samples ending after `start` seconds:
    per_sec the mean over those intervals, avg_bytes weighted by per_sec, count the
    operations in them. None when the run has no such samples."""
    rows = [s for s in perf.get("samples", [])
            if s.get("scope") == "Total" and s.get("elapsed_s", 0) > start + 1e-6
            and s.get("per_sec") is not None]
    if not rows:
        return None
    interval = perf.get("parameters", {}).get("sample_interval_seconds") or 1
    out = {}
    for fam in {r["family"] for r in rows}:
        fr = [r for r in rows if r["family"] == fam]
        ops = sum(r["per_sec"] for r in fr)
        out[fam] = {
            "per_sec": ops / len(fr),
            "avg_bytes": (sum(r["per_sec"] * (r.get("avg_bytes") or 0) for r in fr) / ops
                          if ops else 0),
            "count": ops * interval,
        }
    return {"io": out, "seconds": len(fr) * interval}


def engine_after(perf, start):
    """Per-instance engine samples after `start`: mean cache hit %, highest checkpoint
    depth (MB) reached, over the whole run too."""
    eng = [s for s in perf.get("samples", []) if s.get("family") == "engine"
           and s.get("scope", "").startswith("Instance")]
    late = [s for s in eng if s.get("elapsed_s", 0) > start + 1e-6]
    hits = [s["cache_hit_pct"] for s in late if s.get("cache_hit_pct") is not None]
    depth = [s["checkpoint_depth_mb"] for s in eng if s.get("checkpoint_depth_mb") is not None]
    depth_late = [s["checkpoint_depth_mb"] for s in late
                  if s.get("checkpoint_depth_mb") is not None]
    return {
        "hit_pct": sum(hits) / len(hits) if hits else None,
        "depth_max_mb": max(depth) if depth else None,
        "depth_late_mean_mb": sum(depth_late) / len(depth_late) if depth_late else None,
    }


def measure(perf, sr, start=None):
    m = {}
    insts = perf.get("instances", []) if perf else []
    n = max(len(insts), 1)
    tot = perf.get("totals", {}) if perf else {}
    if perf and start is not None:
        late = totals_after(perf, start)
        if late is not None:
            tot = late
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
        whole = perf.get("totals", {})
        count = io(whole, "db_read").get("count", 0) + io(whole, "db_write").get("count", 0)
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


def by_volume(perf):
    return perf.get("achieved_iops_basis") == "database_volume_transfers"


def own_iops(perf):
    """The run's transactional IOPS: the report's figure, except under exchange2007's
    volume-based one (Jetstress 2007 counts every transfer on the database volume),
    where it is this run's own database reads and writes per second."""
    if not by_volume(perf):
        return perf.get("achieved_transactional_iops", 0)
    tot = perf.get("totals", {})
    return io(tot, "db_read").get("per_sec", 0) + io(tot, "db_write").get("per_sec", 0)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"  (no results in {path}: {e})")
        return None


def size_bytes(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|KB|MB|GB)?", text.strip())
    if not m:
        sys.exit(f"compare.py: size {text!r} not understood; give e.g. 25MiB")
    unit = {"B": 1, None: 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
            "KB": 10**3, "MB": 10**6, "GB": 10**9}[m[2]]
    return float(m[1]) * unit


def time_constants(perf, start, depth):
    """Cache turnover and checkpoint window of the measured part, per database."""
    p = perf.get("parameters", {})
    dbs = max(p.get("databases") or 1, 1)
    page = p.get("page_size") or p.get("page_bytes") or 32768
    cache_pages = (p.get("cache_max_bytes") or 0) / page  # per instance
    late = totals_after(perf, start) if start is not None else None
    tot = late if late is not None else perf.get("totals", {})
    reads = io(tot, "db_read").get("per_sec", 0) / dbs
    lw = io(tot, "log_write")
    log_bps = lw.get("per_sec", 0) * lw.get("avg_bytes", 0) / dbs
    eng = engine_after(perf, start or 0)
    turnover = cache_pages / reads if reads else None
    window = depth / log_bps if depth and log_bps else None
    line = f"   cache {cache_pages:,.0f} pages per database, turnover "
    line += f"{turnover:.0f} s" if turnover else "n/a"
    if depth:
        line += f"; checkpoint depth {depth / 2**20:.1f} MiB, window "
        line += f"{window:.0f} s" if window else "n/a"
    if eng["depth_max_mb"] is not None:
        line += f"; depth reached {eng['depth_max_mb']:.1f} MB"
        if eng["depth_late_mean_mb"] is not None:
            line += f" (mean {eng['depth_late_mean_mb']:.1f} MB measured)"
    if eng["hit_pct"] is not None:
        line += f"; cache hits {eng['hit_pct']:.1f} %"
    print(line)
    if start is not None:
        print(f"   rows from the samples after {start:.0f} s"
              + ("" if late is not None else " (none: whole run)")
              + "; growth over the whole run")


def main():
    args = sys.argv[1:]
    start = depth = None
    if "--measure-from" in args:
        i = args.index("--measure-from")
        start = float(args[i + 1].rstrip("s"))
        del args[i:i + 2]
    if "--checkpoint-depth" in args:
        i = args.index("--checkpoint-depth")
        depth = size_bytes(args[i + 1])
        del args[i:i + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    profile, perf_path, sr_path = args
    perf, sr = load(perf_path), load(sr_path)
    m = measure(perf, sr, start)
    ref = REFERENCE.get(profile) or (
        REFERENCE["exchange2013"] if profile in ("exchange2016", "exchange2019") else {})
    print(f"\n== {profile} ==")
    if perf:
        p = perf.get("parameters", {})
        print(f"   {p.get('databases')} databases of {p.get('database_bytes', 0) >> 20} MiB, "
              f"cache {p.get('cache_max_bytes', 0) >> 20} MiB each, {p.get('threads')} threads, "
              f"{p.get('copies')} copies, BDM {p.get('bdm')}, {perf.get('measured_seconds', 0):.0f} s; "
              f"{own_iops(perf):.1f} transactional IOPS")
        if by_volume(perf):
            # exchange2007 judges as Jetstress 2007: transfers on the database
            # volume, which on a shared VM include other work's I/O.
            print(f"   (the report's achieved IOPS, transfers on the database volume: "
                  f"{perf.get('achieved_transactional_iops', 0):.1f})")
        time_constants(perf, start, depth)
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
            band = RANGES.get(profile, {}).get(key)
            if band is not None:
                lo, hi = band
                text = f"{lo:,.3g}–{hi:,.3g}" if hi < 10 else f"{lo:,.0f}–{hi:,.0f}"
                if lo <= got <= hi:
                    verdict = f"ok (in {text})"
                else:
                    verdict = f"OFF ({text})"
                    failed += 1
            elif tol is None:
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
