//! Slotted database pages: the 80-byte page header, a tag array at the end of the page
//! and record bodies growing up from the header.
//!
//! ```text
//! 0        80                      first_free          len - 4*tag_count     len
//! | header | record bodies (+ holes) | free (contiguous) | tags (tag i at len - 4(i+1)) |
//! ```
//!
//! Tag `i` is `offset u16, length u16` of record `i`; tags are kept in key order. A
//! record is `key_len u16, key, data`. Deleting a record leaves a zeroed hole;
//! [`PageMut::compact`] closes the holes, and [`PageMut::insert`] compacts by itself
//! when the free bytes exist but are not contiguous. The header's `free_bytes` counts
//! all space a new record plus its tag could use after compaction.
//!
//! [`Page::new`] and [`PageMut::new`] check the header and every tag before handing out
//! a view, so the accessors cannot read out of bounds, and a corrupt page gives a
//! [`PageFormatError`] rather than a panic. That check is O(tag count).

use std::cmp::Ordering;

use thiserror::Error;

use crate::bytes::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, try_get_u16};
use crate::{PAGE_HEADER_LEN, PageSize, Pgno};

/// Page flag bits (header offset 36).
pub mod flags {
    /// Root page of its B+tree.
    pub const ROOT: u32 = 1;
    /// Internal (branch) page.
    pub const BRANCH: u32 = 2;
    /// Leaf page.
    pub const LEAF: u32 = 4;
    /// Page is free / empty.
    pub const EMPTY: u32 = 8;
    /// Page belongs to the long-value tree.
    pub const LONG_VALUE: u32 = 16;
    /// Page belongs to a space tree.
    pub const SPACE_TREE: u32 = 32;
    /// Checksums use this crate's block scheme; set on every page edbstress writes.
    pub const NEW_CHECKSUM_FORMAT: u32 = 64;
}

/// Length of one tag (record offset u16, record length u16).
pub const TAG_LEN: usize = 4;
/// Length of the key-length prefix of every record.
pub const KEY_LEN_PREFIX: usize = 2;

const DBTIME: usize = 8;
const PREV: usize = 16;
const NEXT: usize = 20;
const OBJECT_ID: usize = 24;
const FREE_BYTES: usize = 28;
const RESERVED_30: usize = 30;
const FIRST_FREE: usize = 32;
const TAG_COUNT: usize = 34;
const FLAGS: usize = 36;
const PGNO: usize = 64;
const FLUSH_STAMP: usize = 68;

/// Largest encoded record (`2 + key.len() + data.len()`) that fits an empty page.
pub const fn max_record_len(page_size: PageSize) -> usize {
    page_size.bytes() - PAGE_HEADER_LEN - TAG_LEN
}

/// Largest `key.len() + data.len()` that fits an empty page.
pub const fn max_key_data_len(page_size: PageSize) -> usize {
    max_record_len(page_size) - KEY_LEN_PREFIX
}

/// Encoded length of a record: `2 + key_len + data_len`.
pub const fn record_len(key_len: usize, data_len: usize) -> usize {
    KEY_LEN_PREFIX + key_len + data_len
}

/// The decoded page header, minus the checksum fields (offsets 0 and 40..64), which
/// belong to [`crate::checksum`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PageHeader {
    /// Database modification counter when the page last changed (offset 8).
    pub dbtime: u64,
    /// Previous sibling page, [`Pgno::NONE`] for none (offset 16).
    pub prev: Pgno,
    /// Next sibling page, [`Pgno::NONE`] for none (offset 20).
    pub next: Pgno,
    /// B+tree the page belongs to (offset 24).
    pub object_id: u32,
    /// Bytes available for a new record plus its tag after compaction (offset 28).
    pub free_bytes: u16,
    /// Offset where the next record body goes (offset 32).
    pub first_free: u16,
    /// Number of records (offset 34).
    pub tag_count: u16,
    /// [`flags`] bits (offset 36).
    pub flags: u32,
    /// The page's own number (offset 64).
    pub pgno: Pgno,
    /// Flush stamp for lost-write detection (offset 68).
    pub flush_stamp: u32,
}

impl PageHeader {
    /// Reads the header fields of `page`.
    ///
    /// # Panics
    ///
    /// If `page` is shorter than [`PAGE_HEADER_LEN`].
    pub fn read(page: &[u8]) -> PageHeader {
        let page = &page[..PAGE_HEADER_LEN];
        PageHeader {
            dbtime: get_u64(page, DBTIME),
            prev: Pgno::new(get_u32(page, PREV)),
            next: Pgno::new(get_u32(page, NEXT)),
            object_id: get_u32(page, OBJECT_ID),
            free_bytes: get_u16(page, FREE_BYTES),
            first_free: get_u16(page, FIRST_FREE),
            tag_count: get_u16(page, TAG_COUNT),
            flags: get_u32(page, FLAGS),
            pgno: Pgno::new(get_u32(page, PGNO)),
            flush_stamp: get_u32(page, FLUSH_STAMP),
        }
    }

    /// Writes the header fields into `page`, zeroing the reserved fields (offsets 30
    /// and 72..80) and leaving the checksum fields (0..8, 40..64) untouched.
    ///
    /// # Panics
    ///
    /// If `page` is shorter than [`PAGE_HEADER_LEN`].
    pub fn write(&self, page: &mut [u8]) {
        let page = &mut page[..PAGE_HEADER_LEN];
        put_u64(page, DBTIME, self.dbtime);
        put_u32(page, PREV, self.prev.get());
        put_u32(page, NEXT, self.next.get());
        put_u32(page, OBJECT_ID, self.object_id);
        put_u16(page, FREE_BYTES, self.free_bytes);
        put_u16(page, RESERVED_30, 0);
        put_u16(page, FIRST_FREE, self.first_free);
        put_u16(page, TAG_COUNT, self.tag_count);
        put_u32(page, FLAGS, self.flags);
        put_u32(page, PGNO, self.pgno.get());
        put_u32(page, FLUSH_STAMP, self.flush_stamp);
        page[72..80].fill(0);
    }
}

/// A page's structure is inconsistent, or a record index is out of range.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PageFormatError {
    /// The buffer is not one of the supported page sizes.
    #[error(
        "page buffer of {len} bytes is not a supported page size (4, 8, 16 or 32 KiB); \
         pass a whole page"
    )]
    UnsupportedLength {
        /// Length of the buffer given.
        len: usize,
    },
    /// A header field contradicts the page geometry.
    #[error(
        "page header is corrupt: {detail}; the page fails structural checks, verify its \
         checksum and restore the database from a good copy"
    )]
    CorruptHeader {
        /// What is wrong.
        detail: String,
    },
    /// A tag points outside the record area or describes an impossible record.
    #[error(
        "tag {index} of the page is corrupt: {detail}; verify the page checksum and \
         restore the database from a good copy"
    )]
    CorruptTag {
        /// Index of the tag.
        index: usize,
        /// What is wrong.
        detail: &'static str,
    },
    /// Keys are not in ascending order (reported by [`Page::check`]).
    #[error(
        "records {index} and {next} of the page are out of key order; the B+tree \
         relies on sorted tags, restore the database from a good copy",
        next = index + 1
    )]
    KeysOutOfOrder {
        /// Index of the first record of the unordered pair.
        index: usize,
    },
    /// The record index is past the last record.
    #[error("record {index} does not exist: the page holds {count} records")]
    NoSuchRecord {
        /// Index asked for.
        index: usize,
        /// Number of records on the page.
        count: usize,
    },
}

/// A record does not fit the page's free space, even after compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error(
    "page full: the record needs {needed} bytes (body and tag) but only {available} are \
     free; split the page or store the value in the long-value tree"
)]
pub struct PageFull {
    /// Bytes the operation needs (record body plus a new tag where one is added).
    pub needed: usize,
    /// Bytes that would be free after compaction.
    pub available: usize,
}

/// One record of a page, borrowed from the page buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's key.
    pub key: &'a [u8],
    /// The record's data (everything after the key).
    pub data: &'a [u8],
}

/// Location of a record body, from its tag.
#[derive(Clone, Copy, Debug)]
struct Tag {
    offset: usize,
    len: usize,
}

fn tag_pos(page_len: usize, index: usize) -> usize {
    page_len - TAG_LEN * (index + 1)
}

fn read_tag(page: &[u8], index: usize) -> Tag {
    let at = tag_pos(page.len(), index);
    Tag {
        offset: usize::from(get_u16(page, at)),
        len: usize::from(get_u16(page, at + 2)),
    }
}

/// Decodes record `index` with every bound checked.
fn decode_record(page: &[u8], count: usize, index: usize) -> Result<Record<'_>, PageFormatError> {
    if index >= count {
        return Err(PageFormatError::NoSuchRecord { index, count });
    }
    let corrupt = |detail| PageFormatError::CorruptTag { index, detail };
    let outside = || corrupt("tag lies outside the page");
    let tags_start = page
        .len()
        .checked_sub(TAG_LEN * count)
        .ok_or_else(outside)?;
    let tag_at = page.len() - TAG_LEN * (index + 1);
    let offset = usize::from(try_get_u16(page, tag_at).ok_or_else(outside)?);
    let len = usize::from(try_get_u16(page, tag_at + 2).ok_or_else(outside)?);
    if offset < PAGE_HEADER_LEN {
        return Err(corrupt("record offset points into the page header"));
    }
    if len < KEY_LEN_PREFIX {
        return Err(corrupt("record is shorter than its key-length prefix"));
    }
    let body = page
        .get(offset..offset + len)
        .filter(|_| offset + len <= tags_start)
        .ok_or(corrupt("record extends past the record area"))?;
    let key_len = usize::from(get_u16(body, 0));
    if key_len > len - KEY_LEN_PREFIX {
        return Err(corrupt("key length exceeds the record length"));
    }
    let (key, data) = body[KEY_LEN_PREFIX..].split_at(key_len);
    Ok(Record { key, data })
}

/// Checks the header geometry and every tag; returns the record count.
fn validate(page: &[u8]) -> Result<usize, PageFormatError> {
    let (count, tags_start, first_free) = validate_geometry(page)?;
    let header = PageHeader::read(page);
    let corrupt = |detail: String| Err(PageFormatError::CorruptHeader { detail });
    let mut used = 0usize;
    for index in 0..count {
        let record = decode_record(page, count, index)?;
        let tag = read_tag(page, index);
        if tag.offset + tag.len > first_free {
            return Err(PageFormatError::CorruptTag {
                index,
                detail: "record lies beyond the first free offset",
            });
        }
        debug_assert_eq!(
            record.key.len() + record.data.len() + KEY_LEN_PREFIX,
            tag.len
        );
        used += tag.len;
    }
    let Some(free) = (tags_start - PAGE_HEADER_LEN).checked_sub(used) else {
        return corrupt(format!(
            "records total {used} bytes, more than the record area"
        ));
    };
    if usize::from(header.free_bytes) != free {
        return corrupt(format!(
            "free byte count {} disagrees with the records, which leave {free} bytes free",
            header.free_bytes
        ));
    }
    Ok(count)
}

/// Checks the page length, tag count and first free offset (O(1)); returns the record
/// count, where the tag array starts and the first free offset.
fn validate_geometry(page: &[u8]) -> Result<(usize, usize, usize), PageFormatError> {
    let len = page.len();
    if PageSize::from_bytes(len).is_none() {
        return Err(PageFormatError::UnsupportedLength { len });
    }
    let header = PageHeader::read(page);
    let count = usize::from(header.tag_count);
    let corrupt = |detail: String| Err(PageFormatError::CorruptHeader { detail });
    let Some(tags_start) = len.checked_sub(PAGE_HEADER_LEN + TAG_LEN * count) else {
        return corrupt(format!("{count} tags do not fit a {len}-byte page"));
    };
    let tags_start = tags_start + PAGE_HEADER_LEN;
    let first_free = usize::from(header.first_free);
    if first_free < PAGE_HEADER_LEN || first_free > tags_start {
        return corrupt(format!(
            "first free offset {first_free} is outside the record area {PAGE_HEADER_LEN}..{tags_start}"
        ));
    }
    Ok((count, tags_start, first_free))
}

fn search_in(page: &[u8], count: usize, key: &[u8]) -> Result<usize, usize> {
    let (mut low, mut high) = (0usize, count);
    while low < high {
        let mid = low + (high - low) / 2;
        // Validated at construction; an unreadable key compares as empty.
        let probe = decode_record(page, count, mid).map_or(&[][..], |r| r.key);
        match probe.cmp(key) {
            Ordering::Less => low = mid + 1,
            Ordering::Greater => high = mid,
            Ordering::Equal => return Ok(mid),
        }
    }
    Err(low)
}

/// Read-only view of a page whose structure has been checked.
#[derive(Clone, Copy, Debug)]
pub struct Page<'a> {
    buf: &'a [u8],
    count: usize,
}

impl<'a> Page<'a> {
    /// Wraps a page after checking its header and every tag (not the checksum; see
    /// [`crate::checksum::verify_page`]).
    pub fn new(buf: &'a [u8]) -> Result<Page<'a>, PageFormatError> {
        let count = validate(buf)?;
        Ok(Page { buf, count })
    }

    /// Wraps a page after checking only its header geometry (O(1)), for pages already
    /// checked with [`Page::new`] since they were read (a cache's pages). Record access
    /// stays bounds-checked: a damaged tag gives an error from [`Page::record`] (and
    /// compares as an empty key in [`Page::search`]), never a panic.
    pub fn new_unvalidated(buf: &'a [u8]) -> Result<Page<'a>, PageFormatError> {
        let (count, _, _) = validate_geometry(buf)?;
        Ok(Page { buf, count })
    }

    /// The decoded header.
    pub fn header(&self) -> PageHeader {
        PageHeader::read(self.buf)
    }

    /// Number of records.
    pub fn record_count(&self) -> usize {
        self.count
    }

    /// Record `index`, or an error when there is no such record.
    pub fn record(&self, index: usize) -> Result<Record<'a>, PageFormatError> {
        decode_record(self.buf, self.count, index)
    }

    /// Binary search for `key`: `Ok(index)` of the record with that key, or
    /// `Err(index)` where it would be inserted to keep the keys in order.
    pub fn search(&self, key: &[u8]) -> Result<usize, usize> {
        search_in(self.buf, self.count, key)
    }

    /// Bytes available for a new record plus its tag (after compaction).
    pub fn free_space(&self) -> usize {
        usize::from(get_u16(self.buf, FREE_BYTES))
    }

    /// Whether a record with this key and data length would fit (compacting if needed).
    pub fn fits(&self, key_len: usize, data_len: usize) -> bool {
        record_len(key_len, data_len) + TAG_LEN <= self.free_space()
    }

    /// Whether inserting a record of this size writes its body at the first free
    /// offset without compacting: the bodies already on the page stay byte for byte
    /// (only the header, the tag array and the free bytes change). False when it would
    /// not fit at all.
    pub fn inserts_without_moving_bodies(&self, key_len: usize, data_len: usize) -> bool {
        let first_free = usize::from(self.header().first_free);
        let tags_start = self.buf.len().saturating_sub(TAG_LEN * self.count);
        let needed = record_len(key_len, data_len) + TAG_LEN;
        needed <= self.free_space() && first_free + needed <= tags_start
    }

    /// Where record `index`'s body (key-length prefix, key and data) lies on the page,
    /// as its tag says; None when there is no such record or its tag is damaged.
    pub fn record_span(&self, index: usize) -> Option<std::ops::Range<usize>> {
        decode_record(self.buf, self.count, index).ok()?;
        let tag = read_tag(self.buf, index);
        Some(tag.offset..tag.offset + tag.len)
    }

    /// Whether [`PageMut::replace_data`] of record `index` with `data_len` bytes of data
    /// rewrites no body but that record's own old one and bytes from the first free
    /// offset on (it fits in place, or at the first free offset once the old body is
    /// freed): false when it would compact the page (or there is no such record).
    pub fn replaces_without_moving_bodies(&self, index: usize, data_len: usize) -> bool {
        let Ok(record) = decode_record(self.buf, self.count, index) else {
            return false;
        };
        let old = read_tag(self.buf, index);
        let new_len = record_len(record.key.len(), data_len);
        if new_len <= old.len {
            return true;
        }
        let first_free = usize::from(self.header().first_free);
        // `release_body` gives the old body back to the contiguous free area when it
        // is the last one.
        let first_free = if old.offset + old.len == first_free {
            old.offset
        } else {
            first_free
        };
        let tags_start = self.buf.len().saturating_sub(TAG_LEN * self.count);
        first_free + new_len <= tags_start
    }

    /// Full consistency check beyond what [`Page::new`] checks: keys in ascending
    /// order, records not overlapping, reserved fields zero.
    pub fn check(&self) -> Result<(), PageFormatError> {
        check_page(self.buf, self.count)
    }

    /// The whole page buffer.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.buf
    }
}

fn check_page(page: &[u8], count: usize) -> Result<(), PageFormatError> {
    if get_u16(page, RESERVED_30) != 0 || page[72..80].iter().any(|&b| b != 0) {
        return Err(PageFormatError::CorruptHeader {
            detail: "reserved header fields (offsets 30 and 72..80) are not zero".into(),
        });
    }
    let mut previous: Option<&[u8]> = None;
    let mut extents = Vec::with_capacity(count);
    for index in 0..count {
        let record = decode_record(page, count, index)?;
        if previous.is_some_and(|p| p >= record.key) {
            return Err(PageFormatError::KeysOutOfOrder { index: index - 1 });
        }
        previous = Some(record.key);
        let tag = read_tag(page, index);
        extents.push((tag.offset, tag.offset + tag.len, index));
    }
    extents.sort_unstable();
    for pair in extents.windows(2) {
        if pair[1].0 < pair[0].1 {
            return Err(PageFormatError::CorruptTag {
                index: pair[1].2,
                detail: "record overlaps another record",
            });
        }
    }
    Ok(())
}

/// Mutable view of a page; every operation keeps the header, tags and free-byte
/// count consistent.
#[derive(Debug)]
pub struct PageMut<'a> {
    buf: &'a mut [u8],
    count: usize,
}

impl<'a> PageMut<'a> {
    /// Zeroes `buf` and initialises it as an empty page (flags always include
    /// [`flags::NEW_CHECKSUM_FORMAT`]). Checksums are not set: seal the page before
    /// writing it (see [`PageMut::seal`]).
    ///
    /// # Panics
    ///
    /// If `buf.len()` is not a [`PageSize`]; see [`PageMut::try_format`].
    pub fn format(
        buf: &'a mut [u8],
        pgno: Pgno,
        object_id: u32,
        page_flags: u32,
        dbtime: u64,
    ) -> PageMut<'a> {
        match Self::try_format(buf, pgno, object_id, page_flags, dbtime) {
            Ok(page) => page,
            Err(err) => panic!("{err}"),
        }
    }

    /// [`PageMut::format`], returning an error for a buffer that is not page-sized.
    pub fn try_format(
        buf: &'a mut [u8],
        pgno: Pgno,
        object_id: u32,
        page_flags: u32,
        dbtime: u64,
    ) -> Result<PageMut<'a>, PageFormatError> {
        let len = buf.len();
        if PageSize::from_bytes(len).is_none() {
            return Err(PageFormatError::UnsupportedLength { len });
        }
        buf.fill(0);
        let header = PageHeader {
            dbtime,
            prev: Pgno::NONE,
            next: Pgno::NONE,
            object_id,
            // At most 32768 - 80: fits the u16 field.
            free_bytes: (len - PAGE_HEADER_LEN) as u16,
            first_free: PAGE_HEADER_LEN as u16,
            tag_count: 0,
            flags: page_flags | flags::NEW_CHECKSUM_FORMAT,
            pgno,
            flush_stamp: 0,
        };
        header.write(buf);
        Ok(PageMut { buf, count: 0 })
    }

    /// Wraps an existing page after checking its header and every tag.
    pub fn new(buf: &'a mut [u8]) -> Result<PageMut<'a>, PageFormatError> {
        let count = validate(buf)?;
        Ok(PageMut { buf, count })
    }

    /// Wraps a page after checking only its header geometry (O(1)), for pages checked
    /// with [`PageMut::new`] or [`Page::new`] since they were read and changed only
    /// through `PageMut` since (a cache's pages): the per-tag check of `new` is what
    /// makes every later operation safe, so it must have happened once.
    pub fn new_unvalidated(buf: &'a mut [u8]) -> Result<PageMut<'a>, PageFormatError> {
        let (count, _, _) = validate_geometry(buf)?;
        Ok(PageMut { buf, count })
    }

    /// Read-only view of the same page.
    pub fn as_page(&self) -> Page<'_> {
        Page {
            buf: self.buf,
            count: self.count,
        }
    }

    /// The decoded header.
    pub fn header(&self) -> PageHeader {
        PageHeader::read(self.buf)
    }

    /// Sets the dbtime field.
    pub fn set_dbtime(&mut self, dbtime: u64) {
        put_u64(self.buf, DBTIME, dbtime);
    }

    /// Sets the previous-sibling field.
    pub fn set_prev(&mut self, prev: Pgno) {
        put_u32(self.buf, PREV, prev.get());
    }

    /// Sets the next-sibling field.
    pub fn set_next(&mut self, next: Pgno) {
        put_u32(self.buf, NEXT, next.get());
    }

    /// Sets the object id field.
    pub fn set_object_id(&mut self, object_id: u32) {
        put_u32(self.buf, OBJECT_ID, object_id);
    }

    /// Sets the flags; [`flags::NEW_CHECKSUM_FORMAT`] is always kept set.
    pub fn set_flags(&mut self, flags: u32) {
        put_u32(self.buf, FLAGS, flags | flags::NEW_CHECKSUM_FORMAT);
    }

    /// Sets the page-number field (the checksum also binds the page number, see
    /// [`PageMut::seal`]).
    pub fn set_pgno(&mut self, pgno: Pgno) {
        put_u32(self.buf, PGNO, pgno.get());
    }

    /// Sets the flush-stamp field.
    pub fn set_flush_stamp(&mut self, flush_stamp: u32) {
        put_u32(self.buf, FLUSH_STAMP, flush_stamp);
    }

    /// Number of records.
    pub fn record_count(&self) -> usize {
        self.count
    }

    /// Record `index`, or an error when there is no such record.
    pub fn record(&self, index: usize) -> Result<Record<'_>, PageFormatError> {
        decode_record(self.buf, self.count, index)
    }

    /// Binary search for `key`: `Ok(index)` of the record with that key, or
    /// `Err(index)` where it would be inserted to keep the keys in order.
    pub fn search(&self, key: &[u8]) -> Result<usize, usize> {
        search_in(self.buf, self.count, key)
    }

    /// Bytes available for a new record plus its tag (after compaction).
    pub fn free_space(&self) -> usize {
        usize::from(get_u16(self.buf, FREE_BYTES))
    }

    /// Whether a record with this key and data length would fit (compacting if needed).
    pub fn fits(&self, key_len: usize, data_len: usize) -> bool {
        record_len(key_len, data_len) + TAG_LEN <= self.free_space()
    }

    /// The whole page buffer.
    pub fn as_bytes(&self) -> &[u8] {
        self.buf
    }

    /// Stamps the page number from the header and the checksums
    /// ([`crate::checksum::seal_page`]); do this last, right before writing the page.
    pub fn seal(&mut self) {
        let pgno = get_u32(self.buf, PGNO);
        crate::checksum::seal_page(self.buf, Pgno::new(pgno));
    }

    fn first_free(&self) -> usize {
        usize::from(get_u16(self.buf, FIRST_FREE))
    }

    fn set_first_free(&mut self, offset: usize) {
        put_u16(self.buf, FIRST_FREE, offset as u16);
    }

    fn set_free_bytes(&mut self, free: usize) {
        put_u16(self.buf, FREE_BYTES, free as u16);
    }

    fn set_count(&mut self, count: usize) {
        self.count = count;
        put_u16(self.buf, TAG_COUNT, count as u16);
    }

    fn write_tag(&mut self, index: usize, tag: Tag) {
        let at = tag_pos(self.buf.len(), index);
        put_u16(self.buf, at, tag.offset as u16);
        put_u16(self.buf, at + 2, tag.len as u16);
    }

    /// Start of the tag array.
    fn tags_start(&self) -> usize {
        self.buf.len() - TAG_LEN * self.count
    }

    fn contiguous_free(&self) -> usize {
        self.tags_start() - self.first_free()
    }

    /// Writes a record body at `first_free`; the caller made sure it fits.
    fn place_body(&mut self, key: &[u8], data: &[u8]) -> Tag {
        let offset = self.first_free();
        let len = record_len(key.len(), data.len());
        put_u16(self.buf, offset, key.len() as u16);
        let key_end = offset + KEY_LEN_PREFIX + key.len();
        self.buf[offset + KEY_LEN_PREFIX..key_end].copy_from_slice(key);
        self.buf[key_end..offset + len].copy_from_slice(data);
        self.set_first_free(offset + len);
        Tag { offset, len }
    }

    /// Zeroes a freed record body, and gives it back to the contiguous free area when
    /// it is the last body.
    fn release_body(&mut self, tag: Tag) {
        self.buf[tag.offset..tag.offset + tag.len].fill(0);
        if tag.offset + tag.len == self.first_free() {
            self.set_first_free(tag.offset);
        }
    }

    /// Checks that a new record (with a new tag when `new_tag`) fits, compacting when
    /// the space exists but is fragmented.
    fn make_room(&mut self, body_len: usize, new_tag: bool) -> Result<(), PageFull> {
        let needed = body_len + if new_tag { TAG_LEN } else { 0 };
        let available = self.free_space();
        if needed > available {
            return Err(PageFull { needed, available });
        }
        if needed > self.contiguous_free() {
            self.compact();
        }
        debug_assert!(needed <= self.contiguous_free());
        Ok(())
    }

    /// Adds a record after the last one without searching: the bulk-load fast path.
    /// The caller guarantees `key` sorts after every key on the page.
    pub fn append(&mut self, key: &[u8], data: &[u8]) -> Result<(), PageFull> {
        let count = self.count;
        self.insert(count, key, data)
    }

    /// Inserts a record as record `index` (from [`PageMut::search`]), shifting later
    /// records up by one.
    ///
    /// # Panics
    ///
    /// If `index > record_count()`.
    pub fn insert(&mut self, index: usize, key: &[u8], data: &[u8]) -> Result<(), PageFull> {
        assert!(
            index <= self.count,
            "insert index {index} past record count {}",
            self.count
        );
        let body_len = record_len(key.len(), data.len());
        if key.len() > usize::from(u16::MAX) || body_len > usize::from(u16::MAX) {
            return Err(PageFull {
                needed: body_len + TAG_LEN,
                available: self.free_space(),
            });
        }
        self.make_room(body_len, true)?;
        let tag = self.place_body(key, data);
        // Tags i.. move one slot towards the page start.
        let start = self.tags_start();
        let end = tag_pos(self.buf.len(), index) + TAG_LEN;
        self.buf.copy_within(start..end, start - TAG_LEN);
        self.set_count(self.count + 1);
        self.write_tag(index, tag);
        self.set_free_bytes(self.free_space() - body_len - TAG_LEN);
        Ok(())
    }

    /// Removes record `index`, shifting later records down by one.
    ///
    /// # Panics
    ///
    /// If `index >= record_count()`.
    pub fn delete(&mut self, index: usize) {
        assert!(
            index < self.count,
            "delete index {index} past record count {}",
            self.count
        );
        let tag = read_tag(self.buf, index);
        self.release_body(tag);
        let start = self.tags_start();
        let end = tag_pos(self.buf.len(), index);
        self.buf.copy_within(start..end, start + TAG_LEN);
        self.buf[start..start + TAG_LEN].fill(0);
        self.set_count(self.count - 1);
        self.set_free_bytes(self.free_space() + tag.len + TAG_LEN);
    }

    /// Removes records `keep..`, leaving the first `keep` (for page splits: copy the
    /// upper records to the new page, then truncate). Does nothing if `keep >=
    /// record_count()`.
    pub fn truncate(&mut self, keep: usize) {
        while self.count > keep {
            self.delete(self.count - 1);
        }
    }

    /// Replaces the data of record `index`, keeping its key and position.
    ///
    /// # Panics
    ///
    /// If `index >= record_count()`.
    pub fn replace_data(&mut self, index: usize, data: &[u8]) -> Result<(), PageFull> {
        assert!(
            index < self.count,
            "replace index {index} past record count {}",
            self.count
        );
        let old = read_tag(self.buf, index);
        let key_len = usize::from(get_u16(self.buf, old.offset));
        let new_len = record_len(key_len, data.len());
        if new_len <= old.len {
            let data_at = old.offset + KEY_LEN_PREFIX + key_len;
            self.buf[data_at..data_at + data.len()].copy_from_slice(data);
            let freed = Tag {
                offset: old.offset + new_len,
                len: old.len - new_len,
            };
            self.release_body(freed);
            self.write_tag(
                index,
                Tag {
                    offset: old.offset,
                    len: new_len,
                },
            );
            self.set_free_bytes(self.free_space() + freed.len);
            return Ok(());
        }
        let available = self.free_space() + old.len;
        if new_len > available || new_len > usize::from(u16::MAX) {
            return Err(PageFull {
                needed: new_len,
                available,
            });
        }
        let key =
            self.buf[old.offset + KEY_LEN_PREFIX..old.offset + KEY_LEN_PREFIX + key_len].to_vec();
        // Drop the old body first so compaction can reuse its space.
        self.release_body(old);
        self.write_tag(index, Tag { offset: 0, len: 0 });
        self.set_free_bytes(self.free_space() + old.len);
        if new_len > self.contiguous_free() {
            self.compact();
        }
        let tag = self.place_body(&key, data);
        self.write_tag(index, tag);
        self.set_free_bytes(self.free_space() - new_len);
        Ok(())
    }

    /// Moves all record bodies together right after the header, in tag order, and
    /// zeroes the space freed; afterwards all free space is contiguous.
    pub fn compact(&mut self) {
        let mut bodies = Vec::with_capacity(self.first_free() - PAGE_HEADER_LEN);
        let mut tags = Vec::with_capacity(self.count);
        for index in 0..self.count {
            let tag = read_tag(self.buf, index);
            // A zero-length tag is a record being replaced: it has no body yet.
            let offset = PAGE_HEADER_LEN + bodies.len();
            bodies.extend_from_slice(&self.buf[tag.offset..tag.offset + tag.len]);
            tags.push(Tag {
                offset: if tag.len == 0 { 0 } else { offset },
                len: tag.len,
            });
        }
        let end = PAGE_HEADER_LEN + bodies.len();
        let tags_start = self.tags_start();
        self.buf[PAGE_HEADER_LEN..end].copy_from_slice(&bodies);
        self.buf[end..tags_start].fill(0);
        for (index, tag) in tags.into_iter().enumerate() {
            self.write_tag(index, tag);
        }
        self.set_first_free(end);
    }
}
