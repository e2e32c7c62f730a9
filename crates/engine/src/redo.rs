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

impl RedoOp {
    /// The op code stored in the log record.
    pub fn code(&self) -> u8 {
        match self {
            RedoOp::Insert { .. } => 1,
            RedoOp::Delete { .. } => 2,
            RedoOp::ReplaceData { .. } => 3,
            RedoOp::Build { .. } => 4,
            RedoOp::SetLinks { .. } => 5,
            RedoOp::Truncate { .. } => 6,
        }
    }

    /// The payload stored in the log record.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            RedoOp::Insert { index, key, data } => {
                out.extend_from_slice(&index.to_le_bytes());
                out.extend_from_slice(&(key.len() as u16).to_le_bytes());
                out.extend_from_slice(key);
                out.extend_from_slice(data);
            }
            RedoOp::Delete { index } => out.extend_from_slice(&index.to_le_bytes()),
            RedoOp::ReplaceData { index, data } => {
                out.extend_from_slice(&index.to_le_bytes());
                out.extend_from_slice(data);
            }
            RedoOp::Build {
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
                for (key, data) in records {
                    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
                    out.extend_from_slice(&(data.len() as u16).to_le_bytes());
                    out.extend_from_slice(key);
                    out.extend_from_slice(data);
                }
            }
            RedoOp::SetLinks { prev, next } => {
                out.extend_from_slice(&prev.to_le_bytes());
                out.extend_from_slice(&next.to_le_bytes());
            }
            RedoOp::Truncate { keep } => out.extend_from_slice(&keep.to_le_bytes()),
        }
        out
    }

    /// Decodes an op from a log record.
    pub fn decode(op: u8, payload: &[u8]) -> Result<RedoOp, RedoError> {
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
                RedoOp::Insert {
                    index,
                    key: key.to_vec(),
                    data: payload[4 + key_len..].to_vec(),
                }
            }
            2 => RedoOp::Delete { index: u16_at(0)? },
            3 => RedoOp::ReplaceData {
                index: u16_at(0)?,
                data: payload[2..].to_vec(),
            },
            4 => {
                let count = u16_at(16)? as usize;
                let mut records = Vec::with_capacity(count);
                let mut at = 18;
                for _ in 0..count {
                    let key_len = u16_at(at)? as usize;
                    let data_len = u16_at(at + 2)? as usize;
                    let key = payload
                        .get(at + 4..at + 4 + key_len)
                        .ok_or_else(|| err("record beyond payload"))?;
                    let data_at = at + 4 + key_len;
                    let data = payload
                        .get(data_at..data_at + data_len)
                        .ok_or_else(|| err("record beyond payload"))?;
                    records.push((key.to_vec(), data.to_vec()));
                    at = data_at + data_len;
                }
                RedoOp::Build {
                    object_id: u32_at(0)?,
                    flags: u32_at(4)?,
                    prev: u32_at(8)?,
                    next: u32_at(12)?,
                    records,
                }
            }
            5 => RedoOp::SetLinks {
                prev: u32_at(0)?,
                next: u32_at(4)?,
            },
            6 => RedoOp::Truncate { keep: u16_at(0)? },
            _ => return Err(err("unknown op code")),
        })
    }

    /// Applies the op to `page` (page number `pgno`) and sets its dbtime.
    pub fn apply(&self, page: &mut [u8], pgno: u32, dbtime: u64) -> Result<(), RedoError> {
        let err = |what: String| RedoError {
            op: self.code(),
            what,
        };
        if let RedoOp::Build {
            object_id,
            flags,
            prev,
            next,
            records,
        } = self
        {
            let mut p = PageMut::try_format(page, pgno, *object_id, *flags, dbtime)
                .map_err(|e| err(format!("cannot format page {pgno}: {e}")))?;
            p.set_prev(*prev);
            p.set_next(*next);
            for (key, data) in records {
                p.append(key, data)
                    .map_err(|e| err(format!("records do not fit: {e}")))?;
            }
            return Ok(());
        }
        let mut p =
            PageMut::new(page).map_err(|e| err(format!("page {pgno} is not a valid page: {e}")))?;
        let count = p.record_count();
        let in_range = |index: u16, limit: usize| {
            if usize::from(index) < limit {
                Ok(())
            } else {
                Err(err(format!("index {index} out of range ({count} records)")))
            }
        };
        match self {
            RedoOp::Insert { index, key, data } => {
                in_range(*index, count + 1)?;
                p.insert(usize::from(*index), key, data)
                    .map_err(|e| err(format!("insert does not fit: {e}")))?;
            }
            RedoOp::Delete { index } => {
                in_range(*index, count)?;
                p.delete(usize::from(*index));
            }
            RedoOp::ReplaceData { index, data } => {
                in_range(*index, count)?;
                p.replace_data(usize::from(*index), data)
                    .map_err(|e| err(format!("replace does not fit: {e}")))?;
            }
            RedoOp::SetLinks { prev, next } => {
                p.set_prev(*prev);
                p.set_next(*next);
            }
            RedoOp::Truncate { keep } => {
                in_range(*keep, count + 1)?;
                p.truncate(usize::from(*keep));
            }
            RedoOp::Build { .. } => unreachable!("handled above"),
        }
        p.set_dbtime(dbtime);
        Ok(())
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
            let decoded = RedoOp::decode(op.code(), &op.encode()).unwrap();
            assert_eq!(&decoded, op);
            decoded.apply(&mut page, 5, 10 + i as u64).unwrap();
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
        let decoded = RedoOp::decode(4, &build.encode()).unwrap();
        assert_eq!(decoded, build);
        let mut other = vec![0xEEu8; 8192];
        decoded.apply(&mut other, 6, 99).unwrap();
        assert_eq!(page_dbtime(&other), 99);
        let p = Page::new(&other).unwrap();
        assert_eq!(p.record_count(), 2);
        assert_eq!(
            (p.header().pgno, p.header().next, p.header().object_id),
            (6, 2, 7)
        );
    }

    #[test]
    fn bad_ops_are_errors_not_panics() {
        let mut page = vec![0u8; 8192];
        PageMut::format(&mut page, 5, 100, flags::LEAF, 1);
        assert!(RedoOp::Delete { index: 3 }.apply(&mut page, 5, 2).is_err());
        assert!(RedoOp::decode(1, &[0, 0, 50, 0, 1]).is_err());
        assert!(RedoOp::decode(99, &[]).is_err());
        assert!(RedoOp::decode(4, &[0; 17]).is_err());
        let mut garbage = vec![0xFFu8; 8192];
        assert!(
            RedoOp::Delete { index: 0 }
                .apply(&mut garbage, 5, 2)
                .is_err()
        );
    }
}
