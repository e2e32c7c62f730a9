//! A storage that loses log files: the newest generations deleted or emptied after
//! the writes into them were acknowledged, the checkpoint file lost, and logs that
//! `checksum` must reject exactly where recovery would.
//!
//! Every case starts from a real instance that committed durable transactions across
//! several log generations and then crashed.

use super::instance_common;
use instance_common::*;

use std::fs;
use std::path::{Path, PathBuf};

use edbstress_engine::EngineError;
use edbstress_engine::InstanceId;
use edbstress_engine::InstanceLayout;
use edbstress_engine::MessageKey;
use edbstress_engine::deep_check;
use edbstress_engine::read_header;
use edbstress_engine::scan_log_dir;
use edbstress_engine::{Durability, Instance, InstanceConfig, TxnOp};
use edbstress_engine::{RecoveryOptions, recover};
use edbstress_format::Generation;
use edbstress_format::PageSize;
use edbstress_format::header::{DatabaseHeader, DbState};
use edbstress_format::log::log_file_name;
use edbstress_io::IoMode;
use rand::SeedableRng;
use rand::rngs::SmallRng;

/// Generations written past the one the instance opened in.
const GENERATIONS: u32 = 5;
/// Shallow: pages are written and the checkpoint (and circular logging) moves on.
const SHALLOW: u64 = 256 << 10;
/// Deeper than all the log written: the checkpoint stays in the first generations.
const DEEP: u64 = 16 << 20;

struct Crashed {
    config: InstanceConfig,
    written: Vec<(MessageKey, Vec<u8>)>,
    /// The newest generation holding an acknowledged write.
    newest: u32,
}

/// Prepares instance 1 under `dir` (seed `seed`), commits durable inserts until the
/// log has moved `GENERATIONS` generations on, and crashes.
fn crashed(dir: &Path, seed: u64, circular: bool, checkpoint_depth: u64) -> Crashed {
    let layout = prepare_small(dir, PageSize::K8, 4 << 20, 4, seed);
    let mut config = buffered_config(&layout);
    config.cache_min_bytes = 2 << 20;
    config.cache_max_bytes = 2 << 20;
    config.checkpoint_depth = checkpoint_depth;
    config.circular_logging = circular;
    let instance = Instance::open(config.clone()).unwrap();
    let start = instance.log_generation().get();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut written = Vec::new();
    while instance.log_durable().generation.get() < start + GENERATIONS {
        insert_incompressible(&instance, &mut rng, &mut written);
    }
    // A few more in the newest generation, so its loss loses acknowledged commits.
    for _ in 0..3 {
        let body = vec![7u8; 3000];
        let out = instance
            .commit(
                &[TxnOp::Insert {
                    mailbox: 0,
                    props: b"tail",
                    body: &body,
                }],
                Durability::Durable,
            )
            .unwrap();
        written.push((out.inserted[0], body));
    }
    let durable = instance.crash();
    // The newest generation holding an acknowledged write, as the header records it
    // (the durable end may name the start of a next file nothing was written to yet).
    let newest = header(&config.layout).log_required.get();
    assert!(
        newest >= start + GENERATIONS - 1 && newest <= durable.generation.get(),
        "header records generation {newest:#x}, durable end {durable}"
    );
    Crashed {
        config,
        written,
        newest,
    }
}

fn options() -> RecoveryOptions {
    RecoveryOptions {
        io_mode: IoMode::Buffered,
        cache_bytes: 2 << 20,
        ..RecoveryOptions::default()
    }
}

fn header(layout: &InstanceLayout) -> DatabaseHeader {
    read_header(&layout.db_file, IoMode::Buffered)
        .unwrap()
        .header
}

fn log_path(layout: &InstanceLayout, generation: u32) -> PathBuf {
    layout
        .log_dir
        .join(log_file_name(Generation::new(generation)))
}

/// Recovery must refuse with a lost log naming `generation`, and leave the database
/// marked as needing recovery.
#[track_caller]
fn assert_lost_log(layout: &InstanceLayout, generation: u32) {
    match recover(layout, &options()) {
        Err(EngineError::LostLog {
            generation: named, ..
        }) => assert_eq!(named.get(), generation),
        other => panic!("expected a lost log naming generation {generation:#x}, got {other:?}"),
    }
    assert_eq!(header(layout).state, DbState::DirtyNeedsRecovery);
    let owner = header(layout);
    let scan = scan_log_dir(&layout.log_dir, IoMode::Buffered, Some(&owner)).unwrap();
    assert!(!scan.is_clean(), "checksum must fail too: {scan:?}");
    assert!(
        scan.sequence
            .problems
            .iter()
            .any(|p| p.contains(&log_file_name(Generation::new(generation)))),
        "{:?}",
        scan.sequence.problems
    );
}

/// Recovery succeeds and every acknowledged commit is there with its body.
#[track_caller]
fn assert_recovers_everything(c: &Crashed) {
    let report = recover(&c.config.layout, &options()).unwrap();
    assert!(report.succeeded(), "{report:?}");
    let check = deep_check(&c.config.layout.db_file, IoMode::Buffered).unwrap();
    assert!(check.is_clean(), "{:?}", check.problems);
    let instance = Instance::open(c.config.clone()).unwrap();
    for (key, body) in &c.written {
        let m = instance.read(*key, true).unwrap().expect("commit survives");
        assert_eq!(m.body.as_ref(), Some(body));
    }
    instance.shutdown().unwrap();
}

#[test]
fn the_header_records_the_newest_generation_written() {
    let dir = tempfile::tempdir().unwrap();
    let c = crashed(dir.path(), 21, false, SHALLOW);
    // The last commits were acknowledged: their generation is recorded and present.
    assert!(log_path(&c.config.layout, c.newest).exists());
    assert_recovers_everything(&c);
}

#[test]
fn a_missing_newest_generation_is_a_lost_log() {
    let dir = tempfile::tempdir().unwrap();
    let c = crashed(dir.path(), 22, false, SHALLOW);
    let layout = &c.config.layout;
    fs::remove_file(log_path(layout, c.newest)).unwrap();
    let _ = fs::remove_file(layout.log_dir.join("E00tmp.log"));
    assert_lost_log(layout, c.newest);
}

#[test]
fn the_three_newest_generations_missing_are_a_lost_log() {
    let dir = tempfile::tempdir().unwrap();
    let c = crashed(dir.path(), 23, false, SHALLOW);
    let layout = &c.config.layout;
    for g in c.newest - 2..=c.newest {
        fs::remove_file(log_path(layout, g)).unwrap();
    }
    let _ = fs::remove_file(layout.log_dir.join("E00tmp.log"));
    assert_lost_log(layout, c.newest);
}

#[test]
fn a_zeroed_newest_generation_is_a_lost_log() {
    let dir = tempfile::tempdir().unwrap();
    let c = crashed(dir.path(), 24, false, SHALLOW);
    let layout = &c.config.layout;
    let path = log_path(layout, c.newest);
    let mut bytes = fs::read(&path).unwrap();
    bytes[4096..].fill(0);
    fs::write(&path, bytes).unwrap();
    assert_lost_log(layout, c.newest);
}

/// docs/reliability.md's fallback: with both checkpoint copies gone, recovery starts
/// from the header's checkpoint — which moves with the log, so the generations it
/// needs were not deleted by circular logging.
#[test]
fn without_the_checkpoint_file_recovery_starts_from_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let c = crashed(dir.path(), 25, true, SHALLOW);
    let layout = &c.config.layout;
    assert!(
        !log_path(layout, 1).exists(),
        "circular logging should have deleted generation 1 (the test needs it gone)"
    );
    let h = header(layout);
    assert!(
        log_path(layout, h.checkpoint.generation.get()).exists(),
        "the header's checkpoint {} names a deleted generation",
        h.checkpoint
    );
    fs::remove_file(layout.log_dir.join("E00.chk")).unwrap();
    assert_recovers_everything(&c);
}

/// `checksum` reads each log directory as recovery would: every damage recovery
/// refuses, checksum reports (the segment checksums alone are all valid here).
#[test]
fn checksum_rejects_every_log_recovery_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let c = crashed(&dir.path().join("a"), 26, false, DEEP);
    let other = crashed(&dir.path().join("b"), 27, false, DEEP);
    let layout = &c.config.layout;
    let owner = header(layout);
    assert_eq!(owner.state, DbState::DirtyNeedsRecovery);
    let middle = c.newest - 2;
    assert!(
        middle > owner.checkpoint.generation.get().max(1),
        "the test needs a generation after the checkpoint {} and before the newest {:#x}",
        owner.checkpoint,
        c.newest
    );

    let intact = scan_log_dir(&layout.log_dir, IoMode::Buffered, Some(&owner)).unwrap();
    assert!(intact.is_clean(), "{intact:?}");

    type Damage = Box<dyn Fn(&Path)>;
    let name = |g: u32| log_file_name(Generation::new(g));
    let other_logs = other.config.layout.log_dir.clone();
    let cases: Vec<(&str, Damage)> = vec![
        (
            "a middle log cut to half",
            Box::new(move |d: &Path| {
                let p = d.join(name(middle));
                let len = fs::metadata(&p).unwrap().len();
                fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_len(len / 2)
                    .unwrap();
            }),
        ),
        (
            "a missing middle generation",
            Box::new(move |d: &Path| fs::remove_file(d.join(name(middle))).unwrap()),
        ),
        (
            "a log from another instance",
            Box::new(move |d: &Path| {
                fs::copy(other_logs.join(name(middle)), d.join(name(middle))).unwrap();
            }),
        ),
        (
            "a zeroed tail of a middle log",
            Box::new(move |d: &Path| {
                let p = d.join(name(middle));
                let mut bytes = fs::read(&p).unwrap();
                let half = bytes.len() / 2;
                bytes[half..].fill(0);
                fs::write(&p, bytes).unwrap();
            }),
        ),
        (
            "a checkpoint of another database",
            Box::new({
                let other_logs = other.config.layout.log_dir.clone();
                move |d: &Path| {
                    fs::copy(other_logs.join("E00.chk"), d.join("E00.chk")).unwrap();
                }
            }),
        ),
    ];
    for (what, damage) in cases {
        let case = dir.path().join(what.replace(' ', "-"));
        copy_dir(layout.db_file.parent().unwrap(), &case.join("db"));
        copy_dir(layout.log_dir.parent().unwrap(), &case.join("logs"));
        let broken = InstanceLayout::new(InstanceId::new(1), &case.join("db"), &case.join("logs"));
        damage(&broken.log_dir);
        let scan = scan_log_dir(&broken.log_dir, IoMode::Buffered, Some(&owner)).unwrap();
        assert!(
            !scan.is_clean() && !scan.sequence.problems.is_empty(),
            "{what}: checksum passed: {scan:?}"
        );
        let recovered = recover(&broken, &options());
        assert!(
            matches!(&recovered, Err(e) if e.is_integrity()),
            "{what}: recovery should refuse: {recovered:?}"
        );
    }

    // Swapped databases: the log is whole, but it belongs to another database.
    let swapped = header(&other.config.layout);
    let scan = scan_log_dir(&layout.log_dir, IoMode::Buffered, Some(&swapped)).unwrap();
    assert!(!scan.is_clean(), "swapped databases: {scan:?}");
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}
