//! Simulated power cuts for tests (feature `power-cut-sim`). The kernel here has no
//! device-mapper, so a device with a volatile write cache is modelled in the I/O layer
//! itself, under the real engine code paths.
//!
//! While [`arm`]ed, every write of a [`crate::DataFile`] (its own and the
//! threads backend's) (a vectored write as the one write of its concatenated buffers)
//! reaches the file at once (so the process reads what it wrote, as
//! from a cache) but is also journalled as *volatile*, per file (by inode, so renames
//! do not matter), together with the content each touched 4 KiB sector had when the
//! file was last flushed. A successful `fdatasync`/`fsync` of a file makes its
//! journalled writes durable (the journal is cleared). [`cut`] then plays the device
//! losing power: of each file's volatile writes an arbitrary random subset persists —
//! each write whole, not at all, or torn (only some of its 4 KiB sectors) — applied
//! in random order over the flushed content; everything else is discarded. From the
//! cut on, every write and flush fails: the device is gone.
//!
//! Arming is process-wide: use it from a test binary whose tests do not run other I/O
//! at the same time. While armed, io_uring is not used (the threads backend is chosen
//! instead), as writes done by the kernel on its own could not be journalled. Writes
//! and flushes are serialised while armed, which keeps the journal exact.

// The journal reads and writes the files it simulates a power cut on.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::AlignedBuf;

/// Granularity of torn writes: what the simulated device writes atomically.
pub const SECTOR: u64 = 4096;

static ARMED: AtomicBool = AtomicBool::new(false);
static STATE: Mutex<Option<State>> = Mutex::new(None);

#[derive(Default)]
struct State {
    files: HashMap<(u64, u64), Journal>,
    cut: bool,
}

/// Volatile writes of one file since its last flush.
struct Journal {
    /// A handle to write the final state through at the cut.
    handle: File,
    /// Content of every touched sector as of the last flush.
    base: BTreeMap<u64, Vec<u8>>,
    /// Writes since the last flush, in order: offset and bytes.
    pending: Vec<(u64, Vec<u8>)>,
}

/// What a [`cut`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CutReport {
    /// Files with volatile writes at the cut.
    pub files: u64,
    /// Volatile writes at the cut.
    pub writes: u64,
    /// Writes that persisted whole.
    pub persisted: u64,
    /// Writes of which only some sectors persisted.
    pub torn: u64,
    /// Writes lost entirely.
    pub dropped: u64,
}

fn state() -> std::sync::MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn gone() -> io::Error {
    io::Error::other("simulated power cut: the device lost power")
}

/// Starts journalling writes (a fresh, empty journal).
pub fn arm() {
    *state() = Some(State::default());
    ARMED.store(true, Ordering::SeqCst);
}

/// Stops the simulation: writes and flushes go straight to the files again.
pub fn disarm() {
    let mut st = state();
    ARMED.store(false, Ordering::SeqCst);
    *st = None;
}

/// Whether a cut has happened since the last [`arm`].
pub fn is_cut() -> bool {
    state().as_ref().is_some_and(|s| s.cut)
}

/// Small deterministic generator (SplitMix64): the I/O crate has no `rand`.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// How the simulated device behaves at a cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutModel {
    /// Each volatile write persists whole or not at all (a device that writes every
    /// request atomically), in any order.
    WholeWrites,
    /// Each volatile write persists whole, not at all, or torn: only some of its
    /// 4 KiB sectors (a device atomic per sector only), in any order.
    TornSectors,
}

/// Cuts the power: every file's volatile writes persist as an arbitrary random
/// subset (per `model`, in random order) over its last flushed content, and from now
/// on writes and flushes fail.
pub fn cut(seed: u64, model: CutModel) -> io::Result<CutReport> {
    let mut guard = state();
    let Some(st) = guard.as_mut() else {
        return Err(io::Error::other("power-cut simulation is not armed"));
    };
    st.cut = true;
    let mut rng = SplitMix(seed);
    let mut report = CutReport::default();
    let mut keys: Vec<_> = st.files.keys().copied().collect();
    keys.sort_unstable();
    for key in keys {
        let Some(journal) = st.files.remove(&key) else {
            continue;
        };
        if journal.pending.is_empty() {
            continue;
        }
        report.files += 1;
        // Surviving pieces of each write: (sector, offset in sector, bytes).
        let mut survivors: Vec<Vec<(u64, usize, &[u8])>> = Vec::new();
        for (offset, data) in &journal.pending {
            report.writes += 1;
            let fate = match model {
                CutModel::WholeWrites => rng.below(2),
                CutModel::TornSectors => rng.below(3),
            };
            let mut pieces = Vec::new();
            let mut total = 0;
            let mut at = *offset;
            let mut rest = &data[..];
            while !rest.is_empty() {
                let sector = at / SECTOR;
                let within = (at % SECTOR) as usize;
                let n = rest.len().min(SECTOR as usize - within);
                total += 1;
                let keep = match fate {
                    0 => true,
                    1 => false,
                    _ => rng.below(2) == 0,
                };
                if keep {
                    pieces.push((sector, within, &rest[..n]));
                }
                at += n as u64;
                rest = &rest[n..];
            }
            match pieces.len() {
                0 => report.dropped += 1,
                k if k == total => report.persisted += 1,
                _ => report.torn += 1,
            }
            survivors.push(pieces);
        }
        // Any order: the surviving writes are applied shuffled (Fisher-Yates); a
        // write's own sectors never interleave with another's except when torn.
        for i in (1..survivors.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            survivors.swap(i, j);
        }
        let pieces = survivors.into_iter().flatten();
        let mut sectors = journal.base.clone();
        for (sector, within, bytes) in pieces {
            if let Some(content) = sectors.get_mut(&sector) {
                content[within..within + bytes.len()].copy_from_slice(bytes);
            }
        }
        let mut buf = AlignedBuf::new(SECTOR as usize);
        for (sector, content) in sectors {
            buf.copy_from_slice(&content);
            journal.handle.write_all_at(&buf, sector * SECTOR)?;
        }
        journal.handle.sync_data()?;
    }
    Ok(report)
}

fn file_key(file: &File) -> io::Result<(u64, u64)> {
    let m = file.metadata()?;
    Ok((m.dev(), m.ino()))
}

/// Whether the simulation is armed (io_uring is then avoided).
pub(crate) fn armed() -> bool {
    ARMED.load(Ordering::SeqCst)
}

/// A write of `buf` at `offset` to `file`, carried out by `write`, journalled while
/// armed.
pub(crate) fn write(
    file: &File,
    offset: u64,
    buf: &[u8],
    write: impl FnOnce() -> io::Result<usize>,
) -> io::Result<usize> {
    write_parts(file, offset, &[buf], write)
}

/// A write of `parts`, back to back from `offset` (a vectored write), carried out by
/// `write`, journalled while armed as one write of the concatenated bytes: a cut keeps,
/// drops or tears it as a whole, exactly as a single buffer's write of the same bytes.
pub(crate) fn write_parts<P: AsRef<[u8]>>(
    file: &File,
    offset: u64,
    parts: &[P],
    write: impl FnOnce() -> io::Result<usize>,
) -> io::Result<usize> {
    if !armed() {
        return write();
    }
    let mut guard = state();
    let Some(st) = guard.as_mut() else {
        return write();
    };
    if st.cut {
        return Err(gone());
    }
    let key = file_key(file)?;
    let journal = match st.files.entry(key) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => e.insert(Journal {
            handle: file.try_clone()?,
            base: BTreeMap::new(),
            pending: Vec::new(),
        }),
    };
    let len: usize = parts.iter().map(|p| p.as_ref().len()).sum();
    if len > 0 {
        let first = offset / SECTOR;
        let last = (offset + len as u64 - 1) / SECTOR;
        let mut sector_buf = AlignedBuf::new(SECTOR as usize);
        for sector in first..=last {
            if journal.base.contains_key(&sector) {
                continue;
            }
            // The flushed content (zeros past the end of the file).
            let mut got = 0;
            while got < SECTOR as usize {
                match file.read_at(&mut sector_buf[got..], sector * SECTOR + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // O_DIRECT refuses the unaligned remainder of a short read: the
                    // rest lies past the end of the file.
                    Err(_) if got > 0 => break,
                    Err(e) => return Err(e),
                }
            }
            sector_buf[got..].fill(0);
            journal.base.insert(sector, sector_buf.to_vec());
        }
    }
    let n = write()?;
    // What the write transferred: the first `n` bytes of the parts, in order.
    let mut written = Vec::with_capacity(n);
    for part in parts {
        let part = part.as_ref();
        let take = part.len().min(n - written.len());
        written.extend_from_slice(&part[..take]);
        if written.len() == n {
            break;
        }
    }
    journal.pending.push((offset, written));
    Ok(n)
}

/// A flush of `file` carried out by `sync`: makes its journalled writes durable.
pub(crate) fn sync(file: &File, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    if !armed() {
        return sync();
    }
    let mut guard = state();
    let Some(st) = guard.as_mut() else {
        return sync();
    };
    if st.cut {
        return Err(gone());
    }
    sync()?;
    st.files.remove(&file_key(file)?);
    Ok(())
}
