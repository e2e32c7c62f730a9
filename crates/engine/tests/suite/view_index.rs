//! The view index (a third B+tree, engine.md §5): the deep check finds an entry missing
//! or under the wrong sort key, and a database of the previous format version (without
//! the index) is refused with the fix named, by the engine and by prepare, and rebuilt
//! by `prepare --recreate`.

use super::instance_common;
use instance_common::*;

use std::os::unix::fs::FileExt;
use std::path::Path;

use edbstress_engine::deep_check;
use edbstress_engine::{Durability, Instance, TxnOp};
use edbstress_engine::{PrepareError, PreparePlan};
use edbstress_format::checksum::{block_checksum, seal_page};
use edbstress_format::page::{Page, PageHeader, PageMut, flags};
use edbstress_format::{PageSize, Pgno};
use edbstress_io::IoMode;

const VIEW_INDEX_OBJECT_ID: u32 = 102;
const MAILBOX_TABLE_OBJECT_ID: u32 = 100;

/// Rewrites the first leaf of tree `object_id` with `edit` and reseals it (damage the
/// checksum cannot see: only the deep check can).
#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
fn edit_first_leaf(
    db: &Path,
    page_size: PageSize,
    object_id: u32,
    edit: impl FnOnce(&mut PageMut<'_>),
) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(db)
        .unwrap();
    let pages = file.metadata().unwrap().len() / page_size.bytes() as u64;
    let mut buf = vec![0u8; page_size.bytes()];
    for pgno in 1..pages as u32 - 1 {
        file.read_exact_at(&mut buf, Pgno::new(pgno).offset(page_size))
            .unwrap();
        let h = PageHeader::read(&buf);
        if h.object_id == object_id
            && h.flags & flags::LEAF != 0
            && Page::new(&buf).unwrap().record_count() > 1
        {
            edit(&mut PageMut::new(&mut buf).unwrap());
            seal_page(&mut buf, Pgno::new(pgno));
            file.write_all_at(&buf, Pgno::new(pgno).offset(page_size))
                .unwrap();
            return;
        }
    }
    panic!("no leaf of object {object_id} with records");
}

#[test]
fn transactions_keep_the_view_index_in_step_and_check_finds_damage() {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepare_small(dir.path(), PageSize::K8, 4 << 20, 6, 11);
    let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
    assert!(check.is_clean(), "{:?}", check.problems);
    assert_eq!(check.view_entries, check.messages);
    assert!(check.view_entries > 100, "{check:?}");

    let instance = Instance::open(buffered_config(&layout)).unwrap();
    let mut inserted = Vec::new();
    for i in 0..200u32 {
        let body = vec![i as u8; 300 + (i as usize * 37) % 3000];
        let out = instance
            .commit(
                &[TxnOp::Insert {
                    mailbox: i % 6,
                    props: b"subject and sender",
                    body: &body,
                }],
                Durability::Lazy,
            )
            .unwrap();
        inserted.push(out.inserted[0]);
    }
    // Found through the view: a seek lands on a message of the mailbox asked.
    for (i, sort) in [0u32, 1 << 31, u32::MAX].into_iter().enumerate() {
        let key = instance.seek_view(i as u32, sort).unwrap().unwrap();
        assert_eq!(key.mailbox, i as u32);
        assert!(instance.read(key, true).unwrap().is_some());
    }
    for (i, &key) in inserted.iter().enumerate().step_by(3) {
        let op = if i % 2 == 0 {
            TxnOp::Delete { key }
        } else {
            TxnOp::Replace {
                key,
                props: b"moved in its view",
                body: None,
                resort: Some(i as u32 * 7_919),
            }
        };
        assert_eq!(
            instance.commit(&[op], Durability::Lazy).unwrap().found,
            [true]
        );
    }
    let entries = instance.all_view_entries().unwrap();
    let mut keys = instance.all_keys().unwrap();
    assert_eq!(entries.len(), keys.len());
    let mut viewed: Vec<_> = entries.iter().map(|(v, _)| v.message_key()).collect();
    viewed.sort();
    keys.sort();
    assert_eq!(viewed, keys);
    // A moved message sits at its new sort key.
    let moved = inserted[3];
    assert!(
        entries
            .iter()
            .any(|(v, _)| v.message_key() == moved && v.sort == 3 * 7_919)
    );
    instance.shutdown().unwrap();
    let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
    assert!(check.is_clean(), "{:?}", check.problems);

    // An entry removed: its row has none.
    edit_first_leaf(&layout.db_file, PageSize::K8, VIEW_INDEX_OBJECT_ID, |p| {
        p.delete(0)
    });
    let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
    assert!(
        check
            .problems
            .iter()
            .any(|p| p.contains("has no view index entry")),
        "{:?}",
        check.problems
    );
    // A row's sort key changed under its entry.
    edit_first_leaf(
        &layout.db_file,
        PageSize::K8,
        MAILBOX_TABLE_OBJECT_ID,
        |p| {
            let mut row = p.record(1).unwrap().data.to_vec();
            row[21] ^= 0x5A;
            p.replace_data(1, &row).unwrap();
        },
    );
    let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
    assert!(
        check
            .problems
            .iter()
            .any(|p| p.contains("its view entry at")),
        "{:?}",
        check.problems
    );
}

/// Sets the format version of both header copies to `version`, resealed.
#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
fn set_format_version(db: &Path, page_size: PageSize, version: u32) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(db)
        .unwrap();
    let mut slot = vec![0u8; 4096];
    for copy in 0..2u64 {
        let offset = copy * page_size.bytes() as u64;
        file.read_exact_at(&mut slot, offset).unwrap();
        slot[16..20].copy_from_slice(&version.to_le_bytes());
        let sum = block_checksum(&slot, 0, true);
        slot[..8].copy_from_slice(&sum.to_le_bytes());
        file.write_all_at(&slot, offset).unwrap();
    }
}

#[test]
fn a_database_of_the_previous_format_is_refused_then_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_options(PageSize::K8, 2 << 20, 4, 5);
    let layout = prepare_at(dir.path(), options.clone());
    set_format_version(&layout.db_file, PageSize::K8, 1);

    let err = Instance::open(buffered_config(&layout))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("format version 1")
            && err.contains("--recreate")
            && err.contains("edbstress clean"),
        "{err}"
    );
    let err = PreparePlan::check(vec![layout.clone()], options.clone())
        .err()
        .unwrap();
    assert!(
        matches!(err, PrepareError::OldFormat { found: 1, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("--recreate") && msg.contains("edbstress clean"),
        "{msg}"
    );
    // Nothing was touched.
    let err = Instance::open(buffered_config(&layout))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("format version 1"), "{err}");

    let mut recreate = options;
    recreate.recreate = true;
    PreparePlan::check(vec![layout.clone()], recreate)
        .unwrap()
        .execute(&mut |_| {})
        .unwrap();
    let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
    assert!(check.is_clean() && check.view_entries > 0, "{check:?}");
    Instance::open(buffered_config(&layout))
        .unwrap()
        .shutdown()
        .unwrap();
}
