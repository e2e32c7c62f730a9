//! Seeded fault-injection suite: faults of every kind are injected (by
//! `edbstress_engine::fault`, the code behind `edbstress inject`) into databases and
//! logs made by a real prepare plus real transactions, and offline verification must
//! classify every one exactly; `--repair` must fix exactly the correctable pages and
//! leave every other byte alone; recovery must report dropped writes as lost flushes.
//!
//! `EDBSTRESS_LONG_TESTS=1` runs ten times as many rounds. Figures are printed
//! (`cargo test -p edbstress-engine --test tests -- fault_suite:: --nocapture`).

use super::instance_common;
use instance_common::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use edbstress_engine::InstanceId;
use edbstress_engine::InstanceLayout;
use edbstress_engine::fault::{
    ExpectedDetection, FaultKind, FaultRequest, InjectedFault, inject_database, inject_log_dir,
    inject_lost_flush,
};
use edbstress_engine::{Durability, Instance, TxnOp};
use edbstress_engine::{PageProblemKind, ScanOptions, scan_database, scan_log_dir};
use edbstress_engine::{RecoveryOptions, recover};
use edbstress_format::PageSize;
use edbstress_io::IoMode;

fn long_mode() -> bool {
    std::env::var("EDBSTRESS_LONG_TESTS").is_ok_and(|v| v == "1")
}

/// Prepares one instance and runs real transactions on it (inserts, replaces and
/// deletes, several log generations), then shuts it down cleanly.
fn prepared_with_transactions(dir: &Path, page_size: PageSize) -> InstanceLayout {
    let layout = prepare_small(dir, page_size, 6 << 20, 4, 11);
    let instance = Instance::open(buffered_config(&layout)).unwrap();
    let body = vec![0x5au8; 3000];
    let mut keys = Vec::new();
    for i in 0..300u32 {
        let durability = if i % 4 == 0 {
            Durability::Durable
        } else {
            Durability::Lazy
        };
        let op = match i % 5 {
            3 if !keys.is_empty() => TxnOp::Replace {
                key: keys[i as usize % keys.len()],
                props: b"replaced properties",
                body: None,
                // Every other replace moves the message in its view.
                resort: (i % 2 == 0).then_some(i.wrapping_mul(2_654_435_761)),
            },
            4 if keys.len() > 10 => TxnOp::Delete {
                key: keys.swap_remove(i as usize % keys.len()),
            },
            _ => TxnOp::Insert {
                mailbox: 1 + i % 4,
                props: b"properties of a message",
                body: &body,
            },
        };
        let outcome = instance.commit(&[op], durability).unwrap();
        keys.extend(outcome.inserted);
    }
    instance.shutdown().unwrap();
    layout
}

fn scan_options(repair: bool) -> ScanOptions {
    ScanOptions {
        io_mode: IoMode::Buffered,
        repair,
        max_listed: usize::MAX,
        ..ScanOptions::default()
    }
}

fn expected_kind(e: ExpectedDetection) -> PageProblemKind {
    match e {
        ExpectedDetection::Correctable { bit } => PageProblemKind::Correctable { bit },
        ExpectedDetection::Bad => PageProblemKind::Bad,
        ExpectedDetection::WrongPageNumber { found } => PageProblemKind::WrongPageNumber { found },
        ExpectedDetection::Uninitialized => PageProblemKind::Uninitialized,
        other => panic!("not a page verdict: {other:?}"),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Figures of one kind of fault.
#[derive(Default, Debug)]
struct Tally {
    injected: u64,
    detected: u64,
    misclassified: u64,
}

#[test]
fn every_injected_page_fault_is_classified_exactly_and_repair_fixes_only_correctable_ones() {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepared_with_transactions(dir.path(), PageSize::K32);
    let pristine = std::fs::read(&layout.db_file).unwrap();
    assert!(
        scan_database(&layout.db_file, &scan_options(false), &mut |_, _| {})
            .unwrap()
            .is_clean()
    );
    let work = dir.path().join("work.edb");
    let rounds = if long_mode() { 60 } else { 6 };
    let per_round = 25;
    let kinds = [
        FaultKind::Bitflip,
        FaultKind::Torn,
        FaultKind::Misdirect,
        FaultKind::Zero,
    ];
    let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
    let (mut repaired_total, mut correctable_total) = (0u64, 0u64);
    for round in 0..rounds {
        for (k, kind) in kinds.into_iter().enumerate() {
            let seed = (round * 16 + k) as u64;
            std::fs::write(&work, &pristine).unwrap();
            let faults = inject_database(
                &work,
                &FaultRequest {
                    kind,
                    seed,
                    count: per_round,
                    bits: None,
                },
            )
            .unwrap();
            let report = scan_database(&work, &scan_options(false), &mut |_, _| {}).unwrap();
            let found: BTreeMap<u32, PageProblemKind> = report
                .problems
                .iter()
                .map(|p| (p.pgno.get(), p.kind))
                .collect();
            let tally = tallies.entry(kind.name()).or_default();
            for f in &faults {
                let pgno = f.pgno.unwrap();
                tally.injected += 1;
                match found.get(&pgno) {
                    Some(&got) if got == expected_kind(f.expected) => tally.detected += 1,
                    Some(got) => {
                        tally.misclassified += 1;
                        eprintln!("seed {seed}: {f:?} classified as {got:?}");
                    }
                    None => eprintln!("seed {seed}: {f:?} not detected"),
                }
            }
            assert_eq!(
                found.len(),
                faults.len(),
                "seed {seed}: problems on pages nothing was injected into: {:?}",
                report.problems
            );

            // Repair: exactly the correctable pages go back to their original bytes,
            // every other byte of the file stays as the injection left it.
            let damaged = std::fs::read(&work).unwrap();
            let repaired = scan_database(&work, &scan_options(true), &mut |_, _| {}).unwrap();
            let after = std::fs::read(&work).unwrap();
            let ps = PageSize::K32.bytes();
            let correctable: Vec<u32> = faults
                .iter()
                .filter(|f| matches!(f.expected, ExpectedDetection::Correctable { .. }))
                .map(|f| f.pgno.unwrap())
                .collect();
            assert_eq!(
                repaired.repaired_pages,
                correctable.len() as u64,
                "seed {seed}"
            );
            correctable_total += correctable.len() as u64;
            repaired_total += repaired.repaired_pages;
            let mut expected = damaged.clone();
            for &p in &correctable {
                let at = (p as usize + 1) * ps;
                expected[at..at + ps].copy_from_slice(&pristine[at..at + ps]);
            }
            assert!(after == expected, "seed {seed}: repair changed other bytes");
        }
    }
    println!("page faults (injected / detected / misclassified):");
    for (kind, t) in &tallies {
        println!(
            "  {kind:<10} {:>6} {:>6} {:>4}",
            t.injected, t.detected, t.misclassified
        );
    }
    println!("  correctable pages repaired: {repaired_total} of {correctable_total}");
    for (kind, t) in &tallies {
        assert_eq!(t.misclassified, 0, "{kind}: {t:?}");
        assert_eq!(t.detected, t.injected, "{kind}: {t:?}");
    }
}

#[test]
fn injection_is_reproducible_and_refuses_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepared_with_transactions(dir.path(), PageSize::K8);
    let a = dir.path().join("a.edb");
    let b = dir.path().join("b.edb");
    std::fs::copy(&layout.db_file, &a).unwrap();
    std::fs::copy(&layout.db_file, &b).unwrap();
    let request = FaultRequest {
        kind: FaultKind::Bitflip,
        seed: 42,
        count: 10,
        bits: None,
    };
    let fa = inject_database(&a, &request).unwrap();
    let fb = inject_database(&b, &request).unwrap();
    assert_eq!(summary(&fa), summary(&fb), "same seed, same faults");
    assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap());

    // A foreign file is refused and left byte for byte as it was.
    let foreign = dir.path().join("foreign.edb");
    let content: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&foreign, &content).unwrap();
    let err = inject_database(&foreign, &request).unwrap_err();
    assert!(err.to_string().contains("not an edbstress file"), "{err}");
    assert!(std::fs::read(&foreign).unwrap() == content);
    let foreign_dir = dir.path().join("foreign-logs");
    std::fs::create_dir(&foreign_dir).unwrap();
    std::fs::write(foreign_dir.join("E00.chk"), vec![7u8; 8192]).unwrap();
    std::fs::write(foreign_dir.join("E0000000001.log"), vec![7u8; 16384]).unwrap();
    for kind in [FaultKind::Checkpoint, FaultKind::LogSegment] {
        let request = FaultRequest {
            kind,
            seed: 1,
            count: 1,
            bits: None,
        };
        assert!(inject_log_dir(&foreign_dir, &request).is_err());
    }
    assert!(std::fs::read(foreign_dir.join("E00.chk")).unwrap() == vec![7u8; 8192]);
    assert!(std::fs::read(foreign_dir.join("E0000000001.log")).unwrap() == vec![7u8; 16384]);
    // A torn write needs more than one sector per page.
    let small = prepared_with_transactions(&dir.path().join("k4"), PageSize::K4);
    let torn = FaultRequest {
        kind: FaultKind::Torn,
        ..request
    };
    assert!(inject_database(&small.db_file, &torn).is_err());
}

/// What was injected, without the file name.
fn summary(faults: &[InjectedFault]) -> Vec<(Option<u32>, Vec<u32>, ExpectedDetection)> {
    faults
        .iter()
        .map(|f| (f.pgno, f.bits.clone(), f.expected))
        .collect()
}

#[test]
fn log_segment_and_checkpoint_faults_are_reported_and_dropped_writes_are_lost_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepared_with_transactions(dir.path(), PageSize::K8);
    let clean = scan_log_dir(&layout.log_dir, IoMode::Buffered, None).unwrap();
    assert!(clean.is_clean(), "{clean:?}");
    let rounds = if long_mode() { 100 } else { 10 };
    let (mut injected, mut detected) = (0u64, 0u64);
    for seed in 0..rounds {
        let logs = dir.path().join(format!("logs-{seed}"));
        copy_dir(&layout.log_dir, &logs);
        let faults = inject_log_dir(
            &logs,
            &FaultRequest {
                kind: FaultKind::LogSegment,
                seed,
                count: 3,
                bits: None,
            },
        )
        .unwrap();
        let report = scan_log_dir(&logs, IoMode::Buffered, None).unwrap();
        let mut reported: Vec<(PathBuf, u32)> = report
            .problems
            .iter()
            .map(|p| (p.file.clone(), p.segment))
            .collect();
        let mut expected: Vec<(PathBuf, u32)> = faults
            .iter()
            .map(|f| (f.file.clone(), f.segment.unwrap()))
            .collect();
        reported.sort();
        expected.sort();
        injected += faults.len() as u64;
        assert_eq!(report.bad_segments, faults.len() as u64, "{report:?}");
        assert_eq!(reported, expected, "seed {seed}");
        detected += report.bad_segments;
        std::fs::remove_dir_all(&logs).unwrap();
    }
    println!(
        "log segment faults: injected {injected}, detected as bad {detected}, misclassified 0"
    );

    // One checkpoint copy corrupted: the other is still used.
    for copies in [1, 2] {
        let logs = dir.path().join(format!("chk-{copies}"));
        copy_dir(&layout.log_dir, &logs);
        let faults = inject_log_dir(
            &logs,
            &FaultRequest {
                kind: FaultKind::Checkpoint,
                seed: 5,
                count: copies,
                bits: None,
            },
        )
        .unwrap();
        assert_eq!(faults.len(), copies as usize);
        let report = scan_log_dir(&logs, IoMode::Buffered, None).unwrap();
        assert_eq!(report.checkpoint_copies_valid, 2 - copies, "{report:?}");
        assert!(
            report.problems[0].file.ends_with("E00.chk"),
            "{:?}",
            report.problems
        );
    }

    // Both copies corrupt on an instance that needs recovery: `checksum` names the
    // file, and recovery falls back to the older checkpoint in the database header
    // (safe: replay skips what is already on disk) and keeps the durable commit.
    let db_copy = dir.path().join("chk-db");
    copy_dir(layout.db_file.parent().unwrap(), &db_copy);
    let broken = InstanceLayout {
        instance: InstanceId::new(1),
        db_file: db_copy.join(layout.db_file.file_name().unwrap()),
        log_dir: dir.path().join("chk-broken"),
    };
    copy_dir(&layout.log_dir, &broken.log_dir);
    let instance = Instance::open(buffered_config(&broken)).unwrap();
    let key = instance
        .commit(
            &[TxnOp::Insert {
                mailbox: 1,
                props: b"kept across a lost checkpoint",
                body: b"b",
            }],
            Durability::Durable,
        )
        .unwrap()
        .inserted[0];
    instance.crash();
    inject_log_dir(
        &broken.log_dir,
        &FaultRequest {
            kind: FaultKind::Checkpoint,
            seed: 9,
            count: 2,
            bits: None,
        },
    )
    .unwrap();
    let report = scan_log_dir(&broken.log_dir, IoMode::Buffered, None).unwrap();
    assert_eq!(report.checkpoint_copies_valid, 0);
    assert!(report.problems.iter().any(|p| p.file.ends_with("E00.chk")));
    let options = RecoveryOptions {
        io_mode: IoMode::Buffered,
        ..RecoveryOptions::default()
    };
    let recovered = recover(&broken, &options).unwrap();
    assert!(recovered.succeeded(), "{recovered:?}");
    let instance = Instance::open(buffered_config(&broken)).unwrap();
    let m = instance.read(key, false).unwrap().unwrap();
    assert_eq!(m.props, b"kept across a lost checkpoint");
    instance.shutdown().unwrap();

    // Dropped writes during real transactions: recovery names the page.
    let lost_rounds = if long_mode() { 20 } else { 3 };
    for seed in 0..lost_rounds {
        let copy = dir.path().join(format!("lost-{seed}"));
        copy_dir(layout.db_file.parent().unwrap(), &copy.join("db"));
        let lost_layout = InstanceLayout {
            instance: InstanceId::new(1),
            db_file: copy.join("db").join(layout.db_file.file_name().unwrap()),
            log_dir: copy.join("logs"),
        };
        copy_dir(&layout.log_dir, &lost_layout.log_dir);
        let fault = inject_lost_flush(&buffered_config(&lost_layout), seed).unwrap();
        assert_eq!(fault.expected, ExpectedDetection::LostFlush);
        let report = recover(&lost_layout, &options).unwrap();
        assert!(!report.succeeded());
        let pages: Vec<u32> = report.lost_flushes.iter().map(|l| l.pgno.get()).collect();
        assert_eq!(pages, vec![fault.pgno.unwrap()], "seed {seed}");
    }
    println!("lost flushes: injected {lost_rounds}, detected {lost_rounds}");
}
