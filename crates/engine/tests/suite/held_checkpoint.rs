//! The checkpoint held back (`InstanceConfig::hold_checkpoint`, the SoftRecovery test):
//! whatever is written and flushed, the checkpoint file keeps the position of the open,
//! so recovery after a crash replays every generation written since — and the database
//! comes out intact. Without the hold, the same flush moves the checkpoint forward.

use super::instance_common;
use instance_common::*;

use edbstress_engine::MessageKey;
use edbstress_engine::deep_check;
use edbstress_engine::log::read_checkpoint;
use edbstress_engine::{Instance, InstanceConfig};
use edbstress_engine::{RecoveryOptions, recover};
use edbstress_format::PageSize;
use edbstress_io::IoMode;
use rand::SeedableRng;
use rand::rngs::SmallRng;

/// Generations to write past the one the instance opened in.
const GENERATIONS: u32 = 3;

fn prepared(dir: &std::path::Path, hold: bool) -> InstanceConfig {
    let layout = prepare_small(dir, PageSize::K8, 4 << 20, 4, 11);
    let mut config = buffered_config(&layout);
    config.cache_min_bytes = 2 << 20;
    config.cache_max_bytes = 2 << 20;
    // Shallow: without the hold, pages would be written to advance the checkpoint.
    config.checkpoint_depth = 64 << 10;
    config.hold_checkpoint = hold;
    config
}

/// Inserts incompressible messages durably until the durable log has moved
/// `GENERATIONS` generations past `start`, flushing everything (`checkpoint_now`)
/// halfway. Returns what was inserted.
fn write_generations(instance: &Instance, start: u32) -> Vec<(MessageKey, Vec<u8>)> {
    let mut rng = SmallRng::seed_from_u64(5);
    let mut written = Vec::new();
    let mut flushed = false;
    while instance.log_durable().generation.get() < start + GENERATIONS {
        insert_incompressible(instance, &mut rng, &mut written);
        if !flushed && instance.log_durable().generation.get() > start {
            instance.checkpoint_now().unwrap();
            flushed = true;
        }
    }
    assert!(flushed);
    written
}

#[test]
fn held_checkpoint_makes_recovery_replay_every_generation() {
    let dir = tempfile::tempdir().unwrap();
    let config = prepared(dir.path(), true);
    let log_dir = config.layout.log_dir.clone();
    let instance = Instance::open(config.clone()).unwrap();
    let start = instance.log_generation().get();
    let opened_at = read_checkpoint(&log_dir, IoMode::Buffered)
        .unwrap()
        .checkpoint;
    let written = write_generations(&instance, start);
    // The flush wrote pages but left the checkpoint where it was.
    assert_eq!(instance.checkpoint_now().unwrap(), opened_at);
    assert_eq!(
        read_checkpoint(&log_dir, IoMode::Buffered)
            .unwrap()
            .checkpoint,
        opened_at
    );
    let durable = instance.crash();
    assert!(durable.generation.get() >= start + GENERATIONS);

    let report = recover(
        &config.layout,
        &RecoveryOptions {
            io_mode: IoMode::Buffered,
            cache_bytes: 2 << 20,
            ..RecoveryOptions::default()
        },
    )
    .unwrap();
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(report.start, opened_at.to_string());
    assert!(
        report.generations_replayed > GENERATIONS,
        "replayed {} generations",
        report.generations_replayed
    );
    assert!(report.transactions_committed >= written.len() as u64);

    let check = deep_check(&config.layout.db_file, IoMode::Buffered).unwrap();
    assert!(check.is_clean(), "{:?}", check.problems);
    let instance = Instance::open(config).unwrap();
    for (key, body) in &written {
        let m = instance
            .read(*key, true)
            .unwrap()
            .expect("message survives");
        assert_eq!(m.body.as_ref(), Some(body));
    }
    instance.shutdown().unwrap();
}

#[test]
fn without_the_hold_a_flush_moves_the_checkpoint_forward() {
    let dir = tempfile::tempdir().unwrap();
    let config = prepared(dir.path(), false);
    let instance = Instance::open(config.clone()).unwrap();
    let start = instance.log_generation().get();
    write_generations(&instance, start);
    let at = instance.checkpoint_now().unwrap();
    assert!(
        at.generation.get() >= start + GENERATIONS,
        "checkpoint at {at}"
    );
    assert_eq!(
        read_checkpoint(&config.layout.log_dir, IoMode::Buffered)
            .unwrap()
            .checkpoint,
        at
    );
    instance.shutdown().unwrap();
}
