//! The page cache's test fixtures, shared by cache_behaviour.rs, cache_faults.rs and
//! cache_write_out.rs: a database made once by a real `prepare` and copied per test, a
//! transaction log whose durability the test controls (and audits against the real
//! file), page markers and small helpers.

#![allow(dead_code)] // the suite and power_cut's binary use different subsets

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use edbstress_engine::EngineError;
use edbstress_engine::InstanceId;
use edbstress_engine::InstanceLayout;
use edbstress_engine::{CacheConfig, PageCache, WalSync};
use edbstress_engine::{PrepareOptions, PreparePlan};
use edbstress_format::log::LogPosition;
use edbstress_format::{PageSize, Pgno};
use edbstress_io::{Access, BackendKind, DataFile, IoClass, IoMode};
use parking_lot::{Condvar, Mutex};

pub const PAGE: PageSize = PageSize::K8;
pub const PAGE_LEN: usize = 8192;
/// Where the tests write their marker: inside the page body, away from the header.
pub const MARK: usize = 4000;

// ---------------------------------------------------------------- database files

pub struct Template {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub pages: u32,
}

/// One 16 MiB database of 8 KiB pages prepared once; each test copies it.
pub fn template() -> &'static Template {
    static TEMPLATE: OnceLock<Template> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = InstanceLayout::new(InstanceId::new(1), dir.path(), &dir.path().join("logs"));
        let options = PrepareOptions {
            page_size: PAGE,
            database_bytes: 16 << 20,
            mailboxes: 10,
            io_mode: IoMode::Buffered,
            backend: BackendKind::Threads,
            threads: 1,
            ..PrepareOptions::default()
        };
        let pages = options.page_count().expect("page count");
        let plan = PreparePlan::check(vec![layout.clone()], options).expect("plan");
        plan.execute(&mut |_| {}).expect("prepare");
        Template {
            path: layout.db_file,
            pages,
            _dir: dir,
        }
    })
}

pub struct Db {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub pages: u32,
}

pub fn database() -> Db {
    let t = template();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db.edb");
    std::fs::copy(&t.path, &path).expect("copy template");
    Db {
        _dir: dir,
        path,
        pages: t.pages,
    }
}

pub fn open(path: &Path, access: Access) -> Arc<DataFile> {
    let file = match DataFile::open(path, IoMode::Direct, access) {
        Ok(file) => file,
        Err(_) => DataFile::open(path, IoMode::Buffered, access).expect("open database"),
    };
    Arc::new(file)
}

/// Page `pgno` as it is on disk now.
#[allow(clippy::disallowed_methods)] // reads what is on disk, behind the engine's back
pub fn disk_page(path: &Path, pgno: u32) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).expect("open");
    let mut buf = vec![0u8; PAGE_LEN];
    file.read_exact_at(&mut buf, Pgno::new(pgno).offset(PAGE))
        .expect("read page");
    buf
}

#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
pub fn write_disk_page(path: &Path, pgno: u32, page: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open");
    file.write_all_at(page, Pgno::new(pgno).offset(PAGE))
        .expect("write page");
}

/// Written after every marker, so that page content that happens to look like a
/// marker is not taken for one.
pub const MARK_TAG: u64 = 0x7E57_CAC4_E5EA_1ED0;

pub fn marker(page: &[u8]) -> u64 {
    u64::from_le_bytes(page[MARK..MARK + 8].try_into().expect("8 bytes"))
}

/// The marker a test wrote, if the page carries one.
pub fn test_marker(page: &[u8]) -> Option<u64> {
    let tag = u64::from_le_bytes(page[MARK + 8..MARK + 16].try_into().expect("8 bytes"));
    (tag == MARK_TAG).then(|| marker(page))
}

pub fn set_marker(page: &mut [u8], value: u64) {
    page[MARK..MARK + 8].copy_from_slice(&value.to_le_bytes());
    page[MARK + 8..MARK + 16].copy_from_slice(&MARK_TAG.to_le_bytes());
}

// ---------------------------------------------------------------- a log we control

/// Log positions are plain byte counts here (`LogPosition::unpack(n)`).
pub fn pos(n: u64) -> LogPosition {
    LogPosition::unpack(n)
}

#[derive(Default)]
pub struct WalState {
    pub current: u64,
    pub durable: u64,
    /// flush_to blocks while set.
    pub blocked: bool,
    /// flush_to calls waiting right now.
    pub waiting: usize,
    /// flush_to fails while set.
    pub broken: bool,
    pub flushes: Vec<u64>,
}

/// A transaction log whose durability the test controls. With an audit file, every
/// flush_to first checks that no page on disk carries a marker (= the log position
/// of its last change) beyond the durable end: the write-ahead rule, checked on the
/// real file.
pub struct FakeWal {
    pub state: Mutex<WalState>,
    pub changed: Condvar,
    pub audit: Option<(PathBuf, Vec<u32>)>,
    pub violations: Mutex<Vec<String>>,
}

impl FakeWal {
    pub fn new(start: u64) -> Arc<FakeWal> {
        Self::with_audit(start, None)
    }

    pub fn with_audit(start: u64, audit: Option<(PathBuf, Vec<u32>)>) -> Arc<FakeWal> {
        Arc::new(FakeWal {
            state: Mutex::new(WalState {
                current: start,
                durable: start,
                ..WalState::default()
            }),
            changed: Condvar::new(),
            audit,
            violations: Mutex::new(Vec::new()),
        })
    }

    /// Appends `bytes` of log; returns the end position.
    pub fn append(&self, bytes: u64) -> u64 {
        let mut s = self.state.lock();
        s.current += bytes;
        s.current
    }

    pub fn set_current(&self, n: u64) {
        self.state.lock().current = n;
    }

    pub fn block(&self, blocked: bool) {
        self.state.lock().blocked = blocked;
        self.changed.notify_all();
    }

    pub fn waiting(&self) -> usize {
        self.state.lock().waiting
    }

    pub fn durable_n(&self) -> u64 {
        self.state.lock().durable
    }

    /// Checks the audited pages on disk against the durable end read afterwards
    /// (a page found on disk was written while durable was at most that).
    pub fn audit_now(&self) {
        let Some((path, pages)) = &self.audit else {
            return;
        };
        let found: Vec<(u32, u64)> = pages
            .iter()
            .filter_map(|&p| test_marker(&disk_page(path, p)).map(|m| (p, m)))
            .collect();
        let durable = self.durable_n();
        let mut violations = self.violations.lock();
        for (p, m) in found {
            if m > durable {
                violations.push(format!(
                    "page {p} on disk holds change {m} but the log is durable only to {durable}"
                ));
            }
        }
    }
}

impl WalSync for FakeWal {
    fn current(&self) -> LogPosition {
        pos(self.state.lock().current)
    }

    fn durable(&self) -> LogPosition {
        pos(self.state.lock().durable)
    }

    fn flush_to(&self, target: LogPosition) -> Result<(), EngineError> {
        self.audit_now();
        let mut s = self.state.lock();
        s.flushes.push(target.pack());
        s.waiting += 1;
        while s.blocked && !s.broken {
            self.changed.wait(&mut s);
        }
        s.waiting -= 1;
        if s.broken {
            return Err(EngineError::Invalid("the log device failed (test)".into()));
        }
        s.durable = s.durable.max(target.pack());
        s.current = s.current.max(s.durable);
        Ok(())
    }

    fn bytes_between(&self, older: LogPosition, newer: LogPosition) -> u64 {
        newer.pack().saturating_sub(older.pack())
    }
}

pub fn config(max_frames: usize) -> CacheConfig {
    CacheConfig {
        page_size: PAGE,
        min_frames: max_frames / 4,
        max_frames,
        checkpoint_depth: 1 << 40,
        coalesce_max: 512 << 10,
        write_depth: 8,
        instance: InstanceId::new(3),
        backend: BackendKind::Auto,
        verify_structure: false,
        read_class: IoClass::DbRead,
        write_class: IoClass::DbWrite,
    }
}

/// Faults `pgno` in (if needed) and returns a copy of it.
pub fn read_through<S: Send + 'static>(cache: &PageCache<S>, pgno: u32) -> Vec<u8> {
    let mut guard = cache.lock();
    if guard.lookup(Pgno::new(pgno)).is_none() {
        guard = cache.fault_in(guard, Pgno::new(pgno)).expect("fault_in");
    }
    let f = guard
        .lookup(Pgno::new(pgno))
        .expect("resident after fault_in");
    guard.page(f).to_vec()
}

/// Sets the marker of `pgno` to the end of a fresh log append and marks it dirty.
pub fn modify<S: Send + 'static>(cache: &PageCache<S>, wal: &FakeWal, pgno: u32) -> u64 {
    let mut guard = cache.lock();
    if guard.lookup(Pgno::new(pgno)).is_none() {
        guard = cache.fault_in(guard, Pgno::new(pgno)).expect("fault_in");
    }
    let f = guard.lookup(Pgno::new(pgno)).expect("resident");
    let end = wal.append(100);
    set_marker(guard.page_mut(f), end);
    guard.mark_dirty(f, pos(end));
    end
}

pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// A cache over the database `db` (read-write) with the log `wal`.
pub fn new_cache(db: &Db, config: CacheConfig, wal: &Arc<FakeWal>) -> PageCache<()> {
    new_cache_with(db, config, wal, ())
}

/// [`new_cache`] with `state` as the engine state kept under the instance lock.
pub fn new_cache_with<S: Send + 'static>(
    db: &Db,
    config: CacheConfig,
    wal: &Arc<FakeWal>,
    state: S,
) -> PageCache<S> {
    PageCache::new(
        config,
        open(&db.path, Access::ReadWrite),
        wal.clone(),
        state,
    )
    .expect("cache")
}

/// Lets the log flush again when dropped: a failed assertion must not leave the page
/// writer (and a scope joining the test's threads) blocked for ever.
pub struct ReleaseOnDrop<'a>(pub &'a FakeWal);

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.block(false);
    }
}
