//! B+tree operations over cached pages, run under the instance lock.
//!
//! Every page access goes through the cache guard; a page that is not cached yields
//! [`TreeError::Miss`] and the caller (the transaction layer) undoes what it did,
//! releases the lock, faults the page in and retries. Modifications are recorded in a
//! [`ChangeSet`]: for each change a redo record (applied with the very code recovery
//! uses) and, before a page is first touched, a copy of it so the whole change set can
//! be undone in memory.
//!
//! Layout rules (engine.md §1, §5): roots never move (a full root moves its records to
//! a new child and becomes a branch above it); leaves carry sibling links, branches do
//! not; a branch entry is (separator key, child page number) and a key is routed to the
//! last entry whose separator is ≤ the key (the first entry also takes smaller keys);
//! a leaf emptied by a delete, or merged into a sibling by ESE's rule (its records fit
//! there with the free density to spare), goes to the free-page list (branches are
//! never merged). A split that moves records logs the split page's before image.

//!
//! - this file: the tree state, errors, the change set (redo records and undo copies)
//!   and page access helpers;
//! - `image`: undo images of changed pages (header, tags, and only the bodies a
//!   change rewrites);
//! - `reuse`: the buffers a session thread keeps from one change set to the next;
//! - `search`: descent, lookups, range scans and cache warming;
//! - `update`: insert, delete, replace, page allocation and the free-page list;
//! - `splits`: page splits, separators in branches and root splits.

mod image;
pub(crate) mod reuse;
mod search;
mod splits;
mod update;

use self::image::BeforeImage;
pub use self::search::{
    LeafPosition, descend, get_into, last_leaf_free_space, scan_from, warm_free_list, warm_range,
};
use self::splits::split;
use self::update::{allocate, apply, modify};
pub use self::update::{delete, insert, replace};

use edbstress_format::PageSize;
use edbstress_format::Pgno;
use edbstress_format::log::LogRecord;
use edbstress_format::page::Page;

use crate::runtime::cache::{CacheGuard, FrameId};
use crate::runtime::redo::{BuildRecords, RedoRef, page_dbtime};
use crate::runtime::schema::FREE_LIST_ANCHOR;

/// The engine state protected by the instance lock, next to the cache.
#[derive(Clone, Debug)]
pub struct TreeState {
    /// Page size of the database.
    pub page_size: PageSize,
    /// Last dbtime given out.
    pub dbtime: u64,
    /// First never-allocated page.
    pub next_unused_page: Pgno,
    /// Data pages the file holds.
    pub page_count: u32,
    /// Next message id.
    pub next_message_id: u64,
    /// What the trees did with space since the instance opened (kept here, under the
    /// lock and restored by an attempt's undo, so only committed changes count).
    pub space: SpaceCounters,
}

/// Where pages came from and went, and how leaves split (instrumentation of the
/// database's growth: docs/fidelity.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpaceCounters {
    /// Pages taken from the end of the file (never used before).
    pub pages_from_end: u64,
    /// Pages taken from the free-page list.
    pub pages_reused: u64,
    /// Pages put on the free-page list (emptied or merged leaves).
    pub pages_freed: u64,
    /// Sparse leaves merged into a sibling.
    pub merges: u64,
    /// Leaf splits that halved the page by bytes.
    pub splits_halving: u64,
    /// Leaf splits at the tree's right edge (the new record starts a page).
    pub splits_right_edge: u64,
    /// Hotpoint splits of the mailbox table (a mailbox's appends keep its page full).
    pub splits_hotpoint: u64,
    /// Splits (leaves and branches) that moved records and so logged the split page's
    /// before image (redo op 7).
    pub splits_with_image: u64,
}

impl TreeState {
    /// The counters a checkpoint must carry (see `CheckpointState`).
    pub fn checkpoint_state(&self) -> edbstress_format::log::CheckpointState {
        edbstress_format::log::CheckpointState {
            last_dbtime: self.dbtime,
            next_unused_page: self.next_unused_page.get(),
            next_message_id: self.next_message_id,
        }
    }
}

/// Why a tree operation could not complete under the lock.
#[derive(Debug)]
pub enum TreeError {
    /// The page is not cached: fault it in and retry.
    Miss(Pgno),
    /// No free frame for a new page: wait for one and retry.
    NoFrame,
    /// The file has no unused page left: grow it and retry.
    NeedGrowth,
    /// A page's content is inconsistent with the tree.
    Corrupt {
        /// The page.
        pgno: Pgno,
        /// What is wrong.
        what: String,
    },
}

type TreeResult<T> = Result<T, TreeError>;

fn corrupt(pgno: Pgno, what: impl Into<String>) -> TreeError {
    TreeError::Corrupt {
        pgno,
        what: what.into(),
    }
}

/// Deepest tree walked before a cycle is assumed.
const MAX_DEPTH: usize = 32;

/// The changes of one transaction, with what is needed to undo them. Its vectors,
/// redo payloads and undo images come from, and go back to, this thread's spares
/// ([`reuse`]).
pub struct ChangeSet {
    /// Transaction id.
    pub trx: u64,
    /// Redo records, in order.
    pub records: Vec<LogRecord>,
    /// Pages modified (frame, page number).
    pub touched: Vec<(FrameId, Pgno)>,
    /// Original bytes of pages modified that existed before (frame, copy).
    originals: Vec<(FrameId, BeforeImage)>,
    /// Frames created for new pages.
    created: Vec<FrameId>,
    /// A spare vector for the records a commit hands the log ([`ChangeSet::log_buffer`]).
    log: Vec<LogRecord>,
    /// State at the start, restored by undo.
    state_before: Option<TreeState>,
}

impl ChangeSet {
    /// An empty change set for transaction `trx`.
    pub fn new(trx: u64) -> ChangeSet {
        let vecs = reuse::take_vecs();
        ChangeSet {
            trx,
            records: vecs.records,
            touched: vecs.touched,
            originals: vecs.originals,
            created: vecs.created,
            log: vecs.log,
            state_before: None,
        }
    }

    /// An empty vector for the records a commit appends to the log; give it back
    /// with [`ChangeSet::recycle_log_buffer`] once appended.
    pub fn log_buffer(&mut self) -> Vec<LogRecord> {
        std::mem::take(&mut self.log)
    }

    /// Takes back the vector from [`ChangeSet::log_buffer`] (emptied here, its small
    /// payloads kept for later change sets).
    pub fn recycle_log_buffer(&mut self, mut records: Vec<LogRecord>) {
        reuse::recycle_records(&mut records);
        self.log = records;
    }

    /// Pages created so far by the attempt.
    pub fn created_count(&self) -> usize {
        self.created.len()
    }

    /// Whether nothing was changed.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Appends a [`LogRecord::PageImage`] for each touched page whose change starts a new
    /// dirty period ([`CacheGuard::starts_dirty_period`]): its bytes before the change
    /// (taken from the undo copies, which are not needed once the change commits), or
    /// an empty image for a page created by this change (never written).
    pub fn take_page_images(&mut self, g: &Guard<'_>, out: &mut Vec<LogRecord>) {
        for &(frame, pgno) in &self.touched {
            if !g.starts_dirty_period(frame) {
                continue;
            }
            let image = match self.originals.iter_mut().find(|(f, _)| *f == frame) {
                Some((_, before)) => before.take_page(g.page(frame)),
                None => Vec::new(),
            };
            out.push(LogRecord::PageImage { pgno, image });
        }
    }

    /// Remembers the tree state before the first change.
    pub fn begin(&mut self, g: &mut CacheGuard<'_, TreeState>) {
        if self.state_before.is_none() {
            self.state_before = Some(g.state_ref().clone());
        }
    }

    /// Puts every touched page and the tree state back as they were.
    pub fn undo(&mut self, g: &mut CacheGuard<'_, TreeState>) {
        for (frame, before) in self.originals.drain(..).rev() {
            before.restore(g.page_mut(frame));
            reuse::recycle_image(before.into_bytes());
        }
        for frame in self.created.drain(..) {
            g.discard(frame);
        }
        if let Some(state) = self.state_before.take() {
            *g.state() = state;
        }
        reuse::recycle_records(&mut self.records);
        self.touched.clear();
    }
}

impl Drop for ChangeSet {
    fn drop(&mut self) {
        reuse::recycle_vecs(reuse::ChangeSetVecs {
            records: std::mem::take(&mut self.records),
            touched: std::mem::take(&mut self.touched),
            originals: std::mem::take(&mut self.originals),
            created: std::mem::take(&mut self.created),
            log: std::mem::take(&mut self.log),
        });
    }
}

/// A guard on the instance: cache plus tree state.
pub type Guard<'a> = CacheGuard<'a, TreeState>;

fn frame_of(g: &mut Guard<'_>, pgno: Pgno) -> TreeResult<FrameId> {
    g.lookup(pgno).ok_or(TreeError::Miss(pgno))
}

/// A cached page. Its structure was checked when the cache read it (and our own
/// changes keep it valid), so only the O(1) geometry check runs here; record access
/// still reports damage as an error.
fn view<'p>(g: &'p Guard<'_>, frame: FrameId, pgno: Pgno) -> TreeResult<Page<'p>> {
    Page::new_unvalidated(g.page(frame)).map_err(|e| corrupt(pgno, format!("malformed page: {e}")))
}

/// Branch entry index a key is routed to: the last separator ≤ key, or 0.
fn route(page: &Page<'_>, pgno: Pgno, key: &[u8]) -> TreeResult<usize> {
    let n = page.record_count();
    if n == 0 {
        return Err(corrupt(pgno, "branch page without entries"));
    }
    let mut i = match page.search(key) {
        Ok(i) => i,
        Err(0) => return Ok(0),
        Err(i) => return Ok(i - 1),
    };
    // Equal separators can follow a split of a leftmost child: take the last one.
    while i + 1 < n
        && page
            .record(i + 1)
            .map_err(|e| corrupt(pgno, e.to_string()))?
            .key
            == key
    {
        i += 1;
    }
    Ok(i)
}

fn child_of(page: &Page<'_>, pgno: Pgno, index: usize) -> TreeResult<Pgno> {
    let r = page
        .record(index)
        .map_err(|e| corrupt(pgno, e.to_string()))?;
    let bytes: [u8; 4] = r
        .data
        .try_into()
        .map_err(|_| corrupt(pgno, "branch entry is not a page number"))?;
    Ok(Pgno::from_le_bytes(bytes))
}
