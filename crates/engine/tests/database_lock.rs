//! Two instances of one database in one process: the second open is refused with the
//! PID and lock file while the first is open, and succeeds after it shuts down (or
//! crashes); recovery, a repairing checksum, prepare and fault injection take the same
//! lock.

mod instance_common;
use instance_common::*;

use edbstress_engine::error::EngineError;
use edbstress_engine::fault::{FaultError, FaultKind, FaultRequest, inject_database};
use edbstress_engine::instance::{Instance, InstanceConfig};
use edbstress_engine::layout::InstanceLayout;
use edbstress_engine::lock::LockError;
use edbstress_engine::prepare::{PrepareError, PrepareOptions, PreparePlan};
use edbstress_engine::recovery::{RecoveryOptions, recover};
use edbstress_engine::verify::{ScanError, ScanOptions, scan_database};
use edbstress_format::PageSize;
use edbstress_io::IoMode;

fn prepared(dir: &std::path::Path) -> (InstanceLayout, InstanceConfig, PrepareOptions) {
    let options = small_options(PageSize::K8, 2 << 20, 4, 5);
    let layout = prepare_at(dir, options.clone());
    (layout.clone(), buffered_config(&layout), options)
}

fn is_held(e: &LockError) -> bool {
    matches!(e, LockError::Held { pid: Some(pid), .. } if *pid == std::process::id())
}

#[test]
fn a_second_instance_of_an_open_database_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (layout, config, options) = prepared(tmp.path());
    let first = Instance::open(config.clone()).unwrap();
    let lock_file = tmp.path().join("db/edbstress001.edb.lock");
    assert!(lock_file.exists());

    match Instance::open(config.clone()) {
        Err(EngineError::Locked(e)) => {
            assert!(is_held(&e), "{e}");
            let message = e.to_string();
            assert!(message.contains(&format!("PID {}", std::process::id())));
            assert!(message.contains("edbstress001.edb.lock"), "{message}");
        }
        Err(other) => panic!("expected a lock error, got {other}"),
        Ok(_) => panic!("a second instance opened the same database"),
    }
    let recovery = RecoveryOptions {
        io_mode: IoMode::Buffered,
        ..RecoveryOptions::default()
    };
    assert!(matches!(recover(&layout, &recovery), Err(EngineError::Locked(ref e)) if is_held(e)));
    let repair = ScanOptions {
        repair: true,
        io_mode: IoMode::Buffered,
        ..ScanOptions::default()
    };
    assert!(matches!(
        scan_database(&layout.db_file, &repair, &mut |_, _| {}),
        Err(ScanError::Locked(ref e)) if is_held(e)
    ));
    assert!(matches!(
        PreparePlan::check(vec![layout.clone()], options),
        Err(PrepareError::Locked(ref e)) if is_held(e)
    ));
    let before = std::fs::read(&layout.db_file).unwrap();
    let fault = FaultRequest {
        kind: FaultKind::Zero,
        seed: 1,
        count: 1,
        bits: None,
    };
    assert!(matches!(
        inject_database(&layout.db_file, &fault),
        Err(FaultError::Engine(EngineError::Locked(ref e))) if is_held(e)
    ));
    assert!(
        std::fs::read(&layout.db_file).unwrap() == before,
        "fault injected under a lock"
    );

    first.shutdown().unwrap();
    assert!(!lock_file.exists(), "the lock file goes with the lock");
    let second = Instance::open(config.clone()).unwrap();
    second.crash();
    // After a crash the lock is free again; recovery takes it and lets it go.
    recover(&layout, &recovery).unwrap();
    Instance::open(config).unwrap().shutdown().unwrap();
}
