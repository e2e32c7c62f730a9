//! Deep consistency check (`edbstress check`): walks the three B+trees of a database
//! from their roots and verifies what checksums cannot — key order within and across
//! pages, separator bounds, equal leaf depth, sibling links, page structure and
//! free-space accounting — that every long value a row refers to exists, complete, and
//! that no long value is orphaned, and that the view index holds exactly one entry per
//! row, under the row's sort key, with the row's bookmark, and no other.

use std::path::{Path, PathBuf};

use edbstress_format::checksum::{PageVerdict, verify_page};
use edbstress_format::page::{Page, PageFormatError, PageHeader, flags};
use edbstress_format::{PageSize, Pgno};
use edbstress_io::blocking::FileIo;
use edbstress_io::{Access, AlignedBuf, DataFile, IoClass, IoMode};
use serde::Serialize;

use crate::dbfile::read_verified_header;
use crate::error::EngineError;
use crate::runtime::schema::{
    FREE_LIST_ANCHOR, LONG_VALUE_OBJECT_ID, LONG_VALUE_ROOT, LongValueKey, MAILBOX_TABLE_OBJECT_ID,
    MAILBOX_TABLE_ROOT, MessageKey, RowHeader, VIEW_INDEX_OBJECT_ID, VIEW_INDEX_ROOT, ViewKey,
    chunk_len,
};

/// Problems listed individually (all are counted).
const MAX_LISTED: usize = 100;

/// Result of a deep check.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CheckReport {
    /// The database.
    pub path: PathBuf,
    /// Pages visited.
    pub pages_visited: u64,
    /// Rows in the mailbox table.
    pub messages: u64,
    /// Long-value chunks.
    pub long_value_chunks: u64,
    /// Leaf pages with no records.
    pub empty_leaves: u64,
    /// Depth of the mailbox table (1 = root is a leaf).
    pub table_depth: u32,
    /// Depth of the long-value tree.
    pub long_value_depth: u32,
    /// Entries in the view index.
    pub view_entries: u64,
    /// Depth of the view index.
    pub view_index_depth: u32,
    /// Pages on the free list.
    pub free_pages: u64,
    /// Leaves of the mailbox table and how full they are.
    pub table_leaves: LeafFill,
    /// Leaves of the long-value tree and how full they are.
    pub long_value_leaves: LeafFill,
    /// Leaves of the view index and how full they are.
    pub view_leaves: LeafFill,
    /// Problems found.
    pub problem_count: u64,
    /// The first problems.
    pub problems: Vec<String>,
}

/// How full a tree's leaves are: where a database's space goes (docs/fidelity.md,
/// growth per transactional I/O).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LeafFill {
    /// Leaf pages (a root that is a leaf included).
    pub pages: u64,
    /// Bytes their records and tags take (page headers excluded).
    pub used_bytes: u64,
    /// Bytes they could hold (page size less the header, per page).
    pub usable_bytes: u64,
}

impl LeafFill {
    /// Used bytes as a percentage of usable bytes (0 for no leaves).
    pub fn fill_pct(&self) -> f64 {
        if self.usable_bytes == 0 {
            0.0
        } else {
            100.0 * self.used_bytes as f64 / self.usable_bytes as f64
        }
    }
}

impl CheckReport {
    /// Whether the trees are consistent.
    pub fn is_clean(&self) -> bool {
        self.problem_count == 0
    }

    fn problem(&mut self, what: String) {
        self.problem_count += 1;
        if self.problems.len() < MAX_LISTED {
            self.problems.push(what);
        }
    }
}

struct TreeWalk<'a> {
    io: &'a mut FileIo,
    page_size: PageSize,
    page_count: u32,
    buf: AlignedBuf,
    report: &'a mut CheckReport,
    object_id: u32,
    long_value: bool,
    leaves: Vec<(u32, u32, u32)>,
    fill: LeafFill,
    leaf_depth: Option<u32>,
    /// One bit per page: reached by a tree walk (shared by both walks).
    seen: &'a mut Vec<u64>,
    visit: &'a mut dyn FnMut(&[u8], &[u8]),
}

impl TreeWalk<'_> {
    fn read(&mut self, pgno: u32) -> Result<Option<Vec<u8>>, EngineError> {
        if pgno == 0 || pgno > self.page_count {
            self.report.problem(format!(
                "reference to page {pgno}, outside the database (1..={})",
                self.page_count
            ));
            return Ok(None);
        }
        let (word, bit) = (pgno as usize / 64, 1u64 << (pgno % 64));
        if self.seen[word] & bit != 0 {
            self.report.problem(format!(
                "page {pgno} is reached twice (shared by two parents, or a cycle)"
            ));
            return Ok(None);
        }
        self.seen[word] |= bit;
        let offset = Pgno::new(pgno).offset(self.page_size);
        let len = self.page_size.bytes();
        self.io
            .read_exact(IoClass::OfflineRead, &mut self.buf, len, offset)?;
        self.report.pages_visited += 1;
        match verify_page(&self.buf, Pgno::new(pgno)) {
            PageVerdict::Valid | PageVerdict::Correctable { .. } => Ok(Some(self.buf.to_vec())),
            verdict => {
                self.report
                    .problem(format!("page {pgno}: checksum verdict {verdict:?}"));
                Ok(None)
            }
        }
    }

    /// Walks the subtree at `pgno`; keys must lie in [lower, upper).
    fn walk(
        &mut self,
        pgno: u32,
        depth: u32,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        is_root: bool,
    ) -> Result<(), EngineError> {
        if depth > 32 {
            self.report.problem(format!(
                "page {pgno}: tree deeper than 32 levels (a cycle?)"
            ));
            return Ok(());
        }
        let Some(bytes) = self.read(pgno)? else {
            return Ok(());
        };
        let page = match Page::new(&bytes) {
            Ok(p) => p,
            Err(e) => {
                self.report.problem(format!("page {pgno}: malformed ({e})"));
                return Ok(());
            }
        };
        let h = page.header();
        match page.check() {
            // Branches may repeat a separator (a split of a first child can produce
            // one; routing takes the last): their order is checked non-strictly below.
            Err(PageFormatError::KeysOutOfOrder { .. }) if h.flags & flags::BRANCH != 0 => {}
            Err(e) => self.report.problem(format!(
                "page {pgno}: structure or free space inconsistent ({e})"
            )),
            Ok(()) => {}
        }
        if h.object_id != self.object_id {
            self.report.problem(format!(
                "page {pgno}: object id {} in the tree of object {}",
                h.object_id, self.object_id
            ));
        }
        if (h.flags & flags::ROOT != 0) != is_root {
            self.report.problem(format!(
                "page {pgno}: root flag {} where it should be {is_root}",
                h.flags & flags::ROOT != 0
            ));
        }
        if (h.flags & flags::LONG_VALUE != 0) != self.long_value {
            self.report.problem(format!(
                "page {pgno}: long-value flag does not match its tree"
            ));
        }
        let mut keys: Vec<&[u8]> = Vec::with_capacity(page.record_count());
        let mut records = Vec::with_capacity(page.record_count());
        for i in 0..page.record_count() {
            match page.record(i) {
                Ok(r) => {
                    keys.push(r.key);
                    records.push(r);
                }
                Err(e) => {
                    self.report
                        .problem(format!("page {pgno}: record {i} unreadable ({e})"));
                    return Ok(());
                }
            }
        }
        let is_leaf = h.flags & flags::LEAF != 0;
        for w in keys.windows(2) {
            let ordered = if is_leaf { w[0] < w[1] } else { w[0] <= w[1] };
            if !ordered {
                self.report
                    .problem(format!("page {pgno}: keys out of order"));
                break;
            }
        }
        if is_leaf {
            for r in &records {
                if lower.is_some_and(|l| r.key < l) || upper.is_some_and(|u| r.key >= u) {
                    self.report.problem(format!(
                        "page {pgno}: key outside the range its parent gives"
                    ));
                    break;
                }
            }
            match self.leaf_depth {
                None => self.leaf_depth = Some(depth),
                Some(d) if d != depth => self
                    .report
                    .problem(format!("page {pgno}: leaf at depth {depth}, others at {d}")),
                Some(_) => {}
            }
            if records.is_empty() && !is_root {
                self.report.empty_leaves += 1;
            }
            let usable = self.page_size.bytes() - edbstress_format::PAGE_HEADER_LEN;
            self.fill.pages += 1;
            self.fill.usable_bytes += usable as u64;
            self.fill.used_bytes += usable.saturating_sub(page.free_space()) as u64;
            // A root has no siblings (the mailbox root's `next` heads the free list).
            let (prev, next) = if is_root {
                (0, 0)
            } else {
                (h.prev.get(), h.next.get())
            };
            self.leaves.push((pgno, prev, next));
            for r in records {
                (self.visit)(r.key, r.data);
            }
            return Ok(());
        }
        if h.flags & flags::BRANCH == 0 {
            self.report.problem(format!(
                "page {pgno}: neither leaf nor branch (flags {:#x})",
                h.flags
            ));
            return Ok(());
        }
        if records.is_empty() {
            self.report
                .problem(format!("page {pgno}: branch without entries"));
            return Ok(());
        }
        let owned: Vec<(Vec<u8>, Vec<u8>)> = records
            .iter()
            .map(|r| (r.key.to_vec(), r.data.to_vec()))
            .collect();
        for (i, (key, data)) in owned.iter().enumerate() {
            let Ok(child) = <[u8; 4]>::try_from(data.as_slice()).map(u32::from_le_bytes) else {
                self.report.problem(format!(
                    "page {pgno}: branch entry {i} is not a page number"
                ));
                continue;
            };
            // The first entry also takes keys below its separator.
            let child_lower = if i == 0 { lower } else { Some(key.as_slice()) };
            let child_upper = owned.get(i + 1).map(|(k, _)| k.as_slice()).or(upper);
            self.walk(child, depth + 1, child_lower, child_upper, false)?;
        }
        Ok(())
    }

    fn check_links(&mut self, tree: &str) {
        for (i, &(pgno, prev, next)) in self.leaves.iter().enumerate() {
            let want_prev = if i == 0 { 0 } else { self.leaves[i - 1].0 };
            let want_next = self.leaves.get(i + 1).map_or(0, |l| l.0);
            if prev != want_prev || next != want_next {
                self.report.problem(format!(
                    "{tree} leaf {pgno}: links prev {prev} next {next}, expected prev {want_prev} next {want_next}"
                ));
            }
        }
    }
}

/// The geometry every walk of a database shares.
#[derive(Clone, Copy)]
struct Geometry {
    page_size: PageSize,
    page_count: u32,
}

impl<'a> TreeWalk<'a> {
    /// A walk of the tree of `object_id` that calls `visit` on each entry.
    fn new(
        io: &'a mut FileIo,
        geometry: Geometry,
        (report, seen): (&'a mut CheckReport, &'a mut Vec<u64>),
        (object_id, long_value): (u32, bool),
        visit: &'a mut dyn FnMut(&[u8], &[u8]),
    ) -> TreeWalk<'a> {
        TreeWalk {
            io,
            page_size: geometry.page_size,
            page_count: geometry.page_count,
            buf: AlignedBuf::new(geometry.page_size.bytes()),
            report,
            object_id,
            long_value,
            leaves: Vec::new(),
            fill: LeafFill::default(),
            leaf_depth: None,
            seen,
            visit,
        }
    }

    /// Walks the tree from `root` and checks its leaves' links; returns its leaf depth
    /// and fill.
    fn run(mut self, root: u32, tree: &str) -> Result<(u32, LeafFill), EngineError> {
        self.walk(root, 1, None, None, true)?;
        self.check_links(tree);
        Ok((self.leaf_depth.unwrap_or(0), self.fill))
    }
}

/// What the walk of the mailbox table found in its rows.
#[derive(Default)]
struct TableRows {
    /// Rows that refer to long values: (lvid, body length).
    refs: Vec<(u64, u32)>,
    /// Keys of rows that do not decode.
    bad_rows: Vec<Vec<u8>>,
    messages: u64,
    /// Every row's place in the view, in table key order.
    row_views: Vec<ViewKey>,
}

/// What the walk of the long-value tree found: each value in key order as (lvid,
/// chunks seen, bytes, chunk numbering ok), and the chunks in all.
#[derive(Default)]
struct LongValues {
    values: Vec<(u64, u32, u64, bool)>,
    chunks: u64,
}

/// Checks the database at `path` (offline: it holds the database's shared lock, so no
/// writer can use it meanwhile; other readers may).
pub fn deep_check(path: &Path, io_mode: IoMode) -> Result<CheckReport, EngineError> {
    let file = DataFile::open(path, io_mode, Access::ReadOnly)?;
    let _lock = crate::runtime::lock::DatabaseLock::acquire_shared(path)?;
    let header = read_verified_header(&file)?.header;
    let mut io = FileIo::offline(&file)?;
    let geometry = Geometry {
        page_size: header.page_size,
        page_count: header.page_count,
    };
    let chunk_len = chunk_len(header.page_size);
    let mut report = CheckReport {
        path: path.to_path_buf(),
        ..CheckReport::default()
    };
    let mut seen = vec![0u64; header.page_count as usize / 64 + 1];

    let rows = walk_table(&mut io, geometry, &mut report, &mut seen)?;
    let values = walk_long_values(&mut io, geometry, chunk_len, &mut report, &mut seen)?;
    let view_entries = walk_view_index(&mut io, geometry, &mut report, &mut seen)?;
    report.view_entries = view_entries.len() as u64;
    check_view_matches_rows(rows.row_views, view_entries, &mut report);

    report.messages = rows.messages;
    report.long_value_chunks = values.chunks;
    for k in rows.bad_rows {
        report.problem(format!("row {k:02x?}: malformed key or row"));
    }
    check_long_value_refs(rows.refs, &values.values, chunk_len, &mut report);
    check_free_list(&mut io, geometry, &seen, &mut report)?;
    Ok(report)
}

/// Walks the mailbox table, collecting what its rows refer to.
fn walk_table(
    io: &mut FileIo,
    geometry: Geometry,
    report: &mut CheckReport,
    seen: &mut Vec<u64>,
) -> Result<TableRows, EngineError> {
    let mut rows = TableRows::default();
    let mut visit_row = |k: &[u8], row: &[u8]| {
        rows.messages += 1;
        match (MessageKey::decode(k), RowHeader::decode(row)) {
            (Some(key), Some(h)) => {
                rows.row_views.push(ViewKey::of(key, h.sort));
                if h.long {
                    rows.refs.push((h.lvid, h.body_len));
                }
            }
            _ => rows.bad_rows.push(k.to_vec()),
        }
    };
    let (depth, fill) = TreeWalk::new(
        io,
        geometry,
        (&mut *report, seen),
        (MAILBOX_TABLE_OBJECT_ID, false),
        &mut visit_row,
    )
    .run(MAILBOX_TABLE_ROOT.get(), "mailbox table")?;
    report.table_depth = depth;
    report.table_leaves = fill;
    Ok(rows)
}

/// Walks the long-value tree, collecting each value's chunks.
fn walk_long_values(
    io: &mut FileIo,
    geometry: Geometry,
    chunk_len: usize,
    report: &mut CheckReport,
    seen: &mut Vec<u64>,
) -> Result<LongValues, EngineError> {
    let mut lv = LongValues::default();
    let mut visit_chunk = |k: &[u8], data: &[u8]| {
        lv.chunks += 1;
        let Some(key) = LongValueKey::decode(k) else {
            lv.values.push((u64::MAX, 0, 0, false));
            return;
        };
        match lv.values.last_mut() {
            Some(last) if last.0 == key.lvid => {
                last.3 &= key.chunk == last.1 && data.len() <= chunk_len;
                last.1 += 1;
                last.2 += data.len() as u64;
            }
            _ => lv.values.push((
                key.lvid,
                1,
                data.len() as u64,
                key.chunk == 0 && data.len() <= chunk_len,
            )),
        }
    };
    let (depth, fill) = TreeWalk::new(
        io,
        geometry,
        (&mut *report, seen),
        (LONG_VALUE_OBJECT_ID, true),
        &mut visit_chunk,
    )
    .run(LONG_VALUE_ROOT.get(), "long-value tree")?;
    report.long_value_depth = depth;
    report.long_value_leaves = fill;
    Ok(lv)
}

/// Walks the view index: entries in key order, each with exactly the data a view
/// entry of its key holds (bookmark and sort column).
fn walk_view_index(
    io: &mut FileIo,
    geometry: Geometry,
    report: &mut CheckReport,
    seen: &mut Vec<u64>,
) -> Result<Vec<ViewKey>, EngineError> {
    let mut view_entries: Vec<ViewKey> = Vec::new();
    let mut bad_entries: Vec<String> = Vec::new();
    let mut visit_entry = |k: &[u8], data: &[u8]| match ViewKey::decode(k) {
        Some(key) => {
            if data != key.entry_data().as_slice() {
                bad_entries.push(format!(
                    "view entry of message {}:{} (sort key {:#x}) has the wrong bookmark or column",
                    key.mailbox, key.message, key.sort
                ));
            }
            view_entries.push(key);
        }
        None => bad_entries.push(format!("view entry key {k:02x?} is malformed")),
    };
    let (depth, fill) = TreeWalk::new(
        io,
        geometry,
        (&mut *report, seen),
        (VIEW_INDEX_OBJECT_ID, false),
        &mut visit_entry,
    )
    .run(VIEW_INDEX_ROOT.get(), "view index")?;
    report.view_index_depth = depth;
    report.view_leaves = fill;
    for problem in bad_entries {
        report.problem(problem);
    }
    Ok(view_entries)
}

/// Every long value a row refers to must exist, complete, and every long value must
/// be referred to (both lists in lvid order once `refs` is sorted).
fn check_long_value_refs(
    mut refs: Vec<(u64, u32)>,
    values: &[(u64, u32, u64, bool)],
    chunk_len: usize,
    report: &mut CheckReport,
) {
    refs.sort_unstable();
    let mut j = 0;
    for (lvid, body_len) in refs {
        while j < values.len() && values[j].0 < lvid {
            report.problem(format!(
                "long value {} is not referenced by any row (orphan)",
                values[j].0
            ));
            j += 1;
        }
        match values.get(j) {
            Some(&(id, count, bytes, numbered)) if id == lvid => {
                let want = (body_len as usize).div_ceil(chunk_len) as u32;
                if count != want || bytes != u64::from(body_len) || !numbered {
                    report.problem(format!(
                        "long value {lvid}: {count} chunks / {bytes} bytes, the row says {want} chunks / {body_len} bytes"
                    ));
                }
                j += 1;
            }
            _ => report.problem(format!(
                "long value {lvid} referenced by a row does not exist"
            )),
        }
    }
    for v in &values[j..] {
        report.problem(format!(
            "long value {} is not referenced by any row (orphan)",
            v.0
        ));
    }
}

/// Every row must have exactly one view entry, under its own sort key, and every entry
/// a row (both lists are compared in table key order).
fn check_view_matches_rows(
    rows: Vec<ViewKey>,
    mut entries: Vec<ViewKey>,
    report: &mut CheckReport,
) {
    entries.sort_unstable_by_key(|e| (e.mailbox, e.message, e.sort));
    let (mut i, mut j) = (0, 0);
    while i < rows.len() || j < entries.len() {
        let row = rows.get(i);
        let entry = entries.get(j);
        let order = |v: &ViewKey| (v.mailbox, v.message);
        match (row, entry) {
            (Some(r), Some(e)) if order(r) == order(e) => {
                if r.sort != e.sort {
                    report.problem(format!(
                        "message {}:{}: its row sorts at {:#x}, its view entry at {:#x}",
                        r.mailbox, r.message, r.sort, e.sort
                    ));
                }
                if entries.get(j + 1).is_some_and(|n| order(n) == order(e)) {
                    report.problem(format!(
                        "message {}:{} has more than one view entry",
                        e.mailbox, e.message
                    ));
                    j += 1;
                    continue;
                }
                i += 1;
                j += 1;
            }
            (Some(r), e) if e.is_none_or(|e| order(r) < order(e)) => {
                report.problem(format!(
                    "message {}:{} has no view index entry",
                    r.mailbox, r.message
                ));
                i += 1;
            }
            (_, Some(e)) => {
                report.problem(format!(
                    "view entry of message {}:{} points at no row",
                    e.mailbox, e.message
                ));
                j += 1;
            }
            (Some(_), None) | (None, None) => break,
        }
    }
}

/// Follows the free list from its anchor: every page on it must be a formatted empty
/// page that no tree references, and the list must end.
fn check_free_list(
    io: &mut FileIo,
    Geometry {
        page_size: ps,
        page_count,
    }: Geometry,
    seen: &[u64],
    report: &mut CheckReport,
) -> Result<(), EngineError> {
    let mut buf = AlignedBuf::new(ps.bytes());
    let anchor = FREE_LIST_ANCHOR.offset(ps);
    io.read_exact(IoClass::OfflineRead, &mut buf, ps.bytes(), anchor)?;
    let mut next = PageHeader::read(&buf).next.get();
    let mut on_list = vec![0u64; page_count as usize / 64 + 1];
    while next != 0 {
        let pgno = next;
        if pgno > page_count {
            report.problem(format!(
                "free list points at page {pgno}, outside the database"
            ));
            break;
        }
        let (word, bit) = (pgno as usize / 64, 1u64 << (pgno % 64));
        if on_list[word] & bit != 0 {
            report.problem(format!("free list loops at page {pgno}"));
            break;
        }
        on_list[word] |= bit;
        if seen[word] & bit != 0 {
            report.problem(format!("page {pgno} is on the free list and in a tree"));
        }
        let offset = Pgno::new(pgno).offset(ps);
        io.read_exact(IoClass::OfflineRead, &mut buf, ps.bytes(), offset)?;
        let h = PageHeader::read(&buf);
        if !matches!(
            verify_page(&buf, Pgno::new(pgno)),
            PageVerdict::Valid | PageVerdict::Correctable { .. }
        ) || h.flags & flags::EMPTY == 0
            || h.tag_count != 0
        {
            report.problem(format!(
                "free-list page {pgno} is not a valid empty page (flags {:#x})",
                h.flags
            ));
            break;
        }
        report.free_pages += 1;
        next = h.next.get();
    }
    Ok(())
}
