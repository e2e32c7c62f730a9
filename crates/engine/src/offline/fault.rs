//! Fault injection (`edbstress inject`, hidden): damages edbstress's own files the way
//! storage can — flipped bits, torn writes, misdirected writes, zeroed pages, dropped
//! writes (lost flushes), corrupt log segments and checkpoint copies — and reports
//! exactly what it did and how `checksum` / `recover` must classify it, so tests and
//! users can check detection.
//!
//! Everything is deterministic from a seed. Only files carrying edbstress's signature
//! are touched (database header magic, log file header magic, checkpoint magic): a
//! fault injector must never damage a foreign file.
//!
//! Expected classifications (docs/reliability.md):
//! - `bitflip` with 1 bit → correctable at that bit; with 2 bits → bad (3 or more
//!   bits in one checksum block go beyond the checksum's guarantee: expected bad, but
//!   a few in a thousand such faults alias to a one-bit correction, as with ESE's);
//! - `torn` (a new sealed version of the page, of which only the first k sectors
//!   reached the disk) → bad (the new and old versions differ in at least 8 bits of
//!   the part that was not written, so one-bit "correction" cannot apply);
//! - `misdirect` (page A's bytes written at page B) → wrong page number naming A;
//! - `zero` → uninitialized;
//! - `lost-flush` (the storage drops a page write during real transactions) → recovery
//!   reports a lost flush of that page;
//! - `log-segment` (2 bits flipped in a used segment) → bad log segment;
//! - `checkpoint` (one copy corrupted) → one valid copy; both → `checksum` reports no
//!   valid copy, naming `E00.chk` (recovery then falls back to the older checkpoint
//!   recorded in the database header, which is safe).

use std::path::{Path, PathBuf};

use edbstress_format::Generation;
use edbstress_format::checksum::seal_page;
use edbstress_format::header::HeaderError;
use edbstress_format::log::{
    CHECKPOINT_COPY_LEN, CHECKPOINT_FILE_NAME, LogFileHeader, SEGMENT_LEN, SegmentLen,
    parse_log_file_name,
};
use edbstress_format::{PageSize, Pgno};
use edbstress_io::blocking::FileIo;
use edbstress_io::{Access, AlignedBuf, DataFile, IoClass, IoError, IoMode};
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::dbfile::{HeaderReadError, read_header_from};
use crate::error::EngineError;
use crate::runtime::instance::{Durability, Instance, InstanceConfig, TxnOp};

/// Magic bytes at offset 8 of a log file header.
const LOG_MAGIC: &[u8; 8] = b"EDBSLOG\0";
/// Magic bytes at offset 8 of a checkpoint copy.
const CHECKPOINT_MAGIC: &[u8; 8] = b"EDBSCHK\0";
/// Granularity of a torn write: what a device writes atomically.
const SECTOR: usize = 4096;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Flip bits of a data page.
    Bitflip,
    /// A page write of which only a prefix of whole sectors reached the disk.
    Torn,
    /// Another page's bytes written over a page.
    Misdirect,
    /// A page overwritten with zeros.
    Zero,
    /// A page write acknowledged but dropped, during real transactions.
    LostFlush,
    /// Bits flipped in a used log segment.
    LogSegment,
    /// A checkpoint file copy corrupted.
    Checkpoint,
}

impl FaultKind {
    /// Every kind, in the order of the CLI's help.
    pub const ALL: [FaultKind; 7] = [
        FaultKind::Bitflip,
        FaultKind::Torn,
        FaultKind::Misdirect,
        FaultKind::Zero,
        FaultKind::LostFlush,
        FaultKind::LogSegment,
        FaultKind::Checkpoint,
    ];

    /// The CLI name (`bitflip`, `torn`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Bitflip => "bitflip",
            FaultKind::Torn => "torn",
            FaultKind::Misdirect => "misdirect",
            FaultKind::Zero => "zero",
            FaultKind::LostFlush => "lost-flush",
            FaultKind::LogSegment => "log-segment",
            FaultKind::Checkpoint => "checkpoint",
        }
    }

    /// Whether the fault is applied to a database file (else to a log directory;
    /// `lost-flush` needs both).
    pub fn targets_database(self) -> bool {
        matches!(
            self,
            FaultKind::Bitflip | FaultKind::Torn | FaultKind::Misdirect | FaultKind::Zero
        )
    }
}

impl std::str::FromStr for FaultKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FaultKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = FaultKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown fault kind '{s}': use one of {}", names.join(", "))
            })
    }
}

/// How verification must classify an injected fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExpectedDetection {
    /// `checksum`: the page is correctable at this bit.
    Correctable {
        /// Bit index within the page.
        bit: u32,
    },
    /// `checksum`: the page is bad.
    Bad,
    /// `checksum`: the page holds page `found`.
    WrongPageNumber {
        /// The page whose bytes were copied.
        found: Pgno,
    },
    /// `checksum`: the page is all zero.
    Uninitialized,
    /// `recover`: a lost flush of the page.
    LostFlush,
    /// `checksum` of the logs: the segment is bad.
    BadLogSegment,
    /// `checksum` of the logs: this many checkpoint copies remain valid.
    CheckpointCopiesValid {
        /// Valid copies left (0 or 1).
        valid: u32,
    },
}

/// One fault as injected.
#[derive(Clone, Debug, Serialize)]
pub struct InjectedFault {
    /// What was done.
    pub fault: FaultKind,
    /// The file changed.
    pub file: PathBuf,
    /// The damaged page (database faults and lost flushes).
    pub pgno: Option<u32>,
    /// Log segment slot (log-segment) or checkpoint copy (checkpoint).
    pub segment: Option<u32>,
    /// File offset of the damaged page, segment or copy.
    pub offset: u64,
    /// Bits flipped: indices within the page or segment (byte = bit / 8).
    pub bits: Vec<u32>,
    /// Bytes of the new version written, for torn writes (whole sectors).
    pub torn_at: Option<usize>,
    /// The page whose bytes were copied (misdirect).
    pub source_pgno: Option<u32>,
    /// How verification must classify it.
    pub expected: ExpectedDetection,
}

/// What to inject.
#[derive(Clone, Copy, Debug)]
pub struct FaultRequest {
    /// The kind.
    pub kind: FaultKind,
    /// Seed of every random choice.
    pub seed: u64,
    /// How many faults, each on a distinct page (or segment / copy).
    pub count: u32,
    /// Bits flipped per fault. `bitflip`: 1 = correctable, 2 = bad; `None` draws 1 or
    /// 2 at random. `log-segment` and `checkpoint`: at least 2 (default 2). Three or
    /// more bits in one checksum block exceed what the checksum guarantees
    /// (docs/format.md §5.3): such damage is expected bad, but may rarely pass for a
    /// one-bit error.
    pub bits: Option<u32>,
}

/// Why faults could not be injected.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    /// The target is not an edbstress file: it is left alone.
    #[error(
        "{path} is not an edbstress file ({why}); fault injection only touches files made by edbstress"
    )]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// What was found.
        why: String,
    },
    /// The request cannot be carried out on this target.
    #[error("{0}")]
    Invalid(String),
    /// Reading or writing the file failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The engine failed while running the transactions of a lost-flush injection.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> FaultError + 'a {
    move |source| FaultError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// The damaged file, written through a backend of its own (classes
/// [`IoClass::OfflineRead`] and [`IoClass::OfflineWrite`]).
fn open_rw(path: &Path) -> Result<FileIo, FaultError> {
    DataFile::open(path, IoMode::Buffered, Access::ReadWrite)
        .and_then(|file| FileIo::offline(&file))
        .map_err(|e| io_fault("open", path, e))
}

/// An [`IoError`] as a [`FaultError::Io`], keeping the system's error where there is one.
fn io_fault(op: &'static str, path: &Path, e: IoError) -> FaultError {
    let source = match e {
        IoError::Io { source, .. } => source,
        other => std::io::Error::other(other),
    };
    io_err(op, path)(source)
}

fn read_at(file: &mut FileIo, len: usize, offset: u64) -> Result<Vec<u8>, FaultError> {
    let mut buf = AlignedBuf::new(len);
    file.read_exact(IoClass::OfflineRead, &mut buf, len, offset)
        .map_err(|e| io_fault("read", file.path(), e))?;
    Ok(buf.to_vec())
}

fn write_at(file: &mut FileIo, buf: &[u8], offset: u64) -> Result<(), FaultError> {
    let mut aligned = AlignedBuf::new(buf.len());
    aligned.copy_from_slice(buf);
    file.write_all(
        IoClass::OfflineWrite,
        &mut aligned,
        buf.len(),
        offset,
        false,
    )
    .map_err(|e| io_fault("write", file.path(), e))
}

fn sync(file: &mut FileIo) -> Result<(), FaultError> {
    file.sync(IoClass::OfflineWrite)
        .map_err(|e| io_fault("fdatasync", file.path(), e))
}

/// Page size and page count of an edbstress database; anything else is refused.
fn database_geometry(path: &Path) -> Result<(PageSize, u32), FaultError> {
    let file = DataFile::open(path, IoMode::Buffered, Access::ReadOnly)
        .map_err(|e| FaultError::Invalid(format!("cannot open {}: {e}", path.display())))?;
    match read_header_from(&file) {
        Ok(sel) => Ok((sel.header.page_size, sel.header.page_count)),
        Err(HeaderReadError::Header(HeaderError::NotOurs | HeaderError::Uninitialized)) => {
            Err(FaultError::NotOurs {
                path: path.to_path_buf(),
                why: "no edbstress database header".into(),
            })
        }
        Err(e) => Err(FaultError::Invalid(format!(
            "{}: the database header is unreadable ({e}); faults are injected only into databases whose header can be read",
            path.display()
        ))),
    }
}

/// Distinct bit indices within `len` bytes, sorted.
fn random_bits(rng: &mut StdRng, len: usize, count: u32) -> Vec<u32> {
    let mut bits: Vec<u32> = sample(rng, len * 8, count as usize)
        .into_iter()
        .map(|b| b as u32)
        .collect();
    bits.sort_unstable();
    bits
}

fn flip(buf: &mut [u8], bits: &[u32]) {
    for &b in bits {
        buf[(b / 8) as usize] ^= 1 << (b % 8);
    }
}

/// Injects `request.count` database faults into distinct pages of the database at
/// `path`. Misdirect sources are pages not damaged by this call.
pub fn inject_database(
    path: &Path,
    request: &FaultRequest,
) -> Result<Vec<InjectedFault>, FaultError> {
    if !request.kind.targets_database() {
        return Err(FaultError::Invalid(format!(
            "fault kind {} applies to a log directory, not a database",
            request.kind.name()
        )));
    }
    let (page_size, page_count) = database_geometry(path)?;
    // Like any writer: never under a running instance, a recovery or a check.
    let _lock = crate::runtime::lock::DatabaseLock::acquire(path).map_err(EngineError::from)?;
    let ps = page_size.bytes();
    if request.kind == FaultKind::Torn && ps <= SECTOR {
        return Err(FaultError::Invalid(format!(
            "a torn write needs pages larger than one {SECTOR}-byte sector; {} has {ps}-byte pages",
            path.display()
        )));
    }
    let needed = request.count as usize
        * if request.kind == FaultKind::Misdirect {
            2
        } else {
            1
        };
    if needed > page_count as usize {
        return Err(FaultError::Invalid(format!(
            "{} has {page_count} pages, too few for {} {} faults on distinct pages",
            path.display(),
            request.count,
            request.kind.name()
        )));
    }
    let mut rng = StdRng::seed_from_u64(request.seed);
    // Targets first, then misdirect sources among the rest, so no source is damaged.
    let chosen: Vec<u32> = sample(&mut rng, page_count as usize, needed)
        .into_iter()
        .map(|i| i as u32 + 1)
        .collect();
    let (targets, sources) = chosen.split_at(request.count as usize);
    let mut file = open_rw(path)?;
    let mut faults = Vec::with_capacity(targets.len());
    for (i, &pgno) in targets.iter().enumerate() {
        let offset = Pgno::new(pgno).offset(page_size);
        let mut fault = InjectedFault {
            fault: request.kind,
            file: path.to_path_buf(),
            pgno: Some(pgno),
            segment: None,
            offset,
            bits: Vec::new(),
            torn_at: None,
            source_pgno: None,
            expected: ExpectedDetection::Bad,
        };
        match request.kind {
            FaultKind::Bitflip => {
                let n = request.bits.unwrap_or_else(|| rng.random_range(1..=2));
                if n == 0 || n as usize > ps * 8 {
                    return Err(FaultError::Invalid(format!(
                        "cannot flip {n} bits of a {ps}-byte page"
                    )));
                }
                let mut page = read_at(&mut file, ps, offset)?;
                fault.bits = random_bits(&mut rng, ps, n);
                flip(&mut page, &fault.bits);
                write_at(&mut file, &page, offset)?;
                fault.expected = if n == 1 {
                    ExpectedDetection::Correctable { bit: fault.bits[0] }
                } else {
                    ExpectedDetection::Bad
                };
            }
            FaultKind::Torn => {
                let old = read_at(&mut file, ps, offset)?;
                let sectors = ps / SECTOR;
                let k = rng.random_range(1..sectors);
                let mut new = old.clone();
                // The new version: a later dbtime and changed bytes in the part that
                // is not written, then sealed — a valid page the engine could write.
                let dbtime = u64::from_le_bytes(new[8..16].try_into().unwrap_or_default());
                new[8..16]
                    .copy_from_slice(&(dbtime + 1 + rng.random_range(0..1000u64)).to_le_bytes());
                let start = rng.random_range(k * SECTOR..ps - 16);
                let len = rng.random_range(8..=(ps - start).min(512));
                for b in &mut new[start..start + len] {
                    *b ^= rng.random_range(1..=255u8);
                }
                seal_page(&mut new, Pgno::new(pgno));
                write_at(&mut file, &new[..k * SECTOR], offset)?;
                fault.torn_at = Some(k * SECTOR);
                fault.expected = ExpectedDetection::Bad;
            }
            FaultKind::Misdirect => {
                let source = sources[i];
                let bytes = read_at(&mut file, ps, Pgno::new(source).offset(page_size))?;
                write_at(&mut file, &bytes, offset)?;
                fault.source_pgno = Some(source);
                fault.expected = ExpectedDetection::WrongPageNumber {
                    found: Pgno::new(source),
                };
            }
            FaultKind::Zero => {
                write_at(&mut file, &vec![0u8; ps], offset)?;
                fault.expected = ExpectedDetection::Uninitialized;
            }
            _ => unreachable!("checked by targets_database"),
        }
        faults.push(fault);
    }
    sync(&mut file)?;
    Ok(faults)
}

/// Log generation files of `dir` (sorted), each checked for the log file magic.
fn log_files(dir: &Path) -> Result<Vec<(Generation, PathBuf)>, FaultError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        if let Some(generation) = entry.file_name().to_str().and_then(parse_log_file_name) {
            found.push((generation, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Injects `request.count` log faults into the instance log directory `dir`:
/// `log-segment` corrupts distinct used segments of the generation files,
/// `checkpoint` corrupts `count` (1 or 2) copies of `E00.chk`.
pub fn inject_log_dir(
    dir: &Path,
    request: &FaultRequest,
) -> Result<Vec<InjectedFault>, FaultError> {
    // Like a writer of the log: never under a running instance.
    let _lock = crate::runtime::dirlock::LogDirLock::acquire(
        dir,
        crate::runtime::lock::LockMode::Exclusive,
    )
    .map_err(EngineError::from)?;
    let mut rng = StdRng::seed_from_u64(request.seed);
    match request.kind {
        FaultKind::LogSegment => {
            // Used data segments of every generation that carries our signature.
            let mut candidates = Vec::new();
            for (_, path) in log_files(dir)? {
                let image = std::fs::read(&path).map_err(io_err("read", &path))?;
                if image.len() < 2 * SEGMENT_LEN || &image[8..16] != LOG_MAGIC {
                    continue;
                }
                // The file's segment length, as its header records it.
                let seg_len = SegmentLen::from_bytes(LogFileHeader::bytes_in(&image).len() as u64)
                    .unwrap_or_default()
                    .bytes();
                for (slot, seg) in image.chunks_exact(seg_len).enumerate().skip(1) {
                    if seg.iter().any(|&b| b != 0) {
                        candidates.push((path.clone(), slot as u32, seg_len));
                    }
                }
            }
            if candidates.is_empty() {
                return Err(FaultError::Invalid(format!(
                    "{} holds no used edbstress log segment to corrupt",
                    dir.display()
                )));
            }
            if request.count as usize > candidates.len() {
                return Err(FaultError::Invalid(format!(
                    "{} holds {} used log segments, fewer than the {} asked for",
                    dir.display(),
                    candidates.len(),
                    request.count
                )));
            }
            let picks = sample(&mut rng, candidates.len(), request.count as usize);
            let mut faults = Vec::new();
            for i in picks {
                let (path, slot, seg_len) = &candidates[i];
                let n = request.bits.unwrap_or(2).max(2);
                let offset = u64::from(*slot) * *seg_len as u64;
                let mut file = open_rw(path)?;
                let mut seg = read_at(&mut file, *seg_len, offset)?;
                let bits = random_bits(&mut rng, *seg_len, n);
                flip(&mut seg, &bits);
                write_at(&mut file, &seg, offset)?;
                sync(&mut file)?;
                faults.push(InjectedFault {
                    fault: FaultKind::LogSegment,
                    file: path.clone(),
                    pgno: None,
                    segment: Some(*slot),
                    offset,
                    bits,
                    torn_at: None,
                    source_pgno: None,
                    expected: ExpectedDetection::BadLogSegment,
                });
            }
            Ok(faults)
        }
        FaultKind::Checkpoint => {
            let path = dir.join(CHECKPOINT_FILE_NAME);
            let mut file = open_rw(&path)?;
            let image = read_at(&mut file, 2 * CHECKPOINT_COPY_LEN, 0).map_err(|_| {
                FaultError::NotOurs {
                    path: path.clone(),
                    why: "shorter than two checkpoint copies".into(),
                }
            })?;
            if &image[8..16] != CHECKPOINT_MAGIC
                && &image[CHECKPOINT_COPY_LEN + 8..CHECKPOINT_COPY_LEN + 16] != CHECKPOINT_MAGIC
            {
                return Err(FaultError::NotOurs {
                    path,
                    why: "no checkpoint signature in either copy".into(),
                });
            }
            if !(1..=2).contains(&request.count) {
                return Err(FaultError::Invalid(
                    "the checkpoint file has two copies: --count must be 1 or 2".into(),
                ));
            }
            let copies: Vec<u32> = if request.count == 2 {
                vec![0, 1]
            } else {
                vec![rng.random_range(0..2)]
            };
            let valid = 2 - request.count;
            let mut faults = Vec::new();
            for copy in copies {
                let n = request.bits.unwrap_or(2).max(2);
                let offset = u64::from(copy) * CHECKPOINT_COPY_LEN as u64;
                let mut seg = read_at(&mut file, CHECKPOINT_COPY_LEN, offset)?;
                let bits = random_bits(&mut rng, CHECKPOINT_COPY_LEN, n);
                flip(&mut seg, &bits);
                write_at(&mut file, &seg, offset)?;
                faults.push(InjectedFault {
                    fault: FaultKind::Checkpoint,
                    file: path.clone(),
                    pgno: None,
                    segment: Some(copy),
                    offset,
                    bits,
                    torn_at: None,
                    source_pgno: None,
                    expected: ExpectedDetection::CheckpointCopiesValid { valid },
                });
            }
            sync(&mut file)?;
            Ok(faults)
        }
        other => Err(FaultError::Invalid(format!(
            "fault kind {} applies to a database, not a log directory",
            other.name()
        ))),
    }
}

/// Drops a page write during real transactions on a cleanly shut down instance: a
/// message is inserted durably, the storage drops the next write of its leaf page,
/// everything is flushed and checkpointed, the message is changed again durably and
/// the instance crashes. Recovery must then report a lost flush of that leaf.
pub fn inject_lost_flush(config: &InstanceConfig, seed: u64) -> Result<InjectedFault, FaultError> {
    let db_file = config.layout.db_file.clone();
    let (page_size, _) = database_geometry(&db_file)?;
    let mailboxes = {
        let file = DataFile::open(&db_file, IoMode::Buffered, Access::ReadOnly)
            .map_err(EngineError::from)?;
        read_header_from(&file)
            .map_err(|e| FaultError::Invalid(e.to_string()))?
            .header
            .mailbox_count
            .max(1)
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mailbox = rng.random_range(1..=mailboxes);
    let instance = Instance::open(config.clone())?;
    let insert = TxnOp::Insert {
        mailbox,
        props: b"lost-flush fault: first version",
        body: b"lost-flush fault body",
    };
    let key = instance.commit(&[insert], Durability::Durable)?.inserted[0];
    let leaf = instance.locate(key)?;
    instance.drop_next_write(leaf);
    instance.checkpoint_now()?;
    let replace = TxnOp::Replace {
        key,
        props: b"lost-flush fault: second version",
        body: None,
        resort: None,
    };
    instance.commit(&[replace], Durability::Durable)?;
    instance.crash();
    Ok(InjectedFault {
        fault: FaultKind::LostFlush,
        file: db_file,
        pgno: Some(leaf.get()),
        segment: None,
        offset: leaf.offset(page_size),
        bits: Vec::new(),
        torn_at: None,
        source_pgno: None,
        expected: ExpectedDetection::LostFlush,
    })
}
