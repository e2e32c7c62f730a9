//! Buffers a session thread keeps from one change set to the next: the change set's
//! vectors, its redo payloads and its undo images. A transaction used to allocate
//! each of them afresh (~16 mallocs and frees per transaction in the engine bench,
//! ~9 % of user time); taken from and given back to these per-thread spares, the
//! steady state allocates none of them.
//!
//! Every pool is bounded (count and, for byte buffers, capacity) so a burst of large
//! transactions does not leave memory parked on a thread: what does not fit is freed.
//!
//! Sessions running as tasks share their thread's spares: a task that suspends in the
//! middle of an operation (a page read) holds its change set's vectors and pin list,
//! so the thread keeps up to [`SPARE_SETS_MAX`] of each, one per task likely to be
//! suspended at once. Every borrow of the spares ends before anything can suspend.

use std::cell::RefCell;

use edbstress_format::Pgno;
use edbstress_format::log::LogRecord;

use crate::runtime::cache::FrameId;

use super::BeforeImage;

/// Spare undo-image buffers per thread (128 KiB with 32 KiB pages: 2 MiB for 16
/// sessions, counted against the memory goal).
const SPARE_IMAGES_MAX: usize = 4;

/// Spare redo payload buffers per thread, and the bytes they may hold in all: row,
/// view-entry, delete and link payloads (a few hundred bytes) and a few long-value
/// chunks (a message body is ~4 KB on average) are kept; a thread parks at most
/// 64 KiB (1 MiB for 16 sessions).
const SPARE_PAYLOADS_MAX: usize = 64;
const SPARE_PAYLOAD_BYTES_MAX: usize = 64 << 10;

/// Spare row buffers per thread, and the largest kept (a row is at most ~1.4 KB:
/// its fixed part, properties and an inline body).
const SPARE_ROWS_MAX: usize = 4;
const SPARE_ROW_CAPACITY_MAX: usize = 4096;

/// Largest vector (in elements) of a change set kept for the next one.
const SPARE_VEC_CAPACITY_MAX: usize = 1024;

/// Change sets' vectors and pin lists kept per thread: one is enough for a thread per
/// session; a thread of tasks has several operations in progress at once.
const SPARE_SETS_MAX: usize = 8;

/// The vectors of one change set, empty.
#[derive(Default)]
pub(super) struct ChangeSetVecs {
    pub(super) records: Vec<LogRecord>,
    pub(super) touched: Vec<(FrameId, Pgno)>,
    pub(super) originals: Vec<(FrameId, BeforeImage)>,
    pub(super) created: Vec<FrameId>,
    /// What a commit hands the log (images, begin, redo, commit).
    pub(super) log: Vec<LogRecord>,
}

#[derive(Default)]
struct Spares {
    images: Vec<Vec<u8>>,
    payloads: Vec<Vec<u8>>,
    /// Capacity of `payloads`, in bytes.
    payload_bytes: usize,
    rows: Vec<Vec<u8>>,
    pins: Vec<Vec<Pgno>>,
    vecs: Vec<ChangeSetVecs>,
}

thread_local! {
    static SPARES: RefCell<Spares> = RefCell::new(Spares::default());
}

/// An empty buffer for an undo image, recycled when this thread has one.
pub(super) fn take_image() -> Vec<u8> {
    SPARES
        .with(|s| s.borrow_mut().images.pop())
        .unwrap_or_default()
}

/// Keeps `buf` for a later undo image (up to [`SPARE_IMAGES_MAX`]).
pub(super) fn recycle_image(buf: Vec<u8>) {
    // A buffer moved into a PageImage record (torn-write protection) leaves an empty
    // one behind: pooling it would only displace a real one.
    if buf.capacity() == 0 {
        return;
    }
    SPARES.with(|s| {
        let mut s = s.borrow_mut();
        if s.images.len() < SPARE_IMAGES_MAX {
            s.images.push(buf);
        }
    });
}

/// An empty buffer of at least `capacity` bytes for a redo payload, recycled when
/// this thread has one that large (a smaller one would only be reallocated).
pub fn take_payload(capacity: usize) -> Vec<u8> {
    SPARES
        .with(|s| {
            let mut s = s.borrow_mut();
            let i = s.payloads.iter().rposition(|b| b.capacity() >= capacity)?;
            let buf = s.payloads.swap_remove(i);
            s.payload_bytes -= buf.capacity();
            Some(buf)
        })
        .unwrap_or_else(|| Vec::with_capacity(capacity))
}

/// Keeps `buf` for a later payload while the thread's spares stay within their
/// bounds (it is freed otherwise).
fn keep_payload(s: &mut Spares, mut buf: Vec<u8>) {
    let capacity = buf.capacity();
    if capacity != 0
        && s.payloads.len() < SPARE_PAYLOADS_MAX
        && s.payload_bytes + capacity <= SPARE_PAYLOAD_BYTES_MAX
    {
        buf.clear();
        s.payload_bytes += capacity;
        s.payloads.push(buf);
    }
}

/// An empty buffer for a message row (read or encoded), recycled when this thread
/// has one.
pub fn take_row() -> Vec<u8> {
    SPARES
        .with(|s| s.borrow_mut().rows.pop())
        .unwrap_or_default()
}

/// Keeps a row buffer from [`take_row`] for later.
pub fn recycle_row(mut buf: Vec<u8>) {
    if buf.capacity() == 0 || buf.capacity() > SPARE_ROW_CAPACITY_MAX {
        return;
    }
    SPARES.with(|s| {
        let mut s = s.borrow_mut();
        if s.rows.len() < SPARE_ROWS_MAX {
            buf.clear();
            s.rows.push(buf);
        }
    });
}

/// An empty list for the pages an operation pins, this thread's spare if it has one.
pub fn take_pins() -> Vec<Pgno> {
    SPARES
        .with(|s| s.borrow_mut().pins.pop())
        .unwrap_or_default()
}

/// Keeps an emptied pin list from [`take_pins`] for the thread's next operation.
pub fn recycle_pins(mut pins: Vec<Pgno>) {
    if pins.capacity() == 0 || pins.capacity() > SPARE_VEC_CAPACITY_MAX {
        return;
    }
    pins.clear();
    SPARES.with(|s| {
        let mut s = s.borrow_mut();
        if s.pins.len() < SPARE_SETS_MAX {
            s.pins.push(pins);
        }
    });
}

/// Empties `records`, keeping their small redo payloads for later change sets.
pub fn recycle_records(records: &mut Vec<LogRecord>) {
    if records.is_empty() {
        return;
    }
    SPARES.with(|s| {
        let mut s = s.borrow_mut();
        for record in records.drain(..) {
            if let LogRecord::PageRedo { payload, .. } = record {
                keep_payload(&mut s, payload);
            }
        }
    });
}

/// The vectors for a new change set: this thread's spares, or new ones.
pub(super) fn take_vecs() -> ChangeSetVecs {
    SPARES
        .with(|s| s.borrow_mut().vecs.pop())
        .unwrap_or_default()
}

/// Keeps the vectors of a finished change set for the next one, emptied (payloads
/// and images go to their own pools).
pub(super) fn recycle_vecs(mut vecs: ChangeSetVecs) {
    recycle_records(&mut vecs.records);
    recycle_records(&mut vecs.log);
    for (_, image) in vecs.originals.drain(..) {
        recycle_image(image.into_bytes());
    }
    vecs.touched.clear();
    vecs.created.clear();
    let oversized = vecs.records.capacity() > SPARE_VEC_CAPACITY_MAX
        || vecs.log.capacity() > SPARE_VEC_CAPACITY_MAX
        || vecs.touched.capacity() > SPARE_VEC_CAPACITY_MAX
        || vecs.originals.capacity() > SPARE_VEC_CAPACITY_MAX
        || vecs.created.capacity() > SPARE_VEC_CAPACITY_MAX;
    if oversized {
        return;
    }
    SPARES.with(|s| {
        let mut s = s.borrow_mut();
        if s.vecs.len() < SPARE_SETS_MAX {
            s.vecs.push(vecs);
        }
    });
}
