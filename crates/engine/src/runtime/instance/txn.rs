//! Transactions: an attempt runs under the instance lock with undo copies, misses and
//! growth are resolved outside it and the attempt retried; commit, reads, seeks and the
//! long-value chunks of message bodies.
//!
//! Each operation touches what an Exchange one does: an insert adds the row (its
//! mailbox's last table leaf, or a random one: [`InsertKeyOrder`]), the body's chunks
//! (the long-value tree's right edge) and
//! a view index entry at a random place of the mailbox's view; a delete removes all
//! three; a replace rewrites the row and, when the view's sort property changes, moves
//! the view entry; a message is found through the view ([`Instance::seek_view`]).

use std::sync::atomic::Ordering;

use edbstress_format::log::{LogPosition, LogRecord};
use edbstress_format::{PageSize, Pgno};

use crate::error::EngineError;
use crate::runtime::btree::{self, ChangeSet, Guard, TreeError, reuse};
use crate::runtime::schema::{
    INLINE_BODY_MAX, KEY_LEN, LONG_VALUE_ROOT, LongValueKey, MAILBOX_TABLE_ROOT, MessageKey,
    RowHeader, VIEW_INDEX_ROOT, ViewKey, chunk_len, new_message_id, record_footprint,
    view_sort_key,
};

use super::*;

impl Instance {
    /// Runs `attempt` under the instance lock until it completes, resolving misses,
    /// frame shortages and growth outside the lock; commits its changes if any.
    ///
    /// Pages faulted in for the operation stay pinned until it completes: its final
    /// attempt needs all of them at once, and a small cache would otherwise evict the
    /// first before the last arrives. A completed attempt unpins them in its own hold
    /// of the lock (a separate hold only to unpin was a quarter of all the lock's takes,
    /// each a chance to wait); an operation that fails unpins them here.
    pub(super) fn run<T>(
        &self,
        durability: Durability,
        attempt: impl FnMut(&mut Guard<'_>, &mut ChangeSet) -> Result<T, TreeError>,
    ) -> Result<(T, LogPosition, u32), EngineError> {
        let mut pinned = reuse::take_pins();
        let result = self.run_pinning(durability, attempt, &mut pinned);
        if !pinned.is_empty() {
            let mut g = self.cache.lock();
            for &pgno in &pinned {
                g.unpin(pgno);
            }
        }
        reuse::recycle_pins(pinned);
        result
    }

    pub(super) fn run_pinning<T>(
        &self,
        durability: Durability,
        mut attempt: impl FnMut(&mut Guard<'_>, &mut ChangeSet) -> Result<T, TreeError>,
        pinned: &mut Vec<Pgno>,
    ) -> Result<(T, LogPosition, u32), EngineError> {
        // Never pin so much that other sessions could find no frame at all.
        let max_pins = (self.cache.config().max_frames / 4).max(4);
        let trx = self.next_trx.fetch_add(1, Ordering::Relaxed);
        let mut retries = 0;
        // The lock as `fault_in` hands it back after installing a page: the retry runs
        // under it rather than releasing and taking it again (with many sessions on few
        // cores, each take of a contended lock can cost a sleep).
        let mut held = None;
        loop {
            if self.cache.has_failed() {
                // `failed` takes the cache lock: let go of the one a miss handed back.
                drop(held.take());
                if let Some(msg) = self.cache.failed() {
                    return Err(EngineError::ShutDown(Some(msg)));
                }
            }
            let mut g = match held.take() {
                Some(g) => g,
                None => self.cache.lock(),
            };
            let mut cs = ChangeSet::new(trx);
            match attempt(&mut g, &mut cs) {
                Ok(value) => {
                    for pgno in pinned.drain(..) {
                        g.unpin(pgno);
                    }
                    if cs.is_empty() {
                        return Ok((value, LogPosition::default(), retries));
                    }
                    let lazy = durability == Durability::Lazy;
                    // A vector kept from the session's earlier change sets.
                    let mut records = cs.log_buffer();
                    if self.config.torn_write_protection {
                        // Ahead of the change, in the same append: the page's first_dirty
                        // (and so the checkpoint) then never passes its image.
                        cs.take_page_images(&g, &mut records);
                    }
                    records.push(LogRecord::Begin { trx });
                    records.append(&mut cs.records);
                    records.push(LogRecord::Commit { trx, lazy });
                    let start = self.log.current();
                    let end = self.log.append(&records)?;
                    cs.recycle_log_buffer(records);
                    for &(frame, _) in &cs.touched {
                        g.mark_dirty_span(frame, start, end);
                    }
                    // Position and state read under one lock hold: the state then covers
                    // every allocation and dbtime before the position.
                    let checkpoint = g.checkpoint_position();
                    let state = g.state_ref().checkpoint_state();
                    drop(g);
                    if !self.config.hold_checkpoint {
                        self.log.set_checkpoint(checkpoint, state);
                    }
                    let depth = self.log.bytes_between(checkpoint, end);
                    match durability {
                        Durability::Durable => {
                            self.log.flush_to(end)?;
                            self.counters
                                .durable_commits
                                .fetch_add(1, Ordering::Relaxed);
                        }
                        Durability::Lazy => {
                            self.counters.lazy_commits.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    self.counters
                        .retries
                        .fetch_add(u64::from(retries), Ordering::Relaxed);
                    // Past the hard limit the transaction is done but its session does
                    // not go on until the page writer has brought the checkpoint back
                    // (docs/engine.md, "Checkpoint depth under load").
                    let limit = self.checkpoint_hard_limit();
                    if depth > limit {
                        self.cache.wait_for_checkpoint(limit)?;
                    }
                    return Ok((value, end, retries));
                }
                Err(e) => {
                    let frames_needed = cs.created_count() + 1;
                    cs.undo(&mut g);
                    retries += 1;
                    if retries > MAX_ATTEMPTS {
                        return Err(EngineError::Invalid(format!(
                            "operation did not complete after {MAX_ATTEMPTS} attempts (cache too small for the working set?)"
                        )));
                    }
                    match e {
                        TreeError::Miss(pgno) => {
                            let mut g = self.cache.fault_in(g, pgno)?;
                            if pinned.len() < max_pins && g.pin(pgno) {
                                pinned.push(pgno);
                            }
                            held = Some(g);
                        }
                        TreeError::NoFrame => {
                            drop(self.cache.try_wait_for_frames(g, frames_needed)?)
                        }
                        TreeError::NeedGrowth => {
                            drop(g);
                            self.grow(frames_needed as u32)?;
                        }
                        TreeError::Corrupt { pgno, what } => {
                            return Err(EngineError::CorruptPage {
                                path: self.config.layout.db_file.clone(),
                                pgno,
                                what,
                            });
                        }
                    }
                }
            }
        }
    }

    /// Applies `ops` as one transaction.
    pub fn commit(
        &self,
        ops: &[TxnOp<'_>],
        durability: Durability,
    ) -> Result<CommitOutcome, EngineError> {
        let chunk_len = self.chunk_len;
        let insert_keys = self.config.insert_keys;
        let ((inserted, found), position, retries) = self.run(durability, |g, cs| {
            // Captures the tree state (message ids included) for undo.
            cs.begin(g);
            let mut inserted = Vec::new();
            let mut found = Vec::new();
            for op in ops {
                match *op {
                    TxnOp::Insert {
                        mailbox,
                        props,
                        body,
                    } => {
                        if body.len() > INLINE_BODY_MAX as usize {
                            // The long value's new pages, fetched before anything changes.
                            let free = btree::last_leaf_free_space(g, LONG_VALUE_ROOT)?;
                            let pages =
                                new_long_value_pages(g.state_ref().page_size, body.len(), free);
                            btree::warm_free_list(g, pages)?;
                        }
                        let sequence = take_sequence(g);
                        let message = new_message_id(insert_keys, sequence);
                        let key = MessageKey { mailbox, message };
                        let sort = view_sort_key(message);
                        let header =
                            RowHeader::for_message(sequence, body.len() as u32, unix_now(), sort);
                        let mut row = reuse::take_row();
                        let inline = if header.long { &[][..] } else { body };
                        header.encode_into(props, inline, &mut row);
                        btree::insert(g, cs, MAILBOX_TABLE_ROOT, &key.encode(), &row)?;
                        reuse::recycle_row(row);
                        if header.long {
                            insert_chunks(g, cs, sequence, body, chunk_len)?;
                        }
                        insert_view_entry(g, cs, ViewKey::of(key, sort))?;
                        inserted.push(key);
                    }
                    TxnOp::Delete { key } => {
                        let mut row = reuse::take_row();
                        if !btree::get_into(g, MAILBOX_TABLE_ROOT, &key.encode(), &mut row)? {
                            reuse::recycle_row(row);
                            found.push(false);
                            continue;
                        }
                        let fixed = RowHeader::decode(&row).ok_or_else(|| bad_row(key))?;
                        reuse::recycle_row(row);
                        if fixed.long {
                            delete_chunks(g, cs, fixed.lvid, fixed.body_len, chunk_len)?;
                        }
                        btree::delete(g, cs, MAILBOX_TABLE_ROOT, &key.encode())?;
                        delete_view_entry(g, cs, ViewKey::of(key, fixed.sort))?;
                        found.push(true);
                    }
                    TxnOp::Replace {
                        key,
                        props,
                        body,
                        resort,
                    } => {
                        let mut row = reuse::take_row();
                        if !btree::get_into(g, MAILBOX_TABLE_ROOT, &key.encode(), &mut row)? {
                            reuse::recycle_row(row);
                            found.push(false);
                            continue;
                        }
                        let fixed = RowHeader::decode(&row).ok_or_else(|| bad_row(key))?;
                        let sort = resort.unwrap_or(fixed.sort);
                        let mut new_row = reuse::take_row();
                        match body {
                            Some(body) => {
                                if fixed.long {
                                    delete_chunks(g, cs, fixed.lvid, fixed.body_len, chunk_len)?;
                                }
                                // The long value keeps its id, as ESE's update of a
                                // separated long value does.
                                let header = RowHeader::for_message(
                                    fixed.lvid,
                                    body.len() as u32,
                                    fixed.received,
                                    sort,
                                );
                                if header.long {
                                    insert_chunks(g, cs, fixed.lvid, body, chunk_len)?;
                                }
                                let inline = if header.long { &[][..] } else { body };
                                header.encode_into(props, inline, &mut new_row);
                            }
                            // Properties only: the body (inline or long) stays as it was.
                            None => RowHeader { sort, ..fixed }.encode_into(
                                props,
                                fixed.inline_body(&row),
                                &mut new_row,
                            ),
                        }
                        reuse::recycle_row(row);
                        btree::replace(g, cs, MAILBOX_TABLE_ROOT, &key.encode(), &new_row)?;
                        reuse::recycle_row(new_row);
                        if sort != fixed.sort {
                            delete_view_entry(g, cs, ViewKey::of(key, fixed.sort))?;
                            insert_view_entry(g, cs, ViewKey::of(key, sort))?;
                        }
                        found.push(true);
                    }
                }
            }
            Ok((inserted, found))
        })?;
        Ok(CommitOutcome {
            position,
            inserted,
            found,
            retries,
        })
    }

    /// Reads a message (and its body when `with_body`).
    ///
    /// The body is read chunk by chunk, keeping what earlier attempts read, so a large
    /// body never needs all its pages cached at once. Row and body are read in separate
    /// lock holds: when the body turns out incomplete, the row is read again — a
    /// message deleted or rewritten meanwhile by another session is reported as
    /// it is now, and only a body missing under an unchanged row is corruption.
    pub fn read(&self, key: MessageKey, with_body: bool) -> Result<Option<Message>, EngineError> {
        let chunk_len = self.chunk_len;
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        let mut previous: Option<Vec<u8>> = None;
        for _ in 0..100 {
            let mut row = reuse::take_row();
            let (present, _, _) = self.run(Durability::Lazy, |g, _| {
                btree::get_into(g, MAILBOX_TABLE_ROOT, &key.encode(), &mut row)
            })?;
            if !present {
                reuse::recycle_row(row);
                return Ok(None);
            }
            let fixed = RowHeader::decode(&row).ok_or_else(|| self.corrupt_row(key))?;
            let props = fixed.props(&row).to_vec();
            let body = if !with_body {
                None
            } else if fixed.long {
                let mut body = Vec::with_capacity(fixed.body_len as usize);
                self.run(Durability::Lazy, |g, _| {
                    read_chunks(g, fixed.lvid, fixed.body_len, chunk_len, &mut body)
                })?;
                if body.len() != fixed.body_len as usize {
                    if previous.as_ref() == Some(&row) {
                        return Err(EngineError::CorruptPage {
                            path: self.config.layout.db_file.clone(),
                            pgno: Pgno::NONE,
                            what: format!(
                                "long value {} has {} of its {} bytes",
                                fixed.lvid,
                                body.len(),
                                fixed.body_len
                            ),
                        });
                    }
                    previous = Some(row);
                    continue;
                }
                Some(body)
            } else {
                Some(fixed.inline_body(&row).to_vec())
            };
            reuse::recycle_row(row);
            return Ok(Some(Message {
                key,
                props,
                body_len: fixed.body_len,
                body,
            }));
        }
        Err(EngineError::Invalid(format!(
            "message {}:{} kept changing while being read",
            key.mailbox, key.message
        )))
    }

    pub(super) fn corrupt_row(&self, key: MessageKey) -> EngineError {
        EngineError::CorruptPage {
            path: self.config.layout.db_file.clone(),
            pgno: Pgno::NONE,
            what: format!(
                "row of message {}:{} is malformed",
                key.mailbox, key.message
            ),
        }
    }

    /// The first message of `mailbox` with an id ≥ `from` (wrapping to the mailbox's
    /// first message), or None when the mailbox is empty.
    pub fn seek_message(&self, mailbox: u32, from: u64) -> Result<Option<MessageKey>, EngineError> {
        let (found, _, _) = self.run(Durability::Lazy, |g, _| {
            for start in [from, 0] {
                let probe = MessageKey {
                    mailbox,
                    message: start,
                }
                .encode();
                // Only the key is needed: the row is not copied out.
                let mut first = None;
                btree::scan_from(g, MAILBOX_TABLE_ROOT, &probe, &mut |k, _| {
                    first = Some(MessageKey::decode(k));
                    false
                })?;
                if let Some(key) = first.flatten().filter(|k| k.mailbox == mailbox) {
                    return Ok(Some(key));
                }
                if start == 0 {
                    break;
                }
            }
            Ok(None)
        })?;
        Ok(found)
    }

    /// The message at view position `sort` of `mailbox`'s view: the first view entry
    /// with a sort key ≥ `sort` (wrapping to the view's first), through its bookmark;
    /// None when the mailbox is empty. This is how Exchange finds a message a user
    /// opens: a seek in a folder view, then the row the entry points to.
    pub fn seek_view(&self, mailbox: u32, sort: u32) -> Result<Option<MessageKey>, EngineError> {
        let (found, _, _) = self.run(Durability::Lazy, |g, _| {
            for start in [sort, 0] {
                let probe = ViewKey {
                    mailbox,
                    sort: start,
                    message: 0,
                }
                .encode();
                let mut first = None;
                btree::scan_from(g, VIEW_INDEX_ROOT, &probe, &mut |k, data| {
                    first = Some((
                        ViewKey::decode(k),
                        data.get(..KEY_LEN).and_then(MessageKey::decode),
                    ));
                    false
                })?;
                match first {
                    Some((Some(view), Some(bookmark))) if view.mailbox == mailbox => {
                        if bookmark != view.message_key() {
                            return Err(TreeError::Corrupt {
                                pgno: Pgno::NONE,
                                what: format!(
                                    "view entry of message {}:{} holds the bookmark of {}:{}",
                                    view.mailbox, view.message, bookmark.mailbox, bookmark.message
                                ),
                            });
                        }
                        return Ok(Some(bookmark));
                    }
                    Some((None, _)) | Some((Some(_), None)) => {
                        return Err(TreeError::Corrupt {
                            pgno: Pgno::NONE,
                            what: "malformed view index entry".into(),
                        });
                    }
                    _ => {}
                }
                if start == 0 {
                    break;
                }
            }
            Ok(None)
        })?;
        Ok(found)
    }

    /// Every view index entry in key order with its bookmark (tests and checks).
    pub fn all_view_entries(&self) -> Result<Vec<(ViewKey, Option<MessageKey>)>, EngineError> {
        let mut entries: Vec<(ViewKey, Option<MessageKey>)> = Vec::new();
        self.run(Durability::Lazy, |g, _| {
            let start = entries
                .last()
                .map_or(Vec::new(), |(k, _)| k.encode().to_vec());
            btree::scan_from(g, VIEW_INDEX_ROOT, &start, &mut |k, data| {
                if let Some(key) =
                    ViewKey::decode(k).filter(|key| entries.last().map(|e| e.0) < Some(*key))
                {
                    entries.push((key, data.get(..KEY_LEN).and_then(MessageKey::decode)));
                }
                true
            })
        })?;
        Ok(entries)
    }

    /// Every message key in key order (tests and checks; reads the whole table, a
    /// page at a time, resuming after the last key on every retry).
    pub fn all_keys(&self) -> Result<Vec<MessageKey>, EngineError> {
        let mut keys: Vec<MessageKey> = Vec::new();
        self.run(Durability::Lazy, |g, _| {
            let start = keys.last().map_or(Vec::new(), |k| k.encode().to_vec());
            btree::scan_from(g, MAILBOX_TABLE_ROOT, &start, &mut |k, _| {
                if let Some(key) = MessageKey::decode(k).filter(|key| keys.last() < Some(key)) {
                    keys.push(key);
                }
                true
            })
        })?;
        Ok(keys)
    }
}

/// The next message sequence number (its long value's id).
fn take_sequence(g: &mut Guard<'_>) -> u64 {
    let s = g.state();
    s.next_message_id += 1;
    s.next_message_id - 1
}

fn bad_row(key: MessageKey) -> TreeError {
    TreeError::Corrupt {
        pgno: Pgno::NONE,
        what: format!(
            "row of message {}:{} is malformed",
            key.mailbox, key.message
        ),
    }
}

fn insert_view_entry(g: &mut Guard<'_>, cs: &mut ChangeSet, key: ViewKey) -> Result<(), TreeError> {
    btree::insert(g, cs, VIEW_INDEX_ROOT, &key.encode(), &key.entry_data())
}

fn delete_view_entry(g: &mut Guard<'_>, cs: &mut ChangeSet, key: ViewKey) -> Result<(), TreeError> {
    if btree::delete(g, cs, VIEW_INDEX_ROOT, &key.encode())? {
        Ok(())
    } else {
        Err(TreeError::Corrupt {
            pgno: Pgno::NONE,
            what: format!(
                "message {}:{} has no view index entry (sort key {:#x})",
                key.mailbox, key.message, key.sort
            ),
        })
    }
}

fn insert_chunks(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    lvid: u64,
    body: &[u8],
    chunk_len: usize,
) -> Result<(), TreeError> {
    for (chunk, data) in body.chunks(chunk_len).enumerate() {
        let key = LongValueKey {
            lvid,
            chunk: chunk as u32,
        }
        .encode();
        btree::insert(g, cs, LONG_VALUE_ROOT, &key, data)?;
    }
    Ok(())
}

/// New pages the chunks of a `body_len`-byte long value take when appended to a last
/// leaf with `free` bytes (`chunk_len` makes a whole number of chunks fill a page).
fn new_long_value_pages(page_size: PageSize, body_len: usize, free: usize) -> usize {
    let chunk_len = chunk_len(page_size);
    let footprint = chunk_len + record_footprint(0);
    let usable = page_size.bytes() - edbstress_format::PAGE_HEADER_LEN;
    let per_page = (usable / footprint).max(1);
    let chunks = body_len.div_ceil(chunk_len);
    chunks.saturating_sub(free / footprint).div_ceil(per_page)
}

fn delete_chunks(
    g: &mut Guard<'_>,
    cs: &mut ChangeSet,
    lvid: u64,
    body_len: u32,
    chunk_len: usize,
) -> Result<(), TreeError> {
    let chunks = (body_len as usize).div_ceil(chunk_len);
    if chunks > 1 {
        // Every leaf the deletes touch, fetched before anything changes.
        let key = |chunk: usize| {
            LongValueKey {
                lvid,
                chunk: chunk as u32,
            }
            .encode()
        };
        btree::warm_range(g, LONG_VALUE_ROOT, &key(0), &key(chunks - 1))?;
    }
    for chunk in 0..chunks {
        let key = LongValueKey {
            lvid,
            chunk: chunk as u32,
        }
        .encode();
        if !btree::delete(g, cs, LONG_VALUE_ROOT, &key)? {
            return Err(TreeError::Corrupt {
                pgno: Pgno::NONE,
                what: format!("long value {lvid} lacks chunk {chunk}"),
            });
        }
    }
    Ok(())
}

/// Appends the chunks of long value `lvid` to `body` from where it stopped (a retry
/// after a miss resumes instead of starting over). Stops early, leaving `body` short,
/// when the chunks end before `body_len` bytes.
fn read_chunks(
    g: &mut Guard<'_>,
    lvid: u64,
    body_len: u32,
    chunk_len: usize,
    body: &mut Vec<u8>,
) -> Result<(), TreeError> {
    let mut expected = (body.len() / chunk_len) as u32;
    let start = LongValueKey {
        lvid,
        chunk: expected,
    }
    .encode();
    if body.len() < body_len as usize {
        btree::scan_from(
            g,
            LONG_VALUE_ROOT,
            &start,
            &mut |k, data| match LongValueKey::decode(k) {
                Some(key)
                    if key.lvid == lvid
                        && key.chunk == expected
                        && body.len() + data.len() <= body_len as usize =>
                {
                    body.extend_from_slice(data);
                    expected += 1;
                    body.len() < body_len as usize
                }
                _ => false,
            },
        )?;
    }
    Ok(())
}
