//! An exchange2007 run judged per volume, as Jetstress 2007 judged: the block device
//! under the temp directory in results.json (checked against `/proc/diskstats` read
//! around the run), the "Volume X: has … for Avg. Disk sec/Read." lines of the test log,
//! Achieved I/O per Second from the database volume's transfers, and the report's Disk
//! Subsystem Performance, per-storage-group thread count and Workload Shape tables as
//! Chromium renders them, each number checked against results.json.

use crate::suite::common;
use common::chromium::{chromium_or_skip, dump_dom};
use common::{edbstress, results, run_dirs};

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The kernel name of the block device holding `path`, found independently of
/// edbstress: st_dev → /sys/dev/block/MAJ:MIN/uevent DEVNAME. None for anonymous
/// devices (tmpfs, overlay, btrfs).
fn device_under(path: &Path) -> Option<String> {
    let dev = fs::metadata(path).unwrap().dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    if major == 0 {
        return None;
    }
    let uevent = fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).ok()?;
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(|s| s.trim().to_string())
}

/// Reads and writes completed by `device` since boot (`/proc/diskstats`).
fn diskstats(device: &str) -> (u64, u64) {
    let text = fs::read_to_string("/proc/diskstats").unwrap();
    let words: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.get(2) == Some(&device))
        .unwrap_or_else(|| panic!("{device} has no /proc/diskstats line"));
    (words[3].parse().unwrap(), words[7].parse().unwrap())
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// "32,768": the report's whole numbers.
fn thousands(v: f64) -> String {
    let digits = (v.round() as i64).unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < -0.5 { format!("-{out}") } else { out }
}

/// The text of the cell after the row header `name` (a table's first cell, or a
/// name-value table's name) in the rendered page.
fn cell_after<'a>(dom: &'a str, name: &str) -> &'a str {
    let at = dom
        .find(&format!("<td>{name}</td>"))
        .or_else(|| dom.find(&format!("<th>{name}</th>")))
        .unwrap_or_else(|| panic!("the rendered page has no row {name}"));
    let rest = &dom[at + name.len() + 9..];
    let start = rest.find('>').unwrap() + 1;
    let end = rest[start..].find("</td>").unwrap();
    &rest[start..start + end]
}

/// A short exchange2007 run of two databases under `root`, with `/proc/diskstats` of
/// `device` read before and after it. Returns its run directory and the diskstats
/// (reads, writes) before and after.
fn exchange2007_run(root: &Path, device: &str) -> (PathBuf, (u64, u64), (u64, u64)) {
    let before = diskstats(device);
    let out = edbstress(
        &[
            "run",
            "--profile",
            "exchange2007",
            "--databases",
            "2",
            "--database-size",
            "32MiB",
            "--cache-max",
            "8MiB",
            "--cache-min",
            "4MiB",
            "--threads",
            "4",
            "--duration",
            "5s",
            "--sample-interval",
            "1s",
            "--no-verify",
            "--db-path",
            "db",
            "--log-path",
            "logs",
            "--results-dir",
            "results",
        ],
        root,
    );
    let after = diskstats(device);
    assert!(
        out.status.code().is_some_and(|c| c == 0 || c == 1),
        "{}",
        common::stderr(&out)
    );
    let dirs = run_dirs(root);
    assert_eq!(dirs.len(), 1);
    (dirs[0].clone(), before, after)
}

/// The volume in results.json: the device under the temp directory, holding databases
/// and logs, its counts within the diskstats delta. Returns the volume, the measured
/// seconds, the transfers per second and whether the device is shared.
fn the_volume_is_the_device_under_the_run(
    r: &Value,
    device: &str,
    (before, after): ((u64, u64), (u64, u64)),
) -> (Value, f64, f64, bool) {
    let volumes = r["volumes"].as_array().expect("a volumes section");
    assert_eq!(volumes.len(), 1, "{volumes:?}");
    let v = &volumes[0];
    assert_eq!(v["device"], device);
    assert_eq!(v["role"], "database_and_log");
    assert_eq!(
        v["instances"],
        serde_json::json!(["Instance0001", "Instance0002"])
    );
    let (reads, writes) = (v["reads"].as_u64().unwrap(), v["writes"].as_u64().unwrap());
    assert!(writes > 0, "the run wrote to {device}: {v}");
    // The measured period is inside the whole run.
    assert!(
        reads <= after.0 - before.0,
        "{reads} reads > diskstats delta"
    );
    assert!(
        writes <= after.1 - before.1,
        "{writes} writes > diskstats delta"
    );
    let seconds = f(&r["measured_seconds"]);
    let transfers = f(&v["transfers_per_sec"]);
    let counted = (reads + writes) as f64 / seconds;
    assert!(
        (transfers - counted).abs() <= 0.05 * counted,
        "transfers/s {transfers} vs {counted} counted"
    );
    assert!(v["own_bytes"].as_u64().unwrap() > 0);
    let shared = v["shared"].as_bool().unwrap();
    let other =
        1.0 - v["own_bytes"].as_u64().unwrap() as f64 / v["device_bytes"].as_u64().unwrap() as f64;
    assert_eq!(
        shared,
        other > 0.2,
        "shared flag vs {other:.2} of other bytes"
    );
    (v.clone(), seconds, transfers, shared)
}

/// Achieved I/O per Second from the database volume's transfers, the volume judged
/// with the 2007 limits, and the test log's lines in Jetstress 2007's words.
fn the_run_is_judged_per_volume(
    r: &Value,
    dir: &Path,
    device: &str,
    (v, transfers, shared): (&Value, f64, bool),
) {
    // Achieved I/O per Second: the database volume's transfers.
    assert_eq!(r["achieved_iops_basis"], "database_volume_transfers");
    assert_eq!(f(&r["achieved_transactional_iops"]), transfers);

    // Judged per volume with the 2007 limits; no per-instance latency rule.
    let criteria = r["criteria"].as_array().unwrap();
    let rule = |key: &str| {
        criteria
            .iter()
            .find(|c| c["key"] == key)
            .unwrap_or_else(|| panic!("no criterion {key}"))
    };
    let scope = format!("Volume {device}");
    for (key, field, limit) in [
        ("volume_db_read_avg_latency", "avg_read_latency_ms", 20.0),
        (
            "volume_db_read_max_latency",
            "max_interval_read_latency_ms",
            50.0,
        ),
        ("volume_log_write_avg_latency", "avg_write_latency_ms", 10.0),
        (
            "volume_log_write_max_latency",
            "max_interval_write_latency_ms",
            50.0,
        ),
    ] {
        let c = rule(key);
        assert_eq!(c["scope"], scope.as_str());
        assert_eq!(f(&c["measured"]), f(&v[field]), "{key}");
        assert_eq!(f(&c["threshold"]), limit, "{key}");
    }
    assert!(!criteria.iter().any(|c| c["key"] == "db_read_avg_latency"));

    // The test log, in Jetstress 2007's words.
    let log = fs::read_to_string(dir.join("test.log")).unwrap();
    for line in [
        format!(
            "Volume {device}: has {:.4} for Avg. Disk sec/Read.",
            f(&v["avg_read_latency_ms"]) / 1000.0
        ),
        format!(
            "Volume {device}: has {:.4} for Avg. Disk sec/Write.",
            f(&v["avg_write_latency_ms"]) / 1000.0
        ),
    ] {
        assert!(log.contains(&line), "test.log lacks {line:?}:\n{log}");
    }
    assert_eq!(
        log.contains(&format!("Volume {device}: shared with other work")),
        shared
    );
}

/// What a person sees: the report's thread count, Disk Subsystem Performance and
/// Workload Shape tables as Chromium renders them, each number from results.json.
fn the_report_shows_the_volume_and_the_workload_shape(
    root: &Path,
    r: &Value,
    dir: &Path,
    device: &str,
    (v, seconds, transfers, shared): (&Value, f64, f64, bool),
) {
    let Some(chromium) = chromium_or_skip("the exchange2007 report") else {
        return;
    };
    let dom = dump_dom(&chromium, &dir.join("report.html"), &root.join("profile"));
    assert_eq!(cell_after(&dom, "Thread count"), "2 (per-storage group)");
    let row = format!("Database and Log ({device})");
    assert_eq!(cell_after(&dom, &row), "the device: every program");
    assert_eq!(
        cell_after(&dom, "the device: every program"),
        format!("{:.4}", f(&v["avg_read_latency_ms"]) / 1000.0)
    );
    // edbstress's own reads and writes apart from the device's totals.
    let own_reads = v["own_reads"].as_u64().unwrap() as f64 / seconds;
    let own_writes = v["own_writes"].as_u64().unwrap() as f64 / seconds;
    assert!(own_reads + own_writes > 0.0);
    assert!(own_reads <= f(&v["reads_per_sec"]) * 1.05 + 1.0);
    assert!(
        dom.contains(&format!(
            "edbstress only</td><td>—</td><td>—</td><td>{own_reads:.3}</td><td>{own_writes:.3}</td>"
        )),
        "no row of edbstress's own I/O"
    );
    assert!(dom.contains("id=\"disk-subsystem\""));
    assert_eq!(dom.contains("it is shared with other work"), shared);
    assert!(
        cell_after(&dom, "Achieved I/O per Second").starts_with(&format!("{transfers:.3} ")),
        "{}",
        cell_after(&dom, "Achieved I/O per Second")
    );

    // Workload Shape: each ratio from results.json's counters.
    let io = &r["totals"]["io"];
    let count = |class: &str| io[class]["count"].as_u64().unwrap() as f64;
    let avg = |class: &str| f(&io[class]["avg_bytes"]);
    let db_ios = count("db_read") + count("db_write");
    let growth = r["sizing"]["final_bytes"].as_u64().unwrap() as f64
        - r["sizing"]["initial_bytes"].as_u64().unwrap() as f64;
    for (name, expected) in [
        ("Database read, average bytes", thousands(avg("db_read"))),
        ("Database write, average bytes", thousands(avg("db_write"))),
        (
            "Transactional database reads per write",
            format!("{:.2}", count("db_read") / count("db_write")),
        ),
        ("Log write, average bytes", thousands(avg("log_write"))),
        (
            "Log writes per database read or write",
            format!("{:.3}", count("log_write") / db_ios),
        ),
        (
            "Log bytes per database read or write",
            thousands(count("log_write") * avg("log_write") / db_ios),
        ),
        (
            "Database growth per transactional I/O, bytes",
            thousands(growth / db_ios),
        ),
        ("Log replication read, average bytes", "—".to_string()),
    ] {
        assert_eq!(cell_after(&dom, name), expected, "Workload Shape: {name}");
    }
    assert!(dom.contains("Jetstress 2013 (Dell PS6210E ESRP)"));
    assert!(dom.contains("Jetstress 2010 (Cisco UCS C210 ESRP)"));
}

#[test]
fn exchange2007_is_judged_per_volume_and_the_report_shows_the_workload_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let Some(device) = device_under(root) else {
        eprintln!(
            "SKIP exchange2007 per-volume test: {} is not on a block device (tmpfs or overlay)",
            root.display()
        );
        return;
    };
    let (dir, before, after) = exchange2007_run(root, &device);
    let r = results(&dir);
    let (v, seconds, transfers, shared) =
        the_volume_is_the_device_under_the_run(&r, &device, (before, after));
    the_run_is_judged_per_volume(&r, &dir, &device, (&v, transfers, shared));
    the_report_shows_the_volume_and_the_workload_shape(
        root,
        &r,
        &dir,
        &device,
        (&v, seconds, transfers, shared),
    );
}

#[test]
fn exchange2007_with_a_database_on_tmpfs_is_judged_per_instance_and_says_so() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() || device_under(shm).is_some() {
        eprintln!("SKIP exchange2007 tmpfs fallback test: /dev/shm is not a tmpfs here");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(device) = device_under(tmp.path()) else {
        eprintln!(
            "SKIP exchange2007 tmpfs fallback test: the temp directory is not on a block device"
        );
        return;
    };
    let db = tempfile::tempdir_in(shm).unwrap();
    let out = edbstress(
        &[
            "run",
            "--profile",
            "exchange2007",
            "--database-size",
            "16MiB",
            "--cache-max",
            "4MiB",
            "--cache-min",
            "2MiB",
            "--threads",
            "2",
            "--duration",
            "3s",
            "--sample-interval",
            "1s",
            "--no-verify",
            "--buffered",
            // A tiny database on tmpfs is in memory by definition: intended here.
            "--allow-cached-databases",
            "--db-path",
            db.path().to_str().unwrap(),
            "--log-path",
            "logs",
            "--results-dir",
            "results",
        ],
        tmp.path(),
    );
    assert!(
        out.status.code().is_some_and(|c| c == 0 || c == 1),
        "{}",
        common::stderr(&out)
    );
    let dir = &run_dirs(tmp.path())[0];
    let r = results(dir);
    // Only the log directory is on a block device: its volume is recorded, but the
    // database would go unjudged per volume, so latency is judged per instance.
    let volumes = r["volumes"].as_array().expect("the log volume");
    assert_eq!(volumes.len(), 1);
    assert_eq!(volumes[0]["device"], device.as_str());
    assert_eq!(volumes[0]["role"], "log");
    let keys: Vec<&str> = r["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"db_read_avg_latency"), "{keys:?}");
    assert!(!keys.iter().any(|k| k.starts_with("volume_")), "{keys:?}");
    assert!(r.get("achieved_iops_basis").is_none());
    let log = fs::read_to_string(dir.join("test.log")).unwrap();
    assert!(log.contains("judging latency per instance"), "{log}");
    assert!(!log.contains("for Avg. Disk sec/"), "{log}");
}
