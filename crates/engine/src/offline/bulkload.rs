//! Bottom-up bulk load of a new database (engine.md §5, §8): the mailbox table, the
//! long-value tree and the view index are planned first (how many messages fit, where
//! every leaf and branch page goes), then every page is a pure function of the plan and
//! its page number. That lets several threads build pages in parallel while one thread
//! streams them to the file in large sequential writes, so creation runs at device
//! speed.
//!
//! Leaves are filled as ESE's are after random inserts, not packed (docs/fidelity.md):
//! table and view-index leaves to [`DEFAULT_LEAF_FILL`], long-value leaves to
//! [`long_value_chunks_per_leaf`] chunks, so the first inserts of a run do not split
//! every leaf they touch.
//!
//! File layout after a bulk load (page numbers):
//! `1` mailbox-table root, `2` long-value root, `3` view-index root, then the table's
//! leaves and branch levels, the long-value tree's, the view index's, then formatted
//! empty pages up to the end of the file (room for the database to grow).

use edbstress_format::page::{PageMut, flags};
use edbstress_format::{PAGE_HEADER_LEN, PageSize, Pgno, checksum};

use crate::offline::view_layout::ViewLayout;
use crate::runtime::content::{Compressibility, ContentGenerator};
use crate::runtime::schema::{
    FIRST_NON_ROOT_PAGE, INLINE_BODY_MAX, LONG_VALUE_OBJECT_ID, LONG_VALUE_ROOT, LongValueKey,
    MAILBOX_TABLE_OBJECT_ID, MAILBOX_TABLE_ROOT, MessageKey, MessageShape, ROW_FIXED_LEN,
    RowHeader, VIEW_INDEX_OBJECT_ID, VIEW_INDEX_ROOT, VIEW_KEY_LEN, ViewKey, chunk_len,
    prepared_message_id, record_footprint, view_entry_footprint,
};

/// The dbtime every bulk-loaded page carries; the engine continues from here.
pub const BULK_LOAD_DBTIME: u64 = 1;
/// Fill factor of table and view-index leaves and of branches: 70 %, the mean fill of
/// B+tree leaves under random inserts (ln 2 ≈ 69 %, Yao 1978), where ESE's leaves settle
/// in an aged database (50–100 % after splits, deletes in between); a packed (90 %)
/// database splits every leaf a run first inserts into (docs/fidelity.md).
pub const DEFAULT_LEAF_FILL: f64 = 0.7;
/// Smallest database, in pages, a bulk load accepts.
pub const MIN_PAGES: u32 = 64;
/// Share of the file left as formatted empty pages for growth.
const GROWTH_RESERVE: f64 = 0.05;

/// What to bulk load.
#[derive(Clone, Debug)]
pub struct BulkLoadSpec {
    /// Page size of the database.
    pub page_size: PageSize,
    /// Data pages in the file (pages 1..=page_count).
    pub page_count: u32,
    /// Mailboxes the messages are spread over.
    pub mailboxes: u32,
    /// Database signature: seeds message sizes and page content.
    pub signature: u64,
    /// Compressibility of payload bytes.
    pub compressibility: Compressibility,
    /// Fill factor of table leaves and branch pages (0.5–1.0).
    pub leaf_fill: f64,
}

/// Why a bulk load cannot be planned or built.
#[derive(Debug, thiserror::Error)]
pub enum BulkLoadError {
    /// The file is too small to hold the trees.
    #[error(
        "a database of {pages} pages of {page_size} is too small to hold any mailbox data; use at least {min_pages} pages (--database-size)"
    )]
    TooSmall {
        /// Pages requested.
        pages: u32,
        /// Page size requested.
        page_size: PageSize,
        /// Smallest workable page count.
        min_pages: u32,
    },
    /// A parameter is out of range.
    #[error("invalid bulk-load parameter: {0}")]
    Invalid(String),
    /// A page could not be assembled (a bug: the plan and the page layout disagree).
    #[error("internal error building page {pgno}: {what}")]
    Internal {
        /// Page being built.
        pgno: Pgno,
        /// What went wrong.
        what: String,
    },
}

/// One B+tree's part of the plan.
#[derive(Clone, Debug)]
pub struct TreePlan {
    /// The tree's object id.
    pub object_id: u32,
    /// Its fixed root page.
    pub root: u32,
    /// First leaf page; leaves are contiguous.
    pub first_leaf: u32,
    /// For every leaf, its first entry: a message id for the table,
    /// `message << 16 | chunk` for the long-value tree, a position in key order for the
    /// view index.
    pub leaf_firsts: Vec<u64>,
    /// Branch levels below the root, bottom-up: (first page, page count).
    pub levels: Vec<(u32, u32)>,
    long_value: bool,
}

impl TreePlan {
    /// Number of leaf pages.
    pub fn leaf_count(&self) -> u32 {
        self.leaf_firsts.len() as u32
    }

    /// One past the last non-root page of the tree.
    fn end(&self) -> u32 {
        self.levels
            .last()
            .map_or(self.first_leaf + self.leaf_count(), |&(first, count)| {
                first + count
            })
    }
}

/// The complete layout of a bulk-loaded database.
#[derive(Clone, Debug)]
pub struct BulkLoadPlan {
    spec: BulkLoadSpec,
    /// Messages loaded (ids 1..=messages).
    pub messages: u64,
    /// Messages per mailbox (the last mailbox may have fewer).
    pub per_mailbox: u64,
    /// The mailbox table.
    pub table: TreePlan,
    /// The long-value tree.
    pub long_values: TreePlan,
    /// The view index.
    pub view_index: TreePlan,
    view: ViewLayout,
    /// First formatted empty page (the database's next unused page).
    pub first_free_page: u32,
    /// Entries per non-root branch page.
    branch_fanout: u32,
    chunk_len: usize,
}

/// Simulates filling leaves in key order.
#[derive(Clone, Copy)]
struct LeafPacker {
    limit: usize,
    used: usize,
    leaves: u32,
}

impl LeafPacker {
    fn new(limit: usize) -> Self {
        LeafPacker {
            limit,
            used: 0,
            leaves: 0,
        }
    }

    /// Adds a record; true when it opened a new leaf.
    fn add(&mut self, footprint: usize) -> bool {
        if self.leaves == 0 || self.used + footprint > self.limit {
            self.leaves += 1;
            self.used = footprint;
            true
        } else {
            self.used += footprint;
            false
        }
    }
}

/// Mean bytes a view index entry takes in a page (the sort column averages 72 bytes);
/// the planner's estimate before the exact count.
const MEAN_VIEW_ENTRY: usize = 2 + VIEW_KEY_LEN + 12 + 72 + 4;

/// Long-value chunks per bulk-loaded leaf: ⌈70 % of what fits⌉ — 3 of 4 at 16 and 32 KiB
/// pages, 2 of 2 at 4 and 8 KiB (chunks are whole; see [`DEFAULT_LEAF_FILL`]).
pub fn long_value_chunks_per_leaf(page_size: PageSize) -> usize {
    let per_page: usize = if page_size.bytes() >= 16 * 1024 { 4 } else { 2 };
    (per_page * 7).div_ceil(10)
}

/// How many messages fit a page budget, with the table's and long-value tree's leaves.
struct MessageFill {
    messages: u64,
    table: LeafPacker,
    lvs: LeafPacker,
    table_firsts: Vec<u64>,
    lv_firsts: Vec<u64>,
}

impl MessageFill {
    /// Adds messages while `pages(table leaves, long-value leaves, messages)` stays
    /// within `budget`.
    fn count(
        spec: &BulkLoadSpec,
        budget: u32,
        pages: impl Fn(u32, u32, u64) -> u32,
        table_limit: usize,
        lv_limit: usize,
        chunk_len: usize,
    ) -> MessageFill {
        let mut table = LeafPacker::new(table_limit);
        let mut lvs = LeafPacker::new(lv_limit);
        let mut table_firsts = Vec::new();
        let mut lv_firsts = Vec::new();
        let mut new_lv_firsts = Vec::new();
        let mut message = 0u64;
        loop {
            let id = message + 1;
            let shape = MessageShape::of(spec.signature, id);
            let mut t = table;
            let new_table_leaf = t.add(record_footprint(shape.row_len()));
            let mut l = lvs;
            new_lv_firsts.clear();
            for chunk in 0..shape.chunk_count(chunk_len) {
                let len = shape.chunk_data_len(chunk, chunk_len);
                if l.add(record_footprint(len)) {
                    new_lv_firsts.push(id << 16 | u64::from(chunk));
                }
            }
            if pages(t.leaves, l.leaves, id) > budget {
                break;
            }
            if new_table_leaf {
                table_firsts.push(id);
            }
            lv_firsts.extend_from_slice(&new_lv_firsts);
            table = t;
            lvs = l;
            message = id;
        }
        MessageFill {
            messages: message,
            table,
            lvs,
            table_firsts,
            lv_firsts,
        }
    }
}

/// Where a page belongs in the plan.
enum PageRole {
    Root(TreeKind),
    Leaf(TreeKind, u32),
    Branch(TreeKind, usize, u32),
    Free,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TreeKind {
    Table,
    LongValue,
    ViewIndex,
}

impl BulkLoadPlan {
    /// Plans how many messages fit and where every page goes.
    pub fn new(spec: BulkLoadSpec) -> Result<BulkLoadPlan, BulkLoadError> {
        if !(0.5..=1.0).contains(&spec.leaf_fill) {
            return Err(BulkLoadError::Invalid(format!(
                "leaf fill factor {} must be between 0.5 and 1.0",
                spec.leaf_fill
            )));
        }
        if spec.mailboxes == 0 {
            return Err(BulkLoadError::Invalid(
                "the mailbox count must be at least 1".into(),
            ));
        }
        let too_small = || BulkLoadError::TooSmall {
            pages: spec.page_count,
            page_size: spec.page_size,
            min_pages: MIN_PAGES,
        };
        if spec.page_count < MIN_PAGES {
            return Err(too_small());
        }
        let usable = spec.page_size.bytes() - PAGE_HEADER_LEN;
        let filled = (usable as f64 * spec.leaf_fill) as usize;
        // Sized for the longest keys (the view index's), so every tree's branches fit.
        let branch_entry = 2 + VIEW_KEY_LEN + 4 + 4;
        let branch_fanout = (filled / branch_entry) as u32;
        let root_fanout = (usable / branch_entry) as u32;
        let branch_pages = |leaves: u32| {
            let mut n = leaves;
            let mut total = 0;
            while n > root_fanout {
                n = n.div_ceil(branch_fanout);
                total += n;
            }
            total
        };
        let tree_pages = |leaves: u32| leaves + branch_pages(leaves);
        let chunk_len = chunk_len(spec.page_size);
        let lv_limit = long_value_chunks_per_leaf(spec.page_size) * record_footprint(chunk_len);
        let reserve = ((f64::from(spec.page_count) * GROWTH_RESERVE) as u32).max(1);
        let budget = spec.page_count - 3 - reserve;

        // The view index's exact size depends on the final message count (its order
        // does): the messages are counted with an estimate of it, and counted again
        // with a smaller budget in the rare case the exact index does not fit.
        let mut margin = 0u32;
        let (fill, view, per_mailbox, view_firsts, view_leaves) = loop {
            let fill = MessageFill::count(
                &spec,
                budget.saturating_sub(margin),
                |t, l, n| {
                    let index_leaves = (n as usize * MEAN_VIEW_ENTRY).div_ceil(filled) as u32;
                    tree_pages(t) + tree_pages(l) + tree_pages(index_leaves)
                },
                filled,
                lv_limit,
                chunk_len,
            );
            if fill.messages == 0 {
                return Err(too_small());
            }
            let per_mailbox = fill.messages.div_ceil(u64::from(spec.mailboxes));
            let view = ViewLayout::new(fill.messages, per_mailbox);
            let mut packer = LeafPacker::new(filled);
            let mut firsts = Vec::new();
            for g in 0..fill.messages {
                let (_, sort, _) = view.entry_at(g);
                if packer.add(view_entry_footprint(sort)) {
                    firsts.push(g);
                }
            }
            let total = tree_pages(fill.table.leaves)
                + tree_pages(fill.lvs.leaves)
                + tree_pages(packer.leaves);
            if total <= budget {
                break (fill, view, per_mailbox, firsts, packer.leaves);
            }
            margin += total - budget;
        };

        let levels_from = |first: u32, leaves: u32| {
            let mut levels = Vec::new();
            let mut next = first + leaves;
            let mut n = leaves;
            while n > root_fanout {
                n = n.div_ceil(branch_fanout);
                levels.push((next, n));
                next += n;
            }
            levels
        };
        let table_plan = TreePlan {
            object_id: MAILBOX_TABLE_OBJECT_ID,
            root: MAILBOX_TABLE_ROOT.get(),
            first_leaf: FIRST_NON_ROOT_PAGE.get(),
            levels: levels_from(FIRST_NON_ROOT_PAGE.get(), fill.table.leaves),
            leaf_firsts: fill.table_firsts,
            long_value: false,
        };
        let lv_first = table_plan.end();
        let lv_plan = TreePlan {
            object_id: LONG_VALUE_OBJECT_ID,
            root: LONG_VALUE_ROOT.get(),
            first_leaf: lv_first,
            levels: levels_from(lv_first, fill.lvs.leaves),
            leaf_firsts: fill.lv_firsts,
            long_value: true,
        };
        let view_first = lv_plan.end();
        let view_plan = TreePlan {
            object_id: VIEW_INDEX_OBJECT_ID,
            root: VIEW_INDEX_ROOT.get(),
            first_leaf: view_first,
            levels: levels_from(view_first, view_leaves),
            leaf_firsts: view_firsts,
            long_value: false,
        };
        let first_free_page = view_plan.end();
        debug_assert!(first_free_page <= spec.page_count + 1);
        Ok(BulkLoadPlan {
            spec,
            messages: fill.messages,
            per_mailbox,
            table: table_plan,
            long_values: lv_plan,
            view_index: view_plan,
            view,
            first_free_page,
            branch_fanout,
            chunk_len,
        })
    }

    /// The spec the plan was made for.
    pub fn spec(&self) -> &BulkLoadSpec {
        &self.spec
    }

    /// The mailbox (0-based) message `message` belongs to.
    pub fn mailbox_of(&self, message: u64) -> u32 {
        ((message - 1) / self.per_mailbox) as u32
    }

    fn tree(&self, kind: TreeKind) -> &TreePlan {
        match kind {
            TreeKind::Table => &self.table,
            TreeKind::LongValue => &self.long_values,
            TreeKind::ViewIndex => &self.view_index,
        }
    }

    fn role(&self, pgno: u32) -> PageRole {
        if pgno == MAILBOX_TABLE_ROOT.get() {
            return PageRole::Root(TreeKind::Table);
        }
        if pgno == LONG_VALUE_ROOT.get() {
            return PageRole::Root(TreeKind::LongValue);
        }
        if pgno == VIEW_INDEX_ROOT.get() {
            return PageRole::Root(TreeKind::ViewIndex);
        }
        for kind in [TreeKind::Table, TreeKind::LongValue, TreeKind::ViewIndex] {
            let tree = self.tree(kind);
            if (tree.first_leaf..tree.first_leaf + tree.leaf_count()).contains(&pgno) {
                return PageRole::Leaf(kind, pgno - tree.first_leaf);
            }
            for (level, &(first, count)) in tree.levels.iter().enumerate() {
                if (first..first + count).contains(&pgno) {
                    return PageRole::Branch(kind, level + 1, pgno - first);
                }
            }
        }
        PageRole::Free
    }

    /// The encoded key of the first entry of leaf `leaf` of a tree.
    fn leaf_first_key(&self, kind: TreeKind, leaf: u32) -> Vec<u8> {
        let first = self.tree(kind).leaf_firsts[leaf as usize];
        match kind {
            TreeKind::Table => self.table_key(first).encode().to_vec(),
            TreeKind::LongValue => LongValueKey {
                lvid: first >> 16,
                chunk: (first & 0xFFFF) as u32,
            }
            .encode()
            .to_vec(),
            TreeKind::ViewIndex => self.view_key_at(first).encode().to_vec(),
        }
    }

    /// Builds page `pgno` into `buf` (one page long) and seals its checksum.
    pub fn build_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<(), BulkLoadError> {
        let internal = |what: String| BulkLoadError::Internal { pgno, what };
        match self.role(pgno.get()) {
            PageRole::Free => {
                PageMut::format(buf, pgno, 0, flags::EMPTY, 0);
            }
            PageRole::Root(kind) => {
                let tree = self.tree(kind);
                let lv = if tree.long_value {
                    flags::LONG_VALUE
                } else {
                    0
                };
                let mut page = PageMut::format(
                    buf,
                    pgno,
                    tree.object_id,
                    flags::ROOT | flags::BRANCH | lv,
                    BULK_LOAD_DBTIME,
                );
                let (first, count) = tree
                    .levels
                    .last()
                    .copied()
                    .unwrap_or((tree.first_leaf, tree.leaf_count()));
                if count == 0 {
                    // An empty tree: the root is an empty leaf.
                    page.set_flags(flags::ROOT | flags::LEAF | lv);
                }
                let level = tree.levels.len();
                self.fill_branch(&mut page, kind, level + 1, first, 0..count)
                    .map_err(internal)?;
            }
            PageRole::Branch(kind, level, index) => {
                let tree = self.tree(kind);
                let lv = if tree.long_value {
                    flags::LONG_VALUE
                } else {
                    0
                };
                // Only leaves carry sibling links (engine.md §1); branches split without
                // touching a neighbour.
                let mut page = PageMut::format(
                    buf,
                    pgno,
                    tree.object_id,
                    flags::BRANCH | lv,
                    BULK_LOAD_DBTIME,
                );
                let (below_first, below_count) = if level == 1 {
                    (tree.first_leaf, tree.leaf_count())
                } else {
                    tree.levels[level - 2]
                };
                let f = self.branch_fanout;
                let children = index * f..((index + 1) * f).min(below_count);
                self.fill_branch(&mut page, kind, level, below_first, children)
                    .map_err(internal)?;
            }
            PageRole::Leaf(kind, index) => {
                let tree = self.tree(kind);
                let lv = if tree.long_value {
                    flags::LONG_VALUE
                } else {
                    0
                };
                let mut page = PageMut::format(
                    buf,
                    pgno,
                    tree.object_id,
                    flags::LEAF | lv,
                    BULK_LOAD_DBTIME,
                );
                link_siblings(&mut page, pgno.get(), index, tree.leaf_count());
                let mut content = ContentGenerator::for_page(
                    self.spec.signature,
                    pgno,
                    self.spec.compressibility,
                );
                match kind {
                    TreeKind::Table => self.fill_table_leaf(&mut page, index, &mut content),
                    TreeKind::LongValue => {
                        self.fill_long_value_leaf(&mut page, index, &mut content)
                    }
                    TreeKind::ViewIndex => self.fill_view_leaf(&mut page, index),
                }
                .map_err(internal)?;
            }
        }
        checksum::seal_page(buf, pgno);
        Ok(())
    }

    /// Adds the entries of branch `page` at `level` (1 = just above the leaves): one
    /// per child, keyed by the child's first key, holding the child's page number.
    fn fill_branch(
        &self,
        page: &mut PageMut<'_>,
        kind: TreeKind,
        level: usize,
        children_first: u32,
        children: std::ops::Range<u32>,
    ) -> Result<(), String> {
        // Child c of a level-L page covers leaves starting at c * fanout^(L-1).
        let span = u64::from(self.branch_fanout).pow(level as u32 - 1);
        for child in children {
            let first_leaf = (u64::from(child) * span) as u32;
            let key = self.leaf_first_key(kind, first_leaf);
            let target = (children_first + child).to_le_bytes();
            page.append(&key, &target)
                .map_err(|_| format!("branch entry for child {child} does not fit"))?;
        }
        Ok(())
    }

    fn fill_table_leaf(
        &self,
        page: &mut PageMut<'_>,
        index: u32,
        content: &mut ContentGenerator,
    ) -> Result<(), String> {
        let firsts = &self.table.leaf_firsts;
        let first = firsts[index as usize];
        let end = firsts
            .get(index as usize + 1)
            .copied()
            .unwrap_or(self.messages + 1);
        let mut row = [0u8; ROW_FIXED_LEN + 512 + INLINE_BODY_MAX as usize];
        for message in first..end {
            let shape = MessageShape::of(self.spec.signature, message);
            let row = &mut row[..shape.row_len()];
            RowHeader::for_message(
                message,
                shape.body_len,
                1_700_000_000 + message,
                self.view.sort_of(message),
            )
            .write(row);
            content.fill(&mut row[ROW_FIXED_LEN..]);
            let key = self.table_key(message).encode();
            page.append(&key, row)
                .map_err(|_| format!("row of message {message} does not fit"))?;
        }
        Ok(())
    }

    /// The table key of the message of sequence number `sequence` (1-based).
    fn table_key(&self, sequence: u64) -> MessageKey {
        let mailbox = self.mailbox_of(sequence);
        let ordinal = sequence - 1 - u64::from(mailbox) * self.per_mailbox;
        MessageKey {
            mailbox,
            message: prepared_message_id(ordinal, self.per_mailbox, mailbox),
        }
    }

    /// The view index entry at position `g` in key order.
    fn view_key_at(&self, g: u64) -> ViewKey {
        let (mailbox, sort, sequence) = self.view.entry_at(g);
        ViewKey {
            mailbox,
            sort,
            message: self.table_key(sequence).message,
        }
    }

    fn fill_view_leaf(&self, page: &mut PageMut<'_>, index: u32) -> Result<(), String> {
        let firsts = &self.view_index.leaf_firsts;
        let first = firsts[index as usize];
        let end = firsts
            .get(index as usize + 1)
            .copied()
            .unwrap_or(self.messages);
        for g in first..end {
            let key = self.view_key_at(g);
            page.append(&key.encode(), &key.entry_data())
                .map_err(|_| format!("view entry of message {} does not fit", key.message))?;
        }
        Ok(())
    }

    fn fill_long_value_leaf(
        &self,
        page: &mut PageMut<'_>,
        index: u32,
        content: &mut ContentGenerator,
    ) -> Result<(), String> {
        let firsts = &self.long_values.leaf_firsts;
        let start = firsts[index as usize];
        let end = firsts.get(index as usize + 1).copied();
        let (mut message, mut chunk) = (start >> 16, (start & 0xFFFF) as u32);
        let mut data = vec![0u8; self.chunk_len];
        while message <= self.messages && end != Some(message << 16 | u64::from(chunk)) {
            let shape = MessageShape::of(self.spec.signature, message);
            if chunk >= shape.chunk_count(self.chunk_len) {
                message += 1;
                chunk = 0;
                continue;
            }
            let data = &mut data[..shape.chunk_data_len(chunk, self.chunk_len)];
            content.fill(data);
            let key = LongValueKey {
                lvid: message,
                chunk,
            }
            .encode();
            page.append(&key, data)
                .map_err(|_| format!("chunk {chunk} of message {message} does not fit"))?;
            chunk += 1;
        }
        Ok(())
    }
}

fn link_siblings(page: &mut PageMut<'_>, pgno: u32, index: u32, count: u32) {
    let pgno = Pgno::new(pgno);
    let none = Pgno::NONE;
    page.set_prev(if index > 0 {
        Pgno::new(pgno.get() - 1)
    } else {
        none
    });
    page.set_next(if index + 1 < count {
        pgno.next().unwrap_or(none)
    } else {
        none
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use edbstress_format::checksum::{PageVerdict, verify_page};
    use edbstress_format::page::Page;

    fn plan(page_size: PageSize, page_count: u32) -> BulkLoadPlan {
        BulkLoadPlan::new(BulkLoadSpec {
            page_size,
            page_count,
            mailboxes: 10,
            signature: 0xfeed,
            compressibility: Compressibility::MAIL,
            leaf_fill: DEFAULT_LEAF_FILL,
        })
        .unwrap()
    }

    /// Walks a tree from its root and returns every leaf key in order, checking key
    /// order, sibling links and that branch keys match their children's first keys.
    fn walk(pages: &[Vec<u8>], root: u32) -> Vec<Vec<u8>> {
        fn descend(pages: &[Vec<u8>], pgno: u32, leaves: &mut Vec<u32>, lower: Option<&[u8]>) {
            let page = Page::new(&pages[pgno as usize]).unwrap();
            let h = page.header();
            if h.flags & flags::LEAF != 0 {
                if let Some(lower) = lower {
                    assert_eq!(
                        page.record(0).unwrap().key,
                        lower,
                        "separator of leaf {pgno}"
                    );
                }
                leaves.push(pgno);
                return;
            }
            for i in 0..page.record_count() {
                let r = page.record(i).unwrap();
                let child = u32::from_le_bytes(r.data.try_into().unwrap());
                descend(pages, child, leaves, Some(r.key));
            }
        }
        let mut leaves = Vec::new();
        descend(pages, root, &mut leaves, None);
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for (i, &leaf) in leaves.iter().enumerate() {
            let page = Page::new(&pages[leaf as usize]).unwrap();
            let h = page.header();
            assert_eq!(h.prev, if i == 0 { 0 } else { leaves[i - 1] });
            assert_eq!(h.next, leaves.get(i + 1).copied().unwrap_or(0));
            for r in 0..page.record_count() {
                keys.push(page.record(r).unwrap().key.to_vec());
            }
        }
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys out of order");
        keys
    }

    #[test]
    fn bulk_load_builds_consistent_trees() {
        for (ps, count) in [
            (PageSize::K8, 3000),
            (PageSize::K32, 1200),
            (PageSize::K4, 20_000),
        ] {
            let plan = plan(ps, count);
            let mut pages = vec![Vec::new()];
            for pgno in 1..=count {
                let mut buf = vec![0u8; ps.bytes()];
                plan.build_page(Pgno::new(pgno), &mut buf).unwrap();
                assert_eq!(
                    verify_page(&buf, Pgno::new(pgno)),
                    PageVerdict::Valid,
                    "page {pgno}"
                );
                pages.push(buf);
            }
            let table_keys = walk(&pages, MAILBOX_TABLE_ROOT.get());
            assert_eq!(table_keys.len() as u64, plan.messages);
            let lv_keys = walk(&pages, LONG_VALUE_ROOT.get());
            let expected_chunks: u64 = (1..=plan.messages)
                .map(|m| u64::from(MessageShape::of(0xfeed, m).chunk_count(chunk_len(ps))))
                .sum();
            assert_eq!(lv_keys.len() as u64, expected_chunks);
            // Every long value a row refers to exists, with all its chunks; the rows'
            // sequence numbers are the messages loaded.
            let lv: std::collections::HashSet<_> = lv_keys.iter().cloned().collect();
            let mut sequences = Vec::new();
            for pgno in plan.table.first_leaf..plan.table.first_leaf + plan.table.leaf_count() {
                let page = Page::new(&pages[pgno as usize]).unwrap();
                for r in 0..page.record_count() {
                    let header = RowHeader::decode(page.record(r).unwrap().data).unwrap();
                    let shape = MessageShape::of(0xfeed, header.lvid);
                    for chunk in 0..shape.chunk_count(chunk_len(ps)) {
                        let lk = LongValueKey {
                            lvid: header.lvid,
                            chunk,
                        }
                        .encode()
                        .to_vec();
                        assert!(lv.contains(&lk), "missing chunk {chunk} of {}", header.lvid);
                    }
                    sequences.push(header.lvid);
                }
            }
            sequences.sort_unstable();
            assert!(sequences.iter().copied().eq(1..=plan.messages));
            // The view index: one entry per row, under the row's sort key, with its
            // bookmark; rows and entries agree.
            let view_keys = walk(&pages, VIEW_INDEX_ROOT.get());
            assert_eq!(view_keys.len() as u64, plan.messages);
            let mut from_view: Vec<(MessageKey, u32)> = view_keys
                .iter()
                .map(|k| {
                    let v = ViewKey::decode(k).unwrap();
                    (v.message_key(), v.sort)
                })
                .collect();
            from_view.sort();
            let mut from_rows = Vec::new();
            for pgno in plan.table.first_leaf..plan.table.first_leaf + plan.table.leaf_count() {
                let page = Page::new(&pages[pgno as usize]).unwrap();
                for r in 0..page.record_count() {
                    let rec = page.record(r).unwrap();
                    let header = RowHeader::decode(rec.data).unwrap();
                    from_rows.push((MessageKey::decode(rec.key).unwrap(), header.sort));
                }
            }
            assert_eq!(from_view, from_rows);
            // Leaves at the realistic fill, not packed.
            let fill = |first: u32, count: u32| {
                let used: usize = (first..first + count)
                    .map(|p| {
                        ps.bytes()
                            - PAGE_HEADER_LEN
                            - Page::new(&pages[p as usize]).unwrap().free_space()
                    })
                    .sum();
                used as f64 / (count as usize * (ps.bytes() - PAGE_HEADER_LEN)) as f64
            };
            for (tree, plan_tree) in [("table", &plan.table), ("view", &plan.view_index)] {
                let f = fill(plan_tree.first_leaf, plan_tree.leaf_count());
                assert!((0.6..=0.71).contains(&f), "{ps} {tree} leaves {f:.3} full");
            }
            let lv = fill(plan.long_values.first_leaf, plan.long_values.leaf_count());
            // 3 of 4 chunks at 16/32 KiB pages; 2 of 2 (short last chunks included) below.
            let most = if ps.bytes() >= 16 * 1024 { 0.76 } else { 1.0 };
            // At 4 KiB a 2,000-byte long value is a full chunk and a 2-byte one: half
            // the leaf's second chunk slot goes unused.
            let least = if ps.bytes() < 8 * 1024 { 0.45 } else { 0.55 };
            assert!(
                (least..=most).contains(&lv),
                "{ps} long-value leaves {lv:.3} full"
            );
            // Mostly full, with the growth reserve left as empty pages.
            let used = plan.first_free_page - 1;
            assert!(
                used as f64 > 0.85 * count as f64,
                "{ps}: used {used} of {count}"
            );
            assert!(plan.first_free_page <= count);
            let free = Page::new(&pages[count as usize]).unwrap().header();
            assert_eq!(free.flags & flags::EMPTY, flags::EMPTY);
        }
    }

    #[test]
    fn deep_trees_have_branch_levels() {
        // 4 KiB pages with many leaves need at least one branch level under the root.
        let plan = plan(PageSize::K4, 60_000);
        assert!(!plan.long_values.levels.is_empty());
        assert!(plan.table.leaf_count() > 100);
    }

    #[test]
    fn too_small_is_an_error() {
        let err = BulkLoadPlan::new(BulkLoadSpec {
            page_size: PageSize::K32,
            page_count: 10,
            mailboxes: 1,
            signature: 1,
            compressibility: Compressibility::MAIL,
            leaf_fill: 0.9,
        })
        .unwrap_err();
        assert!(err.to_string().contains("too small"), "{err}");
    }
}
