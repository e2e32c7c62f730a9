//! The SoftRecovery test (product.md §2): per instance, transactions generate a number
//! of log files with the checkpoint held back, the instance crashes without flushing
//! its cache, and recovery replays the log from the checkpoint — Jetstress's
//! "Soft-Recovery Statistics" (log files replayed and elapsed seconds per instance,
//! and the average time to replay one log file).
//!
//! All instances run at once, each with its own sessions. Whatever happens while
//! generating (a stop request, an error), the instance is crashed and recovered, so no
//! database is left needing recovery.

use edbstress_format::Generation;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use edbstress_engine::Compressibility;
use edbstress_engine::EngineError;
use edbstress_engine::InstanceId;
use edbstress_engine::InstanceLayout;
use edbstress_engine::{Instance, InstanceConfig};
use edbstress_engine::{RecoveryOptions, RecoveryReport, recover};
use edbstress_io::{BackendKind, IoMode, IoStats};
use edbstress_report::OpMix;
use parking_lot::Mutex;
use serde::Serialize;

use crate::config::RunConfig;
use crate::per_instance::run_each;
use crate::profile::Profile;
use crate::transaction::TransactionGenerator;

/// How to run the SoftRecovery test.
#[derive(Clone, Debug, PartialEq)]
pub struct SoftRecoveryOptions {
    /// Log files (generations) to generate per instance before the crash
    /// (Jetstress: 500).
    pub logs_to_replay: u32,
    /// Sessions running transactions per instance.
    pub sessions_per_instance: u32,
    /// Minimum database cache per instance, bytes.
    pub cache_min_bytes: u64,
    /// Maximum database cache per instance, bytes (also the cache of the replay).
    pub cache_max_bytes: u64,
    /// Checkpoint depth per instance, bytes. The checkpoint is held back while
    /// generating, so this does not move it; it is kept so the configuration reads
    /// back the same.
    pub checkpoint_depth: u64,
    /// Operation mix of the transactions.
    pub op_mix: OpMix,
    /// Share of lazy commits, percent.
    pub lazy_commit_pct: u32,
    /// Seed of the transaction generators.
    pub seed: u64,
    /// Compressibility of the message content written.
    pub compressibility: Compressibility,
    /// Direct or buffered I/O.
    pub io_mode: IoMode,
    /// I/O backend.
    pub backend: BackendKind,
    /// Log page images (torn-write protection), as in the other tests.
    pub torn_write_protection: bool,
    /// The version profile: its ESE's log writing (what each log file holds follows
    /// from how often and how the log is written).
    pub profile: Profile,
}

impl SoftRecoveryOptions {
    /// The test a run configuration asks for: its sessions shared out over the
    /// databases (at least one each), its per-instance cache and checkpoint depth.
    pub fn from_config(config: &RunConfig) -> SoftRecoveryOptions {
        SoftRecoveryOptions {
            logs_to_replay: config.logs_to_replay,
            sessions_per_instance: config.sessions().div_ceil(config.databases.max(1)).max(1),
            cache_min_bytes: config.cache_min_per_instance(),
            cache_max_bytes: config.cache_max_per_instance(),
            checkpoint_depth: config.checkpoint_depth,
            op_mix: config.op_mix,
            lazy_commit_pct: config.lazy_commit_pct,
            seed: config.seed,
            compressibility: Compressibility::from_ratio(config.compressibility)
                .unwrap_or(Compressibility::MAIL),
            io_mode: config.io_mode,
            backend: config.backend,
            torn_write_protection: config.torn_write_protection,
            profile: config.profile,
        }
    }
}

/// What the progress callback is told about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SoftRecoveryPhase {
    /// Generating logs: done = log files written so far, total = log files asked for.
    Generating,
    /// Replaying after the crash: reported at the start (done = 0, total = log files
    /// generated) and at the end (done = total = log files replayed).
    Replaying,
}

/// What the test did for one instance.
#[derive(Clone, Debug, Serialize)]
pub struct SoftRecoveryInstanceReport {
    /// Instance number.
    pub instance: InstanceId,
    /// Log files completed before the crash (counted from the generation the
    /// instance opened in to the generation of the durable end of the log).
    pub logs_generated: u32,
    /// Log files replayed (Jetstress's "Log files replayed").
    pub logs_replayed: u32,
    /// Seconds spent generating.
    pub generate_seconds: f64,
    /// Seconds the replay took (Jetstress's "Elapsed seconds").
    pub elapsed_seconds: f64,
    /// Transactions run while generating (reads included).
    pub transactions: u64,
    /// Stopped before `logs_to_replay` log files were generated.
    pub stopped: bool,
    /// The recovery's own report (records, pages redone, lost flushes, I/O).
    pub recovery: RecoveryReport,
}

impl SoftRecoveryInstanceReport {
    /// Seconds to replay one log file, if any was replayed.
    pub fn seconds_per_log(&self) -> Option<f64> {
        (self.logs_replayed > 0).then(|| self.elapsed_seconds / f64::from(self.logs_replayed))
    }

    /// Whether recovery brought the database back to a clean state.
    pub fn succeeded(&self) -> bool {
        self.recovery.succeeded()
    }
}

/// Jetstress's "Average time to play one Log file": replay seconds of all instances
/// over the log files they replayed; None when nothing was replayed.
pub fn average_seconds_per_log(reports: &[SoftRecoveryInstanceReport]) -> Option<f64> {
    let logs: u64 = reports.iter().map(|r| u64::from(r.logs_replayed)).sum();
    let seconds: f64 = reports.iter().map(|r| r.elapsed_seconds).sum();
    (logs > 0).then(|| seconds / logs as f64)
}

/// Why the test could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum SoftRecoveryError {
    /// An option is out of range.
    #[error("{0}")]
    Invalid(String),
    /// An instance failed (its database was crashed and recovered when it had been
    /// opened).
    #[error("soft recovery of instance {instance}: {source}")]
    Instance {
        /// Instance number.
        instance: InstanceId,
        /// What failed.
        #[source]
        source: EngineError,
    },
}

/// Runs the test on every instance of `layouts` at once. `progress` receives (phase,
/// instance, done, total) from the instances' threads. A set `stop` ends generation
/// early; the instances are crashed and recovered all the same and their reports
/// flagged `stopped`. Returns a report per instance, in `layouts` order, and the I/O of
/// the replays (classes `RecoveryRead` and `RecoveryWrite`).
pub fn run_soft_recovery(
    layouts: &[InstanceLayout],
    options: &SoftRecoveryOptions,
    stop: &AtomicBool,
    progress: &(dyn Fn(SoftRecoveryPhase, u32, u32, u32) + Sync),
) -> Result<(Vec<SoftRecoveryInstanceReport>, IoStats), SoftRecoveryError> {
    check_options(options)?;
    // One failing instance ends the others' generation early (they still recover).
    let results = run_each(
        layouts,
        |layout, abort| {
            soft_recover_one(layout, options, stop, abort, progress).map_err(|source| {
                SoftRecoveryError::Instance {
                    instance: layout.instance,
                    source,
                }
            })
        },
        || {
            SoftRecoveryError::Invalid(
                "a soft recovery thread panicked; please report this as a bug".into(),
            )
        },
    );
    let mut reports = Vec::with_capacity(results.len());
    let mut stats = IoStats::new();
    for result in results {
        let report = result?;
        stats.merge(&report.recovery.io);
        reports.push(report);
    }
    Ok((reports, stats))
}

fn check_options(options: &SoftRecoveryOptions) -> Result<(), SoftRecoveryError> {
    let invalid = |what: String| Err(SoftRecoveryError::Invalid(what));
    if options.logs_to_replay == 0 {
        return invalid("log files to replay must be at least 1 (Jetstress uses 500)".into());
    }
    if options.sessions_per_instance == 0 {
        return invalid("soft recovery needs at least one session per instance".into());
    }
    if options.cache_max_bytes == 0 {
        return invalid("the maximum database cache must be more than 0 bytes".into());
    }
    if options.lazy_commit_pct > 100 {
        return invalid(format!(
            "lazy commits {}% is more than 100%",
            options.lazy_commit_pct
        ));
    }
    // Reads write no log and deletes run out of messages: only inserts and replaces
    // are sure to keep the log growing to the generations asked for.
    if options.op_mix.insert + options.op_mix.replace == 0 {
        return invalid(
            "the operation mix has no inserts or replaces, so it would never fill the log files to replay; give inserts or replaces a share"
                .into(),
        );
    }
    Ok(())
}

/// Generates, crashes and recovers one instance.
fn soft_recover_one(
    layout: &InstanceLayout,
    options: &SoftRecoveryOptions,
    stop: &AtomicBool,
    abort: &AtomicBool,
    progress: &(dyn Fn(SoftRecoveryPhase, u32, u32, u32) + Sync),
) -> Result<SoftRecoveryInstanceReport, EngineError> {
    let mut config = InstanceConfig::new(layout.clone());
    config.cache_min_bytes = options.cache_min_bytes;
    config.cache_max_bytes = options.cache_max_bytes;
    config.checkpoint_depth = options.checkpoint_depth;
    config.io_mode = options.io_mode;
    config.backend = options.backend;
    config.hold_checkpoint = true;
    config.torn_write_protection = options.torn_write_protection;
    options.profile.configure_instance(&mut config);
    let instance = Instance::open(config)?;
    let number = layout.instance;
    let wanted = options.logs_to_replay;
    let started = Instant::now();
    let start = instance.log_durable().generation;
    // Counted on the durable end of the log: what the crash keeps.
    let target = start.checked_add(wanted).unwrap_or(Generation::MAX);
    let transactions = AtomicU64::new(0);
    let reported = AtomicU32::new(0);
    let halt = AtomicBool::new(false);
    let failure: Mutex<Option<EngineError>> = Mutex::new(None);
    progress(SoftRecoveryPhase::Generating, u32::from(number), 0, wanted);
    std::thread::scope(|scope| {
        for session in 0..options.sessions_per_instance {
            let (instance, transactions, reported, halt, failure) =
                (&instance, &transactions, &reported, &halt, &failure);
            scope.spawn(move || {
                // Distinct streams for every session of every instance.
                let stream = (u32::from(number) - 1)
                    .wrapping_mul(options.sessions_per_instance)
                    .wrapping_add(session);
                let mut generator = TransactionGenerator::new(
                    options.seed,
                    stream,
                    options.op_mix,
                    options.lazy_commit_pct,
                    options.compressibility,
                );
                loop {
                    if stop.load(Ordering::Relaxed)
                        || abort.load(Ordering::Relaxed)
                        || halt.load(Ordering::Relaxed)
                    {
                        break;
                    }
                    let generation = instance.log_durable().generation;
                    let done = generation.since(start).min(wanted);
                    if reported.fetch_max(done, Ordering::Relaxed) < done {
                        progress(
                            SoftRecoveryPhase::Generating,
                            u32::from(number),
                            done,
                            wanted,
                        );
                    }
                    if generation >= target {
                        break;
                    }
                    let kind = generator.next_kind();
                    match generator.run(instance, kind) {
                        Ok(_) => {
                            transactions.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            failure.lock().get_or_insert(e);
                            halt.store(true, Ordering::Relaxed);
                            break;
                        }
                    }
                }
            });
        }
    });
    let generate_seconds = started.elapsed().as_secs_f64();
    let durable = instance.crash();
    let logs_generated = durable.generation.since(start);
    progress(
        SoftRecoveryPhase::Replaying,
        u32::from(number),
        0,
        logs_generated,
    );
    let replay_started = Instant::now();
    let recovery = recover(
        layout,
        &RecoveryOptions {
            io_mode: options.io_mode,
            backend: options.backend,
            cache_bytes: options.cache_max_bytes,
        },
    );
    let elapsed_seconds = replay_started.elapsed().as_secs_f64();
    // The generation error is the cause; the recovery ran to leave the database clean.
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    let recovery = recovery?;
    let logs_replayed = recovery.generations_replayed;
    progress(
        SoftRecoveryPhase::Replaying,
        u32::from(number),
        logs_replayed,
        logs_replayed,
    );
    Ok(SoftRecoveryInstanceReport {
        instance: number,
        logs_generated,
        logs_replayed,
        generate_seconds,
        elapsed_seconds,
        transactions: transactions.into_inner(),
        stopped: logs_generated < wanted,
        recovery,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn report(logs_replayed: u32, elapsed_seconds: f64) -> SoftRecoveryInstanceReport {
        SoftRecoveryInstanceReport {
            instance: InstanceId::new(1),
            logs_generated: logs_replayed,
            logs_replayed,
            generate_seconds: 0.0,
            elapsed_seconds,
            transactions: 0,
            stopped: false,
            recovery: RecoveryReport {
                generations_replayed: logs_replayed,
                seconds: elapsed_seconds,
                ..RecoveryReport::new(InstanceId::new(1), PathBuf::new(), PathBuf::new())
            },
        }
    }

    /// The reference ESRP report's eight instances give its 2.8426 s per log file.
    #[test]
    fn average_replay_time_matches_the_reference_report() {
        let rows = [
            (507, 1418.822492),
            (506, 1296.2998768),
            (509, 1713.4602096),
            (508, 1429.1653102),
            (509, 1619.8444451),
            (501, 1647.1600931),
            (506, 1298.1562801),
            (504, 1089.708714),
        ];
        let reports: Vec<_> = rows.into_iter().map(|(n, s)| report(n, s)).collect();
        let average = average_seconds_per_log(&reports).unwrap();
        assert!((average - 2.8426).abs() < 0.00005, "{average}");
        assert_eq!(average_seconds_per_log(&[report(0, 1.0)]), None);
        assert_eq!(report(4, 2.0).seconds_per_log(), Some(0.5));
    }

    #[test]
    fn a_mix_that_cannot_fill_logs_is_refused() {
        let options = SoftRecoveryOptions {
            logs_to_replay: 5,
            sessions_per_instance: 1,
            cache_min_bytes: 1 << 20,
            cache_max_bytes: 1 << 20,
            checkpoint_depth: 1 << 20,
            op_mix: OpMix {
                insert: 0,
                delete: 50,
                replace: 0,
                read: 50,
            },
            lazy_commit_pct: 70,
            seed: 1,
            compressibility: edbstress_engine::Compressibility::MAIL,
            profile: Profile::Exchange2013,
            io_mode: IoMode::Buffered,
            backend: BackendKind::Auto,
            torn_write_protection: false,
        };
        let e = run_soft_recovery(&[], &options, &AtomicBool::new(false), &|_, _, _, _| {});
        assert!(matches!(e, Err(SoftRecoveryError::Invalid(_))), "{e:?}");
    }
}
