//! An open instance: one database file, its page cache and its transaction log, and
//! the transactions sessions run against it.
//!
//! Transactions apply at commit (see `btree`): under the instance lock the changes are
//! applied optimistically with undo copies; a page that is not cached makes the attempt
//! undo itself, release the lock, read the page and retry. A successful attempt appends
//! Begin, its redo records and Commit to the log in one call, marks its pages dirty with
//! the position of that append's end, and releases the lock; a durable commit then waits
//! for the log to reach the disk (group commit), a lazy one returns at once.

mod txn;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use edbstress_format::Generation;
use edbstress_format::InstanceId;
use edbstress_format::header::{DatabaseHeader, DbState};
use edbstress_format::log::{CheckpointState, LogPosition, LogRecord};
use edbstress_format::{PageSize, Pgno};
use edbstress_io::{Access, AlignedBuf, BackendKind, DataFile, IoClass, IoMode, IoStats};
use parking_lot::Mutex;

use crate::dbfile::{DbFileIo, read_verified_header};
use crate::error::EngineError;
use crate::layout::InstanceLayout;
use crate::runtime::btree::{self, SpaceCounters, TreeState};
use crate::runtime::cache::{CacheConfig, CacheCounters, PageCache, WalSync};
use crate::runtime::growth::{GrowthAllowance, GrowthLimitReached};
use crate::runtime::log::{GenerationHook, GenerationRecord, LogConfig, LogCounters, LogWriter};
use crate::runtime::schema::{InsertKeyOrder, MAILBOX_TABLE_ROOT, MessageKey, chunk_len};

/// How to open an instance.
#[derive(Clone, Debug)]
pub struct InstanceConfig {
    /// Where its files are.
    pub layout: InstanceLayout,
    /// Instance number used in I/O accounting.
    pub instance: InstanceId,
    /// Minimum database cache size in bytes.
    pub cache_min_bytes: u64,
    /// Maximum database cache size in bytes.
    pub cache_max_bytes: u64,
    /// Checkpoint depth in bytes of log.
    pub checkpoint_depth: u64,
    /// Checkpoint depth past which a transaction's session waits for the page writer
    /// before going on, bytes of log (at least `checkpoint_depth`); `None`: where ESE's
    /// checkpoint writes reach their greatest urgency (`cache::depth::hard_limit`: 1.25 × the depth + 63.5 MiB).
    pub checkpoint_too_deep: Option<u64>,
    /// Log buffer size in bytes (half of it ready starts a log write).
    pub log_buffer: usize,
    /// A bounded durability delay for lazy commits (`LogConfig::lazy_flush_interval`);
    /// `None`, as ESE: a lazy commit waits for the next log write.
    pub lazy_flush_interval: Option<Duration>,
    /// Write a flush's closed log segments and its partially filled tail in two
    /// writes (see `LogConfig::split_tail_write`).
    pub split_tail_write: bool,
    /// Write a partially filled log tail with a shadow copy and continue it in the
    /// next write (see `LogConfig::partial_tail_shadow`).
    pub partial_tail_shadow: bool,
    /// Segment (log sector) length of new log generations (see
    /// `LogConfig::segment_len`).
    pub log_segment_len: edbstress_format::log::SegmentLen,
    /// Remove log generations behind the checkpoint.
    pub circular_logging: bool,
    /// Direct or buffered I/O.
    pub io_mode: IoMode,
    /// I/O backend for background writes.
    pub backend: BackendKind,
    /// Hold the checkpoint where it was at open (the SoftRecovery test): it is never
    /// advanced, so a crash makes recovery replay every log generation written since,
    /// and no page is written for checkpoint depth (`checkpoint_depth` is then unused;
    /// pages are still written when the cache needs frames, which replay tolerates).
    pub hold_checkpoint: bool,
    /// Largest write of contiguous dirty pages the page writer coalesces, bytes (at
    /// least one page is always written).
    pub write_coalesce_max: usize,
    /// Torn-write protection: log the on-disk image of every page a change makes dirty
    /// (a `PageImage` record ahead of the change), so that recovery can rebuild a page
    /// whose write a power cut tore. Costs about one page of log per database page
    /// written. Off by default, like Exchange's ESE, which detects torn pages by
    /// checksum (-1018) instead and patches them from a passive copy.
    pub torn_write_protection: bool,
    /// Where a new message's row goes among its mailbox's rows.
    pub insert_keys: InsertKeyOrder,
    /// A limit on the database file's growth, shared with other instances; None: the
    /// file grows as long as the filesystem has room.
    pub growth_allowance: Option<Arc<GrowthAllowance>>,
}

impl InstanceConfig {
    /// Defaults of the exchange2010 profile for the instance at `layout`.
    pub fn new(layout: InstanceLayout) -> InstanceConfig {
        InstanceConfig {
            instance: layout.instance,
            layout,
            cache_min_bytes: 32 << 20,
            cache_max_bytes: 256 << 20,
            checkpoint_depth: 20 << 20,
            checkpoint_too_deep: None,
            log_buffer: crate::runtime::log::DEFAULT_LOG_BUFFER_LEN,
            lazy_flush_interval: None,
            split_tail_write: true,
            partial_tail_shadow: false,
            log_segment_len: edbstress_format::log::SegmentLen::Page4096,
            circular_logging: false,
            io_mode: IoMode::Direct,
            backend: BackendKind::Auto,
            hold_checkpoint: false,
            write_coalesce_max: 512 << 10,
            torn_write_protection: false,
            insert_keys: InsertKeyOrder::Ascending,
            growth_allowance: None,
        }
    }
}

/// Whether a commit waits for the log to be durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Wait until the commit record is on stable storage.
    Durable,
    /// Return at once; the commit reaches disk with the next log write.
    Lazy,
}

/// One change of a transaction.
#[derive(Clone, Copy, Debug)]
pub enum TxnOp<'a> {
    /// A new message in `mailbox` (its id is assigned at commit).
    Insert {
        /// Mailbox.
        mailbox: u32,
        /// Row properties.
        props: &'a [u8],
        /// Message body.
        body: &'a [u8],
    },
    /// Delete a message and its body.
    Delete {
        /// The message.
        key: MessageKey,
    },
    /// Update a message's properties, and its body when `body` is given.
    Replace {
        /// The message.
        key: MessageKey,
        /// New row properties.
        props: &'a [u8],
        /// New body, or None to keep it.
        body: Option<&'a [u8]>,
        /// A new view sort key (the property the view sorts by changed: its view
        /// index entry moves), or None to keep it.
        resort: Option<u32>,
    },
}

/// What a commit did.
#[derive(Clone, Debug, Default)]
pub struct CommitOutcome {
    /// Log position just after the commit record (0 when nothing changed).
    pub position: LogPosition,
    /// Keys of inserted messages, in op order.
    pub inserted: Vec<MessageKey>,
    /// For each delete/replace, whether the message existed.
    pub found: Vec<bool>,
    /// Attempts that had to be retried (cache misses, frame waits, growth).
    pub retries: u32,
}

/// A message as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Its key.
    pub key: MessageKey,
    /// Row properties.
    pub props: Vec<u8>,
    /// Body length.
    pub body_len: u32,
    /// The body, when asked for.
    pub body: Option<Vec<u8>>,
}

/// Counters of an instance.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct InstanceCounters {
    /// Transactions committed durably.
    pub durable_commits: u64,
    /// Transactions committed lazily.
    pub lazy_commits: u64,
    /// Read-only operations.
    pub reads: u64,
    /// Attempts retried after a miss, a frame wait or growth.
    pub retries: u64,
    /// Times the file was grown.
    pub growths: u64,
    /// Pages added to the file by growth.
    pub pages_grown: u64,
    /// Times the database header was written (both copies, each made durable).
    pub header_writes: u64,
}

#[derive(Default)]
struct AtomicCounters {
    durable_commits: AtomicU64,
    lazy_commits: AtomicU64,
    reads: AtomicU64,
    retries: AtomicU64,
    growths: AtomicU64,
    pages_grown: AtomicU64,
    header_writes: AtomicU64,
}

impl WalSync for LogWriter {
    fn current(&self) -> LogPosition {
        LogWriter::current(self)
    }
    fn durable(&self) -> LogPosition {
        LogWriter::durable(self)
    }
    fn flush_to(&self, pos: LogPosition) -> Result<(), EngineError> {
        LogWriter::flush_to(self, pos)
    }
    fn bytes_between(&self, older: LogPosition, newer: LogPosition) -> u64 {
        LogWriter::bytes_between(self, older, newer)
    }
}

/// What a clean shutdown left behind.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ShutdownReport {
    /// The database file.
    pub db_file: PathBuf,
    /// Log position the next run continues from.
    pub log_end: String,
    /// Highest dbtime.
    pub last_dbtime: u64,
    /// Pages in the file.
    pub page_count: u32,
}

/// An open instance.
pub struct Instance {
    config: InstanceConfig,
    file: Arc<DataFile>,
    log: Arc<LogWriter>,
    cache: PageCache<TreeState>,
    /// Shared with the log writer's generation hook, which records log generations
    /// and the checkpoint in it.
    header: Arc<Mutex<DatabaseHeader>>,
    /// The database file's I/O outside the cache (header writes, growth, the
    /// checkpoint barrier), timed and counted by a backend of the configured kind;
    /// shared with the log writer's generation hook and checkpoint barrier. Always
    /// locked last (after `header`).
    file_io: Arc<Mutex<DbFileIo>>,
    /// `file_io`'s counters, readable while it is busy.
    file_io_stats: Arc<Mutex<IoStats>>,
    growth: Mutex<()>,
    next_trx: AtomicU64,
    chunk_len: usize,
    /// Shared with the generation hook, which counts its header writes.
    counters: Arc<AtomicCounters>,
    /// Keeps other processes and instances off the database while this one is open.
    _lock: crate::runtime::lock::DatabaseLock,
    /// And off its log directory, whatever database path they were given.
    _log_lock: crate::runtime::dirlock::LogDirLock,
}

/// The log writer's generation hook: records in the header, durably, that
/// `generation` holds data, with the checkpoint last written to `E00.chk` (so the
/// header's checkpoint moves with the log and is a safe fallback when both checkpoint
/// copies are lost).
fn record_generation_in(
    header: Arc<Mutex<DatabaseHeader>>,
    file_io: Arc<Mutex<DbFileIo>>,
    counters: Arc<AtomicCounters>,
) -> GenerationHook {
    Box::new(move |r: GenerationRecord| {
        let mut h = header.lock();
        h.log_required = h.log_required.max(r.generation);
        h.checkpoint = h.checkpoint.max(r.checkpoint);
        h.last_dbtime = h.last_dbtime.max(r.state.last_dbtime);
        h.next_unused_page = h.next_unused_page.max(r.state.next_unused_page);
        h.next_message_id = h.next_message_id.max(r.state.next_message_id);
        h.update_seq += 1;
        file_io.lock().write_header(&h)?;
        counters.header_writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    })
}

/// Attempts before an operation gives up (each retry follows real progress: a page
/// read, a frame freed or the file grown).
const MAX_ATTEMPTS: u32 = 10_000;

impl Instance {
    /// Opens a cleanly shut down (or freshly prepared) instance and marks it in use.
    pub fn open(config: InstanceConfig) -> Result<Instance, EngineError> {
        let path = &config.layout.db_file;
        let lock = crate::runtime::lock::DatabaseLock::acquire(path)?;
        let file = Arc::new(DataFile::open(path, config.io_mode, Access::ReadWrite)?);
        let mut header = read_verified_header(&file)?.header;
        match header.state {
            DbState::Clean => {}
            DbState::DirtyNeedsRecovery => {
                return Err(EngineError::NeedsRecovery { path: path.clone() });
            }
            DbState::Creating => {
                return Err(EngineError::Invalid(format!(
                    "{} was left unfinished by an interrupted prepare; run `edbstress prepare` again",
                    path.display()
                )));
            }
        }
        let log_lock = crate::runtime::dirlock::claim_log_dir(
            &config.layout,
            crate::runtime::log::LogIdentity {
                db_signature: header.signature,
                log_signature: header.log_signature,
            },
        )?;
        let page_size = header.page_size;
        let log = Arc::new(LogWriter::open(
            LogConfig {
                dir: config.layout.log_dir.clone(),
                instance: config.instance,
                db_signature: header.signature,
                log_signature: header.log_signature,
                file_len: edbstress_format::log::DEFAULT_LOG_FILE_LEN,
                segment_len: config.log_segment_len,
                buffer_len: config.log_buffer,
                lazy_flush_interval: config.lazy_flush_interval,
                split_tail_write: config.split_tail_write,
                partial_tail_shadow: config.partial_tail_shadow,
                circular: config.circular_logging,
                io_mode: config.io_mode,
                backend: config.backend,
            },
            header.checkpoint,
            header.checkpoint,
            CheckpointState {
                last_dbtime: header.last_dbtime,
                next_unused_page: header.next_unused_page,
                next_message_id: header.next_message_id,
            },
        )?);
        let file_io = Arc::new(Mutex::new(DbFileIo::open(
            &file,
            config.backend,
            config.instance,
        )?));
        let file_io_stats = file_io.lock().stats_handle();
        let barrier_io = Arc::clone(&file_io);
        log.set_checkpoint_barrier(Box::new(move || {
            Ok(barrier_io.lock().sync(IoClass::DbFlush)?)
        }));
        // From here on the database may change: it needs recovery unless shut down cleanly.
        header.state = DbState::DirtyNeedsRecovery;
        header.update_seq += 1;
        file_io.lock().write_header(&header)?;
        let counters = Arc::new(AtomicCounters::default());
        counters.header_writes.fetch_add(1, Ordering::Relaxed);
        let recorded = header.log_required;
        let header = Arc::new(Mutex::new(header));
        log.set_generation_hook(
            record_generation_in(
                Arc::clone(&header),
                Arc::clone(&file_io),
                Arc::clone(&counters),
            ),
            recorded,
        );
        let header_now = header.lock().clone();
        let header_ref = &header_now;
        let frames = |bytes: u64| (bytes / page_size.bytes() as u64).max(16) as usize;
        let cache = PageCache::new(
            CacheConfig {
                page_size,
                min_frames: frames(config.cache_min_bytes.min(config.cache_max_bytes)),
                max_frames: frames(config.cache_max_bytes),
                // Writes for checkpoint depth only serve to advance the checkpoint.
                checkpoint_depth: if config.hold_checkpoint {
                    u64::MAX
                } else {
                    config.checkpoint_depth
                },
                coalesce_max: config.write_coalesce_max,
                write_depth: 32,
                instance: config.instance,
                backend: config.backend,
                verify_structure: true,
                read_class: IoClass::DbRead,
                write_class: IoClass::DbWrite,
            },
            file.clone(),
            log.clone() as Arc<dyn WalSync>,
            TreeState {
                page_size,
                dbtime: header_ref.last_dbtime,
                next_unused_page: Pgno::new(header_ref.next_unused_page),
                page_count: header_ref.page_count,
                next_message_id: header_ref.next_message_id,
                space: Default::default(),
            },
        )?;
        Ok(Instance {
            chunk_len: chunk_len(page_size),
            config,
            file,
            log,
            cache,
            header,
            file_io_stats,
            file_io,
            growth: Mutex::new(()),
            next_trx: AtomicU64::new(1),
            counters,
            _lock: lock,
            _log_lock: log_lock,
        })
    }

    /// The instance's configuration.
    pub fn config(&self) -> &InstanceConfig {
        &self.config
    }

    /// Page size of the database.
    pub fn page_size(&self) -> PageSize {
        self.header.lock().page_size
    }

    /// The next message id to be handed out (ids below it exist or were deleted).
    pub fn next_message_id(&self) -> u64 {
        self.cache.lock().state_ref().next_message_id
    }

    /// What the trees did with space since the instance opened: pages from the end of
    /// the file and from the free list, pages freed, merges and splits by kind.
    pub fn space_counters(&self) -> SpaceCounters {
        self.cache.lock().state_ref().space
    }

    /// Pages allocated from the end of the file so far (the high-water mark of pages in
    /// use; pages reused from the free list do not count): what the database has
    /// needed of its file, without the file's growth granularity.
    pub fn pages_allocated(&self) -> u64 {
        u64::from(
            self.cache
                .lock()
                .state_ref()
                .next_unused_page
                .get()
                .saturating_sub(1),
        )
    }

    /// Mailboxes the database was prepared with.
    pub fn mailbox_count(&self) -> u32 {
        self.header.lock().mailbox_count
    }

    /// Grows the file by formatted empty pages (about 1 % of its size, at least 1 MiB,
    /// at least `needed` pages beyond the next unused one, within the growth allowance)
    /// and records the new size durably in the header.
    fn grow(&self, needed: u32) -> Result<(), EngineError> {
        let _one_at_a_time = self.growth.lock();
        let (page_count, next_unused, page_size) = {
            let mut g = self.cache.lock();
            let s = g.state();
            (s.page_count, s.next_unused_page, s.page_size)
        };
        let last_needed = next_unused.get().saturating_add(needed.saturating_sub(1));
        if last_needed <= page_count {
            return Ok(()); // another session grew it
        }
        let ps = page_size.bytes();
        let least = last_needed - page_count;
        let mut add = (page_count / 100)
            .max((1 << 20) / ps as u32)
            .max(16)
            .max(least);
        // The allowance is taken before anything is written: a file never grows past it.
        // Near the limit the step shrinks to what is left (at least what is needed).
        let taken = match &self.config.growth_allowance {
            Some(allowance) => {
                let taken = allowance
                    .take(u64::from(add) * ps as u64, u64::from(least) * ps as u64)
                    .map_err(|left| GrowthLimitReached {
                        file: self.file.path().to_path_buf(),
                        needed: u64::from(least) * ps as u64,
                        left,
                    })?;
                add = (taken / ps as u64) as u32;
                Some((allowance, taken))
            }
            None => None,
        };
        let result = self.extend(page_count, add, page_size);
        if result.is_err()
            && let Some((allowance, taken)) = taken
        {
            allowance.give_back(taken);
        }
        result
    }

    /// Appends `add` formatted empty pages to the file of `page_count` pages and records
    /// the new size durably in the header.
    fn extend(&self, page_count: u32, add: u32, page_size: PageSize) -> Result<(), EngineError> {
        let ps = page_size.bytes();
        let new_count = page_count.checked_add(add).ok_or_else(|| {
            EngineError::Invalid(
                "the database reached the largest page count a file can hold".into(),
            )
        })?;
        let per_write = ((1 << 20) / ps).max(1) as u32;
        let grown = u64::from(add) * ps as u64;
        let full = |e: edbstress_io::IoError| {
            let path = self.file.path();
            EngineError::Io(e).in_full_dir(
                "database directory",
                path.parent().unwrap_or(std::path::Path::new(".")),
                || {
                    let name = path.file_name().unwrap_or_default().to_string_lossy();
                    format!(
                        "growing {name} by {}",
                        edbstress_io::ByteSize(grown).approx()
                    )
                },
                grown,
                "free space there or move the database to a bigger filesystem",
            )
        };
        let mut buf = AlignedBuf::new(per_write as usize * ps);
        let mut pgno = page_count + 1;
        while pgno <= new_count {
            let n = per_write.min(new_count - pgno + 1);
            for i in 0..n {
                let page = &mut buf[i as usize * ps..(i as usize + 1) * ps];
                crate::dbfile::format_unused_page(page, Pgno::new(pgno + i));
            }
            self.file_io
                .lock()
                .write(
                    IoClass::DbGrowth,
                    &mut buf,
                    n as usize * ps,
                    edbstress_format::Pgno::new(pgno).offset(page_size),
                )
                .map_err(full)?;
            pgno += n;
        }
        self.file_io.lock().sync(IoClass::DbGrowth).map_err(full)?;
        {
            let mut h = self.header.lock();
            h.page_count = new_count;
            h.update_seq += 1;
            self.file_io.lock().write_header(&h)?;
        }
        self.cache.lock().state().page_count = new_count;
        let c = &self.counters;
        c.growths.fetch_add(1, Ordering::Relaxed);
        c.pages_grown.fetch_add(u64::from(add), Ordering::Relaxed);
        c.header_writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes every dirty page and the checkpoint file now. With
    /// [`InstanceConfig::hold_checkpoint`] the file keeps the held position, which is
    /// returned.
    pub fn checkpoint_now(&self) -> Result<LogPosition, EngineError> {
        self.cache.flush_all()?;
        if self.config.hold_checkpoint {
            return self.log.write_checkpoint();
        }
        let (checkpoint, state) = {
            let g = self.cache.lock();
            (g.checkpoint_position(), g.state_ref().checkpoint_state())
        };
        self.log.set_checkpoint(checkpoint, state);
        self.log.write_checkpoint()?;
        Ok(checkpoint)
    }

    /// Cache counters.
    pub fn cache_counters(&self) -> CacheCounters {
        self.cache.counters()
    }

    /// Log counters.
    pub fn log_counters(&self) -> LogCounters {
        self.log.counters()
    }

    /// I/O statistics of the database file and the log: the cache's reads and writes,
    /// the log writer's I/O, and the database file's bookkeeping (header writes,
    /// growth, checkpoint barrier flushes).
    pub fn io_stats(&self) -> IoStats {
        let mut stats = self.cache.io_stats();
        stats.merge(&self.log.stats());
        stats.merge(&self.file_io_stats.lock());
        stats
    }

    /// "io_uring" or "threads": the backend carrying the database file's I/O (the
    /// `backend` of the configuration, `Auto` resolved).
    pub fn read_backend(&self) -> &'static str {
        self.cache.read_backend()
    }

    /// "io_uring" or "threads": the backend that carries the log writes.
    pub fn log_backend(&self) -> &'static str {
        self.log.backend_name()
    }

    /// "io_uring" or "threads": the backend that carries the database file's
    /// bookkeeping I/O (header writes, growth, checkpoint barrier flushes).
    pub fn file_io_backend(&self) -> &'static str {
        self.file_io.lock().backend_name()
    }

    /// Transaction counters.
    pub fn counters(&self) -> InstanceCounters {
        let c = &self.counters;
        InstanceCounters {
            durable_commits: c.durable_commits.load(Ordering::Relaxed),
            lazy_commits: c.lazy_commits.load(Ordering::Relaxed),
            reads: c.reads.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            growths: c.growths.load(Ordering::Relaxed),
            pages_grown: c.pages_grown.load(Ordering::Relaxed),
            header_writes: c.header_writes.load(Ordering::Relaxed),
        }
    }

    /// End of the durable log.
    pub fn log_durable(&self) -> LogPosition {
        self.log.durable()
    }

    /// The leaf page holding (or that would hold) `key` in the mailbox table.
    pub fn locate(&self, key: MessageKey) -> Result<Pgno, EngineError> {
        let (leaf, _, _) = self.run(Durability::Lazy, |g, _| {
            Ok(btree::descend(g, MAILBOX_TABLE_ROOT, &key.encode())?.leaf)
        })?;
        Ok(leaf)
    }

    /// The checkpoint depth past which transactions wait for the page writer
    /// ([`InstanceConfig::checkpoint_too_deep`]); `u64::MAX` with a held checkpoint.
    pub fn checkpoint_hard_limit(&self) -> u64 {
        let depth = self.config.checkpoint_depth;
        match (self.config.hold_checkpoint, self.config.checkpoint_too_deep) {
            (true, _) => u64::MAX,
            (false, Some(limit)) => limit.max(depth),
            (false, None) => crate::runtime::cache::depth::hard_limit(depth),
        }
    }

    /// Log bytes between the checkpoint (the oldest unwritten change) and the end of
    /// the log: what soft recovery would replay now.
    pub fn checkpoint_depth_bytes(&self) -> u64 {
        let checkpoint = self.cache.lock().checkpoint_position();
        self.log.bytes_between(checkpoint, self.log.current())
    }

    /// With circular logging, keep log generations from `floor` on (readers such as
    /// log replication still need them) as well as what the checkpoint needs; `None`
    /// lets the checkpoint alone decide again. Takes effect at the next deletion.
    pub fn set_log_retention_floor(&self, floor: Option<Generation>) {
        self.log
            .set_retention_floor(floor.unwrap_or(Generation::MAX));
    }

    /// Current log generation.
    pub fn log_generation(&self) -> Generation {
        self.log.generation()
    }

    /// Fault injection for lost-flush tests: the next write of `pgno` is dropped. Public
    /// only for the engine's own tests (feature `test-internals`); the fault injector
    /// uses it in-crate.
    #[cfg(feature = "test-internals")]
    pub fn drop_next_write(&self, pgno: Pgno) {
        self.cache.drop_next_write(pgno);
    }

    /// Fault injection for lost-flush tests: the next write of `pgno` is dropped.
    #[cfg(not(feature = "test-internals"))]
    pub(crate) fn drop_next_write(&self, pgno: Pgno) {
        self.cache.drop_next_write(pgno);
    }

    /// Flushes everything and marks the database cleanly shut down.
    pub fn shutdown(self) -> Result<ShutdownReport, EngineError> {
        let Instance {
            config,
            log,
            cache,
            header,
            file_io,
            ..
        } = self;
        cache.flush_all()?;
        let state = cache.shutdown()?;
        log.append(&[LogRecord::Shutdown {
            last_dbtime: state.dbtime,
        }])?;
        let log = Arc::try_unwrap(log)
            .map_err(|_| EngineError::Invalid("log still in use at shutdown".into()))?;
        let end = log.shutdown()?;
        let mut h = header.lock().clone();
        h.state = DbState::Clean;
        h.update_seq += 1;
        h.checkpoint = end;
        h.last_dbtime = state.dbtime;
        h.next_unused_page = state.next_unused_page.get();
        h.page_count = state.page_count;
        h.next_message_id = state.next_message_id;
        file_io.lock().write_header(&h)?;
        Ok(ShutdownReport {
            db_file: config.layout.db_file,
            log_end: end.to_string(),
            last_dbtime: h.last_dbtime,
            page_count: h.page_count,
        })
    }

    /// Crash simulation: stops without writing dirty pages or unflushed log; the
    /// database then needs recovery. Returns the durable end of the log once no page
    /// can be written any more: every page on disk depends only on log before it, so
    /// a test may cut the log anywhere after it (what a real crash may lose).
    pub fn crash(self) -> LogPosition {
        let Instance { cache, log, .. } = self;
        cache.abandon();
        let durable = log.durable();
        if let Ok(log) = Arc::try_unwrap(log) {
            log.abandon();
        }
        durable
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
