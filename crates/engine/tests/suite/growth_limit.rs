//! A growth limit shared by two instances: their files together never grow past it, the
//! insert that would pass it is refused with a typed error before anything is written,
//! the databases stay consistent and usable, and lifting the limit lets them grow again.

use std::sync::Arc;

use super::instance_common::*;

use edbstress_engine::deep_check;
use edbstress_engine::{Durability, EngineError, GrowthAllowance, Instance, MessageKey, TxnOp};
use edbstress_format::PageSize;
use edbstress_io::IoMode;
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

fn file_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn two_instances_never_grow_past_their_shared_limit_and_grow_again_once_lifted() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let allowance = Arc::new(GrowthAllowance::new());
    let limit = 3u64 << 20;
    allowance.limit(Some(limit));
    let instances: Vec<(Instance, _)> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let layout = prepare_small(d.path(), PageSize::K8, 2 << 20, 4, 11 + i as u64);
            let mut config = buffered_config(&layout);
            config.cache_min_bytes = 2 << 20;
            config.cache_max_bytes = 2 << 20;
            config.growth_allowance = Some(allowance.clone());
            (Instance::open(config).unwrap(), layout)
        })
        .collect();
    let before: u64 = instances.iter().map(|(_, l)| file_len(&l.db_file)).sum();
    let mut rng = SmallRng::seed_from_u64(5);
    let mut written: [Vec<(MessageKey, Vec<u8>)>; 2] = [Vec::new(), Vec::new()];
    let mut refused = [false, false];
    // 20,000-byte bodies: a few hundred of them need far more than 3 MiB of new pages.
    for round in 0..4000 {
        let i = round % 2;
        if refused[i] {
            if refused.iter().all(|&r| r) {
                break;
            }
            continue;
        }
        let mut body = vec![0u8; 20_000];
        rng.fill_bytes(&mut body);
        let props = (round as u64).to_le_bytes();
        let insert = [TxnOp::Insert {
            mailbox: (round % 4) as u32,
            props: &props,
            body: &body,
        }];
        match instances[i].0.commit(&insert, Durability::Durable) {
            Ok(out) => written[i].push((out.inserted[0], body)),
            Err(e) => {
                assert!(matches!(e, EngineError::GrowthLimit(_)), "{e}");
                assert!(e.to_string().contains("growth limit"), "{e}");
                refused[i] = true;
            }
        }
    }
    assert_eq!(refused, [true, true], "both instances reached the limit");
    let after: u64 = instances.iter().map(|(_, l)| file_len(&l.db_file)).sum();
    assert!(
        after - before <= limit,
        "grew {} bytes past a limit of {limit}",
        after - before
    );
    assert!(
        after - before >= limit - (1 << 20),
        "grew only {}",
        after - before
    );
    // Everything committed reads back; deletes still work; lifted, the files grow again.
    for ((instance, _), w) in instances.iter().zip(&written) {
        for (key, body) in w {
            assert_eq!(
                instance.read(*key, true).unwrap().unwrap().body.as_ref(),
                Some(body)
            );
        }
        instance
            .commit(&[TxnOp::Delete { key: w[0].0 }], Durability::Durable)
            .unwrap();
    }
    allowance.limit(None);
    let mut rng = SmallRng::seed_from_u64(6);
    for (instance, _) in &instances {
        let mut more = Vec::new();
        for _ in 0..40 {
            insert_incompressible(instance, &mut rng, &mut more);
        }
    }
    let lifted: u64 = instances.iter().map(|(_, l)| file_len(&l.db_file)).sum();
    assert!(lifted > after, "no growth after the limit was lifted");
    for (instance, layout) in instances {
        instance.shutdown().unwrap();
        let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
        assert!(check.is_clean(), "{:?}", check.problems);
    }
}
