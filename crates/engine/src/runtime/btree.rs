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
//! leaves may become empty after deletes (no merges).

use edbstress_format::PageSize;
use edbstress_format::Pgno;
use edbstress_format::log::LogRecord;
use edbstress_format::page::{Page, PageHeader, Record, flags};

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
    originals: Vec<(FrameId, Vec<u8>)>,
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
                Some((_, bytes)) => std::mem::take(bytes),
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
        for (frame, bytes) in self.originals.drain(..).rev() {
            g.page_mut(frame).copy_from_slice(&bytes);
            recycle_image(bytes);
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
        for (_, bytes) in self.originals.drain(..) {
            recycle_image(bytes);
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

/// A copy of `page`, in a recycled buffer when this thread has one.
fn copy_image(page: &[u8]) -> Vec<u8> {
    let spare = SPARE_IMAGES.with(|spare| spare.borrow_mut().pop());
    match spare {
        Some(mut buf) => {
            buf.clear();
            buf.extend_from_slice(page);
            buf
        }
        None => page.to_vec(),
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

/// Where a key is, or would be, in a tree.
#[derive(Clone, Debug)]
pub struct LeafPosition {
    /// Branch pages from the root down, with the entry followed in each.
    pub path: Vec<(Pgno, usize)>,
    /// The leaf.
    pub leaf: Pgno,
    /// `Ok(i)`: the key is record i; `Err(i)`: it would be inserted at i.
    pub slot: Result<usize, usize>,
}

/// Descends from `root` to the leaf for `key`.
pub fn descend(g: &mut Guard<'_>, root: Pgno, key: &[u8]) -> TreeResult<LeafPosition> {
    let mut pgno = root;
    let mut path = Vec::new();
    loop {
        let frame = frame_of(g, pgno)?;
        let page = view(g, frame, pgno)?;
        let h = page.header();
        if h.flags & flags::LEAF != 0 {
            return Ok(LeafPosition {
                path,
                leaf: pgno,
                slot: page.search(key),
            });
        }
        if h.flags & flags::BRANCH == 0 {
            return Err(corrupt(
                pgno,
                format!(
                    "page in a tree is neither leaf nor branch (flags {:#x})",
                    h.flags
                ),
            ));
        }
        let index = route(&page, pgno, key)?;
        let child = child_of(&page, pgno, index)?;
        path.push((pgno, index));
        if path.len() > MAX_DEPTH {
            return Err(corrupt(pgno, "tree deeper than 32 levels (a cycle?)"));
        }
        pgno = child;
    }
}

/// Like [`frame_of`] without counting a hit or a reference (warm-up walks).
fn peek_frame(g: &Guard<'_>, pgno: Pgno) -> TreeResult<FrameId> {
    g.peek(pgno).ok_or(TreeError::Miss(pgno))
}

/// Makes sure the first `count` pages of the free list are cached, or reports the
/// first that is not as a miss. A page's successor on the list is only known once the
/// page is read, so an insert that needs several new pages would otherwise restart
/// (undoing everything it did) once per page; called before it changes anything,
/// a restart here costs only this walk.
pub fn warm_free_list(g: &Guard<'_>, count: usize) -> TreeResult<()> {
    let anchor = peek_frame(g, FREE_LIST_ANCHOR)?;
    let mut next = Pgno::new(PageHeader::read(g.page(anchor)).next);
    for _ in 0..count {
        if next == Pgno::NONE {
            break;
        }
        let frame = peek_frame(g, next)?;
        next = Pgno::new(PageHeader::read(g.page(frame)).next);
    }
    Ok(())
}

/// Makes sure the leaves holding keys from `first` to `last` in the tree at `root`
/// are cached, with the leaf before the first and the one after the last when those
/// leaves empty (removing them relinks their neighbours), or reports the first that
/// is not as a miss: a delete of many records (a long value's chunks) then faults its
/// leaves in before it changes anything, instead of restarting after each one.
pub fn warm_range(g: &Guard<'_>, root: Pgno, first: &[u8], last: &[u8]) -> TreeResult<()> {
    let mut pgno = root;
    let mut frame = peek_frame(g, pgno)?;
    for depth in 0.. {
        let page = view(g, frame, pgno)?;
        if page.header().flags & flags::LEAF != 0 {
            break;
        }
        if depth > MAX_DEPTH {
            return Err(corrupt(pgno, "tree deeper than 32 levels (a cycle?)"));
        }
        let index = route(&page, pgno, first)?;
        pgno = child_of(&page, pgno, index)?;
        frame = peek_frame(g, pgno)?;
    }
    let key_at = |page: &Page<'_>, pgno: Pgno, i: usize| -> TreeResult<Vec<u8>> {
        Ok(page
            .record(i)
            .map_err(|e| corrupt(pgno, e.to_string()))?
            .key
            .to_vec())
    };
    let mut first_leaf = true;
    for _ in 0..1_000_000 {
        let page = view(g, frame, pgno)?;
        let h = page.header();
        let n = page.record_count();
        // Whether the deletes leave this leaf empty (then its neighbours are relinked).
        let (empties, ends_here) = if n == 0 {
            (false, false)
        } else {
            let last_key = key_at(&page, pgno, n - 1)?;
            let empties =
                key_at(&page, pgno, 0)?.as_slice() >= first && last_key.as_slice() <= last;
            (empties, last_key.as_slice() >= last)
        };
        if first_leaf && empties && h.prev != 0 {
            peek_frame(g, Pgno::new(h.prev))?;
        }
        first_leaf = false;
        if h.next == 0 || (ends_here && !empties) {
            return Ok(());
        }
        let next_frame = peek_frame(g, Pgno::new(h.next))?;
        if ends_here {
            return Ok(());
        }
        (pgno, frame) = (Pgno::new(h.next), next_frame);
    }
    Err(corrupt(pgno, "leaf chain does not end (a cycle?)"))
}

/// Free space of the last leaf of the tree at `root` (where appended records go), or
/// a miss for the first page of the way there that is not cached.
pub fn last_leaf_free_space(g: &Guard<'_>, root: Pgno) -> TreeResult<usize> {
    let mut pgno = root;
    for _ in 0..=MAX_DEPTH {
        let frame = peek_frame(g, pgno)?;
        let page = view(g, frame, pgno)?;
        if page.header().flags & flags::LEAF != 0 {
            return Ok(page.free_space());
        }
        let n = page.record_count();
        if n == 0 {
            return Err(corrupt(pgno, "branch page without entries"));
        }
        pgno = child_of(&page, pgno, n - 1)?;
    }
    Err(corrupt(root, "tree deeper than 32 levels (a cycle?)"))
}

/// Reads the record with exactly `key`, if present.
pub fn get(g: &mut Guard<'_>, root: Pgno, key: &[u8]) -> TreeResult<Option<Vec<u8>>> {
    let pos = descend(g, root, key)?;
    match pos.slot {
        Ok(i) => {
            let frame = frame_of(g, pos.leaf)?;
            let page = view(g, frame, pos.leaf)?;
            Ok(Some(
                page.record(i)
                    .map_err(|e| corrupt(pos.leaf, e.to_string()))?
                    .data
                    .to_vec(),
            ))
        }
        Err(_) => Ok(None),
    }
}

/// Calls `visit(key, data)` for consecutive records from the first key ≥ `start`
/// while it returns true.
pub fn scan_from(
    g: &mut Guard<'_>,
    root: Pgno,
    start: &[u8],
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> TreeResult<()> {
    let pos = descend(g, root, start)?;
    let mut pgno = pos.leaf;
    let mut index = match pos.slot {
        Ok(i) | Err(i) => i,
    };
    for _ in 0..1_000_000 {
        let frame = frame_of(g, pgno)?;
        let page = view(g, frame, pgno)?;
        while index < page.record_count() {
            let r = page
                .record(index)
                .map_err(|e| corrupt(pgno, e.to_string()))?;
            if !visit(r.key, r.data) {
                return Ok(());
            }
            index += 1;
        }
        let next = page.header().next;
        if next == 0 {
            return Ok(());
        }
        pgno = Pgno::new(next);
        index = 0;
    }
    Err(corrupt(pgno, "leaf chain does not end (a cycle?)"))
}

/// Applies `op` to page `pgno` (cached), recording redo and undo information.
fn modify(g: &mut Guard<'_>, cs: &mut ChangeSet, pgno: Pgno, op: RedoRef<'_>) -> TreeResult<()> {
    let frame = frame_of(g, pgno)?;
    apply(g, cs, frame, pgno, op.code(), op.encode(), false)
}

/// Applies the op encoded as `payload` (the log record's, moved into it: the data is
/// copied once into the payload and once into the page) to page `pgno` in `frame`;
/// `new`: a never-used page, which has no before-image to keep.
fn apply(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    frame: FrameId,
    pgno: Pgno,
    code: u8,
    payload: Vec<u8>,
    new: bool,
) -> TreeResult<()> {
    cs.begin(g);
    let before = if new { 0 } else { page_dbtime(g.page(frame)) };
    if !cs.touched.iter().any(|&(f, _)| f == frame) {
        if !new {
            cs.originals.push((frame, copy_image(g.page(frame))));
        }
        cs.touched.push((frame, pgno));
    }
    let after = {
        let s = g.state();
        s.dbtime += 1;
        s.dbtime
    };
    RedoRef::decode(code, &payload)
        .and_then(|op| op.apply_to_checked_page(g.page_mut(frame), pgno, after))
        .map_err(|e| corrupt(pgno, e.to_string()))?;
    cs.records.push(LogRecord::PageRedo {
        pgno: pgno.get(),
        dbtime_before: before,
        dbtime_after: after,
        trx: cs.trx,
        op: code,
        payload,
    });
    Ok(())
}

/// Allocates a never-used page and a frame for it.
///
/// A page from the free list is reused first (`fresh` = false: it exists on disk, so
/// its replacement is logged against its real dbtime); otherwise a never-used page
/// from the end of the file.
fn allocate(g: &mut Guard<'_>, cs: &mut ChangeSet) -> TreeResult<(Pgno, FrameId, bool)> {
    cs.begin(g);
    let anchor = frame_of(g, FREE_LIST_ANCHOR)?;
    let anchor_header = PageHeader::read(g.page(anchor));
    if anchor_header.next != 0 {
        let pgno = Pgno::new(anchor_header.next);
        let frame = frame_of(g, pgno)?;
        let h = PageHeader::read(g.page(frame));
        if h.flags & flags::EMPTY == 0 || pgno == FREE_LIST_ANCHOR {
            return Err(corrupt(pgno, "the free-page list holds a page in use"));
        }
        let links = RedoRef::SetLinks {
            prev: anchor_header.prev,
            next: h.next,
        };
        modify(g, cs, FREE_LIST_ANCHOR, links)?;
        return Ok((pgno, frame, false));
    }
    let pgno = g.state_ref().next_unused_page;
    if pgno.get() > g.state_ref().page_count {
        return Err(TreeError::NeedGrowth);
    }
    // The page's first change is a Build, which formats all of it.
    let frame = g.new_page_to_format(pgno).ok_or(TreeError::NoFrame)?;
    cs.created.push(frame);
    g.state().next_unused_page = pgno + 1;
    Ok((pgno, frame, true))
}

/// Puts page `pgno` (already unlinked from its tree) at the head of the free list.
fn free_page(g: &mut Guard<'_>, cs: &mut ChangeSet, pgno: Pgno) -> TreeResult<()> {
    let anchor = frame_of(g, FREE_LIST_ANCHOR)?;
    let anchor_header = PageHeader::read(g.page(anchor));
    let empty = RedoRef::Build {
        object_id: 0,
        flags: flags::EMPTY,
        prev: 0,
        next: anchor_header.next,
        records: BuildRecords::Pairs(&[]),
    };
    modify(g, cs, pgno, empty)?;
    modify(
        g,
        cs,
        FREE_LIST_ANCHOR,
        RedoRef::SetLinks {
            prev: anchor_header.prev,
            next: pgno.get(),
        },
    )
}

/// A leaf emptied by a delete leaves its tree for the free list: its parent's entry is
/// removed and its neighbours are linked to each other. Only when the parent keeps at
/// least one other entry (no branch ever becomes empty; no merges).
fn release_empty_leaf(g: &mut Guard<'_>, cs: &mut ChangeSet, pos: &LeafPosition) -> TreeResult<()> {
    let Some(&(parent, index)) = pos.path.last() else {
        return Ok(());
    };
    let leaf_frame = frame_of(g, pos.leaf)?;
    let leaf = view(g, leaf_frame, pos.leaf)?;
    if leaf.record_count() != 0 {
        return Ok(());
    }
    let h = leaf.header();
    let parent_frame = frame_of(g, parent)?;
    if view(g, parent_frame, parent)?.record_count() < 2 {
        return Ok(());
    }
    for (neighbour, is_prev) in [(h.prev, true), (h.next, false)] {
        if neighbour == 0 {
            continue;
        }
        let f = frame_of(g, Pgno::new(neighbour))?;
        let nh = PageHeader::read(g.page(f));
        let links = if is_prev {
            RedoRef::SetLinks {
                prev: nh.prev,
                next: h.next,
            }
        } else {
            RedoRef::SetLinks {
                prev: h.prev,
                next: nh.next,
            }
        };
        modify(g, cs, Pgno::new(neighbour), links)?;
    }
    modify(
        g,
        cs,
        parent,
        RedoRef::Delete {
            index: index as u16,
        },
    )?;
    free_page(g, cs, pos.leaf)
}

/// Largest key + data an insert accepts: half of what fits an empty page, so that two
/// records always fit one page and a split always makes room. (Long-value chunks are
/// sized to fill a page exactly in twos or fours.)
pub fn max_entry_len(page_size: PageSize) -> usize {
    edbstress_format::page::max_key_data_len(page_size) / 2
}

/// Inserts a new record; an existing key is an error.
pub fn insert(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    root: Pgno,
    key: &[u8],
    data: &[u8],
) -> TreeResult<()> {
    if key.len() + data.len() > max_entry_len(g.state_ref().page_size) {
        return Err(corrupt(
            root,
            format!("record of {} bytes is too large", key.len() + data.len()),
        ));
    }
    for _ in 0..MAX_DEPTH * 2 {
        let pos = descend(g, root, key)?;
        let index = match pos.slot {
            Ok(_) => return Err(corrupt(pos.leaf, "insert of a key that exists")),
            Err(i) => i,
        };
        let frame = frame_of(g, pos.leaf)?;
        if view(g, frame, pos.leaf)?.fits(key.len(), data.len()) {
            let op = RedoRef::Insert {
                index: index as u16,
                key,
                data,
            };
            return modify(g, cs, pos.leaf, op);
        }
        split(g, cs, &pos.path, pos.leaf, key, data.len(), None)?;
    }
    Err(corrupt(
        root,
        "insert did not find room after repeated splits",
    ))
}

/// Deletes the record with `key`; returns whether it existed.
pub fn delete(g: &mut Guard<'_>, cs: &mut ChangeSet, root: Pgno, key: &[u8]) -> TreeResult<bool> {
    let pos = descend(g, root, key)?;
    match pos.slot {
        Ok(i) => {
            modify(g, cs, pos.leaf, RedoRef::Delete { index: i as u16 })?;
            release_empty_leaf(g, cs, &pos)?;
            Ok(true)
        }
        Err(_) => Ok(false),
    }
}

/// Replaces the data of the record with `key`; returns whether it existed.
pub fn replace(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    root: Pgno,
    key: &[u8],
    data: &[u8],
) -> TreeResult<bool> {
    let pos = descend(g, root, key)?;
    let Ok(i) = pos.slot else { return Ok(false) };
    let frame = frame_of(g, pos.leaf)?;
    let page = view(g, frame, pos.leaf)?;
    let old = page
        .record(i)
        .map_err(|e| corrupt(pos.leaf, e.to_string()))?
        .data
        .len();
    if page.free_space() + old >= data.len() {
        modify(
            g,
            cs,
            pos.leaf,
            RedoRef::ReplaceData {
                index: i as u16,
                data,
            },
        )?;
    } else {
        modify(g, cs, pos.leaf, RedoRef::Delete { index: i as u16 })?;
        insert(g, cs, root, key, data)?;
    }
    Ok(true)
}

/// Splits page `pgno` (reached through `path`) to make room for a record with `key`
/// and `data_len` bytes of data, which the caller then inserts by descending again.
///
/// `position` is where the new record will go: for leaves its key's place (None: found
/// by search); for branches the slot after the entry of the page that split, which key
/// order alone cannot give when a first entry's separator exceeds its subtree.
fn split(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    path: &[(Pgno, usize)],
    pgno: Pgno,
    key: &[u8],
    data_len: usize,
    position: Option<usize>,
) -> TreeResult<()> {
    let frame = frame_of(g, pgno)?;
    let (h, n, leaf_slot) = {
        let page = view(g, frame, pgno)?;
        (page.header(), page.record_count(), page.search(key))
    };
    let Some((&(parent, parent_index), parent_path)) = path.split_last() else {
        // The child's Build is encoded straight from the root's records.
        let payload = {
            let records = records_of(g, frame, pgno)?;
            let pairs: Vec<(&[u8], &[u8])> = records.iter().map(|r| (r.key, r.data)).collect();
            RedoRef::Build {
                object_id: h.object_id,
                flags: h.flags & !flags::ROOT,
                prev: 0,
                next: 0,
                records: BuildRecords::Pairs(&pairs),
            }
            .encode()
        };
        return split_root(g, cs, pgno, h, payload);
    };
    let is_leaf = h.flags & flags::LEAF != 0;
    let insert_at = match position {
        Some(p) => p.min(n),
        None => match leaf_slot {
            Ok(i) | Err(i) => i,
        },
    };
    // Where the upper part starts (an index into the old records), and the separator.
    let right_edge = insert_at == n
        && if is_leaf {
            h.next == 0
        } else {
            is_rightmost(g, path)?
        };
    let (prev, next) = if is_leaf {
        (pgno.get(), h.next)
    } else {
        (0, 0)
    };
    // The records are read in place (no copies): the separator is copied, the moved
    // records are encoded straight into the new page's Build payload.
    let (keep, separator, build) = {
        let records = records_of(g, frame, pgno)?;
        // Choose the split over the combined sequence C = old[..insert_at] + new + old[insert_at..]:
        // C[..s] stays, C[s..] moves, and C[s]'s key separates the halves.
        let split_at = if right_edge {
            // Appending at the right edge (new messages, new long values): keep this page
            // full and start a new one with just the new record.
            n
        } else {
            // Halve by bytes, at least one record on each side.
            let size = |k: &[u8], d: usize| 2 + k.len() + d + 4;
            let combined = |c: usize| -> usize {
                match c.cmp(&insert_at) {
                    std::cmp::Ordering::Less => size(records[c].key, records[c].data.len()),
                    std::cmp::Ordering::Equal => size(key, data_len),
                    std::cmp::Ordering::Greater => {
                        size(records[c - 1].key, records[c - 1].data.len())
                    }
                }
            };
            let total: usize = (0..=n).map(combined).sum();
            let mut acc = 0;
            let mut s = n;
            for c in 0..=n {
                acc += combined(c);
                if acc >= total / 2 {
                    s = c + 1;
                    break;
                }
            }
            s.clamp(1, n)
        };
        // Old records kept on this page, and the separator (the key of C[split_at]).
        let (keep, separator) = match split_at.cmp(&insert_at) {
            std::cmp::Ordering::Less => (split_at, records[split_at].key.to_vec()),
            std::cmp::Ordering::Equal => (split_at, key.to_vec()),
            std::cmp::Ordering::Greater => (split_at - 1, records[split_at - 1].key.to_vec()),
        };
        let moved: Vec<(&[u8], &[u8])> = records[keep..].iter().map(|r| (r.key, r.data)).collect();
        let build = RedoRef::Build {
            object_id: h.object_id,
            flags: h.flags & !flags::ROOT,
            prev,
            next,
            records: BuildRecords::Pairs(&moved),
        };
        (keep, separator, (build.code(), build.encode()))
    };
    let (new_pgno, new_frame, fresh) = allocate(g, cs)?;
    apply(g, cs, new_frame, new_pgno, build.0, build.1, fresh)?;
    if keep < n {
        modify(g, cs, pgno, RedoRef::Truncate { keep: keep as u16 })?;
    }
    if is_leaf {
        modify(
            g,
            cs,
            pgno,
            RedoRef::SetLinks {
                prev: h.prev,
                next: new_pgno.get(),
            },
        )?;
        if h.next != 0 {
            let next_frame = frame_of(g, Pgno::new(h.next))?;
            let next_next = PageHeader::read(g.page(next_frame)).next;
            modify(
                g,
                cs,
                Pgno::new(h.next),
                RedoRef::SetLinks {
                    prev: new_pgno.get(),
                    next: next_next,
                },
            )?;
        }
    }
    insert_separator(
        g,
        cs,
        parent_path,
        parent,
        parent_index + 1,
        &separator,
        new_pgno,
        pgno,
    )
}

/// The records of a cached page, borrowed from it.
fn records_of<'g>(g: &'g Guard<'_>, frame: FrameId, pgno: Pgno) -> TreeResult<Vec<Record<'g>>> {
    let page = view(g, frame, pgno)?;
    (0..page.record_count())
        .map(|i| page.record(i).map_err(|e| corrupt(pgno, e.to_string())))
        .collect()
}

/// Whether every step of `path` followed the last entry of its branch.
fn is_rightmost(g: &mut Guard<'_>, path: &[(Pgno, usize)]) -> TreeResult<bool> {
    for &(pgno, index) in path {
        let frame = frame_of(g, pgno)?;
        if view(g, frame, pgno)?.record_count() != index + 1 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Levels between page `pgno` and the leaves (0 for a leaf).
fn height_of(g: &mut Guard<'_>, pgno: Pgno) -> TreeResult<usize> {
    let mut height = 0;
    let mut p = pgno;
    loop {
        let f = frame_of(g, p)?;
        let page = view(g, f, p)?;
        if page.header().flags & flags::LEAF != 0 {
            return Ok(height);
        }
        p = child_of(&page, p, 0)?;
        height += 1;
        if height > MAX_DEPTH {
            return Err(corrupt(pgno, "branch deeper than 32 levels (a cycle?)"));
        }
    }
}

/// Inserts (separator → child) into branch `pgno` right after the entry of `left`,
/// the page that split into `left` and `child` (at `index` − 1), splitting the branch
/// if it is full.
#[allow(clippy::too_many_arguments)]
fn insert_separator(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    path: &[(Pgno, usize)],
    pgno: Pgno,
    index: usize,
    separator: &[u8],
    child: Pgno,
    left: Pgno,
) -> TreeResult<()> {
    let data = child.to_le_bytes();
    let frame = frame_of(g, pgno)?;
    if view(g, frame, pgno)?.fits(separator.len(), data.len()) {
        return place_entry(g, cs, pgno, index, separator, child);
    }
    // Split the branch, then place the entry next to `left`'s in whichever page at
    // this height now holds it. The root keeps its number but grows a level when
    // split (its records move to a new child, which may itself need splitting: loop).
    let height = height_of(g, pgno)?;
    let root = path.first().map_or(pgno, |&(p, _)| p);
    let (mut target_path, mut target, mut at) = (path.to_vec(), pgno, index);
    for _ in 0..MAX_DEPTH {
        split(g, cs, &target_path, target, separator, data.len(), Some(at))?;
        (target_path, target) = path_to_height(g, root, separator, height)?;
        let tframe = frame_of(g, target)?;
        let tpage = view(g, tframe, target)?;
        // Right after `left`'s entry; or first, when the split made the new entry the
        // first of the upper half (then `left`'s entry ends the lower half).
        let left_bytes = left.to_le_bytes();
        at = match (0..tpage.record_count())
            .find(|&i| tpage.record(i).is_ok_and(|r| r.data == left_bytes))
        {
            Some(i) => i + 1,
            None if tpage.record(0).map_or(true, |r| r.key >= separator) => 0,
            None => {
                return Err(corrupt(
                    target,
                    format!("no entry for page {left} after a branch split"),
                ));
            }
        };
        if tpage.fits(separator.len(), data.len()) {
            return place_entry(g, cs, target, at, separator, child);
        }
    }
    Err(corrupt(pgno, "branch still full after repeated splits"))
}

/// Inserts (separator → child) at `index` of branch `pgno`, which has room.
///
/// The first entry of a branch also takes keys below its separator, so its separator
/// may exceed keys of its subtree (after the entry before it was removed, say). When
/// the new separator goes right after it and is smaller, the first entry's key is
/// rewritten as the empty key — what it means anyway — to keep separators in order.
fn place_entry(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    pgno: Pgno,
    index: usize,
    separator: &[u8],
    child: Pgno,
) -> TreeResult<()> {
    if index == 1 {
        let frame = frame_of(g, pgno)?;
        let first = view(g, frame, pgno)?
            .record(0)
            .map_err(|e| corrupt(pgno, e.to_string()))?;
        if first.key > separator {
            let first_child = first.data.to_vec();
            modify(g, cs, pgno, RedoRef::Delete { index: 0 })?;
            modify(
                g,
                cs,
                pgno,
                RedoRef::Insert {
                    index: 0,
                    key: &[],
                    data: &first_child,
                },
            )?;
        }
    }
    let child = child.to_le_bytes();
    let op = RedoRef::Insert {
        index: index as u16,
        key: separator,
        data: &child,
    };
    modify(g, cs, pgno, op)
}

/// The page `height` levels above the leaves on the path `key` takes from `root`, and
/// the branch pages above it (with the entry followed in each).
fn path_to_height(
    g: &mut Guard<'_>,
    root: Pgno,
    key: &[u8],
    height: usize,
) -> TreeResult<(Vec<(Pgno, usize)>, Pgno)> {
    let steps = height_of(g, root)?
        .checked_sub(height)
        .ok_or_else(|| corrupt(root, "tree lower than the split branch"))?;
    let mut path = Vec::with_capacity(steps);
    let mut p = root;
    for _ in 0..steps {
        let f = frame_of(g, p)?;
        let page = view(g, f, p)?;
        let i = route(&page, p, key)?;
        path.push((p, i));
        p = child_of(&page, p, i)?;
    }
    Ok((path, p))
}

/// A full root: its records move to a new child, and the root becomes a branch with a
/// single entry (empty separator) pointing to it. The child is then split normally.
/// `child_build` is the encoded Build of the child (the root's records).
fn split_root(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    root: Pgno,
    h: PageHeader,
    child_build: Vec<u8>,
) -> TreeResult<()> {
    let (child, child_frame, fresh) = allocate(g, cs)?;
    apply(g, cs, child_frame, child, 4, child_build, fresh)?;
    let root_flags = flags::ROOT | flags::BRANCH | (h.flags & flags::LONG_VALUE);
    let build = RedoRef::Build {
        object_id: h.object_id,
        flags: root_flags,
        prev: 0,
        next: 0,
        records: BuildRecords::Pairs(&[(&[], &child.to_le_bytes())]),
    };
    modify(g, cs, root, build)
}
