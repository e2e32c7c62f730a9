//! Measures the engine's CPU cost per transactional I/O: prepares (once) a database
//! much larger than the cache, runs sessions with the Exchange 2010 operation mix
//! (40 % insert, 20 % delete, 5 % replace, 35 % read; 70 % of commits lazy; messages
//! found through their mailbox's view, as the workload finds them) for a while, and
//! divides the process's CPU time by the database reads and writes done.
//!
//! Reads, deletes and replaces pick a message uniformly over the mailbox: a random
//! position of a random mailbox's view (view sort keys are hashes, spread evenly).
//! Seeking a random id in a random mailbox, as an earlier version of this bench did, found
//! that mailbox's first message almost every time, so nearly every transaction touched
//! the same few hundred hot pages (a 96 % hit ratio on a 2 GiB database with a 64 MiB
//! cache). The hit ratio printed is the measured phase's. It also prints where the
//! database's pages came from and went per transaction (`Instance::space_counters`:
//! the file's end, the free list, merges, splits by kind), the instrument of
//! docs/fidelity.md's growth breakdown.
//!
//! `cargo run --release -p edbstress-engine --example engine_cpu -- DIR [DB_GIB] [CACHE_MIB] [SECONDS] [SESSIONS] [no-split-tail]`
//! (defaults: 4 GiB, 64 MiB, 20 s, 16 sessions, the log's split tail write on). Used by
//! `bench/engine_cpu.sh`. It also prints the group commit's counters: durable commits
//! per flush batch, the share of batches a committer led and of those that left the
//! tail for a second write.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use edbstress_engine::InstanceId;
use edbstress_engine::log::LogCounters;
use edbstress_engine::{CacheCounters, InstanceLayout, MessageShape, SpaceCounters};
use edbstress_engine::{Compressibility, ContentGenerator};
use edbstress_engine::{Durability, EngineError, Instance, InstanceConfig, TxnOp};
use edbstress_engine::{PrepareOptions, PreparePlan};
use edbstress_io::{IoClass, IoStats};

/// (user, system) CPU seconds of this process, from /proc/self/stat.
fn cpu_split() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) / 100.0, ticks(12) / 100.0)
}

/// Context switches (voluntary and not) of this process's live threads so far.
fn context_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut total = 0;
    for task in tasks.flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        for line in status.lines() {
            if let Some(v) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    total
}

/// The command line: where, how large, how long, how many sessions.
struct Args {
    dir: std::path::PathBuf,
    db_gib: u64,
    cache_mib: u64,
    seconds: f64,
    sessions: u32,
    split_tail_write: bool,
    /// Sessions as tasks on this many threads; 0: a thread per session.
    task_threads: u32,
}

fn parse_args() -> Result<Args, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(
        args.get(1)
            .ok_or("usage: engine_cpu DIR [DB_GIB] [CACHE_MIB] [SECONDS] [SESSIONS]")?,
    );
    let db_gib: u64 = args.get(2).map_or(Ok(4), |s| s.parse())?;
    let cache_mib: u64 = args.get(3).map_or(Ok(64), |s| s.parse())?;
    let seconds: f64 = args.get(4).map_or(Ok(20.0), |s| s.parse())?;
    let sessions: u32 = args.get(5).map_or(Ok(16), |s| s.parse())?;
    // The log's split tail write (on, as in `InstanceConfig::new`), or "no-split-tail".
    let split_tail_write = args.get(6).is_none_or(|s| s != "no-split-tail");
    // Sessions as tasks on this many threads, one per CPU by default as in
    // `edbstress run`; 0: a thread per session (the model before tasks).
    let task_threads: u32 = std::env::var("ENGINE_CPU_TASK_THREADS")
        .ok()
        .map_or(Ok(edbstress_io::tasks::default_threads()), |s| s.parse())?
        .min(sessions);
    Ok(Args {
        dir,
        db_gib,
        cache_mib,
        seconds,
        sessions,
        split_tail_write,
        task_threads,
    })
}

/// Prepares the database (once) and opens it with the asked cache.
fn open_instance(args: &Args) -> Result<Instance, Box<dyn std::error::Error>> {
    let layout = InstanceLayout::new(
        InstanceId::new(1),
        &args.dir.join("db"),
        &args.dir.join("logs"),
    );
    let options = PrepareOptions {
        database_bytes: args.db_gib << 30,
        mailboxes: 500,
        ..PrepareOptions::default()
    };
    PreparePlan::check(vec![layout.clone()], options)?.execute(&mut |_| {})?;

    let mut config = InstanceConfig::new(layout);
    config.cache_min_bytes = args.cache_mib << 20;
    config.cache_max_bytes = args.cache_mib << 20;
    config.split_tail_write = args.split_tail_write;
    Ok(Instance::open(config)?)
}

/// A session's reused buffers and random stream.
struct Session {
    rng: ContentGenerator,
    props: Vec<u8>,
    /// Reused: the bench should not charge the engine its own allocations.
    body: Vec<u8>,
}

impl Session {
    fn new(s: u32) -> Session {
        Session {
            rng: ContentGenerator::for_stream(u64::from(s) + 1, Compressibility::MAIL),
            props: vec![0u8; 300],
            body: Vec::new(),
        }
    }

    /// One transaction of the Exchange 2010 mix.
    fn transaction(&mut self, instance: &Instance, mailboxes: u32) -> Result<(), EngineError> {
        let rng = &mut self.rng;
        let mailbox = rng.range(0..u64::from(mailboxes)) as u32;
        let view_position = rng.range(0..1 << 32) as u32;
        let lazy = if rng.range(0..100) < 70 {
            Durability::Lazy
        } else {
            Durability::Durable
        };
        let pick = rng.range(0..100);
        if pick < 40 {
            let shape = MessageShape::of(rng.range(0..u64::MAX), rng.range(0..1 << 30));
            self.body.resize(shape.body_len as usize, 0);
            rng.fill(&mut self.body);
            rng.fill(&mut self.props);
            return instance
                .commit(
                    &[TxnOp::Insert {
                        mailbox,
                        props: &self.props,
                        body: &self.body,
                    }],
                    lazy,
                )
                .map(|_| ());
        }
        // Found as a client finds it: through the mailbox's view.
        match instance.seek_view(mailbox, view_position)? {
            Some(key) if pick < 60 => instance.commit(&[TxnOp::Delete { key }], lazy).map(|_| ()),
            Some(key) if pick < 65 => {
                rng.fill(&mut self.props);
                instance
                    .commit(
                        &[TxnOp::Replace {
                            key,
                            props: &self.props,
                            body: None,
                            resort: None,
                        }],
                        lazy,
                    )
                    .map(|_| ())
            }
            Some(key) => instance.read(key, rng.range(0..2) == 0).map(|_| ()),
            None => Ok(()),
        }
    }
}

/// The sessions' shared counters and stop flag.
#[derive(Default)]
struct Sessions {
    stop: AtomicBool,
    ops: AtomicU64,
    /// Counted while the sessions run (their threads end with each `run`).
    switches: AtomicU64,
}

impl Sessions {
    /// Runs the sessions for `measure`.
    fn run(&self, instance: &Instance, args: &Args, measure: Duration) {
        let mailboxes = instance.mailbox_count();
        self.stop.store(false, Ordering::Relaxed);
        std::thread::scope(|scope| {
            let session = |s: u32| {
                move || {
                    let mut session = Session::new(s);
                    while !self.stop.load(Ordering::Relaxed) {
                        edbstress_io::tasks::yield_now();
                        if let Err(e) = session.transaction(instance, mailboxes) {
                            eprintln!("session {s}: {e}");
                            self.stop.store(true, Ordering::Relaxed);
                        }
                        self.ops.fetch_add(1, Ordering::Relaxed);
                    }
                }
            };
            if args.task_threads == 0 {
                for s in 0..args.sessions {
                    scope.spawn(session(s));
                }
            } else {
                // Sessions as tasks: `task_threads` threads, each running its share.
                let lists = edbstress_io::tasks::deal(args.sessions, args.task_threads, |s| {
                    Box::new(session(s))
                });
                for tasks in lists {
                    let stop = &self.stop;
                    scope.spawn(move || {
                        if let Err(e) = edbstress_io::tasks::run_tasks(tasks) {
                            eprintln!("tasks: {e}");
                            stop.store(true, Ordering::Relaxed);
                        }
                    });
                }
            }
            let before = context_switches();
            std::thread::sleep(measure);
            self.switches
                .store(context_switches() - before, Ordering::Relaxed);
            self.stop.store(true, Ordering::Relaxed);
        });
    }
}

/// The counters at the start of the measured phase.
struct Before {
    io: IoStats,
    retries: u64,
    cache: CacheCounters,
    log: LogCounters,
    durable: u64,
    space: SpaceCounters,
    cpu: (f64, f64),
    ops: u64,
}

impl Before {
    fn take(instance: &Instance, sessions: &Sessions) -> Before {
        Before {
            io: instance.io_stats(),
            retries: instance.counters().retries,
            cache: instance.cache_counters(),
            log: instance.log_counters(),
            durable: instance.counters().durable_commits,
            space: instance.space_counters(),
            cpu: cpu_split(),
            ops: sessions.ops.load(Ordering::Relaxed),
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // As the edbstress binary does (its allocator settings are part of what is measured).
    edbstress_io::bound_allocator_footprint();
    let args = parse_args()?;
    let instance = open_instance(&args)?;
    let sessions = Sessions::default();
    // Warm the cache to its maximum first, as a test run does before measuring.
    let warm = Instant::now();
    while instance.cache_counters().frames < instance.cache_counters().max_frames * 9 / 10
        && warm.elapsed() < Duration::from_secs(120)
    {
        sessions.run(&instance, &args, Duration::from_millis(500));
    }
    let before = Before::take(&instance, &sessions);
    let started = Instant::now();
    sessions.run(&instance, &args, Duration::from_secs_f64(args.seconds));
    let elapsed = started.elapsed().as_secs_f64();
    print_report(&instance, &args, &sessions, &before, elapsed);
    instance.shutdown()?;
    Ok(())
}

/// Prints the measured phase's rates, per-transaction costs and CPU.
fn print_report(
    instance: &Instance,
    args: &Args,
    sessions: &Sessions,
    before: &Before,
    elapsed: f64,
) {
    let (cache_mib, db_gib) = (args.cache_mib, args.db_gib);
    let task_threads = args.task_threads;
    let after_cpu = cpu_split();
    let (user, sys) = (after_cpu.0 - before.cpu.0, after_cpu.1 - before.cpu.1);
    let cpu = user + sys;
    let after_io = instance.io_stats();
    let count = |class: IoClass| after_io.total(class).ops - before.io.total(class).ops;
    let (reads, writes, log_writes) = (
        count(IoClass::DbRead),
        count(IoClass::DbWrite),
        count(IoClass::LogWrite),
    );
    let ops = sessions.ops.load(Ordering::Relaxed) - before.ops;
    let c = instance.cache_counters();
    let before_cache = &before.cache;
    let retries = instance.counters().retries - before.retries;
    println!(
        "per transaction: {:.2} attempts retried, {:.2} misses, {:.2} pages written, {:.2} context switches",
        retries as f64 / ops.max(1) as f64,
        (c.misses - before_cache.misses) as f64 / ops.max(1) as f64,
        (c.pages_written - before_cache.pages_written) as f64 / ops.max(1) as f64,
        sessions.switches.load(Ordering::Relaxed) as f64 / ops.max(1) as f64
    );
    let (hits, misses) = (c.hits - before_cache.hits, c.misses - before_cache.misses);
    println!(
        "{elapsed:.1} s, {} sessions ({}), cache {cache_mib} MiB of a {db_gib} GiB database (hit ratio {:.1} %)",
        args.sessions,
        if task_threads == 0 {
            "a thread each".to_string()
        } else {
            format!("as tasks on {task_threads} threads")
        },
        100.0 * hits as f64 / (hits + misses).max(1) as f64
    );
    println!(
        "transactions {:.0}/s; database reads {:.0}/s, writes {:.0}/s; log writes {:.0}/s",
        ops as f64 / elapsed,
        reads as f64 / elapsed,
        writes as f64 / elapsed,
        log_writes as f64 / elapsed
    );
    let space = instance.space_counters();
    let before_space = &before.space;
    let per_txn = |now: u64, then: u64| (now - then) as f64 / ops.max(1) as f64;
    println!(
        "space per transaction: {:.4} pages from the file's end, {:.4} reused, {:.4} freed ({:.4} merges); leaf splits {:.4} halving, {:.4} right edge, {:.4} hotpoint; {:.4} splits logged with a before image",
        per_txn(space.pages_from_end, before_space.pages_from_end),
        per_txn(space.pages_reused, before_space.pages_reused),
        per_txn(space.pages_freed, before_space.pages_freed),
        per_txn(space.merges, before_space.merges),
        per_txn(space.splits_halving, before_space.splits_halving),
        per_txn(space.splits_right_edge, before_space.splits_right_edge),
        per_txn(space.splits_hotpoint, before_space.splits_hotpoint),
        per_txn(space.splits_with_image, before_space.splits_with_image),
    );
    println!(
        "pages written per second: {:.0} to refill the available pool (evictions), {:.0} for checkpoint depth; {:.2} pages per write; {:.0} faults/s waited for an eviction write",
        (c.pool_flushes - before_cache.pool_flushes) as f64 / elapsed,
        (c.checkpoint_flushes - before_cache.checkpoint_flushes) as f64 / elapsed,
        (c.pages_written - before_cache.pages_written) as f64
            / (c.writes - before_cache.writes).max(1) as f64,
        (c.write_out_waits - before_cache.write_out_waits) as f64 / elapsed
    );
    println!(
        "pages per second written from their frames: {:.0}; copied into write snapshots: {:.0}",
        (c.pages_written_from_frames - before_cache.pages_written_from_frames) as f64 / elapsed,
        (c.pages_copied - before_cache.pages_copied) as f64 / elapsed
    );
    let log = instance.log_counters();
    println!(
        "log per second: {:.0} flush batches, {:.0} writes with fdatasync, {:.1} MB, {:.1} files rolled",
        (log.flush_batches - before.log.flush_batches) as f64 / elapsed,
        (log.fsyncs - before.log.fsyncs) as f64 / elapsed,
        (log.bytes_written - before.log.bytes_written) as f64 / elapsed / 1e6,
        (log.generations_rolled - before.log.generations_rolled) as f64 / elapsed
    );
    let durable_commits = instance.counters().durable_commits - before.durable;
    println!(
        "group commit: {:.0} durable commits/s, {:.2} per flush batch; batches {:.0} % led by a committer, {:.0} % leaving the tail for a second write",
        durable_commits as f64 / elapsed,
        durable_commits as f64 / (log.flush_batches - before.log.flush_batches).max(1) as f64,
        100.0 * (log.commit_flushes - before.log.commit_flushes) as f64
            / (log.flush_batches - before.log.flush_batches).max(1) as f64,
        100.0 * (log.tail_deferrals - before.log.tail_deferrals) as f64
            / (log.flush_batches - before.log.flush_batches).max(1) as f64
    );
    println!(
        "CPU {cpu:.2} s (user {user:.2} s, system {sys:.2} s; {:.0} % of one core): {:.1} µs of CPU per transactional I/O (database read or write)",
        100.0 * cpu / elapsed,
        1e6 * cpu / (reads + writes).max(1) as f64
    );
}
