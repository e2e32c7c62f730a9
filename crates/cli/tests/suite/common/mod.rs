//! What the CLI tests share: running the built binary, reading its output, and a
//! sentinel directory that proves a command touched nothing outside the paths it was
//! given.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use edbstress_engine::MessageKey;

pub mod aggregate_check;
pub mod chromium;
pub mod hosts;
pub mod slurm;
pub mod sshd;

/// The binary under test: this build's, or the one `EDBSTRESS_TEST_BIN` names (to
/// show that a test fails against an older build).
pub fn binary() -> PathBuf {
    std::env::var_os("EDBSTRESS_TEST_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_edbstress")),
        PathBuf::from,
    )
}

/// Runs the `edbstress` binary with `args` in `cwd`, standard input closed.
pub fn edbstress(args: &[&str], cwd: &Path) -> Output {
    command(cwd).args(args).output().expect("run edbstress")
}

/// A `Command` for the `edbstress` binary in `cwd`, standard input closed.
pub fn command(cwd: &Path) -> Command {
    let mut c = Command::new(binary());
    c.current_dir(cwd).stdin(Stdio::null());
    c
}

/// Loose latency limits and a 1.5 × offered rate, for tests about recovery, fleets or
/// aggregation rather than this machine's latency: a few seconds of Poisson arrivals
/// or latency noise on a busy machine must not decide them. Nor must page fault stalls:
/// a few seconds closed loop (the ESRP campaign's Jetstress pacing) on an 8 MiB cache
/// average a handful of stalls, when the page writer's thread waits for a busy CPU,
/// into more than the limit of 1 per second.
pub const LOOSE_LIMITS: &str = "target_margin = 1.5\nallow_cached_databases = true\n[thresholds]\ndb_read_avg_ms = 1000.0\n\
     db_read_max_ms = 10000.0\nlog_write_avg_ms = 1000.0\nlog_write_max_ms = 10000.0\n\
     page_fault_stalls_per_sec = 1000000.0\n";

/// Writes [`LOOSE_LIMITS`] as `dir/margin.toml` and returns its path.
pub fn write_loose_limits(dir: &Path) -> PathBuf {
    let path = dir.join("margin.toml");
    fs::write(&path, LOOSE_LIMITS).unwrap();
    path
}

/// A short open-loop run of one small database (6 s measured, 1 s samples), for the
/// multi-host tests; add paths, mailboxes and the limits file.
pub const SHORT_RUN: [&str; 16] = [
    "--iops-per-mailbox",
    "0.4",
    "--databases",
    "1",
    "--database-size",
    "32MiB",
    "--cache-max",
    "8MiB",
    "--cache-min",
    "4MiB",
    "--duration",
    "6s",
    "--sample-interval",
    "1s",
    "--buffered",
    // Tiny buffered databases sit in the page cache: these runs are about recovery,
    // fleets or aggregation, not the storage's latency.
    "--allow-cached-databases",
];

/// FNV-1a of `bytes`: how the durability probe reports a message body.
pub fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A commit the durability probe acknowledged: key, body length, body hash.
pub type Acked = (MessageKey, usize, u64);

/// Prepares the small database the durability probe commits to (`db` + `logs` under
/// `dir`: one 24 MiB database of 8 KiB pages).
pub fn prepare_probe_database(dir: &Path) {
    let out = edbstress(
        &[
            "prepare",
            "--databases",
            "1",
            "--database-size",
            "24MiB",
            "--page-size",
            "8KiB",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        dir,
    );
    assert_exit(&out, 0, "prepare");
}

/// Runs `edbstress durability-probe` on `db` + `logs` under `dir` for `millis`, kills
/// it with SIGKILL and returns the commits it acknowledged before.
pub fn probe_and_kill(dir: &Path, millis: u64) -> Vec<Acked> {
    let mut child = command(dir)
        .args([
            "durability-probe",
            "--sessions",
            "4",
            "--cache",
            "2MiB",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn probe");
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut acked = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() == 5 && f[0] == "ack" {
                let key = MessageKey {
                    mailbox: f[1].parse().unwrap(),
                    message: f[2].parse().unwrap(),
                };
                acked.push((key, f[3].parse().unwrap(), f[4].parse().unwrap()));
            }
        }
        acked
    });
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(millis) {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
            panic!("probe exited early with {status}: {err}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL the probe");
    child.wait().expect("reap");
    reader.join().expect("reader")
}

/// The run directories under `dir/results`, oldest first.
pub fn run_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(dir.join("results"))
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// A run directory's `results.json`.
pub fn results(run_dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(run_dir.join("results.json")).unwrap()).unwrap()
}

/// Standard output as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Both streams, for assertion messages and searches.
pub fn text(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

/// Standard output parsed as JSON (panics with both streams when it is not).
pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            stdout(out),
            stderr(out)
        )
    })
}

/// Asserts the exit code, showing both streams when it differs.
#[track_caller]
pub fn assert_exit(out: &Output, code: i32, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: expected exit {code}\nstdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

/// A test's temporary directory laid out as the multi-host tests want it: `work/` (the
/// working directory the commands run in, holding the loose latency limits as
/// `margin.toml`) and a [`Sentinel`] beside it; a real sshd for the "hosts" starts under
/// it on request. Removed when dropped.
pub struct Site {
    /// `work/`: where the test's commands run and write.
    pub root: PathBuf,
    /// The sentinel beside `work/`; check it once every process the test started is gone.
    pub sentinel: Sentinel,
    tmp: tempfile::TempDir,
}

impl Site {
    /// Creates the temporary directory, `work/` with `margin.toml`, and the sentinel.
    pub fn new() -> Site {
        let tmp = tempfile::tempdir().unwrap();
        let sentinel = Sentinel::new(tmp.path());
        let root = tmp.path().join("work");
        fs::create_dir(&root).unwrap();
        write_loose_limits(&root);
        Site {
            root,
            sentinel,
            tmp,
        }
    }

    /// The temporary directory (holding `work/` and the sentinel).
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// A real sshd listening on `addresses` (one port), under `sshd/`; `None` after a
    /// loud notice when OpenSSH is missing (the test then skips).
    pub fn sshd(&self, addresses: &[&str]) -> Option<sshd::Sshd> {
        sshd::Sshd::start(&self.tmp.path().join("sshd"), addresses)
    }

    /// [`Site::sshd`] with `extra` appended to the server configuration.
    pub fn sshd_with(&self, addresses: &[&str], extra: &str) -> Option<sshd::Sshd> {
        sshd::Sshd::start_with(&self.tmp.path().join("sshd"), addresses, extra)
    }
}

/// A directory beside a test's working paths, filled with files that look like
/// edbstress's (a database name, log names, a `.lock`, a results directory) and a
/// plain file. No command in a test is given this directory, so it must stay exactly as
/// it was: [`Sentinel::assert_untouched`] compares names, sizes, modes, inodes,
/// modification times and contents with the snapshot taken at creation.
pub struct Sentinel {
    dir: PathBuf,
    snapshot: BTreeMap<PathBuf, FileState>,
}

#[derive(Debug, PartialEq, Eq)]
struct FileState {
    len: u64,
    mode: u32,
    ino: u64,
    mtime_ns: i128,
    content: Option<Vec<u8>>,
}

impl Sentinel {
    /// Creates `parent/sentinel` and its files, then takes the snapshot.
    pub fn new(parent: &Path) -> Sentinel {
        let dir = parent.join("sentinel");
        fs::create_dir_all(dir.join("edbstress001")).unwrap();
        fs::create_dir_all(dir.join("results/Performance_2026_01_01_00_00_00")).unwrap();
        let files: [(&str, &[u8]); 7] = [
            ("edbstress001.edb", b"not a database, but named like one"),
            ("edbstress001.edb.lock", b"4242\n"),
            ("edbstress001/E00.chk", b"someone else's checkpoint"),
            ("edbstress001/E0000000001.log", b"someone else's log"),
            ("edbstress001/E00tmp.log", b"someone else's pre-created log"),
            (
                "results/Performance_2026_01_01_00_00_00/results.json",
                b"{}",
            ),
            ("plain.txt", b"a plain file"),
        ];
        for (name, body) in files {
            fs::write(dir.join(name), body).unwrap();
        }
        let snapshot = snapshot(&dir);
        Sentinel { dir, snapshot }
    }

    /// The sentinel directory (tests point symlinks into it).
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Panics, naming the difference, unless the directory is exactly as created.
    #[track_caller]
    pub fn assert_untouched(&self) {
        let now = snapshot(&self.dir);
        for (path, before) in &self.snapshot {
            match now.get(path) {
                None => panic!("sentinel {} was deleted", path.display()),
                Some(after) if after != before => panic!(
                    "sentinel {} was changed: {before:?} -> {after:?}",
                    path.display()
                ),
                Some(_) => {}
            }
        }
        for path in now.keys() {
            assert!(
                self.snapshot.contains_key(path),
                "a file was created in the sentinel directory: {}",
                path.display()
            );
        }
    }
}

fn snapshot(dir: &Path) -> BTreeMap<PathBuf, FileState> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
            }
            let content = meta.is_file().then(|| fs::read(&path).unwrap());
            out.insert(
                path,
                FileState {
                    len: meta.len(),
                    mode: meta.mode(),
                    ino: meta.ino(),
                    mtime_ns: i128::from(meta.mtime()) * 1_000_000_000
                        + i128::from(meta.mtime_nsec()),
                    content,
                },
            );
        }
    }
    out
}
