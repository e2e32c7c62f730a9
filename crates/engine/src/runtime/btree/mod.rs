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
//! - `search`: descent, lookups, range scans and cache warming;
//! - `update`: insert, delete, replace, page allocation and the free-page list;
//! - `splits`: page splits, separators in branches and root splits.

mod search;
mod splits;
mod update;

pub use self::search::{
    LeafPosition, descend, get, last_leaf_free_space, scan_from, warm_free_list, warm_range,
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

/// The changes of one transaction, with what is needed to undo them.
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
    /// State at the start, restored by undo.
    state_before: Option<TreeState>,
}

impl ChangeSet {
    /// An empty change set for transaction `trx`.
    pub fn new(trx: u64) -> ChangeSet {
        ChangeSet {
            trx,
            records: Vec::new(),
            touched: Vec::new(),
            originals: Vec::new(),
            created: Vec::new(),
            state_before: None,
        }
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
            out.push(LogRecord::PageImage {
                pgno: pgno.get(),
                image,
            });
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
            recycle_image(before.bytes);
        }
        for frame in self.created.drain(..) {
            g.discard(frame);
        }
        if let Some(state) = self.state_before.take() {
            *g.state() = state;
        }
        self.records.clear();
        self.touched.clear();
    }
}

impl Drop for ChangeSet {
    fn drop(&mut self) {
        for (_, before) in self.originals.drain(..) {
            recycle_image(before.bytes);
        }
    }
}

/// Spare before-image buffers a session keeps for its next change sets.
const SPARE_IMAGES_MAX: usize = 4;

thread_local! {
    /// Before-image buffers of finished change sets, reused by the next ones on this
    /// thread: spares a page-sized allocation and free per touched page. At most [`SPARE_IMAGES_MAX`] per thread (128 KiB with
    /// 32 KiB pages: 2 MiB for 16 sessions, counted against the memory goal).
    static SPARE_IMAGES: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What undo needs of a page a transaction changes: its used bytes only — the header
/// and record bodies up to `first_free`, and the tag array at the end. The free bytes
/// between them are zero on every B+tree page (formatting, delete, replace and
/// compaction zero what they free), so they are not copied and restoring zeroes them:
/// a page with few records (the free-list anchor, whose header alone changes) costs a
/// few hundred bytes instead of a whole page. The bodies are copied last and only when
/// a change may rewrite them: a page that only gains records keeps its old bodies in
/// place, so its image is the header and tag array.
pub(super) struct BeforeImage {
    /// The header `page[..PAGE_HEADER_LEN]`, the tag array `page[len - tail..]`, then,
    /// once an operation may rewrite them ([`BeforeImage::keep_bodies`]), the record
    /// bodies `page[PAGE_HEADER_LEN..head]`.
    bytes: Vec<u8>,
    /// The first free offset before the change: bodies end there.
    head: usize,
    /// Length of the tag array before the change.
    tail: usize,
    /// Whether the bodies are in `bytes`. Until they are, every change made since the
    /// image was taken left `page[PAGE_HEADER_LEN..head]` as it was (inserts that
    /// append at the first free offset, link changes), so the page itself holds them.
    bodies: bool,
}

impl BeforeImage {
    /// The header and tag array of `page`, in a recycled buffer when this thread has
    /// one; the record bodies wait for [`BeforeImage::keep_bodies`] (an insert, the
    /// commonest change, only appends). A page whose header does not describe a sane
    /// layout is copied whole at once.
    pub(super) fn of(page: &[u8]) -> BeforeImage {
        const HEADER: usize = edbstress_format::PAGE_HEADER_LEN;
        let len = page.len();
        let header = edbstress_format::page::PageHeader::read(page);
        let head = usize::from(header.first_free);
        let tags = usize::from(header.tag_count) * edbstress_format::page::TAG_LEN;
        let sane = head >= HEADER && head + tags <= len;
        let (head, tail) = if sane { (head, tags) } else { (len, 0) };
        debug_assert!(
            page[head..len - tail].iter().all(|&b| b == 0),
            "free bytes of a page are not zero"
        );
        let mut bytes = SPARE_IMAGES
            .with(|spare| spare.borrow_mut().pop())
            .unwrap_or_default();
        bytes.clear();
        bytes.reserve(head + tail);
        bytes.extend_from_slice(&page[..HEADER]);
        bytes.extend_from_slice(&page[len - tail..]);
        let mut image = BeforeImage {
            bytes,
            head,
            tail,
            bodies: false,
        };
        if !sane {
            image.keep_bodies(page);
        }
        image
    }

    /// Copies the record bodies from `page` before an operation that may rewrite them
    /// (delete, replace, truncate, a compacting insert, a rebuild). `page` must be the
    /// page this image was taken of, changed since only by operations that leave the
    /// bodies alone.
    pub(super) fn keep_bodies(&mut self, page: &[u8]) {
        if !self.bodies {
            self.bytes
                .extend_from_slice(&page[edbstress_format::PAGE_HEADER_LEN..self.head]);
            self.bodies = true;
        }
    }

    /// Puts `page` back as it was.
    fn restore(&self, page: &mut [u8]) {
        const HEADER: usize = edbstress_format::PAGE_HEADER_LEN;
        let len = page.len();
        let (header, rest) = self.bytes.split_at(HEADER);
        let (tags, bodies) = rest.split_at(self.tail);
        page[..HEADER].copy_from_slice(header);
        if self.bodies {
            page[HEADER..self.head].copy_from_slice(bodies);
        }
        page[self.head..len - self.tail].fill(0);
        page[len - self.tail..].copy_from_slice(tags);
    }

    /// The whole page as it was (for a page-image record), given the page now (whose
    /// bodies are the old ones unless this image kept them), leaving this image empty.
    fn take_page(&mut self, now: &[u8]) -> Vec<u8> {
        let mut page = now.to_vec();
        self.restore(&mut page);
        recycle_image(std::mem::take(&mut self.bytes));
        page
    }
}

fn recycle_image(buf: Vec<u8>) {
    // A buffer moved into a PageImage record (torn-write protection) leaves an empty
    // one behind: pooling it would only displace a real one.
    if buf.capacity() == 0 {
        return;
    }
    SPARE_IMAGES.with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_IMAGES_MAX {
            spare.push(buf);
        }
    });
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

#[cfg(test)]
mod tests {
    use edbstress_format::Pgno;
    use edbstress_format::page::{PageMut, flags};
    use proptest::prelude::*;

    use super::BeforeImage;
    use super::update::leaves_bodies_alone;
    use crate::runtime::redo::RedoRef;

    #[test]
    fn before_images_keep_used_bytes_and_restore_the_whole_page() {
        let mut page = vec![0u8; 8192];
        let mut p = PageMut::format(&mut page, 9, 2, flags::LEAF, 5);
        for i in 0..20u8 {
            p.append(&[i; 8], &vec![i; 100 + usize::from(i)]).unwrap();
        }
        p.delete(3);
        p.delete(11);
        let original = page.clone();
        let mut image = BeforeImage::of(&page);
        assert!(
            image.bytes.len() < 200,
            "the header and tags only, until bodies may change: {}",
            image.bytes.len()
        );
        image.keep_bodies(&page);
        assert!(
            image.bytes.len() < 3000,
            "only the used bytes: {}",
            image.bytes.len()
        );
        let mut p = PageMut::new(&mut page).unwrap();
        p.insert(0, &[0; 4], &[7; 900]).unwrap();
        p.delete(5);
        p.compact();
        p.replace_data(2, &[9; 40]).unwrap();
        assert_ne!(page, original);
        image.restore(&mut page);
        assert_eq!(page, original, "undo gives the page back byte for byte");
        assert_eq!(
            image.take_page(&page),
            original,
            "and so does the page image"
        );
        // A page whose header makes no sense is copied whole.
        let mut junk = vec![0xA5u8; 8192];
        let image = BeforeImage::of(&junk);
        assert_eq!(image.bytes.len(), 8192);
        junk.fill(0);
        image.restore(&mut junk);
        assert!(junk.iter().all(|&b| b == 0xA5));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u16, usize),
        Delete(u16),
        Replace(u16, usize),
        Links(u32),
        Truncate(u16),
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<u16>(), 1usize..1500).prop_map(|(i, n)| Op::Insert(i, n)),
            2 => any::<u16>().prop_map(Op::Delete),
            2 => (any::<u16>(), 0usize..1500).prop_map(|(i, n)| Op::Replace(i, n)),
            1 => any::<u32>().prop_map(Op::Links),
            1 => any::<u16>().prop_map(Op::Truncate),
        ]
    }

    proptest! {
        /// Whatever the page (holes, nearly full) and whatever changes follow, an image
        /// that copies bodies only before the changes `leaves_bodies_alone` does not
        /// vouch for gives the page back byte for byte, by undo and as a page image.
        #[test]
        fn lazy_body_images_undo_any_sequence_of_changes(
            sizes in proptest::collection::vec(1usize..1200, 0..40),
            holes in proptest::collection::vec(any::<u16>(), 0..8),
            ops in proptest::collection::vec(op_strategy(), 1..6),
        ) {
            let mut page = vec![0u8; 8192];
            let mut p = PageMut::format(&mut page, 9, 2, flags::LEAF, 5);
            for (i, &n) in sizes.iter().enumerate() {
                if p.fits(4, n) {
                    p.append(&(i as u32).to_be_bytes(), &vec![i as u8; n]).unwrap();
                }
            }
            for h in holes {
                let count = p.record_count();
                if count > 0 {
                    p.delete(usize::from(h) % count);
                }
            }
            let original = page.clone();
            let mut image = BeforeImage::of(&page);
            let key = [0xEEu8; 4];
            let filler = vec![0x5Au8; 1500];
            for (step, op) in ops.iter().enumerate() {
                let count = PageMut::new(&mut page).unwrap().record_count() as u16;
                let index = |i: u16, extra: u16| i % (count + extra).max(1);
                let redo = match *op {
                    Op::Insert(i, n) => RedoRef::Insert { index: index(i, 1), key: &key, data: &filler[..n] },
                    Op::Delete(i) if count > 0 => RedoRef::Delete { index: index(i, 0) },
                    Op::Replace(i, n) if count > 0 => RedoRef::ReplaceData { index: index(i, 0), data: &filler[..n] },
                    Op::Links(next) => RedoRef::SetLinks { prev: 1, next },
                    Op::Truncate(keep) => RedoRef::Truncate { keep: index(keep, 1) },
                    _ => continue,
                };
                if !leaves_bodies_alone(&redo, &page) {
                    image.keep_bodies(&page);
                }
                if redo.apply_to_checked_page(&mut page, Pgno::new(9), 100 + step as u64).is_err() {
                    break; // the operation did not fit: it changed nothing
                }
            }
            let mut undone = page.clone();
            image.restore(&mut undone);
            prop_assert_eq!(&undone, &original);
            prop_assert_eq!(image.take_page(&page), original);
        }
    }

    /// Inserts that append keep the bodies where they are, so the image holds none;
    /// a later change that rewrites bodies copies them first, as they were.
    #[test]
    fn before_images_copy_bodies_only_when_a_change_may_rewrite_them() {
        let mut page = vec![0u8; 8192];
        let mut p = PageMut::format(&mut page, 9, 2, flags::LEAF, 5);
        for i in (0..40u8).step_by(2) {
            p.append(&[i; 8], &[i; 100]).unwrap();
        }
        let original = page.clone();
        let mut image = BeforeImage::of(&page);
        let light = image.bytes.len();
        let mut p = PageMut::new(&mut page).unwrap();
        assert!(p.as_page().inserts_without_moving_bodies(8, 100));
        p.insert(3, &[5; 8], &[5; 100]).unwrap();
        p.insert(0, &[0; 4], &[1; 300]).unwrap();
        p.set_next(77);
        assert_eq!(image.bytes.len(), light, "appends copy no bodies");
        let mut undone = page.clone();
        image.restore(&mut undone);
        assert_eq!(undone, original, "undo of appends alone");
        assert_eq!(image.take_page(&page), original, "page image of appends");

        // Appends, then a delete: the bodies are copied at the delete, still intact.
        let mut page = original.clone();
        let mut image = BeforeImage::of(&page);
        let mut p = PageMut::new(&mut page).unwrap();
        p.insert(5, &[9; 8], &[9; 200]).unwrap();
        image.keep_bodies(&page);
        let mut p = PageMut::new(&mut page).unwrap();
        p.delete(0);
        p.delete(4);
        p.compact();
        p.replace_data(1, &[3; 700]).unwrap();
        image.restore(&mut page);
        assert_eq!(page, original, "undo after appends, deletes and compaction");

        // A page too full for a contiguous insert would compact: not an append.
        let mut page = vec![0u8; 8192];
        let mut p = PageMut::format(&mut page, 9, 2, flags::LEAF, 5);
        let mut i = 0u8;
        while p.fits(8, 1000) {
            p.append(&[i; 8], &[i; 1000]).unwrap();
            i += 1;
        }
        p.delete(2);
        let p = PageMut::new(&mut page).unwrap();
        let free = p.free_space();
        assert!(p.fits(8, 1000));
        assert!(
            !p.as_page().inserts_without_moving_bodies(8, 1000),
            "the space is there only after compaction"
        );
        assert!(!p.as_page().inserts_without_moving_bodies(8, free));
    }
}
