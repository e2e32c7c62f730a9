//! Undo images of the pages a change set modifies.

use std::ops::Range;

use super::reuse;

/// Byte ranges of record bodies an image saves one by one (deletes and replaces in
/// place) before it copies all the bodies instead.
const SPANS_MAX: usize = 4;

/// What undo needs of a page a transaction changes: its used bytes only — the header
/// and record bodies up to `first_free`, and the tag array at the end. The free bytes
/// between them are zero on every B+tree page (formatting, delete, replace and
/// compaction zero what they free), so they are not copied and restoring zeroes them:
/// a page with few records (the free-list anchor, whose header alone changes) costs a
/// few hundred bytes instead of a whole page.
///
/// The bodies are copied lazily, and only what a change rewrites: a page that only
/// gains records (inserts that append) keeps its old bodies in place, so its image is
/// the header and tag array; a delete or an in-place replace rewrites one record's
/// body, so the image saves that body's bytes ([`BeforeImage::keep_span`]); a change
/// that may move bodies (compaction, truncate, rebuild) copies all of them first
/// ([`BeforeImage::keep_bodies`]).
///
/// Why the saved spans suffice: every byte of `page[PAGE_HEADER_LEN..head]` a change
/// writes was saved before that change. Deletes and replaces save their old body
/// first; an insert writes at the first free offset, and whenever that offset lies
/// below `head` it was lowered there by freeing a body that ended at it, which was
/// saved. Restoring copies the bodies (if copied), then the spans newest first, so
/// the oldest copy of every byte, taken before anything changed it, is what remains.
pub(super) struct BeforeImage {
    /// The header `page[..PAGE_HEADER_LEN]`, the tag array `page[len - tail..]`, then
    /// the saved spans and, once copied, the record bodies, in the order saved.
    bytes: Vec<u8>,
    /// The first free offset before the change: bodies end there.
    head: usize,
    /// Length of the tag array before the change.
    tail: usize,
    /// Where in `bytes` the bodies `page[PAGE_HEADER_LEN..head]` are, once copied.
    bodies_at: Option<usize>,
    /// Saved spans (page offset, length, offset in `bytes`), oldest first.
    spans: [(usize, usize, usize); SPANS_MAX],
    span_count: usize,
}

impl BeforeImage {
    /// The header and tag array of `page`, in a recycled buffer when this thread has
    /// one; the record bodies wait for [`BeforeImage::keep_span`] and
    /// [`BeforeImage::keep_bodies`]. A page whose header does not describe a sane
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
        let mut bytes = reuse::take_image();
        bytes.clear();
        bytes.reserve(HEADER + tail);
        bytes.extend_from_slice(&page[..HEADER]);
        bytes.extend_from_slice(&page[len - tail..]);
        let mut image = BeforeImage {
            bytes,
            head,
            tail,
            bodies_at: None,
            spans: [(0, 0, 0); SPANS_MAX],
            span_count: 0,
        };
        if !sane {
            image.keep_bodies(page);
        }
        image
    }

    /// Copies all the record bodies from `page` before an operation that may move
    /// them (truncate, a compacting insert or replace, a rebuild). `page` must be the
    /// page this image was taken of, changed since only where spans were saved.
    pub(super) fn keep_bodies(&mut self, page: &[u8]) {
        if self.bodies_at.is_none() {
            self.bodies_at = Some(self.bytes.len());
            self.bytes
                .extend_from_slice(&page[edbstress_format::PAGE_HEADER_LEN..self.head]);
        }
    }

    /// Saves `page[span]` before an operation that rewrites those bytes and no other
    /// record body (a delete zeroes its record's body, a replace that does not compact
    /// rewrites its record's), as [`BeforeImage::keep_bodies`] would but for one
    /// record's bytes. Bytes at or past `head` need no saving (restore zeroes them).
    pub(super) fn keep_span(&mut self, page: &[u8], span: Range<usize>) {
        if self.bodies_at.is_some() {
            return;
        }
        let start = span.start.max(edbstress_format::PAGE_HEADER_LEN);
        let end = span.end.min(self.head);
        if start >= end {
            return;
        }
        if self.span_count == SPANS_MAX {
            self.keep_bodies(page);
            return;
        }
        self.spans[self.span_count] = (start, end - start, self.bytes.len());
        self.span_count += 1;
        self.bytes.extend_from_slice(&page[start..end]);
    }

    /// Puts `page` back as it was.
    pub(super) fn restore(&self, page: &mut [u8]) {
        const HEADER: usize = edbstress_format::PAGE_HEADER_LEN;
        let len = page.len();
        // The old free gap was zero, and so is the page's free gap now (see the type's
        // documentation): only what the change used of the old gap needs zeroing, the
        // bodies it appended and the tags it added, not the whole gap (often most of
        // the page).
        let gap = self.head..len - self.tail;
        let now = edbstress_format::page::PageHeader::read(page);
        let now_head = usize::from(now.first_free);
        let now_tags =
            len.checked_sub(usize::from(now.tag_count) * edbstress_format::page::TAG_LEN);
        match now_tags {
            Some(now_tags) if (HEADER..=now_tags).contains(&now_head) => {
                page[gap.start..now_head.clamp(gap.start, gap.end)].fill(0);
                page[now_tags.clamp(gap.start, gap.end)..gap.end].fill(0);
            }
            _ => page[gap.clone()].fill(0),
        }
        page[..HEADER].copy_from_slice(&self.bytes[..HEADER]);
        if let Some(at) = self.bodies_at {
            page[HEADER..self.head].copy_from_slice(&self.bytes[at..at + self.head - HEADER]);
        }
        for &(start, n, at) in self.spans[..self.span_count].iter().rev() {
            page[start..start + n].copy_from_slice(&self.bytes[at..at + n]);
        }
        page[len - self.tail..].copy_from_slice(&self.bytes[HEADER..HEADER + self.tail]);
        debug_assert!(
            page[gap].iter().all(|&b| b == 0),
            "a free byte the change did not use is not zero"
        );
    }

    /// The whole page as it was (for a page-image record), given the page now (whose
    /// bodies are the old ones except where this image saved them), leaving this
    /// image empty.
    pub(super) fn take_page(&mut self, now: &[u8]) -> Vec<u8> {
        let mut page = now.to_vec();
        self.restore(&mut page);
        reuse::recycle_image(std::mem::take(&mut self.bytes));
        page
    }

    /// The buffer, for reuse.
    pub(super) fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use edbstress_format::Pgno;
    use edbstress_format::page::{PageMut, flags};
    use proptest::prelude::*;

    use super::BeforeImage;
    use crate::runtime::btree::update::{BodiesRewritten, bodies_rewritten};
    use crate::runtime::redo::RedoRef;

    /// Saves in `image` what `redo` may rewrite of `page`'s bodies, as `apply` does.
    fn save_for(image: &mut BeforeImage, redo: &RedoRef<'_>, page: &[u8]) {
        match bodies_rewritten(redo, page) {
            BodiesRewritten::None => {}
            BodiesRewritten::Span(span) => image.keep_span(page, span),
            BodiesRewritten::Any => image.keep_bodies(page),
        }
    }

    #[test]
    fn before_images_keep_used_bytes_and_restore_the_whole_page() {
        let mut page = vec![0u8; 8192];
        let mut p = PageMut::format(&mut page, Pgno::new(9), 2, flags::LEAF, 5);
        for i in 0..20u8 {
            p.append(&[i; 8], &vec![i; 100 + usize::from(i)]).unwrap();
        }
        p.delete(3);
        p.delete(11);
        let original = page.clone();
        let mut image = BeforeImage::of(&page);
        assert!(
            image.bytes.len() < 200 && image.bodies_at.is_none(),
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
            2 => (any::<u16>(), 0usize..120).prop_map(|(i, n)| Op::Replace(i, n)),
            1 => any::<u32>().prop_map(Op::Links),
            1 => any::<u16>().prop_map(Op::Truncate),
        ]
    }

    proptest! {
        /// Whatever the page (holes, nearly full) and whatever changes follow, an image
        /// that saves only what `bodies_rewritten` says a change rewrites (nothing for
        /// appends and links, one record's body for deletes and replaces that do not
        /// compact, all bodies otherwise) gives the page back byte for byte, by undo
        /// and as a page image.
        #[test]
        fn lazy_body_images_undo_any_sequence_of_changes(
            sizes in proptest::collection::vec(1usize..1200, 0..40),
            holes in proptest::collection::vec(any::<u16>(), 0..8),
            ops in proptest::collection::vec(op_strategy(), 1..10),
        ) {
            let mut page = vec![0u8; 8192];
            let mut p = PageMut::format(&mut page, Pgno::new(9), 2, flags::LEAF, 5);
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
                    Op::Links(next) => RedoRef::SetLinks {
                        prev: Pgno::new(1),
                        next: Pgno::new(next),
                    },
                    Op::Truncate(keep) => RedoRef::Truncate { keep: index(keep, 1) },
                    _ => continue,
                };
                save_for(&mut image, &redo, &page);
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
        let mut p = PageMut::format(&mut page, Pgno::new(9), 2, flags::LEAF, 5);
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
        p.set_next(Pgno::new(77));
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
        assert!(image.bodies_at.is_some());
        let mut p = PageMut::new(&mut page).unwrap();
        p.delete(0);
        p.delete(4);
        p.compact();
        p.replace_data(1, &[3; 700]).unwrap();
        image.restore(&mut page);
        assert_eq!(page, original, "undo after appends, deletes and compaction");

        // A page too full for a contiguous insert would compact: not an append.
        let mut page = vec![0u8; 8192];
        let mut p = PageMut::format(&mut page, Pgno::new(9), 2, flags::LEAF, 5);
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

    /// A delete or a replace that does not compact saves only its record's bytes; the
    /// first change that may move bodies after them copies the rest; more spans than
    /// the image holds copy all bodies. Each way undo is byte for byte.
    #[test]
    fn deletes_and_replaces_in_place_save_only_their_records_bytes() {
        let mut page = vec![0u8; 8192];
        let mut p = PageMut::format(&mut page, Pgno::new(9), 2, flags::LEAF, 5);
        for i in 0..30u8 {
            p.append(&[i; 8], &[i; 200]).unwrap();
        }
        p.delete(7); // a hole: the page's bodies are not contiguous
        let original = page.clone();
        let light = BeforeImage::of(&page).bytes.len();
        let apply = |page: &mut Vec<u8>, image: &mut BeforeImage, redo: RedoRef<'_>| {
            save_for(image, &redo, page);
            redo.apply_to_checked_page(page, Pgno::new(9), 77).unwrap();
        };

        // A delete, an in-place shrink, a grow at the first free offset, then an
        // insert into the space the last body left.
        let mut image = BeforeImage::of(&page);
        let count = PageMut::new(&mut page).unwrap().record_count() as u16;
        apply(&mut page, &mut image, RedoRef::Delete { index: 3 });
        apply(
            &mut page,
            &mut image,
            RedoRef::ReplaceData {
                index: 5,
                data: &[1; 50],
            },
        );
        apply(&mut page, &mut image, RedoRef::Delete { index: count - 2 });
        apply(
            &mut page,
            &mut image,
            RedoRef::ReplaceData {
                index: 0,
                data: &[2; 600],
            },
        );
        apply(
            &mut page,
            &mut image,
            RedoRef::Insert {
                index: 1,
                key: &[0, 1],
                data: &[3; 90],
            },
        );
        assert!(image.bodies_at.is_none(), "no change here moves bodies");
        assert_eq!(image.span_count, 4);
        assert!(
            image.bytes.len() <= light + 4 * 210,
            "four records' bytes, not the page's: {} (header and tags {light})",
            image.bytes.len()
        );
        let mut undone = page.clone();
        image.restore(&mut undone);
        assert_eq!(undone, original, "undo of deletes and replaces in place");
        assert_eq!(image.take_page(&page), original, "and their page image");

        // A fifth span copies all bodies, as they are after the first four changes.
        let mut page = original.clone();
        let mut image = BeforeImage::of(&page);
        for index in [0, 2, 4, 6, 8] {
            apply(&mut page, &mut image, RedoRef::Delete { index });
        }
        assert!(image.bodies_at.is_some(), "spans full: bodies copied");
        let mut undone = page.clone();
        image.restore(&mut undone);
        assert_eq!(undone, original, "undo after spans, then all bodies");

        // A replace that must compact copies all bodies, after the spans saved.
        let mut page = original.clone();
        let mut image = BeforeImage::of(&page);
        apply(&mut page, &mut image, RedoRef::Delete { index: 10 });
        let free = PageMut::new(&mut page).unwrap().free_space();
        let big = vec![4u8; free];
        let redo = RedoRef::ReplaceData {
            index: 1,
            data: &big[..free - 20],
        };
        assert_eq!(bodies_rewritten(&redo, &page), BodiesRewritten::Any);
        apply(&mut page, &mut image, redo);
        assert!(image.bodies_at.is_some());
        let mut undone = page.clone();
        image.restore(&mut undone);
        assert_eq!(
            undone, original,
            "undo of a span, then a compacting replace"
        );
    }
}
