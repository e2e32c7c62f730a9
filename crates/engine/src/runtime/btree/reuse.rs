//! Buffers a session thread keeps from one change set to the next: the change set's
//! vectors, its redo payloads and its undo images. A transaction used to allocate
//! each of them afresh (~16 mallocs and frees per transaction in the engine bench,
//! ~9 % of user time); taken from and given back to these per-thread spares, the
//! steady state allocates none of them.
//!
//! Every pool is bounded (count and, for byte buffers, capacity) so a burst of large
//! transactions does not leave memory parked on a thread: what does not fit is freed.

use std::cell::RefCell;

use edbstress_format::Pgno;
use edbstress_format::log::LogRecord;

use crate::runtime::cache::FrameId;

use super::BeforeImage;

/// Spare undo-image buffers per thread (128 KiB with 32 KiB pages: 2 MiB for 16
/// sessions, counted against the memory goal).
const SPARE_IMAGES_MAX: usize = 4;

/// Spare redo payload buffers per thread, and the largest one kept: row, view-entry,
/// delete and link payloads (a few hundred bytes) are kept; long-value chunks (most
/// of a page) are freed, so a thread parks at most 64 × 2 KiB.
const SPARE_PAYLOADS_MAX: usize = 64;
const SPARE_PAYLOAD_CAPACITY_MAX: usize = 2048;

/// Largest vector (in elements) of a change set kept for the next one.
const SPARE_VEC_CAPACITY_MAX: usize = 1024;

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
    vecs: Option<ChangeSetVecs>,
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

/// An empty buffer for a redo payload, recycled when this thread has one.
pub(super) fn take_payload() -> Vec<u8> {
    SPARES
        .with(|s| s.borrow_mut().payloads.pop())
        .unwrap_or_default()
}

/// Empties `records`, keeping their small redo payloads for later change sets.
pub fn recycle_records(records: &mut Vec<LogRecord>) {
    if records.is_empty() {
        return;
    }
    SPARES.with(|s| {
        let mut s = s.borrow_mut();
        for record in records.drain(..) {
            if let LogRecord::PageRedo { mut payload, .. } = record {
                if s.payloads.len() < SPARE_PAYLOADS_MAX
                    && payload.capacity() <= SPARE_PAYLOAD_CAPACITY_MAX
                {
                    payload.clear();
                    s.payloads.push(payload);
                }
            }
        }
    });
}

/// The vectors for a new change set: this thread's spares, or new ones.
pub(super) fn take_vecs() -> ChangeSetVecs {
    SPARES
        .with(|s| s.borrow_mut().vecs.take())
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
    SPARES.with(|s| s.borrow_mut().vecs = Some(vecs));
}
