//! The transactions sessions run: the operation mix of the profile (insert, delete,
//! replace, seek), with the profile's share of lazy commits, on Jetstress's record.
//!
//! What each is, after Jetstress's configuration file and its developer's description
//! (docs/fidelity.md, "The record and the operations"): every record is the short pad
//! (200 bytes) in the row and the long pad (2,000 bytes) as a long value
//! ([`MessageShape::JETSTRESS`]). An insert adds a record and its view index entry; a
//! seek finds a record and reads its row without fetching the long value
//! (`RetrieveLVOnRead = false`); a replace rewrites the row's pad and the long value
//! (`UpdateLV = true`); a delete removes the row, its long value and its view entry.
//! Every transaction touches one mailbox chosen uniformly, and seeks, replaces and
//! deletes find their record as a client does, by a seek to a random position of the
//! mailbox's view, then the entry's bookmark (deletes with [`DeleteTarget::Oldest`]
//! take the mailbox's first row instead). One replace in [`RESORT_ONE_IN`] changes
//! the property the view sorts by, moving the record's view entry.

use edbstress_engine::EngineError;
use edbstress_engine::{Compressibility, ContentGenerator};
use edbstress_engine::{Durability, Instance, TxnOp};
use edbstress_engine::{MessageKey, MessageShape};
use edbstress_report::OpMix;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// One replace in this many changes the view's sort property (its view entry moves).
/// Exchange's views sort on properties a client rarely changes (subject, sender,
/// received) and on ones it often does (read state, flag, categories); one in five
/// stands for that mix. Not calibrated: replaces are 5–10 % of the profiles' mixes, so
/// the share moves no fidelity row beyond its noise.
pub const RESORT_ONE_IN: u32 = 5;

/// The kind of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnKind {
    /// Insert a message.
    Insert,
    /// Delete a message.
    Delete,
    /// Replace a message's row and its long value.
    Replace,
    /// Seek a message and read its row (not its long value).
    Read,
}

impl TxnKind {
    /// Every kind, in mix order.
    pub const ALL: [TxnKind; 4] = [
        TxnKind::Insert,
        TxnKind::Delete,
        TxnKind::Replace,
        TxnKind::Read,
    ];
}

/// What one transaction did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnOutcome {
    /// Its kind.
    pub kind: TxnKind,
    /// Whether it committed lazily (reads never commit).
    pub lazy: bool,
    /// Whether it found a message to work on (deletes, replaces and reads of an empty
    /// mailbox do nothing).
    pub found: bool,
}

/// Generates and runs transactions of one session.
pub struct TransactionGenerator {
    rng: SmallRng,
    content: ContentGenerator,
    mix: OpMix,
    lazy_commit_pct: u32,
    props: Vec<u8>,
    body: Vec<u8>,
    /// Operations per transaction (1: each its own).
    batch: u32,
    /// The kinds of the last batch.
    batch_kinds: Vec<TxnKind>,
    /// Record buffers of a batch's inserts and replaces: (props, body) each.
    batch_records: Vec<(Vec<u8>, Vec<u8>)>,
    /// Which record a delete removes.
    delete_target: DeleteTarget,
}

/// Which record a delete removes. Jetstress's is not published (a delete is a
/// JetSeek, then a JetDelete); both candidates are built and measured
/// (docs/fidelity.md, "Delete target").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteTarget {
    /// The record found as seeks find theirs: a random position of the mailbox's view.
    ViewSeek,
    /// The mailbox's oldest record (its first row), as a mail queue ages out.
    Oldest,
}

/// One operation of a batch, before its commit.
enum BatchStep {
    Insert {
        mailbox: u32,
    },
    Delete {
        key: MessageKey,
    },
    Replace {
        key: MessageKey,
        resort: Option<u32>,
    },
}

impl TransactionGenerator {
    /// A generator for session `session` of a run seeded with `seed`.
    pub fn new(
        seed: u64,
        session: u32,
        mix: OpMix,
        lazy_commit_pct: u32,
        compressibility: Compressibility,
    ) -> TransactionGenerator {
        let session_seed = seed ^ (u64::from(session) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        TransactionGenerator {
            rng: SmallRng::seed_from_u64(session_seed),
            content: ContentGenerator::for_stream(session_seed.rotate_left(17), compressibility),
            mix,
            lazy_commit_pct,
            props: Vec::with_capacity(512),
            body: Vec::with_capacity(64 << 10),
            batch: 1,
            batch_kinds: Vec::new(),
            batch_records: Vec::new(),
            delete_target: DeleteTarget::ViewSeek,
        }
    }

    /// The generator with deletes removing `target` (the profile's `delete_target`).
    pub fn with_delete_target(mut self, target: DeleteTarget) -> TransactionGenerator {
        self.delete_target = target;
        self
    }

    /// The record a `kind` operation on `mailbox` works on: a seek to a random position
    /// of the mailbox's view, or, for a delete with [`DeleteTarget::Oldest`], the
    /// mailbox's first row.
    fn find_record(
        &mut self,
        instance: &Instance,
        mailbox: u32,
        kind: TxnKind,
    ) -> Result<Option<MessageKey>, EngineError> {
        if kind == TxnKind::Delete && self.delete_target == DeleteTarget::Oldest {
            return instance.seek_message(mailbox, 0);
        }
        instance.seek_view(mailbox, self.rng.random())
    }

    /// The generator with `ops` operations per transaction (the profile's
    /// `ops_per_transaction`; at least 1).
    pub fn with_batch(mut self, ops: u32) -> TransactionGenerator {
        self.batch = ops.max(1);
        self
    }

    /// Operations per transaction.
    pub fn batch(&self) -> u32 {
        self.batch
    }

    /// Runs one transaction of [`TransactionGenerator::batch`] operations, the first of
    /// kind `first`, the others drawn from the mix; their kinds are then
    /// [`TransactionGenerator::batch_kinds`]. Returns whether it committed lazily.
    pub fn run_batch_from(
        &mut self,
        instance: &Instance,
        first: TxnKind,
    ) -> Result<bool, EngineError> {
        let mut kinds = std::mem::take(&mut self.batch_kinds);
        kinds.clear();
        kinds.push(first);
        for _ in 1..self.batch {
            kinds.push(self.next_kind());
        }
        let result = self.run_batch(instance, &kinds);
        self.batch_kinds = kinds;
        result
    }

    /// The kinds of the last [`TransactionGenerator::run_batch_from`].
    pub fn batch_kinds(&self) -> &[TxnKind] {
        &self.batch_kinds
    }

    /// The kind of the next transaction, drawn from the mix.
    pub fn next_kind(&mut self) -> TxnKind {
        let m = self.mix;
        let total = (m.insert + m.delete + m.replace + m.read).max(1);
        let r = self.rng.random_range(0..total);
        if r < m.insert {
            TxnKind::Insert
        } else if r < m.insert + m.delete {
            TxnKind::Delete
        } else if r < m.insert + m.delete + m.replace {
            TxnKind::Replace
        } else {
            TxnKind::Read
        }
    }

    fn durability(&mut self) -> Durability {
        if self.rng.random_range(0..100) < self.lazy_commit_pct {
            Durability::Lazy
        } else {
            Durability::Durable
        }
    }

    fn fill_props(&mut self, len: usize) {
        self.props.resize(len, 0);
        self.content.fill(&mut self.props);
    }

    fn fill_body(&mut self, len: usize) {
        self.body.resize(len, 0);
        self.content.fill(&mut self.body);
    }

    /// Runs one transaction of `kind` against `instance`.
    pub fn run(&mut self, instance: &Instance, kind: TxnKind) -> Result<TxnOutcome, EngineError> {
        let mailboxes = instance.mailbox_count().max(1);
        let mailbox = self.rng.random_range(0..mailboxes);
        let shape = MessageShape::JETSTRESS;
        if kind == TxnKind::Insert {
            self.fill_props(shape.props_len as usize);
            self.fill_body(shape.body_len as usize);
            let durability = self.durability();
            instance.commit(
                &[TxnOp::Insert {
                    mailbox,
                    props: &self.props,
                    body: &self.body,
                }],
                durability,
            )?;
            return Ok(TxnOutcome {
                kind,
                lazy: durability == Durability::Lazy,
                found: true,
            });
        }
        let Some(key) = self.find_record(instance, mailbox, kind)? else {
            return Ok(TxnOutcome {
                kind,
                lazy: false,
                found: false,
            });
        };
        let (durability, found) = match kind {
            TxnKind::Insert => unreachable!("handled above"),
            TxnKind::Read => {
                // RetrieveLVOnRead = false: the long value is not fetched.
                let found = instance.read(key, false)?.is_some();
                return Ok(TxnOutcome {
                    kind,
                    lazy: false,
                    found,
                });
            }
            TxnKind::Delete => {
                let durability = self.durability();
                let outcome = instance.commit(&[TxnOp::Delete { key }], durability)?;
                (durability, outcome.found.first().copied().unwrap_or(false))
            }
            TxnKind::Replace => {
                // UpdateLV = true: the long value is written again with the row.
                self.fill_props(shape.props_len as usize);
                self.fill_body(shape.body_len as usize);
                let resort =
                    (self.rng.random_range(0..RESORT_ONE_IN) == 0).then(|| self.rng.random());
                let durability = self.durability();
                let outcome = instance.commit(
                    &[TxnOp::Replace {
                        key,
                        props: &self.props,
                        body: Some(&self.body[..]),
                        resort,
                    }],
                    durability,
                )?;
                (durability, outcome.found.first().copied().unwrap_or(false))
            }
        };
        Ok(TxnOutcome {
            kind,
            lazy: durability == Durability::Lazy,
            found,
        })
    }
}

impl TransactionGenerator {
    /// Runs `kinds` as the operations of one transaction, as Jetstress groups
    /// `BatchUpdates` operations between a begin and a commit (one reading of that
    /// setting: docs/fidelity.md, "Batching"): seeks read at once; deletes and replaces
    /// find their record first; every change commits together with one durability
    /// drawn from the mix. Returns whether it committed lazily.
    pub fn run_batch(
        &mut self,
        instance: &Instance,
        kinds: &[TxnKind],
    ) -> Result<bool, EngineError> {
        let mailboxes = instance.mailbox_count().max(1);
        let shape = MessageShape::JETSTRESS;
        let mut steps = Vec::with_capacity(kinds.len());
        for &kind in kinds {
            let mailbox = self.rng.random_range(0..mailboxes);
            if kind == TxnKind::Insert {
                steps.push(BatchStep::Insert { mailbox });
                continue;
            }
            let Some(key) = self.find_record(instance, mailbox, kind)? else {
                continue;
            };
            match kind {
                TxnKind::Insert => unreachable!("handled above"),
                TxnKind::Read => {
                    instance.read(key, false)?;
                }
                TxnKind::Delete => steps.push(BatchStep::Delete { key }),
                TxnKind::Replace => {
                    let resort =
                        (self.rng.random_range(0..RESORT_ONE_IN) == 0).then(|| self.rng.random());
                    steps.push(BatchStep::Replace { key, resort });
                }
            }
        }
        if steps.is_empty() {
            return Ok(false);
        }
        let records = steps
            .iter()
            .filter(|s| !matches!(s, BatchStep::Delete { .. }))
            .count();
        if self.batch_records.len() < records {
            self.batch_records.resize_with(records, Default::default);
        }
        for (props, body) in &mut self.batch_records[..records] {
            props.resize(shape.props_len as usize, 0);
            self.content.fill(props);
            body.resize(shape.body_len as usize, 0);
            self.content.fill(body);
        }
        let durability = self.durability();
        let mut buffers = self.batch_records.iter();
        let ops: Vec<TxnOp<'_>> = steps
            .iter()
            .map(|step| match *step {
                BatchStep::Delete { key } => TxnOp::Delete { key },
                BatchStep::Insert { mailbox } => {
                    let (props, body) = buffers.next().expect("a buffer per record");
                    TxnOp::Insert {
                        mailbox,
                        props,
                        body,
                    }
                }
                BatchStep::Replace { key, resort } => {
                    let (props, body) = buffers.next().expect("a buffer per record");
                    TxnOp::Replace {
                        key,
                        props,
                        body: Some(&body[..]),
                        resort,
                    }
                }
            })
            .collect();
        instance.commit(&ops, durability)?;
        Ok(durability == Durability::Lazy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_mix() {
        let mix = OpMix {
            insert: 40,
            delete: 20,
            replace: 5,
            read: 35,
        };
        let mut g = TransactionGenerator::new(7, 0, mix, 70, Compressibility::MAIL);
        let mut counts = [0u32; 4];
        for _ in 0..100_000 {
            let k = g.next_kind();
            counts[TxnKind::ALL.iter().position(|x| *x == k).unwrap()] += 1;
        }
        for (count, want) in counts.iter().zip([40.0, 20.0, 5.0, 35.0]) {
            let pct = f64::from(*count) / 1000.0;
            assert!((pct - want).abs() < 1.0, "{counts:?}");
        }
    }
}
