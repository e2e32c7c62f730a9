//! `edbstress sweep` through the binary: a real storage sweep on a loop device
//! re-formatted by the setup command at each point (btrfs with compression none, lzo,
//! zstd; root, losetup and mkfs.btrfs needed, else a loud skip and the run-settings
//! sweep instead), stopped by a failing setup and resumed; a sweep over run settings
//! stopped with Ctrl-C and resumed. Each checks sweep.csv against every point's
//! results.json; the storage sweep renders sweep.html in headless Chromium.

use crate::suite::common;
use common::chromium::{chromium_or_skip, decode_png, dump_dom, screenshot};
use common::{Sentinel, command, text};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Run settings of every point: a short run of one small database, limits loose
/// enough that a busy machine's latency does not decide the verdicts.
const BASE_RUN: &str = r#"duration = "2s"
sample_interval = "1s"
databases = 1
database_size = "32MiB"
cache_max = "8MiB"
cache_min = "4MiB"
io_mode = "buffered"
# A tiny buffered database sits in the page cache: these runs are about the sweep.
allow_cached_databases = true
verify_after = false
"#;

const LOOSE: &str = "[run.thresholds]\ndb_read_avg_ms = 1000.0\ndb_read_max_ms = 10000.0\n\
     log_write_avg_ms = 1000.0\nlog_write_max_ms = 10000.0\npage_fault_stalls_per_sec = 1000000.0\n";

/// A loop device on a sparse file, and a mount point; detached (and unmounted) on drop,
/// also when the test fails.
struct LoopDevice {
    dev: String,
    mnt: PathBuf,
}

impl LoopDevice {
    fn attach(dir: &Path) -> Result<LoopDevice, String> {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if !root {
            return Err("a loop device needs root (run the tests as root)".into());
        }
        for tool in ["losetup", "mkfs.btrfs", "btrfs"] {
            let found = Command::new("sh")
                .arg("-c")
                .arg(format!("command -v {tool}"))
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !found {
                return Err(format!(
                    "{tool} is not installed (apt-get install btrfs-progs util-linux)"
                ));
            }
        }
        let image = dir.join("disk.img");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(1 << 30))
            .map_err(|e| format!("cannot make the image: {e}"))?;
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&image)
            .output()
            .map_err(|e| format!("cannot run losetup: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "no loop device here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let mnt = dir.join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        Ok(LoopDevice {
            dev: String::from_utf8_lossy(&out.stdout).trim().to_string(),
            mnt,
        })
    }

    fn mounted(&self) -> bool {
        std::fs::read_to_string("/proc/mounts")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split(' ').nth(1) == Some(&*self.mnt.to_string_lossy()))
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        for _ in 0..20 {
            if !self.mounted() {
                break;
            }
            let _ = Command::new("umount").arg(&self.mnt).status();
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.mounted() {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

fn sweep(cwd: &Path, file: &Path, out: &Path) -> Output {
    command(cwd)
        .arg("sweep")
        .arg("--config")
        .arg(file)
        .arg("--output")
        .arg(out)
        .output()
        .unwrap()
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// sweep.csv as (header, rows).
fn read_csv(dir: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    let mut lines = text
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect());
    let header: Vec<String> = lines.next().unwrap();
    (header, lines.collect())
}

/// Every row of sweep.csv is a finished run whose figures are those of its
/// results.json; returns the rows.
fn check_csv_against_results(dir: &Path, runs: usize) -> (Vec<String>, Vec<Vec<String>>) {
    let (header, rows) = read_csv(dir);
    assert_eq!(rows.len(), runs, "one row per point and repeat");
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for row in &rows {
        assert_eq!(row[col("status")], "done", "{row:?}");
        let r = read_json(&dir.join(&row[col("run_dir")]).join("results.json"));
        assert_eq!(row[col("verdict")], r["overall_result"].as_str().unwrap());
        let num = |v: &serde_json::Value| v.as_f64().unwrap();
        assert_eq!(
            row[col("transactional_iops")],
            format!("{:.2}", num(&r["achieved_transactional_iops"]))
        );
        for (class, prefix) in [
            ("db_read", "db_read"),
            ("db_write", "db_write"),
            ("log_write", "log_write"),
        ] {
            let s = &r["totals"]["io"][class];
            assert_eq!(
                row[col(&format!("{prefix}_iops"))],
                format!("{:.2}", num(&s["per_sec"]))
            );
            assert_eq!(
                row[col(&format!("{prefix}_avg_ms"))],
                format!("{:.3}", num(&s["avg_latency_ms"]))
            );
            assert_eq!(
                row[col(&format!("{prefix}_p99_ms"))],
                format!("{:.3}", num(&s["p99_ms"]))
            );
        }
    }
    (header, rows)
}

/// A sweep over run settings only (sessions × content compressibility): stopped with
/// Ctrl-C during its first run, then resumed to the end.
fn run_settings_sweep(dir: &Path) {
    let file = dir.join("settings.toml");
    std::fs::write(
        &file,
        format!(
            "[sweep]\nname = \"sessions and compressibility\"\norder = \"shuffled\"\n\
             [run]\n{}db_paths = [\"data/db\"]\nlog_paths = [\"data/log\"]\n{LOOSE}\
             [[axis]]\nname = \"threads\"\nvalues = [2, 4]\n\
             [[axis]]\nname = \"compressibility\"\nvalues = [\"incompressible\", \"mail\"]\n",
            // Long enough to be stopped in the middle.
            BASE_RUN.replace("\"2s\"", "\"4s\"")
        ),
    )
    .unwrap();
    let out = dir.join("settings-sweep");
    let child = command(dir)
        .arg("sweep")
        .arg("--config")
        .arg(&file)
        .arg("--output")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ctrl-C once the first run is under way.
    let started = Instant::now();
    loop {
        let running = std::fs::read_dir(out.join("points"))
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|p| std::fs::read_dir(p.path()).into_iter().flatten().flatten())
            .any(|e| e.path().join("test.log").is_file());
        if running {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no run started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let first = child.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(130), "{}", text(&first));
    assert!(text(&first).contains("resume with"), "{}", text(&first));
    let s = read_json(&out.join("sweep.json"));
    assert_eq!(s["state"], "interrupted");
    let interrupted = &s["runs"][0];
    assert_eq!(interrupted["status"], "interrupted", "{s:#}");
    // The run was stopped cleanly: its results are written and say so.
    let partial = out.join(
        interrupted["run_dir"]
            .as_str()
            .expect("the run wrote its directory"),
    );
    assert_eq!(read_json(&partial.join("results.json"))["aborted"], true);
    let seed = s["seed"].clone();
    let order: Vec<serde_json::Value> = s["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["point"].clone())
        .collect();

    let second = sweep(dir, &file, &out);
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    assert!(
        text(&second).contains("resuming: 0 of 4 runs already finished"),
        "{}",
        text(&second)
    );
    let s = read_json(&out.join("sweep.json"));
    assert_eq!(s["state"], "complete");
    assert_eq!(s["seed"], seed, "the recorded shuffle is kept");
    let again: Vec<serde_json::Value> = s["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["point"].clone())
        .collect();
    assert_eq!(order, again);
    let first_dir = s["runs"][0]["dir"].as_str().unwrap();
    assert!(
        out.join(format!("{first_dir}.attempt-1")).is_dir(),
        "the interrupted attempt is set aside, not deleted"
    );
    check_csv_against_results(&out, 4);
}

#[test]
fn a_sweep_over_run_settings_survives_ctrl_c_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    run_settings_sweep(dir.path());
}

#[test]
fn a_changed_sweep_file_keeps_unchanged_points_and_refuses_sweep_wide_changes() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let file = dir.join("sweep.toml");
    let file_text = |threads: &str, run: &str| {
        format!(
            "[run]\n{run}db_paths = [\"data/db\"]\nlog_paths = [\"data/log\"]\n{LOOSE}\
             [[axis]]\nname = \"threads\"\nvalues = {threads}\n"
        )
    };
    let out = dir.join("s");
    std::fs::write(&file, file_text("[2, 4]", BASE_RUN)).unwrap();
    let first = sweep(dir, &file, &out);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let before = read_json(&out.join("sweep.json"));
    let kept_run_dir = before["runs"][1]["run_dir"].as_str().unwrap().to_string();

    // threads=2 dropped, threads=8 added: threads=4 is kept as it is.
    std::fs::write(&file, file_text("[4, 8]", BASE_RUN)).unwrap();
    let second = sweep(dir, &file, &out);
    let said = text(&second);
    assert_eq!(second.status.code(), Some(0), "{said}");
    assert!(
        said.contains("1 kept (their settings are unchanged), 1 to run"),
        "{said}"
    );
    assert!(said.contains("kept p01 #1 (threads=4)"), "{said}");
    assert!(
        said.contains("to run p02 #1 (threads=8): a new point"),
        "{said}"
    );
    let after = read_json(&out.join("sweep.json"));
    assert_eq!(after["state"], "complete");
    assert_eq!(
        after["runs"][0]["run_dir"],
        kept_run_dir.as_str(),
        "{after:#}"
    );
    assert_eq!(after["runs"][1]["dir"], "points/p02-r1-2", "{after:#}");
    // The dropped point's run is kept aside with the earlier sweep.json.
    let aside = out.join("superseded-1");
    assert_eq!(
        read_json(&aside.join("sweep.json"))["config_text"],
        before["config_text"]
    );
    let dropped = before["runs"][0]["run_dir"].as_str().unwrap();
    assert!(aside.join(dropped).join("results.json").is_file());
    check_csv_against_results(&out, 2);

    // A sweep-wide change is refused, naming it, and changes nothing.
    std::fs::write(
        &file,
        file_text("[4, 8]", &BASE_RUN.replace("\"2s\"", "\"3s\"")),
    )
    .unwrap();
    let third = sweep(dir, &file, &out);
    let said = text(&third);
    assert_eq!(third.status.code(), Some(2), "{said}");
    assert!(said.contains("[run] duration: 2s → 3s"), "{said}");
    assert!(!said.contains("resume with"), "{said}");
    assert_eq!(read_json(&out.join("sweep.json")), after);
}

#[test]
fn a_storage_sweep_reformats_a_loop_device_at_each_point() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let lo = match LoopDevice::attach(dir) {
        Ok(lo) => lo,
        Err(why) => {
            eprintln!(
                "\n!!!!!!!!!!\n!!! SKIPPED: the storage sweep: {why}. Running the sweep over \
                 run settings only instead.\n!!!!!!!!!!\n"
            );
            run_settings_sweep(dir);
            return;
        }
    };
    let file = dir.join("btrfs.toml");
    // The setup refuses a point while a marker file names it: the sweep stops there.
    let setup = "if [ -e {sweep_dir}/../refuse-{point}-r{repeat} ]; then echo \"setup refused: {point} r{repeat}\" >&2; exit 3; fi; \
         mkfs.btrfs -q -f {dev} && mount -o compress={compression} {dev} {mnt} && mkdir -p {mnt}/db {mnt}/log";
    let measure = "sync; a=$(du -s -B1 --apparent-size {mnt} | cut -f1); \
         u=$(btrfs filesystem df -b {mnt} | sed -n 's/^Data.*used=\\([0-9]*\\).*/\\1/p'); \
         awk -v a=$a -v u=$u 'BEGIN{{printf \"%.3f\\n\", a/u}}'";
    std::fs::write(
        &file,
        format!(
            "[sweep]\nname = \"btrfs compression\"\nrepeats = 2\ndatabases = \"fresh\"\n\
             [run]\n{BASE_RUN}compressibility = \"mail\"\ndb_paths = [\"{{mnt}}/db\"]\nlog_paths = [\"{{mnt}}/log\"]\n{LOOSE}\
             [vars]\ndev = \"{}\"\nmnt = \"{}\"\n\
             [[axis]]\nname = \"compression\"\nstorage = true\nvalues = [\"none\", \"lzo\", \"zstd\"]\n\
             [commands]\nsetup = {setup:?}\nteardown = \"umount {{mnt}}\"\nmeasure = {measure:?}\n\
             measure_name = \"compression ratio\"\n",
            lo.dev,
            lo.mnt.display()
        ),
    )
    .unwrap();
    let out = dir.join("sweep");
    std::fs::write(dir.join("refuse-p02-r2"), "").unwrap();
    let first = sweep(dir, &file, &out);
    assert_eq!(first.status.code(), Some(2), "{}", text(&first));
    let t = text(&first);
    assert!(t.contains("the setup command failed (code 3)"), "{t}");
    assert!(
        t.contains("setup refused: p02 r2"),
        "the setup's output is shown: {t}"
    );
    assert!(t.contains("resume with"), "{t}");
    assert!(!lo.mounted(), "nothing is left mounted");
    let s = read_json(&out.join("sweep.json"));
    assert_eq!(s["state"], "stopped");
    let kept: Vec<(String, Vec<u8>)> = s["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "done")
        .map(|r| {
            let d = r["run_dir"].as_str().unwrap().to_string();
            let bytes = std::fs::read(out.join(&d).join("results.json")).unwrap();
            (d, bytes)
        })
        .collect();
    assert_eq!(
        kept.len(),
        3,
        "p01 twice and p02 once finished before the refusal"
    );

    std::fs::remove_file(dir.join("refuse-p02-r2")).unwrap();
    let second = sweep(dir, &file, &out);
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    assert!(text(&second).contains("resuming: 3 of 6 runs already finished"));
    assert!(!lo.mounted());
    for (d, bytes) in &kept {
        assert_eq!(
            &std::fs::read(out.join(d).join("results.json")).unwrap(),
            bytes,
            "{d} kept as it was"
        );
    }
    assert!(out.join("points/p02-r2.attempt-1/setup.log").is_file());
    let s = read_json(&out.join("sweep.json"));
    assert_eq!(s["state"], "complete");
    let (header, rows) = check_csv_against_results(&out, 6);
    let ratio = header
        .iter()
        .position(|h| h == "compression_ratio")
        .unwrap();
    let axis = header.iter().position(|h| h == "compression").unwrap();
    for (row, run) in rows.iter().zip(s["runs"].as_array().unwrap()) {
        let r: f64 = row[ratio]
            .parse()
            .unwrap_or_else(|_| panic!("a ratio: {row:?}"));
        assert!(r > 0.1 && r < 20.0, "{row:?}");
        assert_eq!(run["measured"].as_str(), Some(row[ratio].as_str()));
        assert_eq!(
            row[axis],
            s["points"][run["point"].as_u64().unwrap() as usize]["values"][0]
        );
    }

    // compare takes the sweep directory: every finished run, labelled by its point.
    let cmp = command(dir).arg("compare").arg(&out).output().unwrap();
    assert_eq!(cmp.status.code(), Some(0), "{}", text(&cmp));
    assert!(text(&cmp).contains("compression=zstd #2"), "{}", text(&cmp));

    // What a person sees.
    let Some(chromium) = chromium_or_skip("sweep.html") else {
        return;
    };
    let html = out.join("sweep.html");
    let dom = dump_dom(&chromium, &html, &dir.join("profile"));
    for expected in [
        "Database read latency by compression — average",
        "Log write latency by compression — 99th percentile",
        "Database write throughput by compression",
        "compression ratio by compression",
        ">zstd</text>",
        "average limit 1000 ms",
        "Best: compression=",
    ] {
        assert!(dom.contains(expected), "sweep.html lacks {expected}");
    }
    assert!(dom.matches("<svg").count() >= 11, "every chart is drawn");
    assert!(dom.contains("report.html\">report</a>"));
    let png = dir.join("sweep.png");
    screenshot(&chromium, &html, &png, 1240, 2400);
    let (_, _, pixels) = decode_png(&png);
    // The first series' colour (#0072B2) is on the charts.
    let blue = pixels.iter().filter(|p| **p == [0x00, 0x72, 0xB2]).count();
    assert!(blue > 200, "the charts' lines are drawn ({blue} pixels)");
}

#[test]
fn init_writes_a_template_and_mistakes_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let init = command(dir).args(["sweep", "init"]).output().unwrap();
    assert_eq!(init.status.code(), Some(0), "{}", text(&init));
    let template = std::fs::read_to_string(dir.join("sweep.toml")).unwrap();
    assert!(template.contains("[[axis]]") && template.contains("[commands]"));
    let again = command(dir).args(["sweep", "init"]).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again).contains("already exists"), "{}", text(&again));
    assert_eq!(
        std::fs::read_to_string(dir.join("sweep.toml")).unwrap(),
        template
    );

    let none = command(dir).arg("sweep").output().unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(text(&none).contains("--config"), "{}", text(&none));

    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[[axis]]\nname = \"thread\"\nvalues = [2, 4]\n").unwrap();
    let out = sweep(dir, &bad, &dir.join("never"));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("point 1 (thread=2)"), "{}", text(&out));
    assert!(text(&out).contains("thread"), "{}", text(&out));
    assert!(
        !dir.join("never").exists(),
        "nothing is created for a bad sweep file"
    );

    // A directory holding something else is not taken for a sweep.
    std::fs::create_dir(dir.join("busy")).unwrap();
    std::fs::write(dir.join("busy/notes.txt"), "mine").unwrap();
    std::fs::write(&bad, "[[axis]]\nname = \"threads\"\nvalues = [2]\n").unwrap();
    let out = sweep(dir, &bad, &dir.join("busy"));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("holds no sweep"), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(dir.join("busy/notes.txt")).unwrap(),
        "mine"
    );
}

/// The processes whose command line holds `marker`, with their PIDs (zombies left out:
/// they are gone, only not yet reaped).
fn processes_with(marker: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| Some(s.rsplit_once(')')?.1.trim_start().starts_with('Z')))
            .unwrap_or(true);
        if cmdline.contains(marker) && !zombie {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Waits up to `limit` for `pid` to end; its exit code, or None (then it is killed).
fn exit_within(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status.code().unwrap_or(-1));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    None
}

#[test]
fn a_hanging_setup_command_is_ended_with_everything_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let sentinel = Sentinel::new(dir);
    // A sleep no other process runs, in the shell's command line and its children's.
    let seconds = 100_000 + std::process::id() % 100_000;
    let marker = format!("sleep {seconds}");
    let mut problems: Vec<String> = Vec::new();
    // (what, setup script, extra [commands] lines, Ctrl-C presses, expected exit).
    let cases = [
        (
            "one Ctrl-C during a hanging setup",
            format!("{marker} & {marker}; wait"),
            "",
            1,
            130,
        ),
        (
            "two Ctrl-C during a setup that ignores SIGTERM",
            format!("trap '' TERM; {marker} & {marker}; wait"),
            "",
            2,
            130,
        ),
        (
            "a setup that overruns [commands] timeout",
            format!("{marker} & {marker}; wait"),
            "timeout = \"2s\"\n",
            0,
            2,
        ),
    ];
    for (n, (what, setup, extra, presses, code)) in cases.iter().enumerate() {
        let file = dir.join(format!("hang{n}.toml"));
        std::fs::write(
            &file,
            format!(
                "[run]\n{BASE_RUN}db_paths = [\"data/db\"]\nlog_paths = [\"data/log\"]\n{LOOSE}\
                 [[axis]]\nname = \"threads\"\nvalues = [2]\n\
                 [commands]\nsetup = {setup:?}\nteardown = \"echo torn down > torn-down-{n}\"\n{extra}"
            ),
        )
        .unwrap();
        let out = dir.join(format!("hang{n}"));
        let mut child = command(dir)
            .arg("sweep")
            .arg("--config")
            .arg(&file)
            .arg("--output")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("hang{n}.err"))).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while processes_with(&marker).len() < 3 && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(100));
        }
        if processes_with(&marker).len() < 3 {
            let exited = exit_within(&mut child, Duration::ZERO);
            let said = std::fs::read_to_string(dir.join(format!("hang{n}.err"))).unwrap();
            problems.push(format!(
                "{what}: the setup never started ({exited:?}): {said}"
            ));
            continue;
        }
        for _ in 0..*presses {
            let sent = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(sent.success());
            std::thread::sleep(Duration::from_millis(300));
        }
        let exited = exit_within(&mut child, Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(200));
        let left = processes_with(&marker);
        eprintln!(
            "{what}: sweep exit {exited:?} after {:.1} s; {} of its processes left",
            started.elapsed().as_secs_f64(),
            left.len()
        );
        if exited != Some(*code) {
            problems.push(format!(
                "{what}: the sweep gave {exited:?} within 30 s, not exit {code}"
            ));
        }
        if !left.is_empty() {
            problems.push(format!("{what}: processes left behind: {left:?}"));
        }
        // Stop what was left, by PID, before the next case.
        for (pid, _) in &left {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        if exited.is_some() && *presses < 2 {
            let torn = dir.join(format!("torn-down-{n}")).is_file();
            if !torn {
                problems.push(format!("{what}: the teardown did not run"));
            }
            let s = read_json(&out.join("sweep.json"));
            let expected = if *presses == 1 {
                "interrupted"
            } else {
                "stopped"
            };
            if s["state"] != expected {
                problems.push(format!("{what}: sweep.json says {}", s["state"]));
            }
        }
        let said = std::fs::read_to_string(dir.join(format!("hang{n}.err"))).unwrap();
        if *presses == 0 && !said.contains("timeout = \"2s\"") {
            problems.push(format!(
                "{what}: the message does not name the timeout:\n{said}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    sentinel.assert_untouched();
}
