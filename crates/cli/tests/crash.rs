//! Real crashes: a child process commits durably and prints every acknowledged commit;
//! it is killed with SIGKILL at a random moment; `recover`, `check` and `checksum` must
//! then pass, and every acknowledged commit must be in the database.
//!
//! A few cycles run by default; `EDBSTRESS_LONG_TESTS=1` runs 25.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use edbstress_engine::instance::{Instance, InstanceConfig};
use edbstress_engine::layout::InstanceLayout;
use edbstress_engine::schema::MessageKey;

fn edbstress(args: &[&str], cwd: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_edbstress"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run edbstress")
}

fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs the probe for a random time, kills it, returns the acknowledged commits.
fn run_and_kill(dir: &Path, millis: u64) -> Vec<(MessageKey, usize, u64)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_edbstress"))
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
        .current_dir(dir)
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

#[test]
fn sigkill_during_durable_commits_loses_nothing_acknowledged() {
    let cycles = if std::env::var_os("EDBSTRESS_LONG_TESTS").is_some() {
        25
    } else {
        3
    };
    let dir = tempfile::tempdir().unwrap();
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
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut all_acked: HashMap<MessageKey, (usize, u64)> = HashMap::new();
    let mut seed = 0x9e37_79b9u64;
    for cycle in 0..cycles {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let millis = 150 + (seed >> 33) % 700;
        let acked = run_and_kill(dir.path(), millis);
        for (key, len, hash) in acked {
            all_acked.insert(key, (len, hash));
        }
        let out = edbstress(
            &["recover", "--json", "--db-path", "db", "--log-path", "logs"],
            dir.path(),
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "cycle {cycle}: recover failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            report["instances"][0]["lost_flushes"]
                .as_array()
                .unwrap()
                .is_empty()
        );
        let out = edbstress(
            &["check", "--db-path", "db", "--log-path", "logs"],
            dir.path(),
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "cycle {cycle}: deep check:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let out = edbstress(
            &["checksum", "--db-path", "db", "--log-path", "logs"],
            dir.path(),
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "cycle {cycle}: checksum:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );

        // Every commit acknowledged in any cycle so far is there, body intact.
        let layout = InstanceLayout::new(1, &dir.path().join("db"), &dir.path().join("logs"));
        let instance = Instance::open(InstanceConfig::new(layout)).unwrap();
        for (key, (len, hash)) in &all_acked {
            let m = instance.read(*key, true).unwrap().unwrap_or_else(|| {
                panic!("cycle {cycle}: acknowledged message {key:?} is missing")
            });
            let body = m.body.unwrap();
            assert_eq!(
                (body.len(), fnv64(&body)),
                (*len, *hash),
                "cycle {cycle}: body of {key:?}"
            );
        }
        instance.shutdown().unwrap();
    }
    assert!(
        all_acked.len() > 10,
        "too few commits acknowledged to mean anything: {}",
        all_acked.len()
    );
}
