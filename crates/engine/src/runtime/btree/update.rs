//! Insert, delete and replace; page allocation and the free-page list.

use edbstress_format::Pgno;
use edbstress_format::page::{PageHeader, flags};

use super::*;

/// Applies `op` to page `pgno` (cached), recording redo and undo information.
pub(super) fn modify(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    pgno: Pgno,
    op: RedoRef<'_>,
) -> TreeResult<()> {
    let frame = frame_of(g, pgno)?;
    let mut payload = reuse::take_payload(op.encoded_len());
    op.encode_into(&mut payload);
    apply(g, cs, frame, pgno, op.code(), payload, false)
}

/// Applies the op encoded as `payload` (the log record's, moved into it: the data is
/// copied once into the payload and once into the page) to page `pgno` in `frame`;
/// `new`: a never-used page, which has no before-image to keep.
pub(super) fn apply(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    frame: FrameId,
    pgno: Pgno,
    code: u8,
    payload: Vec<u8>,
    new: bool,
) -> TreeResult<()> {
    cs.begin(g);
    let op = RedoRef::decode(code, &payload).map_err(|e| corrupt(pgno, e.to_string()))?;
    let before = if new { 0 } else { page_dbtime(g.page(frame)) };
    if !cs.touched.iter().any(|&(f, _)| f == frame) {
        if !new {
            cs.originals.push((frame, BeforeImage::of(g.page(frame))));
        }
        cs.touched.push((frame, pgno));
    }
    if let Some((_, image)) = cs.originals.iter_mut().find(|(f, _)| *f == frame) {
        match bodies_rewritten(&op, g.page(frame)) {
            BodiesRewritten::None => {}
            BodiesRewritten::Span(span) => image.keep_span(g.page(frame), span),
            BodiesRewritten::Any => image.keep_bodies(g.page(frame)),
        }
    }
    let after = {
        let s = g.state();
        s.dbtime += 1;
        s.dbtime
    };
    op.apply_to_checked_page(g.page_mut(frame), pgno, after)
        .map_err(|e| corrupt(pgno, e.to_string()))?;
    cs.records.push(LogRecord::PageRedo {
        pgno,
        dbtime_before: before,
        dbtime_after: after,
        trx: cs.trx,
        op: code,
        payload,
    });
    Ok(())
}

/// Which record bodies of a page an op may rewrite (what its undo image must save of
/// them first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum BodiesRewritten {
    /// None: link changes, and inserts that append at the first free offset without
    /// compacting.
    None,
    /// Only these bytes of the bodies (and bytes from the first free offset on): a
    /// delete's record, a replace's record when it does not compact.
    Span(std::ops::Range<usize>),
    /// Any: everything else may move or zero bodies.
    Any,
}

/// What of the record bodies of `page` `op` may rewrite.
pub(super) fn bodies_rewritten(op: &RedoRef<'_>, page: &[u8]) -> BodiesRewritten {
    let Ok(p) = Page::new_unvalidated(page) else {
        return BodiesRewritten::Any;
    };
    let span = |index: u16| {
        p.record_span(usize::from(index))
            .map_or(BodiesRewritten::Any, BodiesRewritten::Span)
    };
    match *op {
        RedoRef::SetLinks { .. } => BodiesRewritten::None,
        RedoRef::Insert { key, data, .. }
            if p.inserts_without_moving_bodies(key.len(), data.len()) =>
        {
            BodiesRewritten::None
        }
        RedoRef::Delete { index } => span(index),
        RedoRef::ReplaceData { index, data }
            if p.replaces_without_moving_bodies(usize::from(index), data.len()) =>
        {
            span(index)
        }
        _ => BodiesRewritten::Any,
    }
}

/// Allocates a never-used page and a frame for it.
///
/// A page from the free list is reused first (`fresh` = false: it exists on disk, so
/// its replacement is logged against its real dbtime); otherwise a never-used page
/// from the end of the file.
pub(super) fn allocate(g: &mut Guard<'_>, cs: &mut ChangeSet) -> TreeResult<(Pgno, FrameId, bool)> {
    cs.begin(g);
    let anchor = frame_of(g, FREE_LIST_ANCHOR)?;
    let anchor_header = PageHeader::read(g.page(anchor));
    if anchor_header.next != Pgno::NONE {
        let pgno = anchor_header.next;
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
        g.state().space.pages_reused += 1;
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
    g.state().space.pages_from_end += 1;
    Ok((pgno, frame, true))
}

/// Puts page `pgno` (already unlinked from its tree) at the head of the free list.
pub(super) fn free_page(g: &mut Guard<'_>, cs: &mut ChangeSet, pgno: Pgno) -> TreeResult<()> {
    let anchor = frame_of(g, FREE_LIST_ANCHOR)?;
    let anchor_header = PageHeader::read(g.page(anchor));
    let empty = RedoRef::Build {
        object_id: 0,
        flags: flags::EMPTY,
        prev: Pgno::NONE,
        next: anchor_header.next,
        records: BuildRecords::Pairs(&[]),
    };
    modify(g, cs, pgno, empty)?;
    g.state().space.pages_freed += 1;
    modify(
        g,
        cs,
        FREE_LIST_ANCHOR,
        RedoRef::SetLinks {
            prev: anchor_header.prev,
            next: pgno,
        },
    )
}

/// A leaf emptied by a delete leaves its tree for the free list: its parent's entry is
/// removed and its neighbours are linked to each other. Only when the parent keeps at
/// least one other entry (no branch ever becomes empty).
pub(super) fn release_empty_leaf(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    pos: &LeafPosition,
) -> TreeResult<()> {
    let Some(&(parent, index)) = pos.path.last() else {
        return Ok(());
    };
    release_empty_leaf_at(g, cs, pos.leaf, parent, index)
}

/// [`release_empty_leaf`] for `leaf`, entry `index` of `parent`.
fn release_empty_leaf_at(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    leaf: Pgno,
    parent: Pgno,
    index: usize,
) -> TreeResult<()> {
    let leaf_frame = frame_of(g, leaf)?;
    let page = view(g, leaf_frame, leaf)?;
    if page.record_count() != 0 {
        return Ok(());
    }
    let h = page.header();
    let parent_frame = frame_of(g, parent)?;
    if view(g, parent_frame, parent)?.record_count() < 2 {
        return Ok(());
    }
    modify(
        g,
        cs,
        parent,
        RedoRef::Delete {
            index: index as u16,
        },
    )?;
    unlink_and_free(g, cs, leaf, h)
}

/// Links the neighbours of `leaf` (header `h`, already out of its parent) to each
/// other and puts it on the free list.
fn unlink_and_free(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    leaf: Pgno,
    h: PageHeader,
) -> TreeResult<()> {
    for (neighbour, is_prev) in [(h.prev, true), (h.next, false)] {
        if neighbour == Pgno::NONE {
            continue;
        }
        let f = frame_of(g, neighbour)?;
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
        modify(g, cs, neighbour, links)?;
    }
    free_page(g, cs, leaf)
}

/// A merge never reads a sibling from disk only to look at it unless the leaf is
/// under this share of its page (percent): ESE's version cleanup checks an uncached
/// sibling only for nearly empty pages (bt.cxx, `FBTICheckSibling`: 30 % less the
/// table's free density; one third in older versions).
const MERGE_READS_SIBLING_BELOW_PCT: usize = 30;

/// Share of a page (percent) a merge leaves free in the sibling it fills: ESE keeps a
/// table's free density there (`FBTISPCCheckMergeable` adds `CbBTIFreeDensity`), 20 %
/// at the default table density of 80 %.
const MERGE_FREE_DENSITY_PCT: usize = 20;

/// After a delete, ESE's merge at version cleanup (bt.cxx, `ErrBTICheckForMultipageOLC`
/// and `FBTISPCCheckMergeable`): a leaf whose records all fit in a sibling, with the
/// table's free density still free there, moves them into it and leaves the tree —
/// whatever its own fill, as long as the sibling is cached; a nearly empty leaf also
/// reads an uncached sibling. The right sibling is tried first; the left one only when
/// the leaf is neither the first nor the last of its tree (merging the last page into
/// its left sibling would undo the appends that fill it). Only siblings under the same
/// parent (branches are never merged). Without it the space deletes free stays
/// scattered in thinned-out leaves (long-value leaves above all: chunks are only ever
/// appended at the tree's right edge) and the file grows instead (docs/fidelity.md,
/// growth per transactional I/O). The moved records are logged as inserts into the
/// sibling (ESE logs the merged page's before image: the same bytes).
fn merge_thinned_leaf(g: &mut Guard<'_>, cs: &mut ChangeSet, pos: &LeafPosition) -> TreeResult<()> {
    let Some(&(parent, index)) = pos.path.last() else {
        return Ok(());
    };
    let page_bytes = g.state_ref().page_size.bytes();
    let usable = page_bytes - edbstress_format::PAGE_HEADER_LEN;
    // Just changed by the delete: cached.
    let Some(leaf_frame) = g.peek(pos.leaf) else {
        return Ok(());
    };
    let leaf = view(g, leaf_frame, pos.leaf)?;
    let count = leaf.record_count();
    let h = leaf.header();
    if count == 0 || h.flags & flags::LEAF == 0 {
        return Ok(());
    }
    // Record bytes and tags: what the records take in the sibling.
    let needed = usable.saturating_sub(leaf.free_space());
    let nearly_empty = needed * 100 < usable * MERGE_READS_SIBLING_BELOW_PCT;
    let reserve = page_bytes * MERGE_FREE_DENSITY_PCT / 100;
    if needed + reserve > usable {
        return Ok(());
    }
    // The check looks at the parent (just descended through) and the sibling without
    // counting a reference to either, as ESE latches them with `bflfNoTouch`: a check
    // that merges nothing leaves the cache's replacement order as it was.
    let Some(parent_frame) = g.peek(parent) else {
        return Ok(());
    };
    let parent_page = view(g, parent_frame, parent)?;
    let entries = parent_page.record_count();
    let right = if index + 1 < entries {
        Some(child_of(&parent_page, parent, index + 1)?)
    } else {
        None
    };
    let left = if index > 0 && h.prev != Pgno::NONE && h.next != Pgno::NONE {
        Some(child_of(&parent_page, parent, index - 1)?)
    } else {
        None
    };
    for (sibling, into_right) in [(right, true), (left, false)] {
        let Some(sibling) = sibling else { continue };
        // Looking at a sibling that is not cached costs a read: only for a nearly
        // empty leaf.
        let sibling_frame = match g.peek(sibling) {
            Some(f) => f,
            None if nearly_empty => frame_of(g, sibling)?,
            None => continue,
        };
        let sibling_page = view(g, sibling_frame, sibling)?;
        if sibling_page.header().flags & flags::LEAF == 0
            || sibling_page.free_space() < needed + reserve
        {
            continue;
        }
        let base = if into_right {
            0
        } else {
            sibling_page.record_count()
        };
        return move_leaf_into(
            g, cs, pos.leaf, h, count, sibling, base, parent, index, into_right,
        );
    }
    Ok(())
}

/// Moves the `count` records of `leaf` (entry `index` of `parent`) into `sibling` from
/// its record `base` on, then takes `leaf` out of the tree onto the free list. A right
/// sibling takes over the leaf's parent entry (its separator bounds the moved keys from
/// below), and its own entry goes; a left sibling's entry already routes them.
#[allow(clippy::too_many_arguments)]
fn move_leaf_into(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    leaf: Pgno,
    h: PageHeader,
    count: usize,
    sibling: Pgno,
    base: usize,
    parent: Pgno,
    index: usize,
    into_right: bool,
) -> TreeResult<()> {
    let moved: Vec<(Vec<u8>, Vec<u8>)> = {
        let frame = frame_of(g, leaf)?;
        let page = view(g, frame, leaf)?;
        (0..count)
            .map(|i| {
                page.record(i)
                    .map(|r| (r.key.to_vec(), r.data.to_vec()))
                    .map_err(|e| corrupt(leaf, e.to_string()))
            })
            .collect::<TreeResult<_>>()?
    };
    for (i, (key, data)) in moved.iter().enumerate() {
        let op = RedoRef::Insert {
            index: (base + i) as u16,
            key,
            data,
        };
        modify(g, cs, sibling, op)?;
    }
    for i in (0..count).rev() {
        modify(g, cs, leaf, RedoRef::Delete { index: i as u16 })?;
    }
    g.state().space.merges += 1;
    if !into_right {
        return release_empty_leaf_at(g, cs, leaf, parent, index);
    }
    // The right sibling's records now start at the leaf's separator: its pointer moves
    // into the leaf's entry and its own entry goes.
    modify(
        g,
        cs,
        parent,
        RedoRef::ReplaceData {
            index: index as u16,
            data: &sibling.to_le_bytes(),
        },
    )?;
    modify(
        g,
        cs,
        parent,
        RedoRef::Delete {
            index: (index + 1) as u16,
        },
    )?;
    unlink_and_free(g, cs, leaf, h)
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
            merge_thinned_leaf(g, cs, &pos)?;
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
