//! Slotted pages: behaviour against a `BTreeMap` model, free-space accounting, and
//! robustness against corrupt pages.

use std::collections::BTreeMap;

use edbstress_format::Pgno;
use edbstress_format::page::{
    KEY_LEN_PREFIX, TAG_LEN, flags, max_key_data_len, max_record_len, record_len,
};
use edbstress_format::{
    PAGE_HEADER_LEN, Page, PageFormatError, PageFull, PageHeader, PageMut, PageSize, PageVerdict,
    Record, verify_page,
};
use proptest::prelude::*;

fn records(page: &Page<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..page.record_count())
        .map(|i| {
            let r = page.record(i).unwrap();
            (r.key.to_vec(), r.data.to_vec())
        })
        .collect()
}

/// Free bytes the header should report for these records.
fn expected_free(size: PageSize, model: &BTreeMap<Vec<u8>, Vec<u8>>) -> usize {
    let used: usize = model
        .iter()
        .map(|(k, d)| record_len(k.len(), d.len()) + TAG_LEN)
        .sum();
    size.bytes() - PAGE_HEADER_LEN - used
}

#[test]
fn format_initialises_an_empty_page() {
    for size in PageSize::ALL {
        let mut buf = vec![0xEEu8; size.bytes()];
        let page = PageMut::format(&mut buf, Pgno::new(7), 3, flags::LEAF | flags::ROOT, 99);
        let header = page.header();
        assert_eq!(
            header,
            PageHeader {
                dbtime: 99,
                prev: Pgno::new(0),
                next: Pgno::new(0),
                object_id: 3,
                free_bytes: (size.bytes() - PAGE_HEADER_LEN) as u16,
                first_free: PAGE_HEADER_LEN as u16,
                tag_count: 0,
                flags: flags::LEAF | flags::ROOT | flags::NEW_CHECKSUM_FORMAT,
                pgno: Pgno::new(7),
                flush_stamp: 0,
            }
        );
        assert_eq!(page.record_count(), 0);
        assert_eq!(page.free_space(), size.bytes() - 80);
        assert!(buf[80..].iter().all(|&b| b == 0));
        // Exactly-fitting record.
        let mut page = PageMut::new(&mut buf).unwrap();
        assert!(page.fits(0, max_key_data_len(size)));
        assert!(!page.fits(0, max_key_data_len(size) + 1));
        let data = vec![0x5A; max_key_data_len(size)];
        page.append(b"", &data).unwrap();
        assert_eq!(page.free_space(), 0);
        assert_eq!(page.record(0).unwrap().data, &data[..]);
        assert_eq!(max_record_len(size), size.bytes() - 84);
    }
}

#[test]
fn header_fields_sit_at_their_documented_offsets() {
    let mut buf = vec![0u8; 8192];
    let mut page = PageMut::format(
        &mut buf,
        Pgno::new(0x0102_0304),
        0x1111_2222,
        flags::BRANCH,
        0xAABB,
    );
    page.set_prev(Pgno::new(0x0A0B_0C0D));
    page.set_next(Pgno::new(0x1A1B_1C1D));
    page.set_flush_stamp(0x5566_7788);
    page.set_dbtime(0x0102_0304_0506_0708);
    page.append(b"k", b"v").unwrap();
    page.seal();
    assert_eq!(
        verify_page(&buf, Pgno::new(0x0102_0304)),
        PageVerdict::Valid
    );
    let le32 = |o: usize| u32::from_le_bytes(buf[o..o + 4].try_into().unwrap());
    let le16 = |o: usize| u16::from_le_bytes(buf[o..o + 2].try_into().unwrap());
    assert_eq!(
        u64::from_le_bytes(buf[8..16].try_into().unwrap()),
        0x0102_0304_0506_0708
    );
    assert_eq!(le32(16), 0x0A0B_0C0D);
    assert_eq!(le32(20), 0x1A1B_1C1D);
    assert_eq!(le32(24), 0x1111_2222);
    assert_eq!(le16(28) as usize, 8192 - 80 - 2 - 1 - 1 - 4);
    assert_eq!(le16(30), 0);
    assert_eq!(le16(32), 84);
    assert_eq!(le16(34), 1);
    assert_eq!(le32(36), flags::BRANCH | flags::NEW_CHECKSUM_FORMAT);
    assert_eq!(le32(64), 0x0102_0304);
    assert_eq!(le32(68), 0x5566_7788);
    // Tag 0 in the last 4 bytes; record = key_len, key, data at offset 80.
    assert_eq!(le16(8188), 80);
    assert_eq!(le16(8190), 4);
    assert_eq!(&buf[80..84], &[1, 0, b'k', b'v']);
}

#[test]
fn insert_search_delete_replace_compact() {
    let mut buf = vec![0u8; 4096];
    let mut page = PageMut::format(&mut buf, Pgno::new(1), 1, flags::LEAF, 0);
    for key in [b"m".as_slice(), b"c", b"x", b"a"] {
        let at = page.search(key).unwrap_err();
        page.insert(at, key, &[key[0]; 10]).unwrap();
    }
    let keys: Vec<&[u8]> = (0..4).map(|i| page.record(i).unwrap().key).collect();
    assert_eq!(keys, [b"a".as_slice(), b"c", b"m", b"x"]);
    assert_eq!(page.search(b"m"), Ok(2));
    assert_eq!(page.search(b"n"), Err(3));
    page.replace_data(1, b"longer data for c").unwrap();
    page.delete(0);
    assert_eq!(
        page.record(0).unwrap(),
        Record {
            key: b"c",
            data: b"longer data for c"
        }
    );
    assert_eq!(
        page.record(3),
        Err(PageFormatError::NoSuchRecord { index: 3, count: 3 })
    );
    let free = page.free_space();
    page.compact();
    assert_eq!(page.free_space(), free);
    page.truncate(1);
    assert_eq!(page.record_count(), 1);
    assert!(page.as_page().check().is_ok());
    // Compaction left no stale bytes between the records and the tags.
    let first_free = page.header().first_free as usize;
    assert!(
        page.as_bytes()[first_free..4096 - 4]
            .iter()
            .all(|&b| b == 0)
    );
}

#[test]
fn insert_compacts_fragmented_space() {
    let mut buf = vec![0u8; 4096];
    let mut page = PageMut::format(&mut buf, Pgno::new(1), 1, flags::LEAF, 0);
    // Fill with 10 records of ~380 bytes, then delete every other one.
    for i in 0..10u8 {
        page.append(&[i], &[i; 380]).unwrap();
    }
    for i in (0..10).step_by(2).rev() {
        page.delete(i);
    }
    let free = page.free_space();
    let record = free - TAG_LEN - KEY_LEN_PREFIX - 1;
    assert!(page.fits(1, record));
    page.insert(0, &[200], &vec![7; record]).unwrap();
    assert_eq!(page.free_space(), 0);
    assert_eq!(
        page.append(&[201], b""),
        Err(PageFull {
            needed: 3 + TAG_LEN,
            available: 0
        })
    );
    let keys: Vec<u8> = (0..6).map(|i| page.record(i).unwrap().key[0]).collect();
    assert_eq!(keys, [200, 1, 3, 5, 7, 9]);
}

#[test]
fn corrupt_tags_give_errors() {
    let mut buf = vec![0u8; 4096];
    let mut page = PageMut::format(&mut buf, Pgno::new(1), 1, flags::LEAF, 0);
    page.append(b"key", b"data").unwrap();
    let good = buf.clone();

    // Record length past the first free offset.
    buf[4094] = 0xFF;
    assert!(matches!(
        Page::new(&buf),
        Err(PageFormatError::CorruptTag { index: 0, .. })
    ));
    // Offset into the header.
    buf.copy_from_slice(&good);
    buf[4092] = 10;
    assert!(matches!(
        Page::new(&buf),
        Err(PageFormatError::CorruptTag { index: 0, .. })
    ));
    // Key length larger than the record.
    buf.copy_from_slice(&good);
    buf[80] = 200;
    assert!(matches!(
        Page::new(&buf),
        Err(PageFormatError::CorruptTag { index: 0, .. })
    ));
    // Free byte count off by one.
    buf.copy_from_slice(&good);
    buf[28] ^= 1;
    assert!(matches!(
        Page::new(&buf),
        Err(PageFormatError::CorruptHeader { .. })
    ));
    // Absurd tag count.
    buf.copy_from_slice(&good);
    buf[34] = 0xFF;
    buf[35] = 0xFF;
    assert!(matches!(
        Page::new(&buf),
        Err(PageFormatError::CorruptHeader { .. })
    ));
    // Wrong length.
    assert_eq!(
        Page::new(&good[..4000]).unwrap_err(),
        PageFormatError::UnsupportedLength { len: 4000 }
    );
    let mut short = vec![0u8; 100];
    assert!(PageMut::try_format(&mut short, Pgno::new(1), 1, 0, 0).is_err());
}

#[test]
fn check_detects_unsorted_keys() {
    let mut buf = vec![0u8; 4096];
    let mut page = PageMut::format(&mut buf, Pgno::new(1), 1, flags::LEAF, 0);
    page.append(b"b", b"").unwrap();
    page.append(b"a", b"").unwrap(); // the caller broke the order
    assert_eq!(
        page.as_page().check(),
        Err(PageFormatError::KeysOutOfOrder { index: 0 })
    );
}

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(usize),
    Replace(usize, Vec<u8>),
    Compact,
    AppendMax(Vec<u8>),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let key = prop::collection::vec(any::<u8>(), 0..12);
    let data = prop::collection::vec(any::<u8>(), 0..700);
    prop_oneof![
        4 => (key.clone(), data.clone()).prop_map(|(k, d)| Op::Put(k, d)),
        2 => any::<usize>().prop_map(Op::Delete),
        2 => (any::<usize>(), data.clone()).prop_map(|(i, d)| Op::Replace(i, d)),
        1 => Just(Op::Compact),
        1 => data.prop_map(Op::AppendMax),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn matches_a_btreemap_model(
        size in prop_oneof![Just(PageSize::K4), Just(PageSize::K8), Just(PageSize::K32)],
        ops in prop::collection::vec(op_strategy(), 1..120),
    ) {
        let mut buf = vec![0u8; size.bytes()];
        PageMut::format(&mut buf, Pgno::new(5), 9, flags::LEAF, 1);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for op in ops {
            let mut page = PageMut::new(&mut buf).unwrap();
            let free = page.free_space();
            match op {
                Op::Put(key, data) => match page.search(&key) {
                    Ok(i) => {
                        let old = model[&key].len();
                        let fits = data.len() <= old || data.len() - old <= free;
                        prop_assert_eq!(page.replace_data(i, &data).is_ok(), fits);
                        if fits {
                            model.insert(key, data);
                        }
                    }
                    Err(i) => {
                        let fits = page.fits(key.len(), data.len());
                        prop_assert_eq!(fits, record_len(key.len(), data.len()) + TAG_LEN <= free);
                        let result = page.insert(i, &key, &data);
                        prop_assert_eq!(result.is_ok(), fits);
                        if fits {
                            model.insert(key, data);
                        }
                    }
                },
                Op::Delete(i) => {
                    if !model.is_empty() {
                        let i = i % model.len();
                        let key = model.keys().nth(i).unwrap().clone();
                        page.delete(i);
                        model.remove(&key);
                    }
                }
                Op::Replace(i, data) => {
                    if !model.is_empty() {
                        let i = i % model.len();
                        let key = model.keys().nth(i).unwrap().clone();
                        let old = model[&key].len();
                        let result = page.replace_data(i, &data);
                        prop_assert_eq!(result.is_ok(), data.len() <= old + free);
                        if result.is_ok() {
                            model.insert(key, data);
                        }
                    }
                }
                Op::Compact => page.compact(),
                Op::AppendMax(data) => {
                    let mut key = model.keys().next_back().cloned().unwrap_or_default();
                    key.push(0xFF);
                    let fits = page.fits(key.len(), data.len());
                    prop_assert_eq!(page.append(&key, &data).is_ok(), fits);
                    if fits {
                        model.insert(key, data);
                    }
                }
            }
            let page = Page::new(&buf).unwrap();
            prop_assert!(page.check().is_ok());
            prop_assert_eq!(page.free_space(), expected_free(size, &model));
            let expected: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
            prop_assert_eq!(records(&page), expected);
            for (i, key) in model.keys().enumerate() {
                prop_assert_eq!(page.search(key), Ok(i));
            }
        }
    }

    /// Corrupting bytes of a valid page never causes a panic: either the page is
    /// rejected, or every read and write on it stays in bounds.
    #[test]
    fn corrupt_pages_never_panic(
        seed_records in prop::collection::vec(
            (prop::collection::vec(any::<u8>(), 0..8), prop::collection::vec(any::<u8>(), 0..300)),
            0..20,
        ),
        corruptions in prop::collection::vec((any::<u16>(), any::<u8>(), any::<bool>()), 1..6),
    ) {
        let mut buf = vec![0u8; 4096];
        {
            let mut page = PageMut::format(&mut buf, Pgno::new(1), 1, flags::LEAF, 0);
            for (key, data) in &seed_records {
                if let Err(i) = page.search(key) {
                    let _ = page.insert(i, key, data);
                }
            }
        }
        let count = usize::from(u16::from_le_bytes([buf[34], buf[35]]));
        for (pos, value, in_structure) in corruptions {
            // Aim at the header and the tag array most of the time.
            let at = if in_structure {
                let structural = 80 + 4 * count;
                let p = usize::from(pos) % structural;
                if p < 80 { p } else { 4096 - (p - 80) - 1 }
            } else {
                usize::from(pos) % 4096
            };
            buf[at] = value;
        }
        if let Ok(page) = Page::new(&buf) {
            for i in 0..page.record_count() + 1 {
                let _ = page.record(i);
            }
            let _ = page.search(b"abc");
            let _ = page.check();
        }
        if let Ok(mut page) = PageMut::new(&mut buf) {
            let _ = page.insert(0, b"new", &[1; 50]);
            if page.record_count() > 1 {
                let _ = page.replace_data(1, &[2; 400]);
                page.delete(0);
            }
            page.compact();
            let _ = page.append(b"\xff\xff", &[3; 100]);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 4096)) {
        if let Ok(page) = Page::new(&bytes) {
            for i in 0..page.record_count() {
                prop_assert!(page.record(i).is_ok());
            }
            let _ = page.search(&bytes[..4]);
        }
    }
}

proptest! {
    /// `record_span` is where the record's body lies, and whenever
    /// `replaces_without_moving_bodies` says so, a replace changes no byte of the other
    /// records' bodies below the first free offset: what undo images rely on to save
    /// only the replaced record.
    #[test]
    fn replaces_without_moving_bodies_leave_the_other_bodies_alone(
        sizes in proptest::collection::vec(1usize..900, 1..30),
        holes in proptest::collection::vec(any::<u16>(), 0..6),
        index in any::<u16>(),
        new_len in 0usize..1400,
    ) {
        let mut buf = vec![0u8; 8192];
        let mut p = PageMut::format(&mut buf, Pgno::new(9), 2, flags::LEAF, 5);
        for (i, &n) in sizes.iter().enumerate() {
            if p.fits(4, n) {
                p.append(&(i as u32).to_be_bytes(), &vec![i as u8; n]).unwrap();
            }
        }
        for h in holes {
            let count = p.record_count();
            if count > 1 {
                p.delete(usize::from(h) % count);
            }
        }
        let count = p.record_count();
        prop_assume!(count > 0);
        let index = usize::from(index) % count;
        let before = buf.clone();
        let page = Page::new(&before).unwrap();
        let span = page.record_span(index).unwrap();
        let r = page.record(index).unwrap();
        prop_assert_eq!(span.len(), record_len(r.key.len(), r.data.len()));
        prop_assert_eq!(&before[span.start + KEY_LEN_PREFIX..span.start + KEY_LEN_PREFIX + r.key.len()], r.key);
        let in_place = page.replaces_without_moving_bodies(index, new_len);
        let head = usize::from(page.header().first_free);
        let others: Vec<_> = (0..count).filter(|&i| i != index).map(|i| page.record_span(i).unwrap()).collect();
        let mut p = PageMut::new(&mut buf).unwrap();
        if p.replace_data(index, &vec![0xEE; new_len]).is_err() {
            return Ok(());
        }
        if in_place {
            for s in others {
                let end = s.end.min(head);
                prop_assert_eq!(&buf[s.start..end], &before[s.start..end]);
            }
        }
    }
}
