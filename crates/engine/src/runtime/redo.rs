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
        prev: u32,
        /// Next leaf (0 for none).
        next: u32,
        /// Records in key order.
        records: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// Set the sibling links.
    SetLinks {
        /// Previous leaf.
        prev: u32,
        /// Next leaf.
        next: u32,
    },
    /// Remove every record from `keep` on.
    Truncate {
        /// Records kept.
        keep: u16,
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
        prev: u32,
        /// Next leaf (0 for none).
        next: u32,
        /// Records in key order.
        records: BuildRecords<'a>,
    },
    /// See [`RedoOp::SetLinks`].
    SetLinks {
        /// Previous leaf.
        prev: u32,
        /// Next leaf.
        next: u32,
    },
    /// See [`RedoOp::Truncate`].
    Truncate {
        /// Records kept.
        keep: u16,
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
        }
    }

    /// Length of the encoded payload.
    pub fn encoded_len(&self) -> usize {
        match self {
            RedoRef::Insert { key, data, .. } => 4 + key.len() + data.len(),
            RedoRef::Delete { .. } | RedoRef::Truncate { .. } => 2,
            RedoRef::ReplaceData { data, .. } => 2 + data.len(),
            RedoRef::Build { records, .. } => match records {
                BuildRecords::Encoded { bytes, .. } => 18 + bytes.len(),
                _ => {
                    let mut len = 18;
                    let _ = records.try_for_each(|k, d| {
                        len += 4 + k.len() + d.len();
                        Ok::<(), ()>(())
                    });
                    len
                }
            },
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
                for v in [object_id, flags, prev, next] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&(records.len() as u16).to_le_bytes());
                if let BuildRecords::Encoded { bytes, .. } = records {
                    out.extend_from_slice(bytes);
                } else {
                    let _ = records.try_for_each(|key, data| {
                        out.extend_from_slice(&(key.len() as u16).to_le_bytes());
                        out.extend_from_slice(&(data.len() as u16).to_le_bytes());
                        out.extend_from_slice(key);
                        out.extend_from_slice(data);
                        Ok::<(), ()>(())
                    });
                }
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
                let mut at = 0;
                for _ in 0..count {
                    at = split_record(bytes, at)
                        .ok_or_else(|| err("record beyond payload"))?
                        .2;
                }
                RedoRef::Build {
                    object_id: u32_at(0)?,
                    flags: u32_at(4)?,
                    prev: u32_at(8)?,
                    next: u32_at(12)?,
                    // Bytes after the last record are ignored, as they always were.
                    records: BuildRecords::Encoded {
                        count,
                        bytes: &bytes[..at],
                    },
                }
            }
            5 => RedoRef::SetLinks {
                prev: u32_at(0)?,
                next: u32_at(4)?,
            },
            6 => RedoRef::Truncate { keep: u16_at(0)? },
            _ => return Err(err("unknown op code")),
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
            } => {
                let mut owned = Vec::with_capacity(records.len());
                let _ = records.try_for_each(|k, d| {
                    owned.push((k.to_vec(), d.to_vec()));
                    Ok::<(), ()>(())
                });
                RedoOp::Build {
                    object_id,
                    flags,
                    prev,
                    next,
                    records: owned,
                }
            }
            RedoRef::SetLinks { prev, next } => RedoOp::SetLinks { prev, next },
            RedoRef::Truncate { keep } => RedoOp::Truncate { keep },
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
        if let RedoRef::Build {
            object_id,
            flags,
            prev,
            next,
            records,
        } = self
        {
            let mut p = PageMut::try_format(page, pgno.get(), *object_id, *flags, dbtime)
                .map_err(|e| err(format!("cannot format page {pgno}: {e}")))?;
            p.set_prev(*prev);
            p.set_next(*next);
            records.try_for_each(|key, data| {
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
            RedoRef::Build { .. } => unreachable!("handled above"),
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
            RedoOp::SetLinks { prev: 4, next: 9 },
            RedoOp::Delete { index: 1 },
            RedoOp::Truncate { keep: 0 },
        ];
        let mut page = vec![0u8; 8192];
        PageMut::format(&mut page, 5, 100, flags::LEAF, 1);
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
        assert_eq!((h.prev, h.next, h.dbtime, h.tag_count), (4, 9, 15, 0));
        let build = RedoOp::Build {
            object_id: 7,
            flags: flags::LEAF,
            prev: 1,
            next: 2,
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
            (6, 2, 7)
        );
    }

    #[test]
    fn borrowed_ops_encode_and_apply_exactly_like_owned_ones() {
        let records: [(&[u8], &[u8]); 3] = [(b"a", &[1; 40]), (b"b", &[]), (b"c", b"xyz")];
        let borrowed = [
            RedoRef::Build {
                object_id: 7,
                flags: flags::LEAF,
                prev: 1,
                next: 2,
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
            RedoRef::SetLinks { prev: 3, next: 0 },
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

    #[test]
    fn bad_ops_are_errors_not_panics() {
        let mut page = vec![0u8; 8192];
        PageMut::format(&mut page, 5, 100, flags::LEAF, 1);
        assert!(
            RedoOp::Delete { index: 3 }
                .apply(&mut page, Pgno::new(5), 2)
                .is_err()
        );
        assert!(RedoOp::decode(1, &[0, 0, 50, 0, 1]).is_err());
        assert!(RedoOp::decode(99, &[]).is_err());
        assert!(RedoOp::decode(4, &[0; 17]).is_err());
        let mut garbage = vec![0xFFu8; 8192];
        assert!(
            RedoOp::Delete { index: 0 }
                .apply(&mut garbage, Pgno::new(5), 2)
                .is_err()
        );
    }
}
