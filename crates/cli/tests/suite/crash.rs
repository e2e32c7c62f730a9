//! Real crashes: a child process commits durably and prints every acknowledged commit;
//! it is killed with SIGKILL at a random moment; `recover`, `check` and `checksum` must
//! then pass, and every acknowledged commit must be in the database.
//!
//! A few cycles run by default; `EDBSTRESS_LONG_TESTS=1` runs 25.

use crate::suite::common;
use common::{edbstress, fnv64, prepare_probe_database, probe_and_kill};

use std::collections::HashMap;

use edbstress_engine::InstanceId;
use edbstress_engine::InstanceLayout;
use edbstress_engine::MessageKey;
use edbstress_engine::{Instance, InstanceConfig};

#[test]
fn sigkill_during_durable_commits_loses_nothing_acknowledged() {
    let cycles = if std::env::var_os("EDBSTRESS_LONG_TESTS").is_some() {
        25
    } else {
        3
    };
    let dir = tempfile::tempdir().unwrap();
    prepare_probe_database(dir.path());
    let mut all_acked: HashMap<MessageKey, (usize, u64)> = HashMap::new();
    let mut seed = 0x9e37_79b9u64;
    for cycle in 0..cycles {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let millis = 150 + (seed >> 33) % 700;
        let acked = probe_and_kill(dir.path(), millis);
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
        let layout = InstanceLayout::new(
            InstanceId::new(1),
            &dir.path().join("db"),
            &dir.path().join("logs"),
        );
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
