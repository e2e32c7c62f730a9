//! The transactional tests (Performance and Stress): open the instances, start the
//! background activities, dispatch transactions through phases (attaining
//! prerequisites, settling, measuring), sample every counter, and shut down cleanly.
//!
//! A [`Workbench`] owns the open instances and their background activities; it can
//! drive several session counts one after another (auto-tuning) before the measured
//! run, keeping caches warm in between.
//!
//! `measure` records the measured phase; [`warmup`] reports the warm-up's progress
//! (cache fill per instance, rate, estimate) and why a warm-up timed out.

use edbstress_format::Generation;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use edbstress_engine::CacheCounters;
use edbstress_engine::Compressibility;
use edbstress_engine::InstanceLayout;
use edbstress_engine::log::LogCounters;
use edbstress_engine::{EngineError, GrowthAllowance, Instance, InstanceConfig};
use edbstress_io::tasks::{self, run_tasks};
use edbstress_io::{ClassStats, IoClass, IoStats, LatencyHistogram};
use edbstress_report::summary::{latency_summary, rate};
use edbstress_report::{
    EngineSummary, HostCounters, InstanceResult, IoSummary, Sample, SampleFamily, SamplingStall,
    Totals, TransactionSummary, Volume, instance_name,
};
use parking_lot::Mutex;

use crate::RunError;
use crate::bdm::{BadPage, BdmConfig, BdmHandle, BdmScanner};
use crate::config::RunConfig;
use crate::host::{HostInterval, HostSampler, HostSnapshot, host_counters};
use crate::live::CounterSnapshot;
use crate::live::{LiveStatus, PhaseKind};
use crate::replication::{LogReplicator, ReplicationConfig, ReplicationHandle, RetentionFloor};
use crate::rundir::TestLog;
use crate::schedule::{ArrivalSchedule, RateController};
use crate::transaction::{TransactionGenerator, TxnKind};

mod drive;
mod live_counters;
mod measure;
pub mod warmup;

use drive::self_drive;

const MB: f64 = 1_048_576.0;
/// How often progress is reported and the open-loop rate adjusted.
const TICK: Duration = Duration::from_secs(1);
/// The classes whose rates and latencies the live progress shows.
const LIVE_CLASSES: [IoClass; 5] = [
    IoClass::DbRead,
    IoClass::DbWrite,
    IoClass::LogWrite,
    IoClass::BdmRead,
    IoClass::ReplicationRead,
];

/// Transaction counters of one instance (cumulative).
#[derive(Debug, Default)]
struct TxnStats {
    by_kind: [u64; 4],
    lazy: u64,
    errors: u64,
    latency: LatencyHistogram,
}

impl Clone for TxnStats {
    fn clone(&self) -> TxnStats {
        TxnStats {
            by_kind: self.by_kind,
            lazy: self.lazy,
            errors: self.errors,
            latency: self.latency.clone(),
        }
    }

    /// In place: the histogram's counter array is overwritten, not allocated again.
    fn clone_from(&mut self, source: &TxnStats) {
        self.by_kind = source.by_kind;
        self.lazy = source.lazy;
        self.errors = source.errors;
        self.latency.clone_from(&source.latency);
    }
}

impl TxnStats {
    fn count(&self) -> u64 {
        self.by_kind.iter().sum()
    }

    /// The counters accumulated since `earlier` into `out`, reusing its histogram's
    /// counter array.
    fn since_into(&self, earlier: &TxnStats, out: &mut TxnStats) {
        for (i, k) in out.by_kind.iter_mut().enumerate() {
            *k = self.by_kind[i].saturating_sub(earlier.by_kind[i]);
        }
        out.lazy = self.lazy.saturating_sub(earlier.lazy);
        out.errors = self.errors.saturating_sub(earlier.errors);
        self.latency.since_into(&earlier.latency, &mut out.latency);
    }

    fn merge(&mut self, other: &TxnStats) {
        for (a, b) in self.by_kind.iter_mut().zip(other.by_kind) {
            *a += b;
        }
        self.lazy += other.lazy;
        self.errors += other.errors;
        self.latency.merge(&other.latency);
    }

    fn summary(&self, seconds: f64) -> TransactionSummary {
        TransactionSummary {
            count: self.count(),
            per_sec: rate(self.count(), seconds),
            inserts: self.by_kind[0],
            deletes: self.by_kind[1],
            replaces: self.by_kind[2],
            reads: self.by_kind[3],
            lazy_commits: self.lazy,
            errors: self.errors,
            latency: latency_summary(&self.latency),
        }
    }
}

fn kind_index(kind: TxnKind) -> usize {
    match kind {
        TxnKind::Insert => 0,
        TxnKind::Delete => 1,
        TxnKind::Replace => 2,
        TxnKind::Read => 3,
    }
}

/// One open instance with what runs beside it.
struct Slot {
    number: u32,
    layout: InstanceLayout,
    instance: Arc<Instance>,
    txn: Mutex<TxnStats>,
    schedule: ArrivalSchedule,
    initial_bytes: u64,
    bdm: Option<BdmHandle>,
    replication: Option<ReplicationHandle>,
}

/// Cumulative counters of every instance at one moment.
#[derive(Clone)]
struct Snapshot {
    at: Instant,
    io: IoStats,
    cache: Vec<CacheCounters>,
    log: Vec<LogCounters>,
    txn: Vec<TxnStats>,
    checkpoint_depth: Vec<u64>,
    generation: Vec<Generation>,
    pages_allocated: Vec<u64>,
    host: HostSnapshot,
}

/// Figures between two snapshots.
struct Interval {
    seconds: f64,
    io: IoStats,
    cache: Vec<CacheCounters>,
    cache_now: Vec<CacheCounters>,
    log: Vec<LogCounters>,
    txn: Vec<TxnStats>,
    checkpoint_depth: Vec<u64>,
    generation: Vec<Generation>,
    generations_written: Vec<u32>,
    pages_allocated: Vec<u64>,
    host: HostInterval,
}

/// What a measured phase produced.
pub struct Measurement {
    /// Seconds measured.
    pub seconds: f64,
    /// Sessions that ran.
    pub sessions: u32,
    /// Per instance results.
    pub instances: Vec<InstanceResult>,
    /// Totals.
    pub totals: Totals,
    /// Time series (one row per interval, scope and family).
    pub samples: Vec<Sample>,
    /// Host counters over the period.
    pub host: HostCounters,
    /// The volumes under the database and log paths over the period.
    pub volumes: Vec<Volume>,
    /// Transactions that failed.
    pub transaction_errors: u64,
    /// Longest sampling interval, seconds.
    pub longest_interval_s: f64,
    /// The longest a sampling interval may last, seconds ([`stall_limit`]).
    pub stall_limit_s: f64,
    /// Sampling intervals longer than [`stall_limit`].
    pub stalls: Vec<SamplingStall>,
}

/// The longest a sampling interval may last before it counts as a stall: twice the
/// sample interval, and at least the interval plus 5 seconds. Sampling runs on its own
/// thread and waits on no I/O, so it is late only when the process was stopped or
/// starved (SIGSTOP, a frozen VM, swapping) or the machine stopped responding; the
/// margin keeps scheduler hiccups of a busy host from failing short intervals, and the
/// factor keeps long intervals from hiding a stall as long as themselves. An interval
/// that stretched this far averages a period that was not observed, so its figures
/// cannot support a Pass.
pub fn stall_limit(sample_interval: Duration) -> Duration {
    sample_interval
        .saturating_mul(2)
        .max(sample_interval.saturating_add(Duration::from_secs(5)))
}

/// Why dispatch stopped early, if it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The user asked (Ctrl-C).
    Interrupted,
    /// A transaction failed (the engine's message).
    Failed(String),
    /// The engine refused to grow a database past the growth limit set for the phase
    /// ([`Workbench::limit_growth`]): the engine's message.
    SpaceBudget(String),
}

/// Open instances and their background activities.
pub struct Workbench<'a> {
    config: &'a RunConfig,
    log: &'a TestLog<'a>,
    slots: Vec<Slot>,
    host: HostSampler,
    background_stop: Arc<AtomicBool>,
    controller: Mutex<Option<RateController>>,
    failure: Mutex<Option<String>>,
    progress: &'a (dyn Fn(&LiveStatus) + Sync),
    /// Where the measured phase's counters go at each sampling interval, if anywhere.
    counters: Option<&'a (dyn Fn(&CounterSnapshot) + Sync)>,
    seed_epoch: u32,
    /// The databases' growth limit, shared by every instance (see
    /// [`Workbench::limit_growth`]).
    growth: Arc<GrowthAllowance>,
    /// The first growth the engine refused in the current dispatch (a session's
    /// message), which stops it.
    growth_refused: Mutex<Option<String>>,
}

/// What closing the workbench found.
#[derive(Debug, Default)]
pub struct CloseReport {
    /// Database pages BDM found corrupt during the run, with their instance (its
    /// number).
    pub bdm_bad_pages: Vec<(u32, BadPage)>,
    /// Database file sizes at the end, per instance.
    pub final_bytes: Vec<u64>,
    /// Problems shutting down (each makes the run fail).
    pub shutdown_errors: Vec<String>,
}

impl<'a> Workbench<'a> {
    /// Opens every instance (databases must exist and be clean) and starts BDM and log
    /// replication as configured.
    pub fn open(
        config: &'a RunConfig,
        layouts: &[InstanceLayout],
        log: &'a TestLog<'a>,
        progress: &'a (dyn Fn(&LiveStatus) + Sync),
    ) -> Result<Workbench<'a>, RunError> {
        log.line("Attaching databases ...");
        let background_stop = Arc::new(AtomicBool::new(false));
        let growth = Arc::new(GrowthAllowance::new());
        let mut slots = Vec::new();
        let start = Instant::now();
        for layout in layouts {
            let mut ic = InstanceConfig::new(layout.clone());
            ic.cache_min_bytes = config.cache_min_per_instance();
            ic.cache_max_bytes = config.cache_max_per_instance();
            ic.checkpoint_depth = config.checkpoint_depth;
            config.profile.configure_instance(&mut ic);
            ic.io_mode = config.io_mode;
            ic.backend = config.backend;
            // Runs can be long; logs behind the checkpoint are not needed for recovery.
            ic.circular_logging = true;
            ic.write_coalesce_max = usize::try_from(config.write_coalesce).unwrap_or(usize::MAX);
            ic.torn_write_protection = config.torn_write_protection;
            ic.growth_allowance = Some(growth.clone());
            let instance = Arc::new(Instance::open(ic).map_err(|e| {
                if e.is_integrity() {
                    RunError::Damaged(e.to_string())
                } else {
                    RunError::Engine {
                        what: format!("open {}", layout.db_file.display()),
                        message: e.to_string(),
                    }
                }
            })?);
            let initial_bytes = file_len(&layout.db_file);
            let n = layout.instance;
            let bdm = if config.bdm && config.bdm_mb_per_sec > 0.0 {
                Some(
                    BdmScanner::spawn(
                        BdmConfig {
                            instance: n,
                            db_file: layout.db_file.clone(),
                            bytes_per_sec: config.bdm_mb_per_sec * MB,
                            read_len: 256 << 10,
                            io_mode: config.io_mode,
                            backend: config.backend,
                        },
                        background_stop.clone(),
                    )
                    .map_err(|e| RunError::Engine {
                        what: format!("start BDM on {}", layout.db_file.display()),
                        message: e.to_string(),
                    })?,
                )
            } else {
                None
            };
            let replication = if config.copies > 1 {
                let inst = instance.clone();
                let (floor_of, generation_of) = (instance.clone(), instance.clone());
                // The log room the free-space check budgeted per instance bounds what
                // the readers may hold back (crate::replication).
                let room = config
                    .checkpoint_depth
                    .saturating_add(crate::runner::RUN_LOG_MARGIN);
                let file_len = edbstress_format::log::DEFAULT_LOG_FILE_LEN as u64;
                let floor = RetentionFloor {
                    set: Arc::new(move |floor| floor_of.set_log_retention_floor(floor)),
                    most_generations: u32::try_from(room / file_len).unwrap_or(u32::MAX),
                    current: Arc::new(move || generation_of.log_generation()),
                };
                Some(
                    LogReplicator::spawn_retaining(
                        ReplicationConfig {
                            instance: n,
                            log_dir: layout.log_dir.clone(),
                            readers: config.copies - 1,
                            read_len: 256 << 10,
                            io_mode: config.io_mode,
                            backend: config.backend,
                        },
                        Arc::new(move || inst.log_durable()),
                        Some(floor),
                        background_stop.clone(),
                    )
                    .map_err(|e| RunError::Engine {
                        what: format!("start log replication of {}", layout.log_dir.display()),
                        message: e.to_string(),
                    })?,
                )
            } else {
                None
            };
            slots.push(Slot {
                number: u32::from(layout.instance),
                layout: layout.clone(),
                instance,
                txn: Mutex::new(TxnStats::default()),
                schedule: ArrivalSchedule::new(
                    1.0,
                    start,
                    config.seed ^ u64::from(layout.instance),
                ),
                initial_bytes,
                bdm,
                replication,
            });
        }
        let mut paths: Vec<PathBuf> = config.db_paths.clone();
        paths.extend(config.log_paths.iter().cloned());
        let controller = config.target_iops().map(|t| {
            let c = RateController::new(t * config.target_margin, 1.0);
            for s in &slots {
                s.schedule.set_rate(c.rate() / layouts.len().max(1) as f64);
            }
            c
        });
        log.line("Preparations for testing are complete.");
        Ok(Workbench {
            config,
            log,
            slots,
            host: HostSampler::new(&paths),
            background_stop,
            controller: Mutex::new(controller),
            failure: Mutex::new(None),
            progress,
            counters: None,
            seed_epoch: 0,
            growth,
            growth_refused: Mutex::new(None),
        })
    }

    /// Publishes the measured phase's counters to `sink` at each sampling interval
    /// (live counters for a scraper).
    pub fn publish_counters(&mut self, sink: &'a (dyn Fn(&CounterSnapshot) + Sync)) {
        self.counters = Some(sink);
    }

    fn snapshot(&self) -> Snapshot {
        let mut snap = Snapshot {
            at: Instant::now(),
            io: IoStats::new(),
            cache: Vec::new(),
            log: Vec::new(),
            txn: Vec::new(),
            checkpoint_depth: Vec::new(),
            generation: Vec::new(),
            pages_allocated: Vec::new(),
            host: self.host.snapshot(),
        };
        self.snapshot_into(&mut snap);
        snap
    }

    /// Takes a snapshot into `snap`, reusing its counters' memory: the per-second tick
    /// would otherwise allocate fresh ~200 KB latency histograms (the I/O classes', each
    /// instance's transactions') every time.
    fn snapshot_into(&self, snap: &mut Snapshot) {
        snap.io.reset();
        snap.cache.clear();
        snap.log.clear();
        snap.txn.resize_with(self.slots.len(), TxnStats::default);
        snap.checkpoint_depth.clear();
        snap.generation.clear();
        snap.pages_allocated.clear();
        for (s, txn) in self.slots.iter().zip(&mut snap.txn) {
            snap.io.merge(&s.instance.io_stats());
            if let Some(b) = &s.bdm {
                snap.io.merge(&b.stats());
            }
            if let Some(r) = &s.replication {
                snap.io.merge(&r.stats());
            }
            snap.cache.push(s.instance.cache_counters());
            snap.log.push(s.instance.log_counters());
            txn.clone_from(&s.txn.lock());
            snap.checkpoint_depth
                .push(s.instance.checkpoint_depth_bytes());
            snap.generation.push(s.instance.log_generation());
            snap.pages_allocated.push(s.instance.pages_allocated());
        }
        snap.at = Instant::now();
        snap.host = self.host.snapshot();
    }

    fn interval(&self, earlier: &Snapshot, now: &Snapshot) -> Interval {
        let mut interval = Interval {
            seconds: 0.0,
            io: IoStats::new(),
            cache: Vec::new(),
            cache_now: Vec::new(),
            log: Vec::new(),
            txn: Vec::new(),
            checkpoint_depth: Vec::new(),
            generation: Vec::new(),
            generations_written: Vec::new(),
            pages_allocated: Vec::new(),
            host: now.host.interval_since(&earlier.host),
        };
        self.interval_into(earlier, now, &mut interval);
        interval
    }

    /// The figures between two snapshots into `out`, reusing its counters' memory.
    fn interval_into(&self, earlier: &Snapshot, now: &Snapshot, out: &mut Interval) {
        out.seconds = (now.at - earlier.at).as_secs_f64();
        now.io.since_into(&earlier.io, &mut out.io);
        out.cache.clear();
        out.cache.extend(
            now.cache
                .iter()
                .zip(&earlier.cache)
                .map(|(n, e)| cache_since(n, e)),
        );
        out.cache_now.clone_from(&now.cache);
        out.log.clear();
        out.log
            .extend(now.log.iter().zip(&earlier.log).map(|(n, e)| LogCounters {
                bytes_written: n.bytes_written.saturating_sub(e.bytes_written),
                ..*n
            }));
        out.txn.resize_with(now.txn.len(), TxnStats::default);
        for ((n, e), o) in now.txn.iter().zip(&earlier.txn).zip(&mut out.txn) {
            n.since_into(e, o);
        }
        out.txn.truncate(now.txn.len().min(earlier.txn.len()));
        out.checkpoint_depth.clone_from(&now.checkpoint_depth);
        out.generation.clone_from(&now.generation);
        out.generations_written.clear();
        out.generations_written.extend(
            now.generation
                .iter()
                .zip(&earlier.generation)
                .map(|(n, e)| n.since(*e)),
        );
        out.pages_allocated.clear();
        out.pages_allocated.extend(
            now.pages_allocated
                .iter()
                .zip(&earlier.pages_allocated)
                .map(|(n, e)| n.saturating_sub(*e)),
        );
        out.host = now.host.interval_since(&earlier.host);
    }

    /// Caches' fill, smallest over the instances, percent of their maximum.
    fn cache_fill_pct(snapshot: &Snapshot) -> f64 {
        snapshot
            .cache
            .iter()
            .map(|c| 100.0 * c.frames as f64 / c.max_frames.max(1) as f64)
            .fold(f64::INFINITY, f64::min)
            .min(100.0)
    }

    /// The database files' total size now, bytes.
    pub fn database_bytes(&self) -> u64 {
        self.slots.iter().map(|s| file_len(&s.layout.db_file)).sum()
    }

    /// From now on the databases may grow by `bytes` more in total (None: no limit): the
    /// engine refuses an extension that would pass it, and the phase that asked for it
    /// stops with [`StopReason::SpaceBudget`].
    pub fn limit_growth(&mut self, bytes: Option<u64>) {
        self.growth.limit(bytes);
    }

    /// Bytes the databases may still grow by under [`Workbench::limit_growth`] (None: no
    /// limit).
    pub fn growth_left(&self) -> Option<u64> {
        self.growth.left()
    }

    /// The growth the engine refused in this dispatch, if any.
    fn growth_refused(&self) -> Option<String> {
        self.growth_refused.lock().clone()
    }

    /// The error that stopped dispatch, if any.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().clone()
    }

    /// Runs `sessions` sessions through `phases`, on the open-loop schedule when
    /// `open_loop` (and the run has a target), else closed loop; returns the
    /// measurement of the `Measure` phase (if any) and why dispatch stopped early (if
    /// it did).
    pub fn dispatch(
        &mut self,
        sessions: u32,
        phases: &[(PhaseKind, Duration)],
        open_loop: bool,
        stop: &AtomicBool,
    ) -> (Option<Measurement>, Option<StopReason>) {
        let mix = self.config.op_mix;
        self.dispatch_mix(sessions, phases, open_loop, mix, stop)
    }

    /// Attains the prerequisites: `sessions` sessions run the mix closed loop, as fast
    /// as the storage allows, until every cache holds 90 % of its maximum or `timeout`
    /// passes, so warming does not depend on the target rate. (Reads alone cannot fill
    /// a cache larger than the pages the records occupy; the mix's inserts add pages.)
    pub fn warm(
        &mut self,
        sessions: u32,
        timeout: Duration,
        stop: &AtomicBool,
    ) -> Option<StopReason> {
        let mix = self.config.op_mix;
        let phases = [(PhaseKind::AttainPrerequisites, timeout)];
        self.dispatch_mix(sessions, &phases, false, mix, stop).1
    }

    fn dispatch_mix(
        &mut self,
        sessions: u32,
        phases: &[(PhaseKind, Duration)],
        open_loop: bool,
        op_mix: edbstress_report::OpMix,
        stop: &AtomicBool,
    ) -> (Option<Measurement>, Option<StopReason>) {
        let sessions_stop = AtomicBool::new(false);
        let open_loop = open_loop && self.controller.lock().is_some();
        *self.growth_refused.lock() = None;
        self.seed_epoch += 1;
        let epoch = self.seed_epoch;
        let config = self.config;
        let compressibility =
            Compressibility::from_ratio(config.compressibility).unwrap_or(Compressibility::MAIL);
        let this: &Workbench<'a> = self;
        let task_threads = config.session_threads_for(sessions);
        let mut outcome = (None, None);
        std::thread::scope(|scope| {
            let n = this.slots.len() as u32;
            let session = |session: u32| {
                let slot = &this.slots[(session % n) as usize];
                let sessions_stop = &sessions_stop;
                let outcome = SessionOutcome {
                    failure: &this.failure,
                    growth_refused: &this.growth_refused,
                };
                let mut generator = TransactionGenerator::new(
                    config.seed ^ (u64::from(epoch) << 40),
                    session,
                    op_mix,
                    config.lazy_commit_pct,
                    compressibility,
                )
                .with_batch(config.profile.defaults().ops_per_transaction)
                .with_delete_target(config.profile.defaults().delete_target);
                move || {
                    run_session(
                        slot,
                        &mut generator,
                        open_loop,
                        sessions_stop,
                        stop,
                        outcome,
                    )
                }
            };
            if task_threads == 0 {
                for s in 0..sessions {
                    scope.spawn(session(s));
                }
            } else {
                // Sessions as tasks: each thread runs every `task_threads`-th session.
                let lists = tasks::deal(sessions, task_threads, |s| Box::new(session(s)));
                for (t, tasks) in lists.into_iter().enumerate() {
                    let (failure, sessions_stop) = (&this.failure, &sessions_stop);
                    scope.spawn(move || {
                        if let Err(e) = run_tasks(tasks) {
                            let mut f = failure.lock();
                            if f.is_none() {
                                *f = Some(format!("the sessions' thread {t} failed: {e}"));
                            }
                            sessions_stop.store(true, Ordering::SeqCst);
                        }
                    });
                }
            }
            outcome = self_drive(this, sessions, phases, open_loop, stop);
            sessions_stop.store(true, Ordering::SeqCst);
        });
        outcome
    }

    /// Stops the background activities and shuts every instance down cleanly.
    pub fn close(self) -> CloseReport {
        self.background_stop.store(true, Ordering::SeqCst);
        let mut report = CloseReport::default();
        self.log.line("Shutting down databases ...");
        let mut done = Vec::new();
        for slot in self.slots {
            if let Some(b) = slot.bdm {
                let r = b.stop_and_join();
                report
                    .bdm_bad_pages
                    .extend(r.bad_pages.into_iter().map(|page| (slot.number, page)));
            }
            let name = instance_name(slot.number);
            if let Some(r) = slot.replication {
                let r = r.stop_and_join();
                let deleted = slot.instance.log_counters().generations_deleted;
                self.log.line(format!(
                    "Log replication of {name}: {} log files shipped, {} removed before a reader got to them, {} closed files not yet read at the end; circular logging deleted {deleted} generations.",
                    r.files_read, r.missed, r.behind
                ));
            }
            match Arc::try_unwrap(slot.instance) {
                Ok(instance) => match instance.shutdown() {
                    Ok(_) => done.push(format!("{name} (complete)")),
                    Err(e) => {
                        done.push(format!("{name} (failed)"));
                        report.shutdown_errors.push(format!("{name}: {e}"));
                    }
                },
                Err(_) => {
                    done.push(format!("{name} (still in use)"));
                    report
                        .shutdown_errors
                        .push(format!("{name}: still in use at shutdown"));
                }
            }
            report.final_bytes.push(file_len(&slot.layout.db_file));
        }
        self.log.line(join_list(&done));
        report
    }

    /// Initial database file sizes, per instance.
    pub fn initial_bytes(&self) -> Vec<u64> {
        self.slots.iter().map(|s| s.initial_bytes).collect()
    }

    /// The layouts of the open instances.
    pub fn layouts(&self) -> Vec<InstanceLayout> {
        self.slots.iter().map(|s| s.layout.clone()).collect()
    }
}

/// The host was not ready at the run's start time (`--start-at`), so it cannot measure
/// with the others.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not ready at the start time {}: the databases were ready {:.1} s after it, so this host \
     cannot measure with the others; give a later --start-at (or a longer lead time to \
     `edbstress fleet`)",
    chrono::DateTime::<chrono::Local>::from(*start).to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
    late.as_secs_f64()
)]
pub struct NotReadyInTime {
    /// The start time.
    pub start: std::time::SystemTime,
    /// How long after it the databases were ready.
    pub late: Duration,
}

/// How long until the run's start time; an error saying how late the run is when the
/// time has passed.
pub fn until_start(config: &RunConfig) -> Result<Duration, NotReadyInTime> {
    let Some(start) = config.start_at else {
        return Ok(Duration::ZERO);
    };
    start
        .duration_since(std::time::SystemTime::now())
        .map_err(|late| NotReadyInTime {
            start,
            late: late.duration(),
        })
}

fn sleep_until(wake: Instant, stop: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= wake || stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((wake - now).min(Duration::from_millis(50)));
    }
}

/// Where a session that stops on an error says why: a refused growth stops the phase,
/// any other error the run.
#[derive(Clone, Copy)]
struct SessionOutcome<'s> {
    failure: &'s Mutex<Option<String>>,
    growth_refused: &'s Mutex<Option<String>>,
}

/// One session: transactions until told to stop.
fn run_session(
    slot: &Slot,
    generator: &mut TransactionGenerator,
    open_loop: bool,
    sessions_stop: &AtomicBool,
    stop: &AtomicBool,
    outcome: SessionOutcome<'_>,
) {
    let stopping = || sessions_stop.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed);
    while !stopping() {
        let intended = if open_loop {
            // The schedule's arrivals are operations: a batch of several takes as many
            // and starts when its last is due.
            let due = slot.schedule.take();
            let due = (1..generator.batch()).fold(due, |_, _| slot.schedule.take());
            // Sleep until due, checking for stop; a late arrival starts at once. A
            // session running as a task sleeps alone, its thread runs the others.
            loop {
                let now = Instant::now();
                if now >= due {
                    break;
                }
                if stopping() {
                    return;
                }
                tasks::sleep_until(now + (due - now).min(Duration::from_millis(50)));
            }
            due
        } else {
            Instant::now()
        };
        // A session running as a task lets the others of its thread go first: one
        // whose transactions never wait (cache hits, lazy commits) would keep it.
        tasks::yield_now();
        let kind = generator.next_kind();
        let result = if generator.batch() > 1 {
            generator.run_batch_from(&slot.instance, kind)
        } else {
            generator.run(&slot.instance, kind).map(|o| o.lazy)
        };
        let latency = intended.elapsed().as_nanos() as u64;
        let mut t = slot.txn.lock();
        match result {
            Ok(lazy) => {
                if generator.batch() > 1 {
                    for &k in generator.batch_kinds() {
                        t.by_kind[kind_index(k)] += 1;
                    }
                } else {
                    t.by_kind[kind_index(kind)] += 1;
                }
                if lazy {
                    t.lazy += 1;
                }
                t.latency.record(latency);
            }
            Err(EngineError::GrowthLimit(refused)) => {
                // Nothing was written: not a transaction error, the limit's doing.
                drop(t);
                outcome
                    .growth_refused
                    .lock()
                    .get_or_insert_with(|| refused.to_string());
                return;
            }
            Err(e) => {
                t.errors += 1;
                drop(t);
                let mut f = outcome.failure.lock();
                if f.is_none() {
                    *f = Some(format!(
                        "{}: {kind:?} transaction failed: {e}",
                        instance_name(slot.number)
                    ));
                }
                return;
            }
        }
    }
}

pub(super) fn hit_pct(c: &CacheCounters) -> f64 {
    let total = c.hits + c.misses;
    if total == 0 {
        100.0
    } else {
        100.0 * c.hits as f64 / total as f64
    }
}

fn cache_since(n: &CacheCounters, e: &CacheCounters) -> CacheCounters {
    CacheCounters {
        hits: n.hits.saturating_sub(e.hits),
        misses: n.misses.saturating_sub(e.misses),
        stalls: n.stalls.saturating_sub(e.stalls),
        stall_ns: n.stall_ns.saturating_sub(e.stall_ns),
        reads: n.reads.saturating_sub(e.reads),
        pages_written: n.pages_written.saturating_sub(e.pages_written),
        writes: n.writes.saturating_sub(e.writes),
        bytes_written: n.bytes_written.saturating_sub(e.bytes_written),
        checkpoint_waits: n.checkpoint_waits.saturating_sub(e.checkpoint_waits),
        checkpoint_wait_ns: n.checkpoint_wait_ns.saturating_sub(e.checkpoint_wait_ns),
        ..*n
    }
}

fn file_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// "a, b and c", as Jetstress lists things.
pub fn join_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}
