//! Page splits: the upper half moves to a new page (at the tree's right edge nothing
//! moves and the new record starts the page; at the end of a mailbox's rows only the
//! rows after it move, ESE's hotpoint split), its separator goes into the parent branch
//! (which may split in turn), and a full root moves its records to a new child and
//! becomes a branch above it. A split that moves records logs the split page's before
//! image (its records) with the new page, as ESE does (docs/format.md, op 7).

use edbstress_format::Pgno;
use edbstress_format::page::{PageHeader, Record, flags};

use super::*;
use crate::runtime::schema::MAILBOX_TABLE_OBJECT_ID;

/// Splits page `pgno` (reached through `path`) to make room for a record with `key`
/// and `data_len` bytes of data, which the caller then inserts by descending again.
///
/// `position` is where the new record will go: for leaves its key's place (None: found
/// by search); for branches the slot after the entry of the page that split, which key
/// order alone cannot give when a first entry's separator exceeds its subtree.
pub(super) fn split(
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
                prev: Pgno::NONE,
                next: Pgno::NONE,
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
            h.next == Pgno::NONE
        } else {
            is_rightmost(g, path)?
        };
    let (prev, next) = if is_leaf {
        (pgno, h.next)
    } else {
        (Pgno::NONE, Pgno::NONE)
    };
    // The records are read in place (no copies): the separator is copied, the moved
    // records are encoded straight into the new page's Build payload.
    let (keep, separator, build, hotpoint) = {
        let records = records_of(g, frame, pgno)?;
        // Choose the split over the combined sequence C = old[..insert_at] + new + old[insert_at..]:
        // C[..s] stays, C[s..] moves, and C[s]'s key separates the halves.
        let hotpoint = if is_leaf && h.object_id == MAILBOX_TABLE_OBJECT_ID {
            let usable = g.state_ref().page_size.bytes() - edbstress_format::PAGE_HEADER_LEN;
            hotpoint_split(&records, insert_at, key, data_len, usable)
        } else {
            None
        };
        let split_at = if right_edge {
            // Appending at the right edge (new messages, new long values): keep this page
            // full and start a new one with just the new record.
            n
        } else if let Some(s) = hotpoint {
            s
        } else {
            halving_split(&records, insert_at, key, data_len)
        };
        // Old records kept on this page, and the separator (the key of C[split_at]).
        let (keep, separator) = match split_at.cmp(&insert_at) {
            std::cmp::Ordering::Less => (split_at, records[split_at].key.to_vec()),
            std::cmp::Ordering::Equal => (split_at, key.to_vec()),
            std::cmp::Ordering::Greater => (split_at - 1, records[split_at - 1].key.to_vec()),
        };
        let build = new_page_build(&h, &records, keep, (prev, next));
        (keep, separator, build, hotpoint)
    };
    let (new_pgno, new_frame, fresh) = allocate(g, cs)?;
    apply(g, cs, new_frame, new_pgno, build.0, build.1, fresh)?;
    if keep < n {
        g.state().space.splits_with_image += 1;
    }
    if is_leaf {
        let space = &mut g.state().space;
        match (right_edge, hotpoint.is_some()) {
            (true, _) => space.splits_right_edge += 1,
            (false, true) => space.splits_hotpoint += 1,
            (false, false) => space.splits_halving += 1,
        }
    }
    if keep < n {
        modify(g, cs, pgno, RedoRef::Truncate { keep: keep as u16 })?;
    }
    if is_leaf {
        link_new_leaf(g, cs, pgno, &h, new_pgno)?;
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

/// Where a split halving the combined sequence by bytes puts its boundary (an index
/// into it, at least one record on each side), the new record of `key` and `data_len`
/// bytes at `insert_at` among `records`.
fn halving_split(records: &[Record<'_>], insert_at: usize, key: &[u8], data_len: usize) -> usize {
    let n = records.len();
    let size = |k: &[u8], d: usize| 2 + k.len() + d + 4;
    let combined = |c: usize| -> usize {
        match c.cmp(&insert_at) {
            std::cmp::Ordering::Less => size(records[c].key, records[c].data.len()),
            std::cmp::Ordering::Equal => size(key, data_len),
            std::cmp::Ordering::Greater => size(records[c - 1].key, records[c - 1].data.len()),
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
}

/// The redo operation (code and payload) building the new page of a split that keeps
/// `keep` of the page's `records` (header `h`), its leaf links `(prev, next)`.
///
/// As ESE logs a split (its `FBTISplitPageBeforeImageRequired`): when records
/// move, the new page is built from the split page's before image — every
/// record, without the free space — so the log alone rebuilds it; when nothing
/// moves (the right edge, a hotpoint at the page's end) the new page starts empty.
fn new_page_build(
    h: &PageHeader,
    records: &[Record<'_>],
    keep: usize,
    (prev, next): (Pgno, Pgno),
) -> (u8, Vec<u8>) {
    if keep < records.len() {
        let image: Vec<(&[u8], &[u8])> = records.iter().map(|r| (r.key, r.data)).collect();
        let op = RedoRef::BuildFromSplit {
            object_id: h.object_id,
            flags: h.flags & !flags::ROOT,
            prev,
            next,
            first: keep as u16,
            image: BuildRecords::Pairs(&image),
        };
        (op.code(), op.encode())
    } else {
        let op = RedoRef::Build {
            object_id: h.object_id,
            flags: h.flags & !flags::ROOT,
            prev,
            next,
            records: BuildRecords::Pairs(&[]),
        };
        (op.code(), op.encode())
    }
}

/// Links the new leaf `new_pgno` in after the split leaf `pgno` (header `h`): the
/// split page points at it, and the page after it (if any) back at it.
fn link_new_leaf(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    pgno: Pgno,
    h: &PageHeader,
    new_pgno: Pgno,
) -> TreeResult<()> {
    modify(
        g,
        cs,
        pgno,
        RedoRef::SetLinks {
            prev: h.prev,
            next: new_pgno,
        },
    )?;
    if h.next != Pgno::NONE {
        let next_frame = frame_of(g, h.next)?;
        let next_next = PageHeader::read(g.page(next_frame)).next;
        modify(
            g,
            cs,
            h.next,
            RedoRef::SetLinks {
                prev: new_pgno,
                next: next_next,
            },
        )?;
    }
    Ok(())
}

/// Bytes a record takes in a page, its tag included (split arithmetic).
fn split_size(key_len: usize, data_len: usize) -> usize {
    2 + key_len + data_len + 4
}

/// Bytes of the key prefix that names a mailbox-table row's mailbox.
const MAILBOX_PREFIX: usize = 4;

/// ESE's hotpoint split (its split selection detects an insert point that keeps taking
/// the inserts): a mailbox-table key that goes right after the last row of its mailbox
/// on the page is a new message appended to that mailbox, and the next ones will follow
/// it. Halving such a page would leave its lower half, the mailbox's older rows, at
/// ~50 % for good (no insert ever lands there again); instead the page keeps everything
/// up to the insert point, full, and only the rows after it (the next mailbox's) move,
/// once. At the page's end nothing moves and the new row starts a page of its own.
///
/// Returns the split point over the combined sequence (see [`split`]), or None when
/// the insert is not at the end of its mailbox's rows or the kept part would not fit.
fn hotpoint_split(
    records: &[Record<'_>],
    insert_at: usize,
    key: &[u8],
    data_len: usize,
    usable: usize,
) -> Option<usize> {
    let mailbox = key.get(..MAILBOX_PREFIX)?;
    let same_mailbox = |k: &[u8]| k.get(..MAILBOX_PREFIX) == Some(mailbox);
    let n = records.len();
    let prev = records.get(insert_at.checked_sub(1)?)?;
    if !same_mailbox(prev.key) {
        return None;
    }
    if insert_at == n {
        return Some(n);
    }
    if same_mailbox(records[insert_at].key) {
        return None;
    }
    let kept: usize = records[..insert_at]
        .iter()
        .map(|r| split_size(r.key.len(), r.data.len()))
        .sum::<usize>()
        + split_size(key.len(), data_len);
    // The new row stays with its mailbox's rows; the next mailbox's rows move.
    (kept <= usable).then_some(insert_at + 1)
}

/// The records of a cached page, borrowed from it.
pub(super) fn records_of<'g>(
    g: &'g Guard<'_>,
    frame: FrameId,
    pgno: Pgno,
) -> TreeResult<Vec<Record<'g>>> {
    let page = view(g, frame, pgno)?;
    (0..page.record_count())
        .map(|i| page.record(i).map_err(|e| corrupt(pgno, e.to_string())))
        .collect()
}

/// Whether every step of `path` followed the last entry of its branch.
pub(super) fn is_rightmost(g: &mut Guard<'_>, path: &[(Pgno, usize)]) -> TreeResult<bool> {
    for &(pgno, index) in path {
        let frame = frame_of(g, pgno)?;
        if view(g, frame, pgno)?.record_count() != index + 1 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Levels between page `pgno` and the leaves (0 for a leaf).
pub(super) fn height_of(g: &mut Guard<'_>, pgno: Pgno) -> TreeResult<usize> {
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
pub(super) fn insert_separator(
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
pub(super) fn place_entry(
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
pub(super) fn path_to_height(
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
pub(super) fn split_root(
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
        prev: Pgno::NONE,
        next: Pgno::NONE,
        records: BuildRecords::Pairs(&[(&[], &child.to_le_bytes())]),
    };
    modify(g, cs, root, build)
}

#[cfg(test)]
mod tests {
    use edbstress_format::page::Record;

    use super::hotpoint_split;
    use crate::runtime::schema::MessageKey;

    fn key(mailbox: u32, message: u64) -> [u8; 12] {
        MessageKey { mailbox, message }.encode()
    }

    #[test]
    fn hotpoint_splits_only_at_the_end_of_a_mailboxs_rows() {
        let keys = [key(1, 5), key(1, 9), key(2, 3), key(2, 4)];
        let data = [0u8; 100];
        let records: Vec<Record<'_>> = keys
            .iter()
            .map(|k| Record {
                key: k,
                data: &data,
            })
            .collect();
        let usable = 4096;
        // After mailbox 1's last row: its rows and the new one stay, mailbox 2's move.
        assert_eq!(
            hotpoint_split(&records, 2, &key(1, 10), 100, usable),
            Some(3)
        );
        // After the page's last row, of the same mailbox: nothing moves.
        assert_eq!(
            hotpoint_split(&records, 4, &key(2, 8), 100, usable),
            Some(4)
        );
        // Between two rows of one mailbox, or first of its mailbox on the page: halve.
        assert_eq!(hotpoint_split(&records, 1, &key(1, 7), 100, usable), None);
        assert_eq!(hotpoint_split(&records, 0, &key(1, 1), 100, usable), None);
        assert_eq!(hotpoint_split(&records, 2, &key(2, 1), 100, usable), None);
        // The kept rows and the new one must fit the page.
        assert_eq!(hotpoint_split(&records, 2, &key(1, 10), 100, 300), None);
    }
}
