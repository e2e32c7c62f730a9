//! Database header: round trip, byte layout, error kinds, and choosing between the
//! primary and shadow copies.

use edbstress_format::header::{
    DB_MAGIC, FORMAT_VERSION, HEADER_REGION_LEN, HeaderCopy, creator_field,
};
use edbstress_format::{
    DatabaseHeader, DbState, Generation, HeaderError, InstanceId, LogPosition, PageSize, TreeRoot,
    block_checksum, select_header,
};
use proptest::prelude::*;

fn sample(update_seq: u64) -> DatabaseHeader {
    DatabaseHeader {
        format_version: FORMAT_VERSION,
        page_size: PageSize::K32,
        signature: 0x0123_4567_89AB_CDEF,
        created_unix: 1_700_000_000,
        state: DbState::DirtyNeedsRecovery,
        instance: InstanceId::new(3),
        update_seq,
        checkpoint: LogPosition {
            generation: Generation::new(0x1A),
            segment: 7,
            offset: 0x120,
        },
        last_dbtime: 987_654,
        page_count: 4096,
        next_unused_page: 3000,
        mailbox_tree: TreeRoot {
            object_id: 2,
            root: 1,
        },
        long_value_tree: TreeRoot {
            object_id: 3,
            root: 2,
        },
        mailbox_count: 500,
        content_ratio_permille: 550,
        record_count: 123_456,
        next_message_id: 777,
        log_signature: 0xFEDC_BA98_7654_3210,
        creator: creator_field("edbstress 0.1.0"),
        log_required: Generation::new(0x1B),
        view_index_tree: TreeRoot {
            object_id: 4,
            root: 3,
        },
    }
}

fn encoded(header: &DatabaseHeader) -> Vec<u8> {
    let mut slot = vec![0xEEu8; header.page_size.bytes()];
    header.encode(&mut slot);
    slot
}

#[test]
fn round_trip_and_layout() {
    let header = sample(5);
    let slot = encoded(&header);
    assert_eq!(DatabaseHeader::decode(&slot), Ok(header.clone()));
    assert_eq!(
        DatabaseHeader::decode(&slot[..HEADER_REGION_LEN]),
        Ok(header.clone())
    );
    let le32 = |o: usize| u32::from_le_bytes(slot[o..o + 4].try_into().unwrap());
    let le64 = |o: usize| u64::from_le_bytes(slot[o..o + 8].try_into().unwrap());
    assert_eq!(le64(0), block_checksum(&slot[..4096], 0, true));
    assert_eq!(slot[8..16], DB_MAGIC);
    assert_eq!(le32(16), FORMAT_VERSION);
    assert_eq!(le32(20), 32768);
    assert_eq!(le64(24), 0x0123_4567_89AB_CDEF);
    assert_eq!(le64(32), 1_700_000_000);
    assert_eq!(le32(40), 2);
    assert_eq!(le32(44), 3);
    assert_eq!(le64(48), 5);
    assert_eq!(le64(56), 0x1A_0007_0120);
    assert_eq!(le64(64), 987_654);
    assert_eq!(le32(72), 4096);
    assert_eq!(le32(76), 3000);
    assert_eq!((le32(80), le32(84), le32(88), le32(92)), (2, 1, 3, 2));
    assert_eq!((le32(96), le32(100)), (500, 550));
    assert_eq!(
        (le64(104), le64(112), le64(120)),
        (123_456, 777, 0xFEDC_BA98_7654_3210)
    );
    assert_eq!(&slot[128..143], b"edbstress 0.1.0");
    assert!(slot[143..160].iter().all(|&b| b == 0));
    assert_eq!(le32(160), 0x1B);
    assert_eq!((le32(164), le32(168)), (4, 3));
    assert!(slot[172..].iter().all(|&b| b == 0));
    assert_eq!(header.creator_str(), "edbstress 0.1.0");
}

#[test]
fn error_kinds() {
    let slot = encoded(&sample(1));
    assert_eq!(
        DatabaseHeader::decode(&vec![0u8; 32768]),
        Err(HeaderError::Uninitialized)
    );
    let mut damaged = slot.clone();
    damaged[200] ^= 4;
    assert_eq!(
        DatabaseHeader::decode(&damaged),
        Err(HeaderError::BadChecksum)
    );
    let foreign = vec![0x42u8; 32768];
    assert_eq!(DatabaseHeader::decode(&foreign), Err(HeaderError::NotOurs));

    let reseal = |mut s: Vec<u8>| {
        let sum = block_checksum(&s[..4096], 0, true);
        s[..8].copy_from_slice(&sum.to_le_bytes());
        s
    };
    // Another version (1: before the view index) is refused, naming the fix, with the
    // signatures that identify the database and its logs.
    for other in [1u8, 3] {
        let mut older = slot.clone();
        older[16] = other;
        let err = DatabaseHeader::decode(&reseal(older)).unwrap_err();
        assert_eq!(
            err,
            HeaderError::UnsupportedVersion {
                found: u32::from(other),
                signature: 0x0123_4567_89AB_CDEF,
                log_signature: 0xFEDC_BA98_7654_3210,
            }
        );
        let msg = err.to_string();
        assert!(
            msg.contains("--recreate") && msg.contains("edbstress clean"),
            "{msg}"
        );
    }
    let mut bad_state = slot.clone();
    bad_state[40] = 9;
    assert!(matches!(
        DatabaseHeader::decode(&reseal(bad_state)),
        Err(HeaderError::Invalid(_))
    ));
    // An instance number beyond 16 bits names no instance edbstress makes.
    let mut bad_instance = slot.clone();
    bad_instance[44..48].copy_from_slice(&70_000u32.to_le_bytes());
    match DatabaseHeader::decode(&reseal(bad_instance)) {
        Err(HeaderError::Invalid(what)) => assert!(what.contains("70000"), "{what}"),
        other => panic!("instance 70000 decoded as {other:?}"),
    }
    let mut bad_size = slot.clone();
    bad_size[20..24].copy_from_slice(&5000u32.to_le_bytes());
    assert!(matches!(
        DatabaseHeader::decode(&reseal(bad_size)),
        Err(HeaderError::Invalid(_))
    ));
    // Garbage after the 4 KiB region (not covered by the checksum) is rejected.
    let mut tail = slot.clone();
    tail[10_000] = 1;
    assert!(matches!(
        DatabaseHeader::decode(&tail),
        Err(HeaderError::Invalid(_))
    ));
    // A slot whose length is not the recorded page size.
    assert!(matches!(
        DatabaseHeader::decode(&slot[..8192]),
        Err(HeaderError::Invalid(_))
    ));
    assert!(matches!(
        DatabaseHeader::decode(&slot[..100]),
        Err(HeaderError::Invalid(_))
    ));
    assert!(
        HeaderError::NotOurs
            .to_string()
            .contains("not an edbstress database")
    );
}

#[test]
fn selection_prefers_the_newer_valid_copy() {
    let old = encoded(&sample(7));
    let new = encoded(&sample(8));

    let both = select_header(&old, &new).unwrap();
    assert_eq!(both.chosen, HeaderCopy::Shadow);
    assert_eq!(both.header.update_seq, 8);
    assert!(both.primary_valid && both.shadow_valid);

    let tie = select_header(&new, &new).unwrap();
    assert_eq!(tie.chosen, HeaderCopy::Primary);

    // Torn primary write: the shadow (older) is used and the damage is reported.
    let mut torn = new.clone();
    torn[100..4096].fill(0);
    let fallback = select_header(&torn, &old).unwrap();
    assert_eq!(fallback.chosen, HeaderCopy::Shadow);
    assert_eq!(fallback.header.update_seq, 7);
    assert_eq!(fallback.primary_error, Some(HeaderError::BadChecksum));
    assert!(fallback.shadow_valid && !fallback.primary_valid);

    let zero = vec![0u8; 32768];
    let only_primary = select_header(&new, &zero).unwrap();
    assert_eq!(only_primary.chosen, HeaderCopy::Primary);
    assert_eq!(only_primary.shadow_error, Some(HeaderError::Uninitialized));

    assert_eq!(select_header(&zero, &zero), Err(HeaderError::Uninitialized));
    assert_eq!(select_header(&torn, &zero), Err(HeaderError::BadChecksum));
    let foreign = vec![0x42u8; 32768];
    assert_eq!(select_header(&foreign, &foreign), Err(HeaderError::NotOurs));
    assert_eq!(select_header(&zero, &foreign), Err(HeaderError::NotOurs));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..5000)) {
        let _ = DatabaseHeader::decode(&bytes);
        let _ = select_header(&bytes, &bytes);
    }

    #[test]
    fn single_flips_are_detected(bit in 0usize..4096 * 8) {
        let slot = encoded(&sample(3));
        let mut damaged = slot.clone();
        damaged[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(DatabaseHeader::decode(&damaged).is_err());
        let selection = select_header(&damaged, &slot).unwrap();
        prop_assert_eq!(selection.chosen, HeaderCopy::Shadow);
    }

    #[test]
    fn round_trips(
        size in prop_oneof![Just(PageSize::K4), Just(PageSize::K8), Just(PageSize::K16), Just(PageSize::K32)],
        signature in any::<u64>(),
        seq in any::<u64>(),
        pages in any::<u32>(),
        state in prop_oneof![Just(DbState::Clean), Just(DbState::DirtyNeedsRecovery), Just(DbState::Creating)],
        creator in "\\PC{0,40}",
    ) {
        let mut header = DatabaseHeader::new(size, signature, 1, &creator);
        header.update_seq = seq;
        header.page_count = pages;
        header.state = state;
        let slot = encoded(&header);
        prop_assert_eq!(DatabaseHeader::decode(&slot), Ok(header.clone()));
        prop_assert!(creator.starts_with(header.creator_str()));
    }
}
