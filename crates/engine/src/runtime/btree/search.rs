//! Descent, lookups, range scans and cache warming (read-only).

use edbstress_format::Pgno;
use edbstress_format::page::{Page, PageHeader, flags};

use super::*;

/// Where a key is, or would be, in a tree.
#[derive(Clone, Debug)]
pub struct LeafPosition {
    /// Branch pages from the root down, with the entry followed in each.
    pub path: TreePath,
    /// The leaf.
    pub leaf: Pgno,
    /// `Ok(i)`: the key is record i; `Err(i)`: it would be inserted at i.
    pub slot: Result<usize, usize>,
}

/// The branch pages of a descent, held inline: every lookup, insert and delete
/// descends, and a heap-allocated path was the engine's commonest allocation (a
/// third of all mallocs per transaction). Holds up to `MAX_DEPTH + 1` entries, the
/// most a descent keeps before it reports a cycle.
#[derive(Clone, Debug)]
pub struct TreePath {
    len: usize,
    entries: [(Pgno, usize); MAX_DEPTH + 1],
}

impl TreePath {
    fn new() -> TreePath {
        TreePath {
            len: 0,
            entries: [(Pgno::NONE, 0); MAX_DEPTH + 1],
        }
    }

    /// Adds the next branch down; false (nothing added) when the path is full.
    fn push(&mut self, entry: (Pgno, usize)) -> bool {
        let Some(slot) = self.entries.get_mut(self.len) else {
            return false;
        };
        *slot = entry;
        self.len += 1;
        true
    }
}

impl std::ops::Deref for TreePath {
    type Target = [(Pgno, usize)];

    fn deref(&self) -> &[(Pgno, usize)] {
        &self.entries[..self.len]
    }
}

/// Descends from `root` to the leaf for `key`.
pub fn descend(g: &mut Guard<'_>, root: Pgno, key: &[u8]) -> TreeResult<LeafPosition> {
    let mut pgno = root;
    let mut path = TreePath::new();
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
        if !path.push((pgno, index)) || path.len() > MAX_DEPTH {
            return Err(corrupt(pgno, "tree deeper than 32 levels (a cycle?)"));
        }
        pgno = child;
    }
}

/// Like [`frame_of`] without counting a hit or a reference (warm-up walks).
pub(super) fn peek_frame(g: &Guard<'_>, pgno: Pgno) -> TreeResult<FrameId> {
    g.peek(pgno).ok_or(TreeError::Miss(pgno))
}

/// Makes sure the first `count` pages of the free list are cached, or reports the
/// first that is not as a miss. A page's successor on the list is only known once the
/// page is read, so an insert that needs several new pages would otherwise restart
/// (undoing everything it did) once per page; called before it changes anything,
/// a restart here costs only this walk.
pub fn warm_free_list(g: &Guard<'_>, count: usize) -> TreeResult<()> {
    let anchor = peek_frame(g, FREE_LIST_ANCHOR)?;
    let mut next = PageHeader::read(g.page(anchor)).next;
    for _ in 0..count {
        if next == Pgno::NONE {
            break;
        }
        let frame = peek_frame(g, next)?;
        next = PageHeader::read(g.page(frame)).next;
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
        if first_leaf && empties && h.prev != Pgno::NONE {
            peek_frame(g, h.prev)?;
        }
        first_leaf = false;
        if h.next == Pgno::NONE || (ends_here && !empties) {
            return Ok(());
        }
        let next_frame = peek_frame(g, h.next)?;
        if ends_here {
            return Ok(());
        }
        (pgno, frame) = (h.next, next_frame);
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

/// Reads the data of the record with exactly `key` into `out` (emptied first; a
/// buffer the caller reuses); returns whether the record is present.
pub fn get_into(g: &mut Guard<'_>, root: Pgno, key: &[u8], out: &mut Vec<u8>) -> TreeResult<bool> {
    out.clear();
    let pos = descend(g, root, key)?;
    match pos.slot {
        Ok(i) => {
            let frame = frame_of(g, pos.leaf)?;
            let page = view(g, frame, pos.leaf)?;
            let record = page
                .record(i)
                .map_err(|e| corrupt(pos.leaf, e.to_string()))?;
            out.extend_from_slice(record.data);
            Ok(true)
        }
        Err(_) => Ok(false),
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
        if next == Pgno::NONE {
            return Ok(());
        }
        pgno = next;
        index = 0;
    }
    Err(corrupt(pgno, "leaf chain does not end (a cycle?)"))
}
