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

use edbstress_engine::InstanceLayout;
use edbstress_engine::MessageShape;
use edbstress_engine::{Compressibility, ContentGenerator};
use edbstress_engine::{Durability, Instance, InstanceConfig, TxnOp};
use edbstress_engine::{PrepareOptions, PreparePlan};
use edbstress_io::IoClass;

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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // As the edbstress binary does (its allocator settings are part of what is measured).
    edbstress_io::bound_allocator_footprint();
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

    let layout = InstanceLayout::new(1, &dir.join("db"), &dir.join("logs"));
    let options = PrepareOptions {
        database_bytes: db_gib << 30,
        mailboxes: 500,
        ..PrepareOptions::default()
    };
    PreparePlan::check(vec![layout.clone()], options)?.execute(&mut |_| {})?;

    let mut config = InstanceConfig::new(layout);
    config.cache_min_bytes = cache_mib << 20;
    config.cache_max_bytes = cache_mib << 20;
    config.split_tail_write = split_tail_write;
    let instance = Instance::open(config)?;
    let mailboxes = instance.mailbox_count();
    // Warm the cache to its maximum first, as a test run does before measuring.
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    // Counted while the sessions run (their threads end with each `run`).
    let switches = AtomicU64::new(0);
    let run = |measure: Duration| {
        stop.store(false, Ordering::Relaxed);
        std::thread::scope(|scope| {
            let session = |s: u32| {
                let (instance, stop, ops) = (&instance, &stop, &ops);
                move || {
                    let mut rng =
                        ContentGenerator::for_stream(u64::from(s) + 1, Compressibility::MAIL);
                    let mut props = vec![0u8; 300];
                    // Reused: the bench should not charge the engine its own allocations.
                    let mut body = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        edbstress_io::tasks::yield_now();
                        let mailbox = rng.range(0..u64::from(mailboxes)) as u32;
                        let view_position = rng.range(0..1 << 32) as u32;
                        let lazy = if rng.range(0..100) < 70 {
                            Durability::Lazy
                        } else {
                            Durability::Durable
                        };
                        let pick = rng.range(0..100);
                        let result = if pick < 40 {
                            let shape =
                                MessageShape::of(rng.range(0..u64::MAX), rng.range(0..1 << 30));
                            body.resize(shape.body_len as usize, 0);
                            rng.fill(&mut body);
                            rng.fill(&mut props);
                            instance
                                .commit(
                                    &[TxnOp::Insert {
                                        mailbox,
                                        props: &props,
                                        body: &body,
                                    }],
                                    lazy,
                                )
                                .map(|_| ())
                        } else {
                            // Found as a client finds it: through the mailbox's view.
                            match instance.seek_view(mailbox, view_position) {
                                Ok(Some(key)) if pick < 60 => {
                                    instance.commit(&[TxnOp::Delete { key }], lazy).map(|_| ())
                                }
                                Ok(Some(key)) if pick < 65 => {
                                    rng.fill(&mut props);
                                    instance
                                        .commit(
                                            &[TxnOp::Replace {
                                                key,
                                                props: &props,
                                                body: None,
                                                resort: None,
                                            }],
                                            lazy,
                                        )
                                        .map(|_| ())
                                }
                                Ok(Some(key)) => {
                                    instance.read(key, rng.range(0..2) == 0).map(|_| ())
                                }
                                Ok(None) => Ok(()),
                                Err(e) => Err(e),
                            }
                        };
                        if let Err(e) = result {
                            eprintln!("session {s}: {e}");
                            stop.store(true, Ordering::Relaxed);
                        }
                        ops.fetch_add(1, Ordering::Relaxed);
                    }
                }
            };
            if task_threads == 0 {
                for s in 0..sessions {
                    scope.spawn(session(s));
                }
            } else {
                // Sessions as tasks: `task_threads` threads, each running its share.
                let lists =
                    edbstress_io::tasks::deal(sessions, task_threads, |s| Box::new(session(s)));
                for tasks in lists {
                    let stop = &stop;
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
            switches.store(context_switches() - before, Ordering::Relaxed);
            stop.store(true, Ordering::Relaxed);
        });
    };
    let warm = Instant::now();
    while instance.cache_counters().frames < instance.cache_counters().max_frames * 9 / 10
        && warm.elapsed() < Duration::from_secs(120)
    {
        run(Duration::from_millis(500));
    }
    let before_io = instance.io_stats();
    let before_retries = instance.counters().retries;
    let before_cache = instance.cache_counters();
    let before_log = instance.log_counters();
    let before_durable = instance.counters().durable_commits;
    let before_space = instance.space_counters();
    let before_cpu = cpu_split();
    let before_ops = ops.load(Ordering::Relaxed);
    let started = Instant::now();
    run(Duration::from_secs_f64(seconds));
    let elapsed = started.elapsed().as_secs_f64();
    let after_cpu = cpu_split();
    let (user, sys) = (after_cpu.0 - before_cpu.0, after_cpu.1 - before_cpu.1);
    let cpu = user + sys;
    let after_io = instance.io_stats();
    let count = |class: IoClass| after_io.total(class).ops - before_io.total(class).ops;
    let (reads, writes, log_writes) = (
        count(IoClass::DbRead),
        count(IoClass::DbWrite),
        count(IoClass::LogWrite),
    );
    let ops = ops.load(Ordering::Relaxed) - before_ops;
    let c = instance.cache_counters();
    let retries = instance.counters().retries - before_retries;
    println!(
        "per transaction: {:.2} attempts retried, {:.2} misses, {:.2} pages written, {:.2} context switches",
        retries as f64 / ops.max(1) as f64,
        (c.misses - before_cache.misses) as f64 / ops.max(1) as f64,
        (c.pages_written - before_cache.pages_written) as f64 / ops.max(1) as f64,
        switches.load(Ordering::Relaxed) as f64 / ops.max(1) as f64
    );
    let (hits, misses) = (c.hits - before_cache.hits, c.misses - before_cache.misses);
    println!(
        "{elapsed:.1} s, {sessions} sessions ({}), cache {cache_mib} MiB of a {db_gib} GiB database (hit ratio {:.1} %)",
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
        (log.flush_batches - before_log.flush_batches) as f64 / elapsed,
        (log.fsyncs - before_log.fsyncs) as f64 / elapsed,
        (log.bytes_written - before_log.bytes_written) as f64 / elapsed / 1e6,
        (log.generations_rolled - before_log.generations_rolled) as f64 / elapsed
    );
    let durable_commits = instance.counters().durable_commits - before_durable;
    println!(
        "group commit: {:.0} durable commits/s, {:.2} per flush batch; batches {:.0} % led by a committer, {:.0} % leaving the tail for a second write",
        durable_commits as f64 / elapsed,
        durable_commits as f64 / (log.flush_batches - before_log.flush_batches).max(1) as f64,
        100.0 * (log.commit_flushes - before_log.commit_flushes) as f64
            / (log.flush_batches - before_log.flush_batches).max(1) as f64,
        100.0 * (log.tail_deferrals - before_log.tail_deferrals) as f64
            / (log.flush_batches - before_log.flush_batches).max(1) as f64
    );
    println!(
        "CPU {cpu:.2} s (user {user:.2} s, system {sys:.2} s; {:.0} % of one core): {:.1} µs of CPU per transactional I/O (database read or write)",
        100.0 * cpu / elapsed,
        1e6 * cpu / (reads + writes).max(1) as f64
    );
    instance.shutdown()?;
    Ok(())
}
