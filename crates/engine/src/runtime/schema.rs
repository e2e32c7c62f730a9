//! The data model every instance holds (engine.md §5): a mailbox table B+tree keyed by
//! (mailbox, message) with rows of a few hundred bytes, a long-value B+tree holding
//! message bodies over [`INLINE_BODY_MAX`] bytes in chunks, and a view index B+tree —
//! the secondary index Exchange keeps for a folder view — keyed by (mailbox, view sort
//! key, message) whose entries hold the row's bookmark (its primary key).
//!
//! Keys are big-endian so that byte order is key order. Message sizes are a pure
//! function of a seed and the message id, so a database can be described (and rebuilt,
//! or verified) without storing per-message state.

use edbstress_format::PageSize;
use edbstress_format::Pgno;

use crate::runtime::content::splitmix64;

/// Object id of the mailbox table B+tree.
pub const MAILBOX_TABLE_OBJECT_ID: u32 = 100;
/// Object id of the long-value (message body) B+tree.
pub const LONG_VALUE_OBJECT_ID: u32 = 101;
/// Fixed root page of the mailbox table (roots never move; splits push down).
pub const MAILBOX_TABLE_ROOT: Pgno = Pgno::new(1);
/// Fixed root page of the long-value tree.
pub const LONG_VALUE_ROOT: Pgno = Pgno::new(2);
/// Object id of the view index B+tree.
pub const VIEW_INDEX_OBJECT_ID: u32 = 102;
/// Fixed root page of the view index.
pub const VIEW_INDEX_ROOT: Pgno = Pgno::new(3);
/// The page whose `next` field heads the list of free pages (roots have no siblings,
/// so the field is free; keeping the head in a page makes every change to the list an
/// ordinary logged page change). 0 = empty list; each free page (flag EMPTY) links to
/// the next through its own `next` field.
pub const FREE_LIST_ANCHOR: Pgno = MAILBOX_TABLE_ROOT;
/// First page that is not a root.
pub const FIRST_NON_ROOT_PAGE: Pgno = Pgno::new(4);

/// Length of the mailbox-table and long-value keys.
pub const KEY_LEN: usize = 12;
/// Length of a view index key.
pub const VIEW_KEY_LEN: usize = 16;
/// Bodies up to this size live in the row itself.
pub const INLINE_BODY_MAX: u32 = 1024;
/// Bytes of a row before its properties: flags u8, body_len u32, lvid u64, received
/// u64, view sort key u32.
pub const ROW_FIXED_LEN: usize = 25;
/// Row flag: the body is stored in the long-value tree under the message id.
pub const ROW_FLAG_LONG_VALUE: u8 = 1;

/// Key of a mailbox table row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessageKey {
    /// Mailbox number, 0-based within the database.
    pub mailbox: u32,
    /// Message id, unique within the database: its place in the mailbox's rows
    /// ([`InsertKeyOrder`]). The message's sequence number is in its row
    /// ([`RowHeader::lvid`]).
    pub message: u64,
}

impl MessageKey {
    /// Big-endian encoding: mailbox then message.
    pub fn encode(self) -> [u8; KEY_LEN] {
        let mut k = [0u8; KEY_LEN];
        k[..4].copy_from_slice(&self.mailbox.to_be_bytes());
        k[4..].copy_from_slice(&self.message.to_be_bytes());
        k
    }

    /// Decodes a key written by [`MessageKey::encode`].
    pub fn decode(k: &[u8]) -> Option<MessageKey> {
        let k: &[u8; KEY_LEN] = k.try_into().ok()?;
        Some(MessageKey {
            mailbox: u32::from_be_bytes(k[..4].try_into().ok()?),
            message: u64::from_be_bytes(k[4..].try_into().ok()?),
        })
    }
}

/// Where a new message's row goes among its mailbox's rows: the order of the table's
/// keys. Jetstress's insert key order is not published (docs/fidelity.md); the profile
/// chooses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InsertKeyOrder {
    /// After every row of its mailbox (ids above every prepared one, growing): each
    /// mailbox's last leaf takes its inserts, ESE's hotpoint split keeps it full.
    #[default]
    Ascending,
    /// At a uniformly random place among its mailbox's rows: inserts land on any leaf of
    /// the table, which reads it, dirties it and splits it where it is full (halving,
    /// the split page's image logged).
    Random,
}

/// Ids at or above this sort after every prepared and randomly placed message.
pub const APPENDED_MESSAGE_BASE: u64 = 1 << 62;

/// The id of a prepared message: ordinal `ordinal` (in load order) of the `per_mailbox`
/// messages of `mailbox`. Prepared ids spread evenly over `0..APPENDED_MESSAGE_BASE`, in
/// load order, so randomly placed ids ([`random_message_id`]) land uniformly among a
/// mailbox's prepared rows; they are even (the random ones odd) and unique across
/// mailboxes (`2·mailbox` below the stride, which exceeds it while messages × mailboxes
/// stays below 2^61).
pub fn prepared_message_id(ordinal: u64, per_mailbox: u64, mailbox: u32) -> u64 {
    let stride = (APPENDED_MESSAGE_BASE / per_mailbox.max(1)) & !1;
    ordinal * stride + 2 * u64::from(mailbox)
}

/// The id of the message with sequence number `sequence` under `order`: above every
/// prepared id in sequence order, or a random place (an odd id below
/// [`APPENDED_MESSAGE_BASE`]; a bijection of the sequence number, so never the id of
/// another message).
pub fn new_message_id(order: InsertKeyOrder, sequence: u64) -> u64 {
    match order {
        InsertKeyOrder::Ascending => APPENDED_MESSAGE_BASE + sequence,
        InsertKeyOrder::Random => (mix61(sequence) << 1) | 1,
    }
}

/// A bijection of the 61-bit integers (xorshifts and odd multipliers modulo 2^61, each
/// invertible): consecutive inputs give unrelated outputs.
fn mix61(x: u64) -> u64 {
    const MASK: u64 = (1 << 61) - 1;
    let mut x = x & MASK;
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9) & MASK;
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB) & MASK;
    x ^ (x >> 31)
}

/// Key of a long-value chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LongValueKey {
    /// Long-value id (the owning message's sequence number: ids grow, as ESE's).
    pub lvid: u64,
    /// Chunk number within the value.
    pub chunk: u32,
}

impl LongValueKey {
    /// Big-endian encoding: lvid then chunk.
    pub fn encode(self) -> [u8; KEY_LEN] {
        let mut k = [0u8; KEY_LEN];
        k[..8].copy_from_slice(&self.lvid.to_be_bytes());
        k[8..].copy_from_slice(&self.chunk.to_be_bytes());
        k
    }

    /// Decodes a key written by [`LongValueKey::encode`].
    pub fn decode(k: &[u8]) -> Option<LongValueKey> {
        let k: &[u8; KEY_LEN] = k.try_into().ok()?;
        Some(LongValueKey {
            lvid: u64::from_be_bytes(k[..8].try_into().ok()?),
            chunk: u32::from_be_bytes(k[8..].try_into().ok()?),
        })
    }
}

/// Key of a view index entry: the mailbox, the message's view sort key (a hash standing
/// for the normalized subject or sender a view sorts by: not monotonic in insertion
/// order, so a new message lands at a random place of its mailbox's view), then the
/// message id (unique keys, as ESE appends the bookmark to a secondary key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ViewKey {
    /// Mailbox number.
    pub mailbox: u32,
    /// View sort key.
    pub sort: u32,
    /// Message id.
    pub message: u64,
}

impl ViewKey {
    /// The view key of the row `key` with view sort key `sort`.
    pub fn of(key: MessageKey, sort: u32) -> ViewKey {
        ViewKey {
            mailbox: key.mailbox,
            sort,
            message: key.message,
        }
    }

    /// The row this entry stands for.
    pub fn message_key(self) -> MessageKey {
        MessageKey {
            mailbox: self.mailbox,
            message: self.message,
        }
    }

    /// Big-endian encoding: mailbox, sort key, message.
    pub fn encode(self) -> [u8; VIEW_KEY_LEN] {
        let mut k = [0u8; VIEW_KEY_LEN];
        k[..4].copy_from_slice(&self.mailbox.to_be_bytes());
        k[4..8].copy_from_slice(&self.sort.to_be_bytes());
        k[8..].copy_from_slice(&self.message.to_be_bytes());
        k
    }

    /// Decodes a key written by [`ViewKey::encode`].
    pub fn decode(k: &[u8]) -> Option<ViewKey> {
        let k: &[u8; VIEW_KEY_LEN] = k.try_into().ok()?;
        Some(ViewKey {
            mailbox: u32::from_be_bytes(k[..4].try_into().ok()?),
            sort: u32::from_be_bytes(k[4..8].try_into().ok()?),
            message: u64::from_be_bytes(k[8..].try_into().ok()?),
        })
    }

    /// The entry's data: the bookmark (the row's [`MessageKey`], 12 bytes) then the
    /// normalized sort column the view orders by ([`sort_column_len`] bytes, a pure
    /// function of the sort key). ESE keeps that column in the index key; here the
    /// 4-byte sort key orders the entries and the column rides in the data, so an entry
    /// has a real index entry's size.
    /// Built inline (no allocation: one is inserted per message).
    pub fn entry_data(self) -> ViewEntryData {
        let len = KEY_LEN + sort_column_len(self.sort);
        let mut bytes = [0u8; VIEW_ENTRY_DATA_MAX];
        bytes[..KEY_LEN].copy_from_slice(&self.message_key().encode());
        let mut x = u64::from(self.sort) ^ 0x5157_0C01;
        let mut at = KEY_LEN;
        while at < len {
            x = splitmix64(x);
            let take = (len - at).min(8);
            bytes[at..at + take].copy_from_slice(&x.to_le_bytes()[..take]);
            at += take;
        }
        ViewEntryData { bytes, len }
    }
}

/// Longest view entry data: the bookmark and the longest sort column.
const VIEW_ENTRY_DATA_MAX: usize = KEY_LEN + 128;

/// A view index entry's data ([`ViewKey::entry_data`]), held inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewEntryData {
    bytes: [u8; VIEW_ENTRY_DATA_MAX],
    len: usize,
}

impl ViewEntryData {
    /// The data as a slice.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl std::ops::Deref for ViewEntryData {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Bytes of the normalized sort column a view entry carries: 16–128, ~72 on average
/// (a subject of ~36 characters normalized to two bytes each, ESE's sort keys for
/// Unicode text).
pub fn sort_column_len(sort: u32) -> usize {
    16 + (splitmix64(u64::from(sort) ^ 0xC01) % 113) as usize
}

/// Bytes a view index entry takes in a page.
pub fn view_entry_footprint(sort: u32) -> usize {
    2 + VIEW_KEY_LEN + KEY_LEN + sort_column_len(sort) + 4
}

/// The view sort key of a message inserted by a transaction: a hash of its id (it
/// stands for a subject or sender, unrelated to arrival order).
pub fn view_sort_key(message: u64) -> u32 {
    (splitmix64(message ^ 0x7669_6577) >> 32) as u32
}

/// Sizes of one message: its row properties and its body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageShape {
    /// Property bytes in the row.
    pub props_len: u32,
    /// Body length in bytes.
    pub body_len: u32,
}

/// `ShortPadLength` of Jetstress 2013's configuration: a column kept in the row.
pub const JETSTRESS_SHORT_PAD_LEN: u32 = 200;
/// `LongPadLength` of Jetstress 2013's configuration: over ESE's 1,023-byte limit of a
/// value kept in the record (`cbLVIntrinsicMost`), so a separate long value.
pub const JETSTRESS_LONG_PAD_LEN: u32 = 2000;

impl MessageShape {
    /// Jetstress's record, every record alike: its short pad in the row, its long pad
    /// as a long value (docs/fidelity.md, "The record").
    pub const JETSTRESS: MessageShape = MessageShape {
        props_len: JETSTRESS_SHORT_PAD_LEN,
        body_len: JETSTRESS_LONG_PAD_LEN,
    };

    /// The shape of message `message` in a database seeded with `seed`: Jetstress's
    /// record ([`MessageShape::JETSTRESS`]) for every message. The arguments stay so
    /// that prepare, transactions and checks name the message they size.
    pub fn of(_seed: u64, _message: u64) -> MessageShape {
        MessageShape::JETSTRESS
    }

    /// Whether the body lives in the long-value tree.
    pub fn has_long_value(self) -> bool {
        self.body_len > INLINE_BODY_MAX
    }

    /// Bytes of the row's data part.
    pub fn row_len(self) -> usize {
        let inline = if self.has_long_value() {
            0
        } else {
            self.body_len as usize
        };
        ROW_FIXED_LEN + self.props_len as usize + inline
    }

    /// Number of long-value chunks of the body (0 when inline).
    pub fn chunk_count(self, chunk_len: usize) -> u32 {
        if self.has_long_value() {
            (self.body_len as usize).div_ceil(chunk_len) as u32
        } else {
            0
        }
    }

    /// Length of chunk `chunk` of the body.
    pub fn chunk_data_len(self, chunk: u32, chunk_len: usize) -> usize {
        let start = chunk as usize * chunk_len;
        (self.body_len as usize - start).min(chunk_len)
    }
}

/// The fixed part of a mailbox-table row: flags u8, body_len u32, lvid u64, received
/// u64, view sort key u32 (little-endian), followed by the properties and, for small
/// bodies, the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowHeader {
    /// The body lives in the long-value tree under `lvid`.
    pub long: bool,
    /// Body length in bytes.
    pub body_len: u32,
    /// The message's sequence number, which is its long value's id when the body is
    /// one (numbers grow with each insert, as ESE's long-value ids do).
    pub lvid: u64,
    /// Received time (seconds), a property every message has.
    pub received: u64,
    /// The message's place in its mailbox's view (the view index key's middle part).
    pub sort: u32,
}

impl RowHeader {
    /// The header of a row for the message of sequence number `sequence` with a body
    /// of `body_len` bytes.
    pub fn for_message(sequence: u64, body_len: u32, received: u64, sort: u32) -> RowHeader {
        let long = body_len > INLINE_BODY_MAX;
        RowHeader {
            long,
            body_len,
            lvid: sequence,
            received,
            sort,
        }
    }

    /// Decodes the fixed part of `row`; None when the row is too short for it (or for
    /// its inline body).
    pub fn decode(row: &[u8]) -> Option<RowHeader> {
        let fixed: &[u8; ROW_FIXED_LEN] = row.get(..ROW_FIXED_LEN)?.try_into().ok()?;
        let long = fixed[0] & ROW_FLAG_LONG_VALUE != 0;
        let body_len = u32::from_le_bytes(fixed[1..5].try_into().ok()?);
        let header = RowHeader {
            long,
            body_len,
            lvid: u64::from_le_bytes(fixed[5..13].try_into().ok()?),
            received: u64::from_le_bytes(fixed[13..21].try_into().ok()?),
            sort: u32::from_le_bytes(fixed[21..25].try_into().ok()?),
        };
        (long || ROW_FIXED_LEN + body_len as usize <= row.len()).then_some(header)
    }

    /// Writes the fixed part into the first [`ROW_FIXED_LEN`] bytes of `row`.
    pub fn write(&self, row: &mut [u8]) {
        row[0] = if self.long { ROW_FLAG_LONG_VALUE } else { 0 };
        row[1..5].copy_from_slice(&self.body_len.to_le_bytes());
        row[5..13].copy_from_slice(&self.lvid.to_le_bytes());
        row[13..21].copy_from_slice(&self.received.to_le_bytes());
        row[21..25].copy_from_slice(&self.sort.to_le_bytes());
    }

    /// The inline body of `row` (empty for a long value).
    pub fn inline_body<'r>(&self, row: &'r [u8]) -> &'r [u8] {
        if self.long {
            &[]
        } else {
            &row[row.len() - self.body_len as usize..]
        }
    }

    /// The properties of `row`.
    pub fn props<'r>(&self, row: &'r [u8]) -> &'r [u8] {
        &row[ROW_FIXED_LEN..row.len() - self.inline_body(row).len()]
    }

    /// A whole row into `row` (emptied first; a buffer the caller reuses): this header,
    /// `props`, then `inline_body` (empty for long values).
    pub fn encode_into(&self, props: &[u8], inline_body: &[u8], row: &mut Vec<u8>) {
        row.clear();
        row.resize(ROW_FIXED_LEN + props.len() + inline_body.len(), 0);
        self.write(row);
        row[ROW_FIXED_LEN..ROW_FIXED_LEN + props.len()].copy_from_slice(props);
        row[ROW_FIXED_LEN + props.len()..].copy_from_slice(inline_body);
    }
}

/// Long-value chunk size for a page size: several chunks fill a page exactly
/// (4 per page for 16/32 KiB pages, 2 for smaller), never more than ~8 KB.
pub fn chunk_len(page_size: PageSize) -> usize {
    let per_page = if page_size.bytes() >= 16 * 1024 { 4 } else { 2 };
    let usable = page_size.bytes() - edbstress_format::PAGE_HEADER_LEN;
    usable / per_page - record_footprint(0)
}

/// Bytes a record with `data_len` data bytes and a [`KEY_LEN`] key takes in a page:
/// key length prefix, key, data and its tag.
pub const fn record_footprint(data_len: usize) -> usize {
    2 + KEY_LEN + data_len + 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_like_their_bytes() {
        let a = MessageKey {
            mailbox: 1,
            message: 500,
        };
        let b = MessageKey {
            mailbox: 2,
            message: 3,
        };
        assert!(a.encode() < b.encode());
        assert_eq!(MessageKey::decode(&a.encode()), Some(a));
        let c = LongValueKey {
            lvid: 7,
            chunk: 300,
        };
        let d = LongValueKey { lvid: 8, chunk: 0 };
        assert!(c.encode() < d.encode());
        assert_eq!(LongValueKey::decode(&d.encode()), Some(d));
        assert_eq!(LongValueKey::decode(&[1, 2]), None);
    }

    #[test]
    fn every_message_is_a_jetstress_record() {
        for m in [0u64, 1, 77, 1 << 40] {
            let shape = MessageShape::of(9, m);
            assert_eq!(shape, MessageShape::JETSTRESS);
            // The short pad in the row, the long pad outside it in one chunk.
            assert!(shape.has_long_value());
            assert_eq!(shape.row_len(), ROW_FIXED_LEN + 200);
            assert_eq!(shape.chunk_count(chunk_len(PageSize::K8)), 1);
            assert_eq!(shape.chunk_count(chunk_len(PageSize::K32)), 1);
        }
    }

    #[test]
    fn view_keys_sort_by_mailbox_then_sort_key() {
        let a = ViewKey {
            mailbox: 1,
            sort: u32::MAX,
            message: 1,
        };
        let b = ViewKey {
            mailbox: 2,
            sort: 0,
            message: 0,
        };
        let c = ViewKey {
            mailbox: 2,
            sort: 1,
            message: 0,
        };
        assert!(a.encode() < b.encode() && b.encode() < c.encode());
        assert_eq!(ViewKey::decode(&c.encode()), Some(c));
        assert_eq!(ViewKey::decode(&[0; 12]), None);
        // The entry holds the bookmark, then a column whose length the sort key decides.
        let data = a.entry_data();
        assert_eq!(MessageKey::decode(&data[..KEY_LEN]), Some(a.message_key()));
        assert_eq!(data.len(), KEY_LEN + sort_column_len(a.sort));
        assert_eq!(data, a.entry_data());
        let lens: Vec<usize> = (0..10_000u32)
            .map(|s| sort_column_len(s.wrapping_mul(2_654_435_761)))
            .collect();
        let mean = lens.iter().sum::<usize>() as f64 / lens.len() as f64;
        assert!((65.0..80.0).contains(&mean), "mean column {mean}");
        assert!(lens.iter().all(|l| (16..=128).contains(l)));
        // Sort keys of consecutive messages are not monotonic.
        let sorts: Vec<u32> = (1..100).map(view_sort_key).collect();
        assert!(sorts.windows(2).any(|w| w[0] > w[1]) && sorts.windows(2).any(|w| w[0] < w[1]));
    }

    fn encode(header: &RowHeader, props: &[u8], inline_body: &[u8]) -> Vec<u8> {
        // Into a dirty buffer: encoding must replace what was there.
        let mut row = vec![0xAB; 3];
        header.encode_into(props, inline_body, &mut row);
        row
    }

    #[test]
    fn rows_round_trip() {
        let inline = RowHeader::for_message(7, 5, 99, 0xDEAD_BEEF);
        let row = encode(&inline, b"props", b"hello");
        let back = RowHeader::decode(&row).unwrap();
        assert_eq!(back, inline);
        assert_eq!(
            (back.props(&row), back.inline_body(&row)),
            (&b"props"[..], &b"hello"[..])
        );
        let long = RowHeader::for_message(8, 50_000, 1, 3);
        assert!(long.long && long.lvid == 8);
        let row = encode(&long, b"p", &[]);
        let back = RowHeader::decode(&row).unwrap();
        assert_eq!(
            (back.props(&row), back.inline_body(&row)),
            (&b"p"[..], &[][..])
        );
        // Too short for its fixed part or for the inline body it claims.
        assert_eq!(RowHeader::decode(&row[..10]), None);
        let mut lying = encode(&inline, b"", b"hello");
        lying[1] = 200;
        assert_eq!(RowHeader::decode(&lying), None);
    }

    #[test]
    fn message_ids_are_unique_and_random_ones_spread_over_the_prepared() {
        let per_mailbox = 5_000;
        let mut prepared = Vec::new();
        for mailbox in 0..3 {
            let ids: Vec<u64> = (0..per_mailbox)
                .map(|i| prepared_message_id(i, per_mailbox, mailbox))
                .collect();
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "load order kept");
            assert!(
                ids.iter()
                    .all(|id| id % 2 == 0 && *id < APPENDED_MESSAGE_BASE)
            );
            prepared.extend(ids);
        }
        let random: Vec<u64> = (1..=20_000)
            .map(|s| new_message_id(InsertKeyOrder::Random, s))
            .collect();
        assert!(
            random
                .iter()
                .all(|id| id % 2 == 1 && *id < APPENDED_MESSAGE_BASE)
        );
        let mut all: Vec<u64> = prepared.iter().chain(&random).copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(
            all.len(),
            prepared.len() + random.len(),
            "an id given twice"
        );
        // Each tenth of a mailbox's prepared rows receives about a tenth of the inserts.
        let mailbox_0 = &prepared[..per_mailbox as usize];
        for tenth in 0..10 {
            let lo = mailbox_0[tenth * 500];
            let hi = mailbox_0
                .get(tenth * 500 + 500)
                .copied()
                .unwrap_or(APPENDED_MESSAGE_BASE);
            let share = random.iter().filter(|id| (lo..hi).contains(*id)).count();
            assert!((1_700..2_300).contains(&share), "tenth {tenth}: {share}");
        }
        let appended = new_message_id(InsertKeyOrder::Ascending, 1);
        assert!(prepared.iter().chain(&random).all(|id| *id < appended));
        assert!(appended < new_message_id(InsertKeyOrder::Ascending, 2));
    }

    #[test]
    fn chunks_fill_pages() {
        for ps in [PageSize::K4, PageSize::K8, PageSize::K16, PageSize::K32] {
            let len = chunk_len(ps);
            let per_page = if ps.bytes() >= 16 * 1024 { 4 } else { 2 };
            let used = per_page * record_footprint(len);
            assert!(used <= ps.bytes() - edbstress_format::PAGE_HEADER_LEN);
            assert!(len <= 8192);
        }
    }
}
