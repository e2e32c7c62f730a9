//! Simulated power cuts (`edbstress-io` feature `power-cut-sim`): sessions commit
//! durably while the engine's real writers flush pages and logs; at a random moment the
//! power is cut — of every write since its file's last flush an arbitrary random subset
//! persists, whole or torn at 4 KiB, in any order — and then recovery must succeed,
//! every acknowledged durable commit must be there with its body, and the database must
//! pass a full checksum scan and a deep check.
//!
//! 20 + 10 cuts normally (whole-write and torn-sector device models), 200 + 100 with
//! `EDBSTRESS_LONG_TESTS=1`. A fourth model is a storage that, on top of the cut,
//! loses the newest log files or their content (10 cuts, 100 in long mode): recovery
//! must then refuse, naming what is lost, or bring back every acknowledged commit —
//! never report success over a missing one. The simulation is process-wide, so this
//! binary holds a single test.

#[path = "suite/instance_common/mod.rs"]
mod instance_common;
use instance_common::*;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use edbstress_engine::EngineError;
use edbstress_engine::InstanceId;
use edbstress_engine::InstanceLayout;
use edbstress_engine::MessageKey;
use edbstress_engine::deep_check;
use edbstress_engine::{Durability, Instance, InstanceConfig, TxnOp};
use edbstress_engine::{PageProblemKind, ScanOptions, scan_database};
use edbstress_engine::{RecoveryOptions, recover};
use edbstress_format::Generation;
use edbstress_format::PageSize;
use edbstress_io::power_cut::{self, CutModel};
use edbstress_io::{BackendKind, IoMode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn long_mode() -> bool {
    std::env::var("EDBSTRESS_LONG_TESTS").is_ok_and(|v| v == "1")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// Even seeds write the log with the split tail write (the exchange2007/2010
/// profiles), odd seeds with one write per flush (exchange2013): both under every model.
fn config(layout: &InstanceLayout, torn_write_protection: bool, seed: u64) -> InstanceConfig {
    let mut c = buffered_config(layout);
    c.torn_write_protection = torn_write_protection;
    c.split_tail_write = seed % 2 == 0;
    // A small cache and a shallow checkpoint: pages are written, evicted and the
    // checkpoint advances all the time, so cuts land amid page writes too.
    c.cache_min_bytes = 96 * 8192;
    c.cache_max_bytes = 96 * 8192;
    c.checkpoint_depth = 64 * 1024;
    c.backend = BackendKind::Threads;
    c.lazy_flush_interval = Some(Duration::from_millis(5));
    c
}

type Acknowledged = BTreeMap<MessageKey, (Vec<u8>, Vec<u8>)>;

/// Figures over all cuts.
#[derive(Default, Debug)]
struct Figures {
    cuts: u64,
    survived: u64,
    acknowledged: u64,
    lost: u64,
    writes_at_cut: u64,
    persisted: u64,
    torn: u64,
    dropped: u64,
    /// Cuts after which recovery refused a torn page, naming it (torn-sector model).
    torn_pages_detected: u64,
    /// Pages recovery rebuilt from their logged images (torn-write protection).
    pages_restored: u64,
    /// Of those, torn pages the scan reported as correctable (checksum aliasing).
    torn_aliased_correctable: u64,
    /// Cuts after which the storage also lost log files or their content.
    logs_lost: u64,
    /// Of those, cuts where recovery refused, naming the lost or damaged log.
    lost_logs_refused: u64,
}

/// What the storage loses of the log on top of the cut, always of the newest
/// generation(s).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum LogLoss {
    /// The newest `n` generation files and the pre-created next file.
    Files(usize),
    /// Everything after the file header of the newest generation file.
    Body,
    /// The newest generation file cut short at a random length.
    Truncated,
}

impl LogLoss {
    fn for_seed(seed: u64) -> LogLoss {
        match seed % 5 {
            0 => LogLoss::Files(1),
            1 => LogLoss::Files(2),
            2 => LogLoss::Files(3),
            3 => LogLoss::Body,
            _ => LogLoss::Truncated,
        }
    }

    /// Applies the loss to the log directory `dir`.
    fn apply(self, dir: &Path, seed: u64) {
        let mut generations: Vec<(Generation, std::path::PathBuf)> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                edbstress_format::log::parse_log_file_name(&name).map(|g| (g, e.path()))
            })
            .collect();
        generations.sort();
        let Some((_, newest)) = generations.last().cloned() else {
            return;
        };
        match self {
            LogLoss::Files(n) => {
                for (_, path) in generations.iter().rev().take(n) {
                    std::fs::remove_file(path).unwrap();
                }
                let _ = std::fs::remove_file(dir.join("E00tmp.log"));
            }
            LogLoss::Body => {
                let mut bytes = std::fs::read(&newest).unwrap();
                bytes[4096..].fill(0);
                std::fs::write(&newest, bytes).unwrap();
            }
            LogLoss::Truncated => {
                let len = std::fs::metadata(&newest).unwrap().len();
                let keep = 4096 + (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) % (len - 4096));
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&newest)
                    .unwrap()
                    .set_len(keep)
                    .unwrap();
            }
        }
    }
}

/// A device model and whether the engine logs page images.
#[derive(Clone, Copy, PartialEq, Eq)]
struct CutSetup {
    model: CutModel,
    torn_write_protection: bool,
    /// The storage also loses the newest log (a model chosen per seed).
    log_loss: bool,
}

/// Runs committing sessions until the cut; returns the commits acknowledged before it.
fn commit_until_cut(
    layout: &InstanceLayout,
    seed: u64,
    setup: CutSetup,
    figures: &mut Figures,
) -> Acknowledged {
    let acknowledged = Mutex::new(Acknowledged::new());
    let count = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let mut rng = SmallRng::seed_from_u64(seed);
    let target = rng.random_range(20..300u64);
    power_cut::arm();
    let instance = Instance::open(config(layout, setup.torn_write_protection, seed)).unwrap();
    std::thread::scope(|s| {
        for session in 0..2u64 {
            let (instance, acknowledged, count, stop) = (&instance, &acknowledged, &count, &stop);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed * 7 + session);
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let props = format!("session {session} commit {n} seed {seed}").into_bytes();
                    let len = rng.random_range(1..6000);
                    let body: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                    let durability = if rng.random_bool(0.8) {
                        Durability::Durable
                    } else {
                        Durability::Lazy
                    };
                    let op = TxnOp::Insert {
                        mailbox: 1 + (n % 4) as u32,
                        props: &props,
                        body: &body,
                    };
                    match instance.commit(&[op], durability) {
                        // Acknowledged only if it returned before the power went: after
                        // the cut every flush fails, so an Ok here came from a flush
                        // that completed before it.
                        Ok(outcome) if durability == Durability::Durable => {
                            if !power_cut::is_cut() {
                                acknowledged
                                    .lock()
                                    .unwrap()
                                    .insert(outcome.inserted[0], (props, body));
                                count.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
            });
        }
        let started = Instant::now();
        while count.load(Ordering::SeqCst) < target && started.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_micros(rng.random_range(50..2000)));
        }
        let report = power_cut::cut(seed, setup.model).unwrap();
        figures.writes_at_cut += report.writes;
        figures.persisted += report.persisted;
        figures.torn += report.torn;
        figures.dropped += report.dropped;
        stop.store(true, Ordering::SeqCst);
    });
    instance.crash();
    power_cut::disarm();
    acknowledged.into_inner().unwrap()
}

/// Runs `cuts` seeded cuts under `setup` on copies of the prepared instance in
/// `pristine`; returns the figures and every failure found.
fn run_cuts(
    dir: &Path,
    pristine: &Path,
    setup: CutSetup,
    seeds: std::ops::Range<u64>,
) -> (Figures, Vec<String>) {
    let mut figures = Figures::default();
    let mut failures = Vec::new();
    for seed in seeds {
        let root = dir.join(format!("cut-{seed}"));
        copy_dir(pristine, &root);
        let layout = InstanceLayout::new(InstanceId::new(1), &root.join("db"), &root.join("logs"));
        figures.cuts += 1;
        let acknowledged = commit_until_cut(&layout, seed, setup, &mut figures);
        figures.acknowledged += acknowledged.len() as u64;
        if setup.log_loss {
            LogLoss::for_seed(seed).apply(&layout.log_dir, seed);
            figures.logs_lost += 1;
        }
        let recovery = RecoveryOptions {
            io_mode: IoMode::Buffered,
            backend: BackendKind::Threads,
            ..RecoveryOptions::default()
        };
        let scan = |layout: &InstanceLayout| {
            scan_database(
                &layout.db_file,
                &ScanOptions {
                    io_mode: IoMode::Buffered,
                    ..ScanOptions::default()
                },
                &mut |_, _| {},
            )
            .unwrap()
        };
        let report = match recover(&layout, &recovery) {
            Ok(r) if r.succeeded() => r,
            Ok(r) => {
                failures.push(format!("seed {seed}: recovery did not succeed: {r:?}"));
                continue;
            }
            Err(EngineError::CorruptPage { pgno, .. })
                if setup.model == CutModel::TornSectors && !setup.torn_write_protection =>
            {
                // A torn page write: recovery must refuse, naming the page, and the
                // checksum scan must report that page — as bad, or, rarely, as
                // correctable: a tear whose difference is a few bits can alias a
                // single-bit syndrome, a limit of ESE-style checksums (docs/format.md
                // §5.3). Reported either way, never silent.
                let found = scan(&layout);
                let kind = found
                    .problems
                    .iter()
                    .find(|p| p.pgno == pgno)
                    .map(|p| p.kind);
                if kind == Some(PageProblemKind::Bad) {
                    figures.torn_pages_detected += 1;
                } else if matches!(kind, Some(PageProblemKind::Correctable { .. })) {
                    figures.torn_pages_detected += 1;
                    figures.torn_aliased_correctable += 1;
                } else {
                    failures.push(format!(
                        "seed {seed}: recovery named page {pgno} damaged but the scan found {:?}",
                        found.problems
                    ));
                }
                std::fs::remove_dir_all(&root).unwrap();
                continue;
            }
            // The storage lost log it had acknowledged: recovery must say so (a lost
            // or damaged log, named), never replay what is left and call it clean.
            Err(e @ (EngineError::LostLog { .. } | EngineError::CorruptLog { .. }))
                if setup.log_loss =>
            {
                let _ = e;
                figures.lost_logs_refused += 1;
                std::fs::remove_dir_all(&root).unwrap();
                continue;
            }
            Err(e) => {
                failures.push(format!("seed {seed}: recovery failed: {e}"));
                continue;
            }
        };
        figures.pages_restored += report.pages_restored.len() as u64;
        let instance = Instance::open(config(&layout, setup.torn_write_protection, seed)).unwrap();
        let mut lost = 0;
        for (key, (props, body)) in &acknowledged {
            match instance.read(*key, true) {
                Ok(Some(m)) if &m.props == props && m.body.as_ref() == Some(body) => {}
                other => {
                    lost += 1;
                    if lost <= 3 {
                        let loss = setup.log_loss.then(|| LogLoss::for_seed(seed));
                        failures.push(format!(
                            "seed {seed}: acknowledged commit {key:?} lost or changed{}: {:?} (recovery {report:?})",
                            loss.map_or(String::new(), |l| format!(" after log loss {l:?}, which recovery did not report")),
                            other.map(|m| m.map(|m| m.props))
                        ));
                    }
                }
            }
        }
        figures.lost += lost;
        instance.shutdown().unwrap();
        let found = scan(&layout);
        if !found.is_clean() {
            failures.push(format!(
                "seed {seed}: checksum scan after recovery: {:?}",
                found.problems
            ));
            continue;
        }
        match deep_check(&layout.db_file, IoMode::Buffered) {
            Ok(check) if check.problems.is_empty() => {}
            Ok(check) => failures.push(format!("seed {seed}: deep check: {:?}", check.problems)),
            Err(e) => failures.push(format!("seed {seed}: deep check failed: {e}")),
        }
        if lost == 0 {
            figures.survived += 1;
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
    (figures, failures)
}

#[test]
fn power_cuts_lose_no_acknowledged_commit_and_leave_no_undetected_damage() {
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine");
    prepare_small(&pristine, PageSize::K8, 4 << 20, 4, 3);
    let (whole, torn, lost_logs) = if long_mode() {
        (200, 100, 100)
    } else {
        (20, 10, 10)
    };

    // A device that writes each request atomically: every cut must be survived.
    let setup = CutSetup {
        model: CutModel::WholeWrites,
        torn_write_protection: false,
        log_loss: false,
    };
    let (figures, failures) = run_cuts(dir.path(), &pristine, setup, 0..whole);
    println!("power cuts, whole writes: {figures:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(figures.survived, figures.cuts);
    assert_eq!(figures.lost, 0);

    // A device atomic per 4 KiB sector only: an 8 KiB page write may be torn. With
    // torn-write protection, recovery rebuilds torn pages from their logged images:
    // every cut must be survived with nothing lost.
    let setup = CutSetup {
        model: CutModel::TornSectors,
        torn_write_protection: true,
        log_loss: false,
    };
    let (figures, failures) = run_cuts(dir.path(), &pristine, setup, 1000..1000 + torn);
    println!("power cuts, torn sectors, torn-write protection: {figures:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(figures.survived, figures.cuts);
    assert_eq!(figures.lost, 0);

    // Without it (the default, like ESE), a torn page with changes to replay stops
    // recovery — which must name it (and `checksum` must report it bad); every other
    // cut must be survived with nothing lost.
    let setup = CutSetup {
        model: CutModel::TornSectors,
        torn_write_protection: false,
        log_loss: false,
    };
    let (figures, failures) = run_cuts(dir.path(), &pristine, setup, 2000..2000 + torn);
    println!("power cuts, torn sectors, no protection: {figures:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(figures.survived + figures.torn_pages_detected, figures.cuts);
    assert_eq!(figures.lost, 0);

    // A storage that also loses the newest log files, or their content: recovery
    // refuses, naming the log, or every acknowledged commit is there (the lost file
    // held nothing acknowledged). A silent loss is a failure above.
    let setup = CutSetup {
        model: CutModel::WholeWrites,
        torn_write_protection: false,
        log_loss: true,
    };
    let (figures, failures) = run_cuts(dir.path(), &pristine, setup, 3000..3000 + lost_logs);
    println!("power cuts, newest log lost: {figures:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(figures.survived + figures.lost_logs_refused, figures.cuts);
    assert_eq!(figures.lost, 0);
    assert!(
        figures.lost_logs_refused > 0,
        "no cut lost an acknowledged log write: the model tests nothing"
    );
}
