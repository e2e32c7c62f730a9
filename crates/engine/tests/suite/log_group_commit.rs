//! Leader-based group commit: a committer in `flush_to` that finds no round in
//! progress runs the round itself, on its own thread; the flusher thread runs the
//! rounds nobody waits for. Whoever runs a round keeps every rule: the generation is
//! recorded before anything in it is acknowledged, nothing acknowledged is lost when
//! the writer is abandoned, and a failed round poisons the log for every committer.

use super::log_common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use edbstress_engine::EngineError;
use edbstress_engine::log::{GenerationRecord, LogPosition, LogWriter, read_log};
use edbstress_format::Generation;
use edbstress_format::log::{CheckpointState, SEGMENT_LEN};
use edbstress_io::IoClass;
use log_common::*;
use rand::Rng;

#[test]
fn a_committer_runs_its_round_itself_and_records_each_generation_before_acknowledging() {
    let (_tmp, dir) = new_log_dir();
    let mut cfg = config(&dir, SMALL_FILE);
    // Nothing for the flusher thread: no lazy deadline, no capacity wake-up.
    cfg.lazy_flush_interval = Some(Duration::from_secs(60));
    let writer = Arc::new(LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap());
    // Which thread recorded each generation, and how far the log was durable then.
    let hooks: Arc<Mutex<Vec<(u32, String, bool)>>> = Arc::default();
    {
        let hooks = Arc::clone(&hooks);
        let weak = Arc::downgrade(&writer);
        writer.set_generation_hook(
            Box::new(move |r: GenerationRecord| {
                let name = std::thread::current().name().unwrap_or("").to_string();
                // Nothing in the new generation may be acknowledged yet: durable is at
                // most its first record's start.
                let first = LogPosition {
                    generation: r.generation,
                    segment: 1,
                    offset: 32,
                };
                let durable_inside = weak.upgrade().is_some_and(|w| w.durable() > first);
                hooks
                    .lock()
                    .unwrap()
                    .push((r.generation.get(), name, durable_inside));
                Ok(())
            }),
            Generation::NONE,
        );
    }
    let committer = {
        let writer = Arc::clone(&writer);
        std::thread::Builder::new()
            .name("committer".into())
            .spawn(move || {
                let mut acknowledged = Vec::new();
                // The first file is prepare's (1 MiB), later ones small.
                // One more commit after the fourth roll: the newest file gets a write.
                let mut rolled = false;
                for trx in 0..2_000u64 {
                    if std::mem::replace(&mut rolled, writer.counters().generations_rolled >= 4) {
                        break;
                    }
                    let size = 200 + (trx as usize * 997) % 9_000;
                    let end = writer.append(&txn(trx, &[size])).unwrap();
                    writer.flush_to(end).unwrap();
                    assert!(writer.durable() >= end, "acknowledged but not durable");
                    acknowledged.push((trx, size));
                }
                acknowledged
            })
            .unwrap()
    };
    let acknowledged = committer.join().unwrap();
    let counters = writer.counters();
    assert!(counters.generations_rolled >= 4, "{counters:?}");
    // Every round was led by the committer: the flusher thread ran none.
    assert_eq!(
        counters.flush_batches, counters.commit_flushes,
        "{counters:?}"
    );
    assert_eq!(
        (counters.lazy_flushes, counters.capacity_flushes),
        (0, 0),
        "{counters:?}"
    );
    let hooks = hooks.lock().unwrap().clone();
    let generations: Vec<u32> = hooks.iter().map(|h| h.0).collect();
    let expected: Vec<u32> = (1..=counters.generations_rolled as u32 + 1).collect();
    assert_eq!(
        generations, expected,
        "each generation recorded once, in order"
    );
    for (generation, thread, durable_inside) in &hooks {
        assert_eq!(
            thread, "committer",
            "generation {generation} was recorded on another thread"
        );
        assert!(
            !durable_inside,
            "generation {generation} was acknowledged before it was recorded"
        );
    }
    drop(hooks);
    Arc::try_unwrap(writer).unwrap().abandon();
    let scan = read_log(&dir, START, sigs(), IoClass::LogRead).unwrap();
    assert_ordered(&scan);
    assert_acknowledged_present(&records_of(&scan), &acknowledged);
}

#[test]
fn committers_and_the_flusher_race_then_abandon_loses_nothing_acknowledged() {
    for split in [false, true] {
        let (_tmp, dir) = new_log_dir();
        let mut cfg = config(&dir, SMALL_FILE);
        cfg.split_tail_write = split;
        cfg.lazy_flush_interval = Some(Duration::from_millis(2));
        // Four segments: the flusher wakes for every closed segment (capacity rounds)
        // and appends wait for space.
        cfg.buffer_len = 4 * SEGMENT_LEN;
        let writer =
            Arc::new(LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap());
        // Before any committer: lazy appends beyond the buffer's capacity, which only
        // the flusher's capacity rounds can make room for.
        let mut lazy_first = Vec::new();
        for trx in 0..4u64 {
            writer.append(&txn(90_000 + trx, &[9_000])).unwrap();
            lazy_first.push((90_000 + trx, 9_000));
        }
        assert!(writer.counters().capacity_flushes > 0);
        // Every fourth commit is lazy: the flusher's timer writes it.
        let mut acknowledged = commit_concurrently(&writer, 8, 80, 100, 4, |rng| {
            match rng.random_range(0..10) {
                0..6 => rng.random_range(50..1_500),
                6..9 => rng.random_range(1_500..9_000),
                _ => rng.random_range(9_000..14_000),
            }
        });
        let counters = writer.counters();
        assert!(counters.commit_flushes > 0, "{counters:?}");
        assert!(counters.generations_rolled > 0, "{counters:?}");
        assert_eq!(counters.writes, counters.fsyncs);
        assert_eq!(
            counters.segments_written * SEGMENT_LEN as u64,
            counters.bytes_written,
            "each segment written once per write"
        );
        if split {
            assert!(counters.tail_deferrals > 0, "{counters:?}");
        }
        // The first lazy transactions were made durable by later rounds.
        acknowledged.extend(lazy_first);
        Arc::try_unwrap(writer).unwrap().abandon();
        let scan = read_log(&dir, START, sigs(), IoClass::LogRead).unwrap();
        assert_ordered(&scan);
        assert!(scan.summary.corrected.is_empty());
        assert_acknowledged_present(&records_of(&scan), &acknowledged);
    }
}

#[test]
fn a_failed_round_poisons_the_log_for_every_committer() {
    let (tmp, dir) = new_log_dir();
    let mut cfg = config(&dir, SMALL_FILE);
    cfg.lazy_flush_interval = Some(Duration::from_secs(60));
    let writer = Arc::new(LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap());
    // The directory goes away under the open generation file: its writes still
    // succeed, but the roll to the next generation cannot find or create a file, so
    // the round that fills the file fails — led by whichever committer runs it.
    let moved = tmp.path().join("moved");
    std::fs::rename(&dir, &moved).unwrap();
    const THREADS: u64 = 6;
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let writer = Arc::clone(&writer);
            std::thread::spawn(move || {
                let mut acknowledged = Vec::new();
                for i in 0..1_000u64 {
                    let trx = t * 10_000 + i;
                    let size = 300 + (trx as usize * 131) % 2_000;
                    let end = match writer.append(&txn(trx, &[size])) {
                        Ok(end) => end,
                        Err(e) => return (acknowledged, e),
                    };
                    match writer.flush_to(end) {
                        Ok(()) => acknowledged.push((trx, size)),
                        Err(e) => return (acknowledged, e),
                    }
                }
                panic!("committer {t}: the log never failed");
            })
        })
        .collect();
    let mut acknowledged = Vec::new();
    for t in threads {
        let (ack, e) = t.join().unwrap();
        // Every committer is told why: the log failed, it did not just stop.
        assert!(
            matches!(&e, EngineError::ShutDown(Some(msg)) if !msg.is_empty()),
            "{e:?}"
        );
        acknowledged.extend(ack);
    }
    // Once poisoned, the log takes nothing more.
    assert!(matches!(
        writer.append(&txn(99_999, &[10])),
        Err(EngineError::ShutDown(Some(_)))
    ));
    let counters = writer.counters();
    assert_eq!(counters.generations_rolled, 0, "{counters:?}");
    Arc::try_unwrap(writer).unwrap().abandon();
    std::fs::rename(&moved, &dir).unwrap();
    let scan = read_log(&dir, START, sigs(), IoClass::LogRead).unwrap();
    assert_ordered(&scan);
    assert!(!acknowledged.is_empty());
    assert_acknowledged_present(&records_of(&scan), &acknowledged);
}
