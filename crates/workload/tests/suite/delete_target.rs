//! Which record a delete removes (`DeleteTarget`): with `Oldest`, every delete takes
//! its mailbox's first row, so each mailbox loses its oldest messages in order; with
//! `ViewSeek`, deletes land at random places of the mailboxes.

use super::common::prepare_instance;
use std::collections::BTreeMap;
use std::path::Path;

use edbstress_engine::{Compressibility, Instance, InstanceConfig, MessageKey, PrepareOptions};
use edbstress_format::PageSize;
use edbstress_io::IoMode;
use edbstress_report::OpMix;
use edbstress_workload::transaction::{DeleteTarget, TransactionGenerator, TxnKind};

const MAILBOXES: u32 = 4;
const DELETES: usize = 40;

fn open(dir: &Path) -> Instance {
    let layout = prepare_instance(
        dir,
        PrepareOptions {
            page_size: PageSize::K32,
            database_bytes: (8 << 20) + 2 * 32768,
            mailboxes: MAILBOXES,
            seed: Some(3),
            ..PrepareOptions::default()
        },
    );
    let mut config = InstanceConfig::new(layout);
    config.io_mode = IoMode::Buffered;
    Instance::open(config).unwrap()
}

/// Each mailbox's messages in id order.
fn messages(instance: &Instance) -> BTreeMap<u32, Vec<MessageKey>> {
    let mut out = BTreeMap::new();
    for mailbox in 0..MAILBOXES {
        let mut keys: Vec<MessageKey> = Vec::new();
        let mut from = 0;
        while let Some(key) = instance.seek_message(mailbox, from).unwrap() {
            if keys.last().is_some_and(|last| key.message <= last.message) {
                break; // wrapped to the first
            }
            keys.push(key);
            from = key.message + 1;
        }
        out.insert(mailbox, keys);
    }
    out
}

/// Runs `DELETES` deletes with `target`; returns, per mailbox, the messages before and
/// after.
fn delete_with(target: DeleteTarget) -> Vec<(Vec<MessageKey>, Vec<MessageKey>)> {
    let dir = tempfile::tempdir().unwrap();
    let instance = open(dir.path());
    let before = messages(&instance);
    let mix = OpMix {
        insert: 0,
        delete: 100,
        replace: 0,
        read: 0,
    };
    let mut generator =
        TransactionGenerator::new(9, 0, mix, 0, Compressibility::MAIL).with_delete_target(target);
    for _ in 0..DELETES {
        let outcome = generator.run(&instance, TxnKind::Delete).unwrap();
        assert!(outcome.found);
    }
    let after = messages(&instance);
    instance.shutdown().unwrap();
    before
        .into_iter()
        .zip(after)
        .map(|((_, b), (_, a))| (b, a))
        .collect()
}

#[test]
fn deletes_of_the_oldest_take_each_mailboxs_first_messages_in_order() {
    let mut deleted = 0;
    for (before, after) in delete_with(DeleteTarget::Oldest) {
        let gone = before.len() - after.len();
        assert_eq!(after, before[gone..], "only the oldest messages are gone");
        deleted += gone;
    }
    assert_eq!(deleted, DELETES);

    // Seeks in the view delete anywhere: some mailbox keeps its first message while
    // losing others.
    let mut deleted = 0;
    let mut from_the_middle = false;
    for (before, after) in delete_with(DeleteTarget::ViewSeek) {
        let gone = before.len() - after.len();
        from_the_middle |= after.first() != before.get(gone);
        deleted += gone;
    }
    assert_eq!(deleted, DELETES);
    assert!(from_the_middle);
}
