//! Model test: random transactions against a real instance (small cache, shallow
//! checkpoint depth, so pages are evicted, flushed and re-read all the time) are
//! mirrored in an in-memory map; at random points the instance "crashes" (cache dropped
//! unflushed, unwritten log discarded, and the log cut at a random point beyond what
//! was durable), is recovered and reopened, and must hold exactly the state after some
//! commit between the last durable one and the last one.

use super::instance_common;
use instance_common::*;

use std::collections::BTreeMap;
use std::path::Path;

use edbstress_engine::InstanceLayout;
use edbstress_engine::MessageKey;
use edbstress_engine::deep_check;
use edbstress_engine::{Durability, Instance, InstanceConfig, TxnOp};
use edbstress_engine::{RecoveryOptions, recover};
use edbstress_format::PageSize;
use edbstress_format::log::{LogPosition, SEGMENT_LEN, log_file_name, parse_log_file_name};
use edbstress_io::IoMode;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

type Contents = BTreeMap<MessageKey, (Vec<u8>, Vec<u8>)>;

fn config(layout: &InstanceLayout) -> InstanceConfig {
    let mut c = buffered_config(layout);
    // A third of the database: pages are evicted and re-read all the time, yet the
    // largest bulk-loaded body (512 KB, 64 pages) fits one transaction's pins.
    c.cache_min_bytes = 320 * 8192;
    c.cache_max_bytes = 320 * 8192;
    c.checkpoint_depth = 96 * 1024;
    c
}

/// The messages and bodies, after checking that the view index holds exactly one
/// entry per message, with its bookmark, and that a view seek finds each mailbox's
/// messages.
fn contents(instance: &Instance) -> Contents {
    let keys = instance.all_keys().unwrap();
    let mut viewed: Vec<MessageKey> = Vec::new();
    for (view, bookmark) in instance.all_view_entries().unwrap() {
        assert_eq!(bookmark, Some(view.message_key()), "bookmark of {view:?}");
        viewed.push(view.message_key());
    }
    viewed.sort();
    assert_eq!(viewed, keys, "view index entries against the table's rows");
    if let Some(first) = keys.first() {
        let found = instance.seek_view(first.mailbox, u32::MAX).unwrap();
        assert_eq!(found.map(|k| k.mailbox), Some(first.mailbox));
    }
    keys.into_iter()
        .map(|k| {
            let m = instance
                .read(k, true)
                .unwrap()
                .expect("listed key readable");
            (k, (m.props, m.body.unwrap()))
        })
        .collect()
}

/// Cuts the log at a random segment boundary at or after `durable`'s tail segment and
/// its shadow: later segments of that generation are zeroed, later generations removed.
fn cut_log(dir: &Path, durable: LogPosition, rng: &mut SmallRng) {
    let path = dir.join(log_file_name(durable.generation));
    let Ok(mut bytes) = std::fs::read(&path) else {
        return;
    };
    let segments = bytes.len() / SEGMENT_LEN;
    let first_cut = usize::from(durable.segment) + 2;
    if first_cut < segments {
        let cut = rng.random_range(first_cut..=segments);
        bytes[cut * SEGMENT_LEN..].fill(0);
        std::fs::write(&path, &bytes).unwrap();
    }
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if let Some(g) = entry.file_name().to_str().and_then(parse_log_file_name) {
            if g > durable.generation {
                std::fs::remove_file(entry.path()).unwrap();
            }
        }
    }
}

/// Prints the page a deep-check problem names (debugging aid for MODEL_CHECK_EVERY_STEP;
/// the model's databases have 8 KiB pages).
fn dump_named_page(layout: &InstanceLayout, problem: &str) {
    let Some(pgno) = problem
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.trim_end_matches(':').parse::<u64>().ok())
    else {
        return;
    };
    let bytes = std::fs::read(&layout.db_file).unwrap();
    let page = &bytes[((pgno + 1) * 8192) as usize..((pgno + 2) * 8192) as usize];
    let p = edbstress_format::page::Page::new(page).unwrap();
    let h = p.header();
    eprintln!(
        "page {pgno}: flags {:#x} prev {} next {} object {}",
        h.flags, h.prev, h.next, h.object_id
    );
    for i in 0..p.record_count() {
        let r = p.record(i).unwrap();
        eprintln!("  {i}: key {:02x?} data {} bytes", r.key, r.data.len());
    }
}

/// What one random step did: its durability, whether it changed the contents, and
/// (operation, props length, body length) for messages.
struct StepDone {
    durability: Durability,
    changed: bool,
    last_op: (i32, usize, usize),
}

/// One random transaction (insert, delete, replace or read), applied to the instance
/// and the model alike; each outcome checked against the model.
fn random_step(
    instance: &Instance,
    model: &mut Contents,
    rng: &mut SmallRng,
    step: usize,
) -> StepDone {
    let durability = if rng.random_bool(0.5) {
        Durability::Durable
    } else {
        Durability::Lazy
    };
    let mut props = vec![0u8; rng.random_range(0..400)];
    rng.fill_bytes(&mut props);
    let mut body = vec![
        0u8;
        if rng.random_bool(0.3) {
            rng.random_range(0..1024)
        } else {
            rng.random_range(1025..40_000)
        }
    ];
    rng.fill_bytes(&mut body);
    let existing: Vec<MessageKey> = model.keys().copied().collect();
    let pick = |rng: &mut SmallRng| {
        if existing.is_empty() || rng.random_bool(0.05) {
            MessageKey {
                mailbox: 1,
                message: 1 << 40,
            }
        } else {
            existing[rng.random_range(0..existing.len())]
        }
    };
    let mut changed = true;
    let op: i32 = rng.random_range(0..100);
    let last_op = (op, props.len(), body.len());
    match op {
        0..40 => {
            let mailbox = rng.random_range(0..6);
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
            let key = out.inserted[0];
            assert!(
                model.insert(key, (props, body)).is_none(),
                "step {step}: id {key:?} reused"
            );
        }
        40..60 => {
            let key = pick(rng);
            let out = instance
                .commit(&[TxnOp::Delete { key }], durability)
                .unwrap();
            assert_eq!(
                out.found[0],
                model.remove(&key).is_some(),
                "step {step}: delete {key:?}"
            );
            changed = out.found[0];
        }
        60..75 => {
            let key = pick(rng);
            let new_body = rng.random_bool(0.5).then_some(&body[..]);
            let out = instance
                .commit(
                    &[TxnOp::Replace {
                        key,
                        props: &props,
                        body: new_body,
                        // Half the replaces move the message in its view.
                        resort: rng.random_bool(0.5).then(|| rng.random()),
                    }],
                    durability,
                )
                .unwrap();
            let existed = model.contains_key(&key);
            assert_eq!(out.found[0], existed, "step {step}: replace {key:?}");
            if let Some(entry) = model.get_mut(&key) {
                entry.0 = props;
                if let Some(b) = new_body {
                    entry.1 = b.to_vec();
                }
            }
            changed = existed;
        }
        _ => {
            changed = false;
            let key = pick(rng);
            let got = instance
                .read(key, true)
                .unwrap()
                .map(|m| (m.props, m.body.unwrap()));
            assert_eq!(got.as_ref(), model.get(&key), "step {step}: read {key:?}");
        }
    }
    StepDone {
        durability,
        changed,
        last_op,
    }
}

/// Crashes the instance, cuts its log beyond what was durable, recovers and reopens
/// it; the recovered contents must be one of `candidates` (the states after each
/// commit since the last durable one). Returns the reopened instance and its contents.
fn crash_and_recover(
    instance: Instance,
    layout: &InstanceLayout,
    candidates: &[Contents],
    rng: &mut SmallRng,
    (seed, step): (u64, usize),
) -> (Instance, Contents) {
    let durable = instance.crash();
    cut_log(&layout.log_dir, durable, rng);
    let report = recover(
        layout,
        &RecoveryOptions {
            io_mode: IoMode::Buffered,
            ..RecoveryOptions::default()
        },
    )
    .unwrap();
    assert!(report.succeeded(), "seed {seed} step {step}: {report:?}");
    let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
    assert!(
        check.is_clean(),
        "seed {seed} step {step}: {:?}",
        check.problems
    );
    let instance = Instance::open(config(layout)).unwrap();
    let after = contents(&instance);
    let matched = candidates.iter().position(|c| *c == after).unwrap_or_else(|| {
        panic!(
            "seed {seed} step {step}: recovered state ({} messages) matches no commit since the last durable one ({} candidates, sizes {:?})",
            after.len(),
            candidates.len(),
            candidates.iter().map(BTreeMap::len).collect::<Vec<_>>()
        )
    });
    assert!(matched < candidates.len());
    (instance, after)
}

fn run_model(seed: u64, steps: usize) {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepare_small(dir.path(), PageSize::K8, 8 << 20, 6, seed);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut instance = Instance::open(config(&layout)).unwrap();
    let mut model = contents(&instance);
    assert!(!model.is_empty(), "bulk-loaded messages readable");
    // States after each commit since the last durable one (the first is durable).
    let mut candidates: Vec<Contents> = vec![model.clone()];
    let mut crashes = 0;
    for step in 0..steps {
        let done = random_step(&instance, &mut model, &mut rng, step);
        if done.changed {
            if done.durability == Durability::Durable {
                candidates.clear();
            }
            candidates.push(model.clone());
        }
        if std::env::var_os("MODEL_CHECK_EVERY_STEP").is_some() {
            instance.checkpoint_now().unwrap();
            let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
            if !check.is_clean() {
                dump_named_page(&layout, &check.problems[0]);
            }
            assert!(
                check.is_clean(),
                "seed {seed} step {step} ({:?}): {:?}",
                done.last_op,
                check.problems
            );
        }
        if rng.random_bool(0.04) {
            crashes += 1;
            let after;
            (instance, after) =
                crash_and_recover(instance, &layout, &candidates, &mut rng, (seed, step));
            model = after;
            candidates = vec![model.clone()];
        }
    }
    instance.shutdown().unwrap();
    let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
    assert!(check.is_clean(), "seed {seed}: {:?}", check.problems);
    let instance = Instance::open(config(&layout)).unwrap();
    assert_eq!(
        contents(&instance),
        model,
        "seed {seed}: state after clean shutdown"
    );
    instance.shutdown().unwrap();
    assert!(steps < 50 || crashes > 0, "seed {seed}: no crash exercised");
}

#[test]
fn random_transactions_match_the_model_across_crashes() {
    let seeds = if std::env::var_os("EDBSTRESS_LONG_TESTS").is_some() {
        40
    } else {
        4
    };
    // MODEL_STEPS sets the steps per seed; MODEL_CHECK_EVERY_STEP=1 deep-checks the
    // database after every step (slow; finds the first step that breaks a tree).
    let steps: usize = std::env::var("MODEL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    // MODEL_SEED=N runs that seed alone.
    let only: Option<u64> = std::env::var("MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    for seed in 0..seeds {
        if only.is_some_and(|o| o != seed) {
            continue;
        }
        run_model(seed, steps);
    }
}
