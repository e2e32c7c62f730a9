//! One run from start to verdict: the run directory, the test log, preparing missing
//! databases, the test itself, checksum verification, the criteria, and the result
//! files.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Local;
use edbstress_engine::CacheConfig;
use edbstress_engine::Compressibility;
use edbstress_engine::InstanceLayout;
use edbstress_engine::{InstanceAction, PrepareOptions, PreparePlan, PrepareProgress};
use edbstress_engine::{ScanOptions, scan_database_until, scan_log_dir};
use edbstress_io::ByteSize;
use edbstress_io::IoClass;
use edbstress_report::summary::{io_summary, transactional_iops};
use edbstress_report::{
    DatabaseVerification, Exporter, IOPS_BASIS_DATABASE_VOLUMES, InstanceResult, LogVerification,
    Pacing, RunResults, TestType, Verification, VolumeRole, instance_name, standard_exporters,
};

use crate::RunError;
use crate::autotune::{AutoTuneOptions, auto_tune, tuning_budget};
use crate::backup::{BackupOptions, run_backup};
use crate::config::RunConfig;
use crate::criteria::{
    Measurements, abort_criterion, evaluate, kernel_log_criterion, offline_criteria,
};
use crate::host::kernel_log::KernelLogWatch;
use crate::host::{HostPeriod, HostSampler, describe_devices};
use crate::live::CounterSnapshot;
use crate::live::{LiveStatus, PhaseKind};
use crate::measured_growth::measured_phase_limit;
use crate::profile::Profile;
use crate::progress::ProgressLines;
use crate::rundir::{RunDirectory, TestLog};
use crate::soft_recovery::{SoftRecoveryOptions, run_soft_recovery};
use crate::transactional::{Measurement, StopReason, Workbench, join_list};
use crate::volumes;

pub use crate::run_results::{empty_results, sizing_warning, system_parameters};

/// `abort_reason` of a run the user stopped (Ctrl-C or SIGTERM).
pub const INTERRUPTED: &str = "interrupted (Ctrl-C)";

/// What the caller is told while a run goes.
pub enum RunEvent<'a> {
    /// A line of the test log.
    Log(&'a str),
    /// Database creation progress.
    Prepare(&'a PrepareProgress),
    /// Live figures of a transactional phase, once a second.
    Live(&'a LiveStatus),
    /// Progress of a non-transactional test: (what, done, total).
    Progress(&'a str, u64, u64),
    /// The counters of the measured phase so far, at each sampling interval.
    Counters(&'a CounterSnapshot),
}

/// A finished run.
pub struct RunOutcome {
    /// The run directory.
    pub dir: PathBuf,
    /// The results (also in `results.json`).
    pub results: RunResults,
    /// The files written, in order.
    pub files: Vec<PathBuf>,
}

/// Runs the test `config` describes, writing its run directory. `stop` (set by Ctrl-C)
/// ends it early: the instances are shut down cleanly and the results are written,
/// marked aborted.
pub fn run(
    config: &RunConfig,
    stop: &AtomicBool,
    events: &(dyn Fn(RunEvent<'_>) + Sync),
) -> Result<RunOutcome, RunError> {
    let started_at = Local::now();
    // A configuration that cannot work here (a path that is a file, too little space,
    // a database in use) is refused before a run directory exists: nothing ran, so
    // there is no run to record as failed.
    // Damage found in an existing database is a finding, recorded in a run directory
    // like any failed run (below).
    let layouts = InstanceLayout::spread(config.databases, &config.db_paths, &config.log_paths);
    match prepare_plan(config, &layouts) {
        Ok(_) | Err(RunError::Damaged(_)) => {}
        Err(e) => return Err(e),
    }
    let dir = RunDirectory::create(&config.results_dir, config.test, started_at)?;
    let forward = |line: &str| events(RunEvent::Log(line));
    let log = dir.test_log()?.with_sink(&forward);
    edbstress_report::write_atomically(
        &dir.path().join(edbstress_report::run_files::CONFIG_TOML),
        config.to_toml().as_bytes(),
    )?;
    log.line("edbstress testing begins ...");
    if let Some(w) = sizing_warning(config) {
        log.line(format!("Warning: {w}."));
    }
    let watched: Vec<PathBuf> = config
        .db_paths
        .iter()
        .chain(&config.log_paths)
        .cloned()
        .collect();
    let sampler = HostSampler::new(&watched);
    let kernel_watch = KernelLogWatch::start(sampler.devices());
    let progress = config.progress_interval.map(|every| {
        log.line(format!(
            "Progress is logged every {}.",
            crate::units::format_duration(every)
        ));
        ProgressLines::new(every)
    });
    // Progress lines go through the test log, which passes them on to the caller.
    let observed = |event: RunEvent<'_>| {
        if let Some(p) = &progress {
            match &event {
                RunEvent::Live(s) => p.live(s, &log),
                RunEvent::Prepare(prep) => p.prepare(prep, &log),
                RunEvent::Progress(what, done, total) => p.step(what, *done, *total, &log),
                RunEvent::Log(_) | RunEvent::Counters(_) => {}
            }
        }
        events(event);
    };
    let run = run_in(config, &log, stop, &observed);
    let kernel_log = kernel_watch.finish();
    let mut results = match run {
        Ok(results) => results,
        Err(e) => {
            record_failure(config, &dir, &log, started_at, &e);
            return Err(e);
        }
    };
    for e in &kernel_log.events {
        log.line(format!("Kernel log on {}: {}", e.device, e.message));
    }
    results.criteria.extend(kernel_log_criterion(&kernel_log));
    results.kernel_log = Some(kernel_log);
    results.storage_devices = describe_devices(sampler.devices());
    // Ctrl-C or SIGTERM in any phase (shutdown, verification included) stops the run
    // early: whatever it measured, it did not finish, so it cannot pass.
    if stop.load(Ordering::Relaxed) && !results.aborted {
        log.line(format!("The test was aborted: {INTERRUPTED}"));
        results.aborted = true;
        results.abort_reason = Some(INTERRUPTED.to_string());
    }
    results.started_at = started_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, false);
    results.ended_at = Local::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, false);
    results.judge();
    log.line("Creating test report ...");
    for c in &results.failed_criteria {
        log.line(format!("Failed: {}", c.describe()));
    }
    log.line(format!(
        "Overall Test Result: {}",
        results.overall_result.label()
    ));
    let mut files = vec![
        dir.path().join(edbstress_report::run_files::CONFIG_TOML),
        dir.path().join(edbstress_report::run_files::TEST_LOG),
    ];
    for exporter in standard_exporters() {
        files.push(exporter.export(&results, dir.path())?);
    }
    Ok(RunOutcome {
        dir: dir.path().to_path_buf(),
        results,
        files,
    })
}

/// The part of a run after its directory exists: preparing and the test itself.
fn run_in(
    config: &RunConfig,
    log: &TestLog<'_>,
    stop: &AtomicBool,
    events: &(dyn Fn(RunEvent<'_>) + Sync),
) -> Result<RunResults, RunError> {
    log.line("Preparing for testing ...");
    let layouts = InstanceLayout::spread(config.databases, &config.db_paths, &config.log_paths);
    prepare(config, &layouts, log, events)?;
    let results = match config.test {
        TestType::Performance | TestType::Stress => {
            transactional_test(config, &layouts, log, stop, events)?
        }
        TestType::DatabaseBackup => backup_test(config, &layouts, log, stop, events)?,
        TestType::SoftRecovery => soft_recovery_test(config, &layouts, log, stop, events)?,
    };
    Ok(results)
}

/// Records a run that could not go on (a database in use, a full disk, an I/O error):
/// the reason in the test log and an aborted, failed results.json, so the run
/// directory tells what happened. Best effort: the caller reports the error anyway.
fn record_failure(
    config: &RunConfig,
    dir: &RunDirectory,
    log: &TestLog<'_>,
    started_at: chrono::DateTime<Local>,
    error: &RunError,
) {
    log.line(format!("The test was aborted: {error}"));
    log.line("Overall Test Result: Fail");
    let mut results = empty_results(config, config.threads.unwrap_or(0));
    results.started_at = started_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, false);
    results.ended_at = Local::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, false);
    results.aborted = true;
    results.abort_reason = Some(error.to_string());
    results.criteria = vec![abort_criterion(&error.to_string())];
    results.judge();
    if let Err(e) = edbstress_report::ResultsJson.export(&results, dir.path()) {
        log.line(format!("Cannot write results.json: {e}"));
    }
}

/// Log bytes per instance beyond the checkpoint depth that a run needs room for.
pub(crate) const RUN_LOG_MARGIN: u64 = 8 << 20;

/// The checked prepare plan of a run: paths, existing databases, free space for the
/// databases and the run's logs. Writes nothing.
fn prepare_plan(config: &RunConfig, layouts: &[InstanceLayout]) -> Result<PreparePlan, RunError> {
    let mailboxes_per_db = config
        .mailboxes
        .map_or(100, |m| m.div_ceil(u64::from(config.databases.max(1))))
        .clamp(1, u64::from(u32::MAX)) as u32;
    let options = PrepareOptions {
        page_size: config.page_size,
        database_bytes: config.database_size,
        mailboxes: mailboxes_per_db,
        compressibility: Compressibility::from_ratio(config.compressibility)
            .map_err(RunError::Config)?,
        io_mode: config.io_mode,
        backend: config.backend,
        seed: Some(config.seed),
        ..PrepareOptions::default()
    };
    let plan = PreparePlan::check(layouts.to_vec(), options).map_err(|e| no_space(config, e))?;
    // Runs use circular logging: the log of an instance stays near the checkpoint depth,
    // plus the log buffer's worth in flight and the pre-created next generation.
    // Databases grow over a run (inserts outnumber deletes): the check budgets that too.
    let growth = config.expected_growth_per_database();
    plan.check_run_space(
        config.checkpoint_depth.saturating_add(RUN_LOG_MARGIN),
        growth.unwrap_or(0),
    )
    .map_err(|e| no_space(config, e))?;
    Ok(plan)
}

/// A refusal for want of space says what would fit (see [`crate::fit`]); any other
/// prepare error as it is.
fn no_space(config: &RunConfig, e: edbstress_engine::PrepareError) -> RunError {
    use edbstress_engine::PrepareError::{NoSpace, NoSpaceForRun};
    match &e {
        // The growth of the run is what does not fit, and no smaller databases would
        // make room: the engine's message names growth and the flags that shrink it.
        NoSpaceForRun {
            needed, available, ..
        } if !crate::fit::databases_can_fit(config, needed.get(), available.get()) => {
            prepare_error(e)
        }
        NoSpace {
            path,
            needed,
            available,
        }
        | NoSpaceForRun {
            path,
            needed,
            available,
        } => RunError::Prepare(crate::fit::no_space_message(
            config,
            path,
            needed.get(),
            available.get(),
        )),
        _ => prepare_error(e),
    }
}

/// Creates missing databases (and reuses existing ones) like `edbstress prepare`.
fn prepare(
    config: &RunConfig,
    layouts: &[InstanceLayout],
    log: &TestLog<'_>,
    events: &(dyn Fn(RunEvent<'_>) + Sync),
) -> Result<(), RunError> {
    let plan = prepare_plan(config, layouts)?;
    let growth = config.expected_growth_per_database();
    log.line(match growth {
        Some(bytes) => format!(
            "Free space checked for the databases, logs and {} of expected growth per database ({} per transactional I/O{}).",
            ByteSize(bytes).approx(),
            ByteSize(crate::config::model::GROWTH_PER_TRANSACTIONAL_IO).approx(),
            if matches!(config.test, TestType::Performance | TestType::Stress)
                && config.effective_pacing() == Pacing::Jetstress
            {
                " at the target rate; Jetstress pacing grows them with what it achieves, and the engine holds its measured phase to the free space"
            } else {
                ""
            }
        ),
        None if matches!(config.test, TestType::Performance | TestType::Stress) => format!(
            "Free space checked for the databases and logs; a throughput run has no target, so database growth (about {} per transactional I/O) is not budgeted.",
            ByteSize(crate::config::model::GROWTH_PER_TRANSACTIONAL_IO).approx(),
        ),
        None => "Free space checked for the databases and logs.".to_string(),
    });
    for (layout, action) in &plan.instances {
        let what = match action {
            InstanceAction::Create => {
                format!("creating ({})", ByteSize(config.database_size).approx())
            }
            InstanceAction::Reuse => "reusing the existing database".to_string(),
            InstanceAction::Rebuild(why) => format!("rebuilding ({why})"),
        };
        log.line(format!(
            "{}: {} -- {what}",
            instance_name(u32::from(layout.instance)),
            layout.db_file.display()
        ));
    }
    let started = Instant::now();
    let reports = plan
        .execute(&mut |p| events(RunEvent::Prepare(&p)))
        .map_err(prepare_error)?;
    let created: Vec<_> = reports.iter().filter(|r| !r.reused).collect();
    if !created.is_empty() {
        let bytes: u64 = created.iter().map(|r| r.bytes_written).sum();
        let secs = started.elapsed().as_secs_f64();
        log.line(format!(
            "Created {} database(s), {} in {:.1} s ({:.0} MiB/s).",
            created.len(),
            ByteSize(bytes).approx(),
            secs,
            bytes as f64 / 1_048_576.0 / secs.max(1e-9)
        ));
    }
    Ok(())
}

/// A prepare failure as a run error; damage found in existing databases stays damage.
fn prepare_error(e: edbstress_engine::PrepareError) -> RunError {
    if e.is_integrity() {
        RunError::Damaged(e.to_string())
    } else {
        RunError::Prepare(e.to_string())
    }
}

fn transactional_test(
    config: &RunConfig,
    layouts: &[InstanceLayout],
    log: &TestLog<'_>,
    stop: &AtomicBool,
    events: &(dyn Fn(RunEvent<'_>) + Sync),
) -> Result<RunResults, RunError> {
    let live = |s: &LiveStatus| events(RunEvent::Live(s));
    let counters = |c: &CounterSnapshot| events(RunEvent::Counters(c));
    let mut bench = Workbench::open(config, layouts, log, &live)?;
    bench.publish_counters(&counters);
    log_cache_and_thresholds(config, log);
    let mut autotune = None;
    let mut threads = config.sessions();
    // Prerequisites at full speed: closed loop whatever the pacing, so warming takes
    // what the storage needs, not what the target rate allows.
    let mut stopped = warm(config, &mut bench, threads, log, stop);
    if config.auto_tune && stopped.is_none() {
        let budget = tuning_budget(config, &bench, log);
        // Jetstress tunes for latency alone and then judges achieved against target;
        // an open-loop run's sessions only need to keep its schedule fed.
        let target = config.open_loop().then(|| config.target_iops()).flatten();
        let (tune, s) = auto_tune(
            &mut bench,
            config.databases,
            &config.thresholds,
            target,
            AutoTuneOptions {
                margin: config.auto_tune_margin,
                ..AutoTuneOptions::for_interval(config.sample_interval)
            },
            budget,
            log,
            stop,
        );
        threads = tune.chosen_threads;
        stopped = s;
        autotune = Some(tune);
    }
    log_dispatch(config, threads, autotune.is_some(), log);
    let measurement = if stopped.is_none() {
        // The load of the measured phase settles for one sampling interval (its pacing
        // or session count differs from the warm-up's), or runs until the start time.
        let mut phases = vec![if config.start_at.is_some() {
            (PhaseKind::WaitForStart, Duration::ZERO)
        } else {
            (PhaseKind::Settle, config.sample_interval)
        }];
        phases.push((PhaseKind::Measure, config.duration));
        let limit = measured_phase_limit(config, &bench, threads, autotune.as_ref(), log);
        bench.limit_growth(limit.as_ref().map(|l| l.bytes));
        let (m, s) = bench.dispatch(threads, &phases, config.open_loop(), stop);
        bench.limit_growth(None);
        stopped = match (s, &limit) {
            (Some(StopReason::SpaceBudget(why)), Some(limit)) => {
                Some(StopReason::SpaceBudget(limit.stop_reason(&why)))
            }
            (s, _) => s,
        };
        m
    } else {
        None
    };
    log.line("Dispatching transactions ends.");
    let initial_bytes: u64 = bench.initial_bytes().iter().sum();
    let bench_layouts = bench.layouts();
    let close = bench.close();
    let mut results = empty_results(config, threads);
    let abort_reason = match &stopped {
        Some(StopReason::Interrupted) => Some(INTERRUPTED.to_string()),
        Some(StopReason::Failed(e)) | Some(StopReason::SpaceBudget(e)) => Some(e.clone()),
        None => None,
    };
    if let Some(why) = &abort_reason {
        log.line(format!("The test was aborted: {why}"));
    }
    results.aborted = abort_reason.is_some();
    results.abort_reason = abort_reason;
    results.sizing.initial_bytes = initial_bytes;
    results.sizing.final_bytes = close.final_bytes.iter().sum();
    for e in &close.shutdown_errors {
        log.line(format!("Shutdown problem: {e}"));
    }
    let verification = if config.verify_after && !stop.load(Ordering::Relaxed) {
        Some(verify(config, &bench_layouts, log, stop, events)?)
    } else {
        None
    };
    let sampling = measurement
        .as_ref()
        .map(|m| (m.longest_interval_s, m.stall_limit_s));
    let measured = measurement.is_some();
    if let Some(m) = measurement {
        fill_measurement(&mut results, m, log);
    }
    let per_volume =
        config.profile == Profile::Exchange2007 && per_volume_judging(&mut results, log);
    let measurements = Measurements {
        volumes: per_volume.then_some(results.volumes.as_slice()),
        instances: &results.instances,
        totals: &results.totals.io,
        achieved_iops: results.achieved_transactional_iops,
        target_iops: results.target_transactional_iops,
        verification: verification.as_ref(),
        transaction_errors: results.totals.transactions.as_ref().map_or(0, |t| t.errors),
        bdm_bad_pages: close.bdm_bad_pages.len() as u64,
        shutdown_errors: close.shutdown_errors.len() as u64,
        sampling,
        measured,
        abort_reason: results.abort_reason.as_deref(),
        instance_count: config.databases,
    };
    results.criteria = evaluate(&measurements, &config.thresholds);
    for (instance, page) in &close.bdm_bad_pages {
        log.line(format!(
            "BDM found a corrupt page: {}: {page}",
            edbstress_report::instance_name(*instance)
        ));
    }
    results.verification = verification;
    results.autotune = autotune;
    Ok(results)
}

/// Attains the prerequisites ([`Workbench::warm`]) within the warm-up's growth budget:
/// a warm-up the engine refuses to grow further ends there, and the run goes on.
fn warm(
    config: &RunConfig,
    bench: &mut Workbench<'_>,
    threads: u32,
    log: &TestLog<'_>,
    stop: &AtomicBool,
) -> Option<StopReason> {
    let budget = config
        .warmup_growth_limit_per_database()
        .saturating_mul(u64::from(config.databases.max(1)));
    bench.limit_growth(Some(budget));
    let stopped = bench.warm(threads, config.warmup_timeout, stop);
    bench.limit_growth(None);
    match stopped {
        Some(StopReason::SpaceBudget(why)) => {
            log.line(format!(
                "Attaining prerequisites ended at the warm-up's growth budget ({}, the caches and a growth step per database): {why}; measuring with the caches as they are.",
                ByteSize(budget).approx()
            ));
            None
        }
        other => other,
    }
}

/// The test log's lines on the cache and the latency thresholds, before dispatch.
fn log_cache_and_thresholds(config: &RunConfig, log: &TestLog<'_>) {
    log.line("Starting transaction dispatch ..");
    log.line(format!(
        "Database cache settings: (minimum: {}, maximum: {}) per instance",
        ByteSize(config.cache_min_per_instance()).approx(),
        ByteSize(config.cache_max_per_instance()).approx()
    ));
    let page = config.page_size.bytes() as u64;
    let pool = CacheConfig::new(
        config.page_size,
        (config.cache_max_per_instance() / page) as usize,
    );
    log.line(format!(
        "Database flush thresholds: (start: {}, stop: {})",
        ByteSize(pool.available_start() as u64 * page).approx(),
        ByteSize(pool.available_stop() as u64 * page).approx()
    ));
    let t = &config.thresholds;
    log.line(format!(
        "Database read latency thresholds: (average: {} msec/read, maximum: {} msec/read).",
        t.db_read_avg_ms, t.db_read_max_ms
    ));
    log.line(format!(
        "Log write latency thresholds: (average: {} msec/write, maximum: {} msec/write).",
        t.log_write_avg_ms, t.log_write_max_ms
    ));
}

/// The test log's lines on the operation mix and the pacing, once the session count is
/// known.
fn log_dispatch(config: &RunConfig, threads: u32, tuned: bool, log: &TestLog<'_>) {
    let m = config.op_mix;
    log.line(format!(
        "Operation mix: Sessions {threads}, Inserts {}%, Deletes {}%, Replaces {}%, Reads {}%, Lazy Commits {}%.",
        m.insert, m.delete, m.replace, m.read, config.lazy_commit_pct
    ));
    match (config.target_iops(), config.effective_pacing()) {
        (Some(target), Pacing::OpenLoop) => log.line(format!(
            "Open-loop pacing: target {target:.1} transactional IOPS ({} mailboxes x {} IOPS), offered with a {:.0} % margin; latency measured from each transaction's intended start.",
            config.mailboxes.unwrap_or(0),
            config.iops_per_mailbox,
            (config.target_margin - 1.0) * 100.0
        )),
        (Some(target), Pacing::Jetstress) => {
            log.line(format!(
            "Jetstress pacing: closed loop at {threads} threads ({}); the run must achieve at least the target of {target:.1} transactional IOPS ({} mailboxes x {} IOPS), and what it achieves beyond is its headroom.",
            if tuned { "auto-tuned" } else { "as given" },
            config.mailboxes.unwrap_or(0),
            config.iops_per_mailbox,
            ));
        }
        (None, _) => log.line("Closed-loop dispatch (throughput run): every session starts its next transaction when the last one ends."),
    }
}

fn fill_measurement(results: &mut RunResults, m: Measurement, log: &TestLog<'_>) {
    log.line(format!(
        "JetInterop batch transaction stats: {}.",
        join_list(
            &m.instances
                .iter()
                .map(|i| i.transactions.as_ref().map_or(0, |t| t.count).to_string())
                .collect::<Vec<_>>()
        )
    ));
    for inst in &m.instances {
        for class in [IoClass::DbRead, IoClass::LogWrite, IoClass::LogRead] {
            let avg = inst.io.get(&class).map_or(0.0, |s| s.avg_latency_ms);
            log.line(format!(
                "{} has {avg:.1} for I/O {} Average Latency.",
                inst.name,
                class.label()
            ));
        }
    }
    let max_stalls = m
        .samples
        .iter()
        .filter_map(|s| s.page_fault_stalls_per_sec)
        .fold(0.0, f64::max);
    let stalled = m
        .samples
        .iter()
        .filter(|s| s.page_fault_stalls_per_sec.is_some_and(|v| v > 0.0))
        .count();
    log.line(format!(
        "Test has {max_stalls:.0} Maximum Database Page Fault Stalls/sec."
    ));
    log.line(format!(
        "The test has {stalled} Database Page Fault Stalls/sec samples higher than 0."
    ));
    log.line(format!(
        "samples.csv has {} intervals.",
        m.samples.iter().map(|s| s.interval).max().unwrap_or(0)
    ));
    results.measured_seconds = m.seconds;
    results.achieved_transactional_iops = transactional_iops(&m.totals.io);
    results.parameters.threads = m.sessions;
    results.instances = m.instances;
    results.totals = m.totals;
    results.samples = m.samples;
    results.sampling_stalls = m.stalls;
    results.host_counters = Some(m.host);
    results.volumes = m.volumes;
}

/// exchange2007: Jetstress 2007's report step — each volume's Avg. Disk sec/Read or
/// sec/Write in the test log, and "Achieved I/O per Second" from the database volumes'
/// transfers. False (judged per instance, and said so) when no volume was found.
fn per_volume_judging(results: &mut RunResults, log: &TestLog<'_>) -> bool {
    // Every database and every log must be on a volume found, or some latency would
    // go unjudged.
    let covered = |i: &InstanceResult, holds: fn(VolumeRole) -> bool| {
        results
            .volumes
            .iter()
            .any(|v| holds(v.role) && v.instances.contains(&i.name))
    };
    let uncovered = results
        .instances
        .iter()
        .any(|i| !covered(i, VolumeRole::holds_databases) || !covered(i, VolumeRole::holds_logs));
    if results.volumes.is_empty() || uncovered {
        if results.measured_seconds > 0.0 {
            log.line("Not every database and log path is on a block device found (a tmpfs or overlay?): judging latency per instance instead of per volume.");
        }
        return false;
    }
    for line in volumes::test_log_lines(&results.volumes) {
        log.line(line);
    }
    let transfers = volumes::database_volume_transfers(&results.volumes);
    log.line(format!(
        "Achieved I/O per Second (Disk Transfers/sec of the database volumes): {transfers:.3}; transactional database I/O issued: {:.3}/sec.",
        results.achieved_transactional_iops
    ));
    results.achieved_transactional_iops = transfers;
    results.achieved_iops_basis = Some(IOPS_BASIS_DATABASE_VOLUMES.to_string());
    true
}

/// Offline checksum verification of every database and log directory.
fn verify(
    config: &RunConfig,
    layouts: &[InstanceLayout],
    log: &TestLog<'_>,
    stop: &AtomicBool,
    events: &(dyn Fn(RunEvent<'_>) + Sync),
) -> Result<Verification, RunError> {
    log.line("Verifying database and log checksums ...");
    let options = ScanOptions {
        io_mode: config.io_mode,
        backend: config.backend,
        ..ScanOptions::default()
    };
    let mut v = Verification {
        passed: true,
        ..Default::default()
    };
    for layout in layouts {
        let what = format!("checksum {}", layout.db_file.display());
        let db = scan_database_until(
            &layout.db_file,
            &options,
            &|| stop.load(Ordering::Relaxed),
            &mut |done, total| events(RunEvent::Progress(&what, done, total)),
        )
        .map_err(|e| RunError::Verify(e.to_string()))?;
        if db.stopped || stop.load(Ordering::Relaxed) {
            // Unfinished verification proves nothing: it cannot pass.
            log.line("Checksum verification was interrupted.");
            v.passed = false;
            break;
        }
        if let Some(t) = &db.truncated {
            log.line(format!(
                "{}: {t}",
                instance_name(u32::from(layout.instance))
            ));
        }
        let owner = edbstress_engine::read_header(&layout.db_file, config.io_mode)
            .ok()
            .map(|s| s.header);
        let logs = scan_log_dir(&layout.log_dir, config.io_mode, owner.as_ref())
            .map_err(|e| RunError::Verify(e.to_string()))?;
        let clean = db.is_clean() && logs.bad_segments == 0 && logs.sequence.problems.is_empty();
        for problem in &logs.sequence.problems {
            log.line(format!(
                "{}: log sequence: {problem}",
                instance_name(u32::from(layout.instance))
            ));
        }
        v.passed &= clean;
        log.line(format!(
            "{}: {} pages checked, {} bad, {} correctable, {} wrong page number ({:.0} MiB/s); {} log segments in {} files checked, {} bad.",
            instance_name(u32::from(layout.instance)),
            db.pages_seen,
            db.bad_pages,
            db.correctable_pages,
            db.wrong_pgno_pages,
            db.mb_per_sec,
            logs.segments_seen,
            logs.files,
            logs.bad_segments
        ));
        v.databases.push(DatabaseVerification {
            path: layout.db_file.display().to_string(),
            pages_seen: db.pages_seen,
            bad_pages: db.bad_pages,
            correctable_pages: db.correctable_pages,
            wrong_page_number: db.wrong_pgno_pages,
            seconds: db.seconds,
            mb_per_sec: db.mb_per_sec,
        });
        v.logs.push(LogVerification {
            path: layout.log_dir.display().to_string(),
            files: logs.files,
            segments_seen: logs.segments_seen,
            bad_segments: logs.bad_segments,
            sequence_problems: logs.sequence.problems.clone(),
        });
    }
    Ok(v)
}

/// Tests without a warm-up start at the run's start time (`--start-at`), if any: the
/// wait is interruptible, and a start time already past fails the run.
fn wait_for_start(
    config: &RunConfig,
    log: &TestLog<'_>,
    stop: &AtomicBool,
) -> Result<(), RunError> {
    let wait = crate::transactional::until_start(config)
        .map_err(|late| RunError::Config(late.to_string()))?;
    if wait.is_zero() {
        return Ok(());
    }
    log.line(format!(
        "Waiting {:.1} s for the start time.",
        wait.as_secs_f64()
    ));
    let until = crate::stop::later(Instant::now(), wait);
    while Instant::now() < until && !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(
            until
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100)),
        );
    }
    Ok(())
}

fn backup_test(
    config: &RunConfig,
    layouts: &[InstanceLayout],
    log: &TestLog<'_>,
    stop: &AtomicBool,
    events: &(dyn Fn(RunEvent<'_>) + Sync),
) -> Result<RunResults, RunError> {
    let options = BackupOptions::from_config(config);
    log.line(format!(
        "Database backup: sequential 256 KiB reads of {} database(s){}.",
        layouts.len(),
        config
            .backup_path
            .as_ref()
            .map_or(String::new(), |p| format!(", copied to {}", p.display()))
    ));
    wait_for_start(config, log, stop)?;
    let started = Instant::now();
    let mut paths = config.db_paths.clone();
    paths.extend(config.backup_path.iter().cloned());
    let host = HostPeriod::start(&paths);
    let (reports, io) = run_backup(layouts, &options, stop, &|instance, done, total| {
        events(RunEvent::Progress(
            &format!("backup {}", instance_name(instance)),
            done,
            total,
        ))
    })
    .map_err(|e| RunError::Engine {
        what: "back up the databases".into(),
        message: e.to_string(),
    })?;
    let seconds = started.elapsed().as_secs_f64();
    // One reader per database, all at once.
    let mut results = empty_results(config, config.databases);
    results.measured_seconds = seconds;
    results.host_counters = Some(host.finish());
    let mut bad = 0;
    for r in &reports {
        let n = r.instance;
        let layout = layouts.iter().find(|l| l.instance == r.instance);
        log.line(format!(
            "{}: {} read in {:.1} s, {:.2} MiB/s{}.",
            instance_name(u32::from(r.instance)),
            ByteSize(r.bytes_read).approx(),
            r.seconds,
            r.mb_per_sec,
            if r.bad_pages > 0 {
                format!(", {} bad pages", r.bad_pages)
            } else {
                String::new()
            }
        ));
        bad += r.bad_pages;
        results.instances.push(InstanceResult {
            name: instance_name(u32::from(r.instance)),
            instance: u32::from(r.instance),
            database_path: r.db_file.display().to_string(),
            log_path: layout.map_or(String::new(), |l| l.log_dir.display().to_string()),
            initial_bytes: r.bytes_read,
            final_bytes: r.bytes_read,
            io: io_summary(&io, Some(n.get()), r.seconds, &|_| 0.0),
            mb_per_sec: Some(r.mb_per_sec),
            bytes_read: Some(r.bytes_read),
            elapsed_seconds: Some(r.seconds),
            ..Default::default()
        });
    }
    let total_bytes: u64 = reports.iter().map(|r| r.bytes_read).sum();
    let total_mb_s = total_bytes as f64 / 1_048_576.0 / seconds.max(1e-9);
    log.line(format!(
        "Total: {} in {seconds:.1} s, {total_mb_s:.2} MiB/s.",
        ByteSize(total_bytes).approx()
    ));
    results.totals.io = io_summary(&io, None, seconds, &|_| 0.0);
    results.totals.mb_per_sec = Some(total_mb_s);
    results.sizing.initial_bytes = total_bytes;
    results.sizing.final_bytes = total_bytes;
    finish_offline(
        &mut results,
        stop,
        "backup_checksum_errors",
        "Database pages failing checksum verification during the backup",
        bad,
    );
    Ok(results)
}

fn soft_recovery_test(
    config: &RunConfig,
    layouts: &[InstanceLayout],
    log: &TestLog<'_>,
    stop: &AtomicBool,
    events: &(dyn Fn(RunEvent<'_>) + Sync),
) -> Result<RunResults, RunError> {
    let options = SoftRecoveryOptions::from_config(config);
    let sessions_per_instance = options.sessions_per_instance;
    log.line(format!(
        "Soft recovery: generating {} log files per instance with the checkpoint held back, then crashing and replaying.",
        config.logs_to_replay
    ));
    wait_for_start(config, log, stop)?;
    let mut paths = config.db_paths.clone();
    paths.extend(config.log_paths.iter().cloned());
    let host = HostPeriod::start(&paths);
    let (reports, io) =
        run_soft_recovery(layouts, &options, stop, &|phase, instance, done, total| {
            events(RunEvent::Progress(
                &format!("{phase:?} {}", instance_name(instance)),
                u64::from(done),
                u64::from(total),
            ))
        })
        .map_err(|e| RunError::Engine {
            what: "run the soft recovery test".into(),
            message: e.to_string(),
        })?;
    let mut results = empty_results(config, sessions_per_instance * config.databases);
    results.host_counters = Some(host.finish());
    let mut failed_recoveries = 0;
    let mut replayed = 0u32;
    let mut replay_seconds = 0.0;
    for r in &reports {
        let n = r.instance;
        let layout = layouts.iter().find(|l| l.instance == r.instance);
        log.line(format!(
            "{}: {} log files generated in {:.1} s; {} log files replayed in {:.1} s.",
            instance_name(u32::from(r.instance)),
            r.logs_generated,
            r.generate_seconds,
            r.logs_replayed,
            r.elapsed_seconds
        ));
        if !r.recovery.succeeded() {
            failed_recoveries += 1;
        }
        replayed += r.logs_replayed;
        replay_seconds += r.elapsed_seconds;
        results.instances.push(InstanceResult {
            name: instance_name(u32::from(r.instance)),
            instance: u32::from(r.instance),
            database_path: layout.map_or(String::new(), |l| l.db_file.display().to_string()),
            log_path: layout.map_or(String::new(), |l| l.log_dir.display().to_string()),
            io: io_summary(&io, Some(n.get()), r.elapsed_seconds, &|_| 0.0),
            logs_generated: Some(r.logs_generated),
            logs_replayed: Some(r.logs_replayed),
            elapsed_seconds: Some(r.elapsed_seconds),
            ..Default::default()
        });
    }
    let wall = reports
        .iter()
        .map(|r| r.elapsed_seconds)
        .fold(0.0, f64::max);
    results.measured_seconds = wall;
    results.totals.io = io_summary(&io, None, wall, &|_| 0.0);
    if replayed > 0 {
        let per_log = replay_seconds / f64::from(replayed);
        results.totals.seconds_per_log = Some(per_log);
        log.line(format!(
            "Average time to replay one log file: {per_log:.3} s."
        ));
    }
    finish_offline(
        &mut results,
        stop,
        "recovery_failures",
        "Instances whose recovery did not complete cleanly",
        failed_recoveries,
    );
    Ok(results)
}

/// The end of a DatabaseBackup or SoftRecovery run: marked aborted when interrupted,
/// judged by I/O errors and its own count of `problems`.
fn finish_offline(
    results: &mut RunResults,
    stop: &AtomicBool,
    key: &'static str,
    name: &'static str,
    problems: u64,
) {
    if stop.load(Ordering::Relaxed) {
        results.aborted = true;
        results.abort_reason = Some(INTERRUPTED.into());
    }
    results.criteria = offline_criteria(&results.totals.io, key, name, problems);
    if let Some(reason) = &results.abort_reason {
        results.criteria.insert(0, abort_criterion(reason));
    }
}
