//! Two instances of one database in one process: the second open is refused with the
//! PID and lock file while the first is open, and succeeds after it shuts down (or
//! crashes); recovery, a repairing checksum, prepare and fault injection take the same
//! lock.

use super::instance_common;
use instance_common::*;

use edbstress_engine::EngineError;
use edbstress_engine::InstanceLayout;
use edbstress_engine::LogDirLock;
use edbstress_engine::fault::{FaultError, FaultKind, FaultRequest, inject_database};
use edbstress_engine::{DatabaseLock, LockError, LockMode, ensure_not_held};
use edbstress_engine::{Instance, InstanceConfig};
use edbstress_engine::{PrepareError, PrepareOptions, PreparePlan};
use edbstress_engine::{RecoveryOptions, recover};
use edbstress_engine::{ScanError, ScanOptions, scan_database};
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

/// The lock belongs to the real file: through a symbolic link or a hard link in
/// another directory an open database is refused with the PID, no lock file is left
/// beside the link, and the instance's log directory is refused whatever its name.
#[test]
fn the_lock_follows_the_real_file_and_its_log_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (layout, config, _) = prepared(tmp.path());
    let open = Instance::open(config.clone()).unwrap();
    let links = tmp.path().join("links");
    std::fs::create_dir(&links).unwrap();
    let symlink = links.join("edbstress001.edb");
    std::os::unix::fs::symlink(&layout.db_file, &symlink).unwrap();
    let hard = tmp.path().join("hard");
    std::fs::create_dir(&hard).unwrap();
    let hard_link = hard.join("edbstress001.edb");
    std::fs::hard_link(&layout.db_file, &hard_link).unwrap();
    for db in [&symlink, &hard_link] {
        for mode in [LockMode::Exclusive, LockMode::Shared] {
            match DatabaseLock::acquire_mode(db, mode) {
                Err(e) => assert!(is_held(&e), "{}: {e}", db.display()),
                Ok(_) => panic!("{} locked while the instance is open", db.display()),
            }
        }
        assert!(ensure_not_held(db).is_err());
    }
    assert!(!links.join("edbstress001.edb.lock").exists());
    assert!(!hard.join("edbstress001.edb.lock").exists());
    // The log directory, through another name.
    let log_link = tmp.path().join("log-link");
    std::os::unix::fs::symlink(&layout.log_dir, &log_link).unwrap();
    match LogDirLock::acquire(&log_link, LockMode::Shared) {
        Err(e @ LockError::DirHeld { .. }) => {
            assert!(
                e.to_string()
                    .contains(&format!("PID {}", std::process::id()))
            )
        }
        other => panic!("expected the log directory held, got {other:?}"),
    }
    open.shutdown().unwrap();
    drop(DatabaseLock::acquire(&symlink).unwrap());
    drop(LogDirLock::acquire(&log_link, LockMode::Exclusive).unwrap());
}

/// No lock file is ever made beside a file that is not an edbstress database, and a
/// symbolic link with the lock file's name is not followed.
#[test]
fn lock_files_only_beside_databases_and_never_through_links() {
    let tmp = tempfile::tempdir().unwrap();
    let foreign = tmp.path().join("passwd");
    std::fs::write(&foreign, vec![b'x'; 16384]).unwrap();
    let theirs = tmp.path().join("passwd.lock");
    std::fs::write(&theirs, "1\n").unwrap();
    assert!(matches!(
        DatabaseLock::acquire_shared(&foreign),
        Err(LockError::NotADatabase { .. })
    ));
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "1\n");
    let short = tmp.path().join("short");
    std::fs::write(&short, b"").unwrap();
    assert!(DatabaseLock::acquire(&short).is_err());
    assert!(!tmp.path().join("short.lock").exists());

    let (layout, _, _) = prepared(tmp.path());
    let target = tmp.path().join("target.pid");
    std::fs::write(&target, "").unwrap();
    let lock_file = tmp.path().join("db/edbstress001.edb.lock");
    std::os::unix::fs::symlink(&target, &lock_file).unwrap();
    for mode in [LockMode::Exclusive, LockMode::Shared] {
        assert!(matches!(
            DatabaseLock::acquire_mode(&layout.db_file, mode),
            Err(LockError::NotOurs { .. })
        ));
    }
    assert!(ensure_not_held(&layout.db_file).is_err());
    assert_eq!(std::fs::read(&target).unwrap(), b"");
}
