//! Page-level redo operations: what a `PageRedo` log record's `op` and `payload` mean,
//! and how they are applied — identically when a transaction commits and when recovery
//! replays the log, so both produce the same page bytes.
//!
//! Payload encodings (little-endian):
//!
//! | op | name | payload |
//! |---|---|---|
//! | 1 | Insert | index u16, key_len u16, key, data |
//! | 2 | Delete | index u16 |
//! | 3 | ReplaceData | index u16, data |
//! | 4 | Build | object_id u32, flags u32, prev u32, next u32, count u16, then per record key_len u16, data_len u16, key, data |
//! | 5 | SetLinks | prev u32, next u32 |
//! | 6 | Truncate | keep u16 (records from `keep` on are removed) |
//! | 7 | BuildFromSplit | object_id u32, flags u32, prev u32, next u32, first u16, count u16, then the `count` records of the split page's before image as in Build; the page gets records `first..` (log format version 2) |

use edbstress_format::Pgno;
use edbstress_format::page::{PageHeader, PageMut};

/// One change to one page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedoOp {
    /// Insert a record at a tag index.
    Insert {
        /// Tag index.
        index: u16,
        /// Key.
        key: Vec<u8>,
        /// Data.
        data: Vec<u8>,
    },
    /// Delete the record at a tag index.
    Delete {
        /// Tag index.
        index: u16,
    },
    /// Replace the data of the record at a tag index.
    ReplaceData {
        /// Tag index.
        index: u16,
        /// New data.
        data: Vec<u8>,
    },
    /// Format the page afresh with these records (new pages, split halves, root splits).
    Build {
        /// B+tree the page belongs to.
        object_id: u32,
        /// Page flags.
        flags: u32,
        /// Previous leaf (0 for none).
        prev: Pgno,
        /// Next leaf (0 for none).
        next: Pgno,
        /// Records in key order.
        records: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// Set the sibling links.
    SetLinks {
        /// Previous leaf.
        prev: Pgno,
        /// Next leaf.
        next: Pgno,
    },
    /// Remove every record from `keep` on.
    Truncate {
        /// Records kept.
        keep: u16,
    },
    /// Format the page afresh with the records `first..` of `image`: the new page of a
    /// split that moves records, logged as ESE logs such a split — with the split
    /// page's before image (its records, without free space) — so the new page is
    /// rebuilt from the log alone.
    BuildFromSplit {
        /// B+tree the page belongs to.
        object_id: u32,
        /// Page flags.
        flags: u32,
        /// Previous leaf (0 for none).
        prev: Pgno,
        /// Next leaf (0 for none).
        next: Pgno,
        /// First record of the image that moves to this page.
        first: u16,
        /// Every record of the split page before the split, in key order.
        image: Vec<(Vec<u8>, Vec<u8>)>,
    },
}

/// Why a redo record cannot be decoded or applied.
#[derive(Debug, thiserror::Error)]
#[error("redo op {op}: {what}")]
pub struct RedoError {
    /// The op code.
    pub op: u8,
    /// What is wrong.
    pub what: String,
}

/// Records of a [`RedoRef::Build`], borrowed.
#[derive(Clone, Copy, Debug)]
pub enum BuildRecords<'a> {
    /// (key, data) pairs.
    Pairs(&'a [(&'a [u8], &'a [u8])]),
    /// The records of an owned [`RedoOp::Build`].
    Owned(&'a [(Vec<u8>, Vec<u8>)]),
    /// `count` records in their payload encoding (key_len u16, data_len u16, key,
    /// data), already checked to lie within `bytes`.
    Encoded {
        /// Number of records.
        count: usize,
        /// The encoded records.
        bytes: &'a [u8],
    },
}

impl BuildRecords<'_> {
    /// Bytes of the records in their payload encoding.
    fn encoded_len(&self) -> usize {
        match self {
            BuildRecords::Encoded { bytes, .. } => bytes.len(),
            _ => {
                let mut len = 0;
                let _ = self.try_for_each(|k, d| {
                    len += 4 + k.len() + d.len();
                    Ok::<(), ()>(())
                });
                len
            }
        }
    }

    /// Appends the records in their payload encoding to `out`.
    fn encode_into(&self, out: &mut Vec<u8>) {
        if let BuildRecords::Encoded { bytes, .. } = self {
            out.extend_from_slice(bytes);
            return;
        }
        let _ = self.try_for_each(|key, data| {
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(&(data.len() as u16).to_le_bytes());
            out.extend_from_slice(key);
            out.extend_from_slice(data);
            Ok::<(), ()>(())
        });
    }

    /// Owned copies of the records.
    fn to_owned_records(self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut owned = Vec::with_capacity(self.len());
        let _ = self.try_for_each(|k, d| {
            owned.push((k.to_vec(), d.to_vec()));
            Ok::<(), ()>(())
        });
        owned
    }

    fn len(&self) -> usize {
        match self {
            BuildRecords::Pairs(pairs) => pairs.len(),
            BuildRecords::Owned(records) => records.len(),
            BuildRecords::Encoded { count, .. } => *count,
        }
    }

    /// Calls `f(key, data)` for every record in order, stopping at the first error.
    fn try_for_each<E>(&self, mut f: impl FnMut(&[u8], &[u8]) -> Result<(), E>) -> Result<(), E> {
        match self {
            BuildRecords::Pairs(pairs) => pairs.iter().try_for_each(|(k, d)| f(k, d)),
            BuildRecords::Owned(records) => records.iter().try_for_each(|(k, d)| f(k, d)),
            BuildRecords::Encoded { count, bytes } => {
                let mut at = 0;
                for _ in 0..*count {
                    // Bounds were checked by `RedoRef::decode`; `split_record` re-checks
                    // without panicking.
                    let Some((key, data, next)) = split_record(bytes, at) else {
                        break;
                    };
                    f(key, data)?;
                    at = next;
                }
                Ok(())
            }
        }
    }
}

/// The encoded Build record at `at` of `bytes`: (key, data, offset after it).
fn split_record(bytes: &[u8], at: usize) -> Option<(&[u8], &[u8], usize)> {
    let header = bytes.get(at..at + 4)?;
    let key_len = usize::from(u16::from_le_bytes([header[0], header[1]]));
    let data_len = usize::from(u16::from_le_bytes([header[2], header[3]]));
    let key = bytes.get(at + 4..at + 4 + key_len)?;
    let data_at = at + 4 + key_len;
    let data = bytes.get(data_at..data_at + data_len)?;
    Some((key, data, data_at + data_len))
}

/// Length of the first `count` encoded Build records of `bytes`, or None when they
/// run past its end.
fn encoded_records_len(bytes: &[u8], count: usize) -> Option<usize> {
    let mut at = 0;
    for _ in 0..count {
        at = split_record(bytes, at)?.2;
    }
    Some(at)
}

/// A redo operation whose byte fields are borrowed: what the commit path encodes
/// straight into a log payload and applies from it, without intermediate copies.
/// [`RedoOp`] is its owned form; both share this encoding and application code, so a
/// committed page and a replayed one are byte-identical.
#[derive(Clone, Copy, Debug)]
pub enum RedoRef<'a> {
    /// See [`RedoOp::Insert`].
    Insert {
        /// Tag index.
        index: u16,
        /// Key.
        key: &'a [u8],
        /// Data.
        data: &'a [u8],
    },
    /// See [`RedoOp::Delete`].
    Delete {
        /// Tag index.
        index: u16,
    },
    /// See [`RedoOp::ReplaceData`].
    ReplaceData {
        /// Tag index.
        index: u16,
        /// New data.
        data: &'a [u8],
    },
    /// See [`RedoOp::Build`].
    Build {
        /// B+tree the page belongs to.
        object_id: u32,
        /// Page flags.
        flags: u32,
        /// Previous leaf (0 for none).
        prev: Pgno,
        /// Next leaf (0 for none).
        next: Pgno,
        /// Records in key order.
        records: BuildRecords<'a>,
    },
    /// See [`RedoOp::SetLinks`].
    SetLinks {
        /// Previous leaf.
        prev: Pgno,
        /// Next leaf.
        next: Pgno,
    },
    /// See [`RedoOp::Truncate`].
    Truncate {
        /// Records kept.
        keep: u16,
    },
    /// See [`RedoOp::BuildFromSplit`].
    BuildFromSplit {
        /// B+tree the page belongs to.
        object_id: u32,
        /// Page flags.
        flags: u32,
        /// Previous leaf (0 for none).
        prev: Pgno,
        /// Next leaf (0 for none).
        next: Pgno,
        /// First record of the image that moves to this page.
        first: u16,
        /// Every record of the split page before the split.
        image: BuildRecords<'a>,
    },
}

impl<'a> RedoRef<'a> {
    /// The op code stored in the log record.
    pub fn code(&self) -> u8 {
        match self {
            RedoRef::Insert { .. } => 1,
            RedoRef::Delete { .. } => 2,
            RedoRef::ReplaceData { .. } => 3,
            RedoRef::Build { .. } => 4,
            RedoRef::SetLinks { .. } => 5,
            RedoRef::Truncate { .. } => 6,
            RedoRef::BuildFromSplit { .. } => 7,
        }
    }

    /// Length of the encoded payload.
    pub fn encoded_len(&self) -> usize {
        match self {
            RedoRef::Insert { key, data, .. } => 4 + key.len() + data.len(),
            RedoRef::Delete { .. } | RedoRef::Truncate { .. } => 2,
            RedoRef::ReplaceData { data, .. } => 2 + data.len(),
            RedoRef::Build { records, .. } => 18 + records.encoded_len(),
            RedoRef::BuildFromSplit { image, .. } => 20 + image.encoded_len(),
            RedoRef::SetLinks { .. } => 8,
        }
    }

    /// Appends the payload stored in the log record to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        match self {
            RedoRef::Insert { index, key, data } => {
                out.extend_from_slice(&index.to_le_bytes());
                out.extend_from_slice(&(key.len() as u16).to_le_bytes());
                out.extend_from_slice(key);
                out.extend_from_slice(data);
            }
            RedoRef::Delete { index } => out.extend_from_slice(&index.to_le_bytes()),
            RedoRef::ReplaceData { index, data } => {
                out.extend_from_slice(&index.to_le_bytes());
                out.extend_from_slice(data);
            }
            RedoRef::Build {
                object_id,
                flags,
                prev,
                next,
                records,
            } => {
                for v in [object_id, flags, &prev.get(), &next.get()] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&(records.len() as u16).to_le_bytes());
                records.encode_into(out);
            }
            RedoRef::BuildFromSplit {
                object_id,
                flags,
                prev,
                next,
                first,
                image,
            } => {
                for v in [object_id, flags, &prev.get(), &next.get()] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&first.to_le_bytes());
                out.extend_from_slice(&(image.len() as u16).to_le_bytes());
                image.encode_into(out);
            }
            RedoRef::SetLinks { prev, next } => {
                out.extend_from_slice(&prev.to_le_bytes());
                out.extend_from_slice(&next.to_le_bytes());
            }
            RedoRef::Truncate { keep } => out.extend_from_slice(&keep.to_le_bytes()),
        }
    }

    /// The payload as a new vector of exactly its length.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out
    }

    /// Decodes an op from a log record's payload, borrowing its bytes.
    pub fn decode(op: u8, payload: &'a [u8]) -> Result<RedoRef<'a>, RedoError> {
        let err = |what: &str| RedoError {
            op,
            what: what.to_string(),
        };
        let u16_at = |at: usize| -> Result<u16, RedoError> {
            payload
                .get(at..at + 2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
                .ok_or_else(|| err("payload too short"))
        };
        let u32_at = |at: usize| -> Result<u32, RedoError> {
            payload
                .get(at..at + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or_else(|| err("payload too short"))
        };
        Ok(match op {
            1 => {
                let index = u16_at(0)?;
                let key_len = u16_at(2)? as usize;
                let key = payload
                    .get(4..4 + key_len)
                    .ok_or_else(|| err("key beyond payload"))?;
                RedoRef::Insert {
                    index,
                    key,
                    data: &payload[4 + key_len..],
                }
            }
            2 => RedoRef::Delete { index: u16_at(0)? },
            3 => RedoRef::ReplaceData {
                index: u16_at(0)?,
                data: &payload[2..],
            },
            4 => {
                let count = u16_at(16)? as usize;
                let bytes = &payload[18..];
                let at = encoded_records_len(bytes, count)
                    .ok_or_else(|| err("record beyond payload"))?;
                RedoRef::Build {
                    object_id: u32_at(0)?,
                    flags: u32_at(4)?,
                    prev: Pgno::new(u32_at(8)?),
                    next: Pgno::new(u32_at(12)?),
                    // Bytes after the last record are ignored, as they always were.
                    records: BuildRecords::Encoded {
                        count,
                        bytes: &bytes[..at],
                    },
                }
            }
            5 => RedoRef::SetLinks {
                prev: Pgno::new(u32_at(0)?),
                next: Pgno::new(u32_at(4)?),
            },
            6 => RedoRef::Truncate { keep: u16_at(0)? },
            7 => {
                let first = u16_at(16)?;
                let count = u16_at(18)? as usize;
                if usize::from(first) > count {
                    return Err(err("first moved record beyond the image"));
                }
                let bytes = &payload[20..];
                let at = encoded_records_len(bytes, count)
                    .ok_or_else(|| err("record beyond payload"))?;
                RedoRef::BuildFromSplit {
                    object_id: u32_at(0)?,
                    flags: u32_at(4)?,
                    prev: Pgno::new(u32_at(8)?),
                    next: Pgno::new(u32_at(12)?),
                    first,
                    image: BuildRecords::Encoded {
                        count,
                        bytes: &bytes[..at],
                    },
                }
            }
            _ => {
                return Err(err(
                    "unknown op code (a log written by a newer edbstress? use a matching release)",
                ));
            }
        })
    }

    /// The owned form.
    pub fn to_owned_op(self) -> RedoOp {
        match self {
            RedoRef::Insert { index, key, data } => RedoOp::Insert {
                index,
                key: key.to_vec(),
                data: data.to_vec(),
            },
            RedoRef::Delete { index } => RedoOp::Delete { index },
            RedoRef::ReplaceData { index, data } => RedoOp::ReplaceData {
                index,
                data: data.to_vec(),
            },
            RedoRef::Build {
                object_id,
                flags,
                prev,
                next,
                records,
            } => RedoOp::Build {
                object_id,
                flags,
                prev,
                next,
                records: records.to_owned_records(),
            },
            RedoRef::SetLinks { prev, next } => RedoOp::SetLinks { prev, next },
            RedoRef::Truncate { keep } => RedoOp::Truncate { keep },
            RedoRef::BuildFromSplit {
                object_id,
                flags,
                prev,
                next,
                first,
                image,
            } => RedoOp::BuildFromSplit {
                object_id,
                flags,
                prev,
                next,
                first,
                image: image.to_owned_records(),
            },
        }
    }

    /// Applies the op to `page` (page number `pgno`) and sets its dbtime, after
    /// checking the page's header and every tag.
    pub fn apply(&self, page: &mut [u8], pgno: Pgno, dbtime: u64) -> Result<(), RedoError> {
        self.apply_checked(page, pgno, dbtime, true)
    }

    /// [`RedoRef::apply`] to a page that was checked when read and changed only through
    /// `PageMut` since (a cached page): only its header geometry is checked (O(1)).
    pub fn apply_to_checked_page(
        &self,
        page: &mut [u8],
        pgno: Pgno,
        dbtime: u64,
    ) -> Result<(), RedoError> {
        self.apply_checked(page, pgno, dbtime, false)
    }

    fn apply_checked(
        &self,
        page: &mut [u8],
        pgno: Pgno,
        dbtime: u64,
        check_tags: bool,
    ) -> Result<(), RedoError> {
        let err = |what: String| RedoError {
            op: self.code(),
            what,
        };
        let build = match *self {
            RedoRef::Build {
                object_id,
                flags,
                prev,
                next,
                records,
            } => Some((object_id, flags, prev, next, 0, records)),
            RedoRef::BuildFromSplit {
                object_id,
                flags,
                prev,
                next,
                first,
                image,
            } => Some((object_id, flags, prev, next, usize::from(first), image)),
            _ => None,
        };
        if let Some((object_id, flags, prev, next, first, records)) = build {
            let mut p = PageMut::try_format(page, pgno, object_id, flags, dbtime)
                .map_err(|e| err(format!("cannot format page {pgno}: {e}")))?;
            p.set_prev(prev);
            p.set_next(next);
            let mut i = 0;
            records.try_for_each(|key, data| {
                i += 1;
                if i <= first {
                    return Ok(());
                }
                p.append(key, data)
                    .map_err(|e| err(format!("records do not fit: {e}")))
            })?;
            return Ok(());
        }
        let mut p = if check_tags {
            PageMut::new(page)
        } else {
            PageMut::new_unvalidated(page)
        }
        .map_err(|e| err(format!("page {pgno} is not a valid page: {e}")))?;
        let count = p.record_count();
        let in_range = |index: u16, limit: usize| {
            if usize::from(index) < limit {
                Ok(())
            } else {
                Err(err(format!("index {index} out of range ({count} records)")))
            }
        };
        match *self {
            RedoRef::Insert { index, key, data } => {
                in_range(index, count + 1)?;
                p.insert(usize::from(index), key, data)
                    .map_err(|e| err(format!("insert does not fit: {e}")))?;
            }
            RedoRef::Delete { index } => {
                in_range(index, count)?;
                p.delete(usize::from(index));
            }
            RedoRef::ReplaceData { index, data } => {
                in_range(index, count)?;
                p.replace_data(usize::from(index), data)
                    .map_err(|e| err(format!("replace does not fit: {e}")))?;
            }
            RedoRef::SetLinks { prev, next } => {
                p.set_prev(prev);
                p.set_next(next);
            }
            RedoRef::Truncate { keep } => {
                in_range(keep, count + 1)?;
                p.truncate(usize::from(keep));
            }
            RedoRef::Build { .. } | RedoRef::BuildFromSplit { .. } => {
                unreachable!("handled above")
            }
        }
        p.set_dbtime(dbtime);
        Ok(())
    }
}

impl RedoOp {
    /// The borrowed form.
    pub fn as_ref(&self) -> RedoRef<'_> {
        match self {
            RedoOp::Insert { index, key, data } => RedoRef::Insert {
                index: *index,
                key,
                data,
            },
            RedoOp::Delete { index } => RedoRef::Delete { index: *index },
            RedoOp::ReplaceData { index, data } => RedoRef::ReplaceData {
                index: *index,
                data,
            },
            RedoOp::Build {
                object_id,
                flags,
                prev,
                next,
                records,
            } => RedoRef::Build {
                object_id: *object_id,
                flags: *flags,
                prev: *prev,
                next: *next,
                records: BuildRecords::Owned(records),
            },
            RedoOp::SetLinks { prev, next } => RedoRef::SetLinks {
                prev: *prev,
                next: *next,
            },
            RedoOp::Truncate { keep } => RedoRef::Truncate { keep: *keep },
            RedoOp::BuildFromSplit {
                object_id,
                flags,
                prev,
                next,
                first,
                image,
            } => RedoRef::BuildFromSplit {
                object_id: *object_id,
                flags: *flags,
                prev: *prev,
                next: *next,
                first: *first,
                image: BuildRecords::Owned(image),
            },
        }
    }

    /// Decodes an op from a log record.
    pub fn decode(op: u8, payload: &[u8]) -> Result<RedoOp, RedoError> {
        RedoRef::decode(op, payload).map(|op| op.to_owned_op())
    }

    /// Applies the op to `page` (page number `pgno`) and sets its dbtime.
    pub fn apply(&self, page: &mut [u8], pgno: Pgno, dbtime: u64) -> Result<(), RedoError> {
        self.as_ref().apply(page, pgno, dbtime)
    }
}

/// The dbtime of a page in memory.
pub fn page_dbtime(page: &[u8]) -> u64 {
    PageHeader::read(page).dbtime
}

#[cfg(test)]
mod tests {
    use super::*;
    use edbstress_format::page::{Page, flags};

    #[test]
    fn ops_round_trip_and_apply() {
        let ops = [
            RedoOp::Insert {
                index: 0,
                key: b"k1".to_vec(),
                data: b"value".to_vec(),
            },
            RedoOp::Insert {
                index: 1,
                key: b"k2".to_vec(),
                data: vec![7; 300],
            },
            RedoOp::ReplaceData {
                index: 0,
                data: b"longer value".to_vec(),
            },
            RedoOp::SetLinks {
                prev: Pgno::new(4),
                next: Pgno::new(9),
            },
            RedoOp::Delete { index: 1 },
            RedoOp::Truncate { keep: 0 },
        ];
        let mut page = vec![0u8; 8192];
        PageMut::format(&mut page, Pgno::new(5), 100, flags::LEAF, 1);
        for (i, op) in ops.iter().enumerate() {
            let decoded = RedoOp::decode(op.as_ref().code(), &op.as_ref().encode()).unwrap();
            assert_eq!(&decoded, op);
            decoded
                .apply(&mut page, Pgno::new(5), 10 + i as u64)
                .unwrap();
            if i == 2 {
                let p = Page::new(&page).unwrap();
                assert_eq!(p.record(0).unwrap().data, b"longer value");
                assert_eq!(p.record_count(), 2);
            }
        }
        let h = PageHeader::read(&page);
        assert_eq!(
            (h.prev.get(), h.next.get(), h.dbtime, h.tag_count),
            (4, 9, 15, 0)
        );
        let build = RedoOp::Build {
            object_id: 7,
            flags: flags::LEAF,
            prev: Pgno::new(1),
            next: Pgno::new(2),
            records: vec![(b"a".to_vec(), vec![1; 40]), (b"b".to_vec(), vec![])],
        };
        let decoded = RedoOp::decode(4, &build.as_ref().encode()).unwrap();
        assert_eq!(decoded, build);
        let mut other = vec![0xEEu8; 8192];
        decoded.apply(&mut other, Pgno::new(6), 99).unwrap();
        assert_eq!(page_dbtime(&other), 99);
        let p = Page::new(&other).unwrap();
        assert_eq!(p.record_count(), 2);
        assert_eq!(
            (p.header().pgno, p.header().next, p.header().object_id),
            (Pgno::new(6), Pgno::new(2), 7)
        );
    }

    #[test]
    fn borrowed_ops_encode_and_apply_exactly_like_owned_ones() {
        let records: [(&[u8], &[u8]); 3] = [(b"a", &[1; 40]), (b"b", &[]), (b"c", b"xyz")];
        let borrowed = [
            RedoRef::Build {
                object_id: 7,
                flags: flags::LEAF,
                prev: Pgno::new(1),
                next: Pgno::new(2),
                records: BuildRecords::Pairs(&records),
            },
            RedoRef::Insert {
                index: 1,
                key: b"bb",
                data: &[9; 500],
            },
            RedoRef::ReplaceData {
                index: 0,
                data: b"shorter",
            },
            RedoRef::SetLinks {
                prev: Pgno::new(3),
                next: Pgno::NONE,
            },
            RedoRef::Delete { index: 2 },
            RedoRef::Truncate { keep: 1 },
        ];
        let mut via_borrowed = vec![0u8; 8192];
        let mut via_owned = vec![0u8; 8192];
        for (i, op) in borrowed.iter().enumerate() {
            let payload = op.encode();
            assert_eq!(payload.len(), op.encoded_len());
            let owned = op.to_owned_op();
            assert_eq!(owned.as_ref().encode(), payload, "op {i}");
            assert_eq!(owned.as_ref().code(), op.code());
            // What a commit applies: the decoded payload, to a page checked earlier.
            let decoded = RedoRef::decode(op.code(), &payload).unwrap();
            assert_eq!(decoded.encode(), payload, "op {i}");
            let dbtime = 20 + i as u64;
            decoded
                .apply_to_checked_page(&mut via_borrowed, Pgno::new(6), dbtime)
                .unwrap();
            // What recovery applies: the owned op decoded from the log.
            RedoOp::decode(op.code(), &payload)
                .unwrap()
                .apply(&mut via_owned, Pgno::new(6), dbtime)
                .unwrap();
            assert_eq!(via_borrowed, via_owned, "page after op {i}");
        }
        let p = Page::new(&via_borrowed).unwrap();
        assert_eq!(p.record_count(), 1);
        assert_eq!(p.record(0).unwrap().data, b"shorter");
        // Bytes after a Build's records are not part of it, as before.
        let mut padded = borrowed[0].encode();
        padded.extend_from_slice(&[0xAB; 3]);
        assert_eq!(
            RedoRef::decode(4, &padded).unwrap().encode(),
            borrowed[0].encode()
        );
    }

    /// A split logged with the split page's before image formats the new page exactly
    /// as a Build of the moved records would, from the log record alone.
    #[test]
    fn build_from_split_takes_the_moved_records_of_the_image() {
        let image: [(&[u8], &[u8]); 4] = [
            (b"a", &[1; 40]),
            (b"b", &[]),
            (b"c", b"xyz"),
            (b"d", &[4; 900]),
        ];
        let split = RedoRef::BuildFromSplit {
            object_id: 7,
            flags: flags::LEAF,
            prev: Pgno::new(3),
            next: Pgno::new(9),
            first: 2,
            image: BuildRecords::Pairs(&image),
        };
        let payload = split.encode();
        assert_eq!(payload.len(), split.encoded_len());
        assert_eq!(
            payload.len(),
            20 + (4 + 1 + 40) + (4 + 1) + (4 + 1 + 3) + (4 + 1 + 900)
        );
        let owned = RedoOp::decode(7, &payload).unwrap();
        assert_eq!(owned.as_ref().encode(), payload);
        let mut from_split = vec![0xEEu8; 8192];
        owned.apply(&mut from_split, Pgno::new(6), 40).unwrap();
        let moved = &image[2..];
        let build = RedoRef::Build {
            object_id: 7,
            flags: flags::LEAF,
            prev: Pgno::new(3),
            next: Pgno::new(9),
            records: BuildRecords::Pairs(moved),
        };
        let mut from_build = vec![0u8; 8192];
        build.apply(&mut from_build, Pgno::new(6), 40).unwrap();
        assert_eq!(from_split, from_build, "the same page, byte for byte");
        let p = Page::new(&from_split).unwrap();
        assert_eq!(p.record_count(), 2);
        assert_eq!(p.record(0).unwrap().key, b"c");
        // All of the image may stay (nothing moves) or move.
        for first in [0u16, 4] {
            let op = RedoRef::BuildFromSplit {
                object_id: 7,
                flags: flags::LEAF,
                prev: Pgno::new(3),
                next: Pgno::new(9),
                first,
                image: BuildRecords::Pairs(&image),
            };
            let mut page = vec![0u8; 8192];
            RedoRef::decode(7, &op.encode())
                .unwrap()
                .apply_to_checked_page(&mut page, Pgno::new(6), 41)
                .unwrap();
            assert_eq!(
                Page::new(&page).unwrap().record_count(),
                4 - usize::from(first)
            );
        }
    }

    #[test]
    fn bad_ops_are_errors_not_panics() {
        let mut page = vec![0u8; 8192];
        PageMut::format(&mut page, Pgno::new(5), 100, flags::LEAF, 1);
        assert!(
            RedoOp::Delete { index: 3 }
                .apply(&mut page, Pgno::new(5), 2)
                .is_err()
        );
        assert!(RedoOp::decode(1, &[0, 0, 50, 0, 1]).is_err());
        assert!(RedoOp::decode(99, &[]).is_err());
        assert!(RedoOp::decode(4, &[0; 17]).is_err());
        // A split image: cut short, or a first moved record past its records.
        let image: [(&[u8], &[u8]); 2] = [(b"a", &[1; 10]), (b"b", &[2; 10])];
        let split = RedoRef::BuildFromSplit {
            object_id: 1,
            flags: flags::LEAF,
            prev: Pgno::new(0),
            next: Pgno::new(0),
            first: 1,
            image: BuildRecords::Pairs(&image),
        }
        .encode();
        assert!(RedoOp::decode(7, &split[..split.len() - 1]).is_err());
        assert!(RedoOp::decode(7, &split[..19]).is_err());
        let mut past = split.clone();
        past[16] = 3;
        assert!(RedoOp::decode(7, &past).is_err());
        let mut garbage = vec![0xFFu8; 8192];
        assert!(
            RedoOp::Delete { index: 0 }
                .apply(&mut garbage, Pgno::new(5), 2)
                .is_err()
        );
    }
}
