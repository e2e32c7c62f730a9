//! Sessions as tasks (`edbstress_io::tasks`), on real files with both backends: a
//! thread runs many tasks whose reads are all in flight at once on the backend its pool
//! reserved for it, each task gets its own bytes back, the pool counts every read, a
//! parked task wakes on a notification from another thread (none lost), sleeps end on
//! time without blocking the other tasks, a task that never waits still lets the others
//! run (and their reads complete), and a panicking task lets the others finish before
//! its panic is passed on, the pool's backend given back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use edbstress_io::tasks::{self, Task, TaskEvent};
use edbstress_io::{
    AlignedBuf, BackendKind, BackendPool, DataFile, FileId, IoClass, IoMode, IoOp, IoRequest,
};
use std::sync::{Condvar, Mutex};

const BLOCK: usize = 4096;
const BLOCKS: u64 = 64;

/// A buffered file of `BLOCKS` blocks, block `i` filled with byte `i`.
fn file_of_blocks(dir: &std::path::Path) -> Arc<DataFile> {
    let file = DataFile::create_new(dir.join("blocks"), IoMode::Buffered).unwrap();
    let blocks: Vec<u8> = (0..BLOCKS).flat_map(|i| [i as u8; BLOCK]).collect();
    super::common::pwrite(file.path(), &blocks, 0);
    Arc::new(file)
}

fn read_block(pool: &BackendPool, block: u64) -> AlignedBuf {
    let completion = pool
        .run(IoRequest {
            file: FileId(0),
            op: IoOp::Read,
            offset: block * BLOCK as u64,
            buf: AlignedBuf::new(BLOCK),
            len: BLOCK,
            class: IoClass::DbRead,
            instance: 1,
            tag: 0,
        })
        .unwrap();
    assert_eq!(*completion.result.as_ref().unwrap(), BLOCK);
    completion.buf
}

fn kinds() -> Vec<BackendKind> {
    let mut kinds = vec![BackendKind::Threads];
    if edbstress_io::IoUringBackend::new(4).is_ok() {
        kinds.push(BackendKind::IoUring);
    } else {
        eprintln!("SKIPPED the io_uring half: io_uring is not usable here");
    }
    kinds
}

#[test]
fn tasks_of_one_thread_read_at_once_and_each_gets_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let file = file_of_blocks(dir.path());
    for kind in kinds() {
        let pool = BackendPool::new(kind, 1, 4, vec![Arc::clone(&file)]).unwrap();
        // Who started and finished a read, in order.
        let events = Mutex::new(Vec::new());
        let tasks: Vec<Task<'_>> = (0..16u64)
            .map(|t| {
                let (pool, events) = (&pool, &events);
                Box::new(move || {
                    assert!(tasks::in_task());
                    for round in 0..4 {
                        let block = (t * 4 + round) % BLOCKS;
                        events.lock().unwrap().push(("start", t));
                        let buf = read_block(pool, block);
                        events.lock().unwrap().push(("end", t));
                        assert!(
                            buf.iter().all(|&b| b == block as u8),
                            "task {t} got another block's bytes"
                        );
                    }
                }) as Task<'_>
            })
            .collect();
        assert!(!tasks::in_task());
        tasks::run_tasks(tasks).unwrap();
        let events = events.into_inner().unwrap();
        // Every task submitted its first read before any read was reaped: waiting for
        // a read does not hold the thread.
        let first_end = events.iter().position(|e| e.0 == "end").unwrap();
        assert_eq!(first_end, 16, "{kind}: {events:?}");
        let stats = pool.stats();
        assert_eq!(
            stats.total(IoClass::DbRead).ops,
            64,
            "{kind}: every read counted"
        );
        // The pool lends its backends again once the tasks are done.
        read_block(&pool, 3);
        assert_eq!(pool.stats().total(IoClass::DbRead).ops, 65, "{kind}");
    }
}

#[test]
fn a_parked_task_wakes_on_every_notification_of_another_thread() {
    // Ping-pong between a task and a thread: a lost wake-up hangs the test.
    const ROUNDS: u64 = 2000;
    let event = TaskEvent::new();
    let turn = Mutex::new(0u64);
    let thread_turn = Condvar::new();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 0..ROUNDS {
                let mut t = turn.lock().unwrap();
                while *t != 2 * i + 1 {
                    t = thread_turn.wait(t).unwrap();
                }
                *t += 1;
                drop(t);
                event.notify();
            }
        });
        let task: Task<'_> = Box::new(|| {
            for i in 0..ROUNDS {
                let mut t = turn.lock().unwrap();
                assert_eq!(*t, 2 * i);
                *t += 1;
                thread_turn.notify_one();
                loop {
                    let seen = event.epoch();
                    if *t == 2 * i + 2 {
                        break;
                    }
                    drop(t);
                    assert!(event.park(seen), "park suspends inside a task");
                    t = turn.lock().unwrap();
                }
            }
            done.store(true, Ordering::SeqCst);
        });
        tasks::run_tasks(vec![task]).unwrap();
    });
    assert!(done.load(Ordering::SeqCst));
    assert!(
        !event.park(event.epoch()),
        "outside tasks park returns at once"
    );
}

#[test]
fn sleeping_tasks_wake_on_time_and_let_the_others_run() {
    let start = Instant::now();
    let woke: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
    let spins = AtomicU64::new(0);
    let mut tasks: Vec<Task<'_>> = (0..4u64)
        .map(|t| {
            let woke = &woke;
            Box::new(move || {
                let until = start + Duration::from_millis(20 * (4 - t));
                tasks::sleep_until(until);
                let at = Instant::now();
                assert!(at >= until, "task {t} woke early");
                woke[t as usize].store(
                    at.duration_since(start).as_micros() as u64,
                    Ordering::SeqCst,
                );
            }) as Task<'_>
        })
        .collect();
    // A task that yields through short sleeps while the others sleep long.
    let spins_ref = &spins;
    tasks.push(Box::new(move || {
        for _ in 0..10 {
            tasks::sleep_until(Instant::now() + Duration::from_millis(1));
            spins_ref.fetch_add(1, Ordering::SeqCst);
        }
    }));
    tasks::run_tasks(tasks).unwrap();
    let order: Vec<u64> = woke.iter().map(|w| w.load(Ordering::SeqCst)).collect();
    assert!(
        order.windows(2).all(|w| w[0] > w[1]),
        "the shortest sleep wakes first: {order:?} µs"
    );
    assert_eq!(spins.load(Ordering::SeqCst), 10);
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_panicking_task_lets_the_others_finish_then_passes_the_panic_on() {
    let dir = tempfile::tempdir().unwrap();
    let file = file_of_blocks(dir.path());
    for kind in kinds() {
        let pool = BackendPool::new(kind, 1, 2, vec![Arc::clone(&file)]).unwrap();
        let stop = AtomicBool::new(false);
        let finished = AtomicU64::new(0);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut tasks: Vec<Task<'_>> = Vec::new();
            for _ in 0..3 {
                let (pool, stop, finished) = (&pool, &stop, &finished);
                tasks.push(Box::new(move || {
                    // Reads on until told to stop, as a session does: the panic of
                    // another task must neither unwind it nor leave it waiting.
                    let mut reads = 0;
                    while !stop.load(Ordering::SeqCst) || reads < 20 {
                        read_block(pool, 1);
                        reads += 1;
                    }
                    finished.fetch_add(1, Ordering::SeqCst);
                }));
            }
            let (pool, stop) = (&pool, &stop);
            tasks.push(Box::new(move || {
                read_block(pool, 2);
                stop.store(true, Ordering::SeqCst);
                panic!("a bug in a session");
            }));
            tasks::run_tasks(tasks)
        }));
        let payload = result.expect_err("the panic is passed on");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"a bug in a session"),
            "{kind}"
        );
        assert_eq!(
            finished.load(Ordering::SeqCst),
            3,
            "{kind}: the others finished their work"
        );
        assert!(!tasks::in_task(), "{kind}: the thread is out of tasks");
        // Both slots can be lent again: the reserved one was given back.
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    for _ in 0..50 {
                        read_block(&pool, 5);
                    }
                });
            }
        });
    }
}

#[test]
fn a_task_that_never_waits_yields_its_thread_to_the_others() {
    let order = Mutex::new(Vec::new());
    let tasks: Vec<Task<'_>> = (0..2u32)
        .map(|t| {
            let order = &order;
            Box::new(move || {
                for _ in 0..3 {
                    tasks::yield_now();
                    order.lock().unwrap().push(t);
                }
            }) as Task<'_>
        })
        .collect();
    tasks::run_tasks(tasks).unwrap();
    assert_eq!(order.into_inner().unwrap(), [0, 1, 0, 1, 0, 1]);
    tasks::yield_now(); // outside tasks: nothing
}

#[test]
fn tasks_that_never_wait_do_not_starve_one_waiting_for_its_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = file_of_blocks(dir.path());
    for kind in kinds() {
        let pool = BackendPool::new(kind, 1, 2, vec![Arc::clone(&file)]).unwrap();
        let done = AtomicBool::new(false);
        let starved = AtomicBool::new(false);
        let mut tasks: Vec<Task<'_>> = Vec::new();
        for _ in 0..2 {
            let (done, starved) = (&done, &starved);
            // Cache hits, yielding between transactions, until the reader ends (or
            // far longer than ten reads take: then the reader was starved).
            tasks.push(Box::new(move || {
                let mut yields = 0u64;
                while !done.load(Ordering::SeqCst) {
                    tasks::yield_now();
                    yields += 1;
                    if yields > 20_000_000 {
                        starved.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            }));
        }
        let (pool, done) = (&pool, &done);
        tasks.push(Box::new(move || {
            for block in 0..10 {
                read_block(pool, block);
            }
            done.store(true, Ordering::SeqCst);
        }));
        tasks::run_tasks(tasks).unwrap();
        assert!(
            !starved.load(Ordering::SeqCst),
            "{kind}: the reader waited while the others yielded to each other"
        );
    }
}
