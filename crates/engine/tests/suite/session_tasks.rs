//! Sessions running as tasks (`edbstress_io::tasks`) on two threads, on a database far
//! larger than the cache, with both backends: their page reads are carried and counted
//! by the chosen backend, a durable commit returns only once the log is durable past
//! it (the flusher leads the round for tasks), and after a crash every durable commit
//! is recovered with its bytes while the database checks clean.

use super::instance_common;

use std::sync::Mutex;

use edbstress_engine::{Durability, Instance, MessageKey, TxnOp};
use edbstress_format::PageSize;
use edbstress_io::tasks::{deal, run_tasks};
use edbstress_io::{BackendKind, IoClass, IoUringBackend};

const SESSIONS: u32 = 12;
const TRANSACTIONS: u32 = 40;

fn durable_commits_of_tasks_survive_a_crash(backend: BackendKind) {
    let dir = tempfile::tempdir().unwrap();
    let layout = instance_common::prepare_small(dir.path(), PageSize::K8, 8 << 20, 20, 11);
    let mut config = instance_common::buffered_config(&layout);
    config.backend = backend;
    config.cache_min_bytes = 1 << 20;
    config.cache_max_bytes = 1 << 20;
    let instance = Instance::open(config.clone()).unwrap();
    let mailboxes = instance.mailbox_count();
    // What each durable commit wrote, as acknowledged.
    let durable: Mutex<Vec<(MessageKey, Vec<u8>, u32)>> = Mutex::new(Vec::new());
    let session = |s: u32| {
        let (instance, durable) = (&instance, &durable);
        move || {
            for i in 0..TRANSACTIONS {
                let mailbox = (s * 7 + i * 3) % mailboxes;
                if i % 4 == 3 {
                    // A read of a message somewhere in the database: mostly misses.
                    if let Some(key) = instance
                        .seek_message(mailbox, u64::from(s * 131 + i))
                        .unwrap()
                    {
                        instance.read(key, true).unwrap();
                    }
                    continue;
                }
                let body = vec![(s * 41 + i) as u8; 2500 + (i as usize * 97) % 4000];
                let props = [s as u8, i as u8, 9];
                let durability = if i % 2 == 0 {
                    Durability::Durable
                } else {
                    Durability::Lazy
                };
                let out = instance
                    .commit(
                        &[TxnOp::Insert {
                            mailbox,
                            props: &props,
                            body: &body,
                        }],
                        durability,
                    )
                    .unwrap();
                if durability == Durability::Durable {
                    assert!(
                        instance.log_durable() >= out.position,
                        "a durable commit returned before its log round: {} < {}",
                        instance.log_durable(),
                        out.position
                    );
                    durable.lock().unwrap().push((out.inserted[0], body, s));
                }
            }
        }
    };
    std::thread::scope(|scope| {
        for tasks in deal(SESSIONS, 2, |s| Box::new(session(s))) {
            scope.spawn(move || run_tasks(tasks).expect("tasks"));
        }
    });
    let cache = instance.cache_counters();
    let reads = instance.io_stats().total(IoClass::DbRead);
    assert!(
        cache.reads > 20,
        "a database 8× the cache misses: {cache:?}"
    );
    assert_eq!(
        reads.ops,
        cache.reads,
        "every page read was carried and counted by the {} backend",
        backend.name()
    );
    assert_eq!(instance.read_backend(), backend.name());
    let counters = instance.counters();
    let durable = durable.into_inner().unwrap();
    assert_eq!(
        durable.len() as u32,
        SESSIONS * TRANSACTIONS / 2,
        "{counters:?}"
    );
    instance_common::crash_recover_and_check(instance, &layout);
    let reopened = Instance::open(config).unwrap();
    for (key, body, s) in &durable {
        let message = reopened
            .read(*key, true)
            .unwrap()
            .unwrap_or_else(|| panic!("session {s}'s durable message {key:?} was lost"));
        assert_eq!(message.body.as_deref(), Some(&body[..]), "{key:?}");
    }
    reopened.shutdown().unwrap();
}

#[test]
fn durable_commits_of_tasks_survive_a_crash_with_the_threads_backend() {
    durable_commits_of_tasks_survive_a_crash(BackendKind::Threads);
}

#[test]
fn durable_commits_of_tasks_survive_a_crash_with_io_uring() {
    if let Err(e) = IoUringBackend::new(4) {
        eprintln!(
            "SKIPPED durable_commits_of_tasks_survive_a_crash_with_io_uring: io_uring is not usable here ({e})"
        );
        return;
    }
    durable_commits_of_tasks_survive_a_crash(BackendKind::IoUring);
}
