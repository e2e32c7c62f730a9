//! The page writer's eviction writes that carry the frame's own buffer (no snapshot
//! copy): while such a write is in flight the page is out of the cache's map yet still
//! dirty (the checkpoint holds), a session that faults it in waits for the write and
//! gets it back without a read, and `new_page` of it waits too and finds the page.
//! On real database files made by `prepare`, with a log whose durability the test
//! holds back, so that the writes stay in flight as long as the test needs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use edbstress_engine::{CacheConfig, EngineError, InstanceLayout, PageCache, WalSync};
use edbstress_engine::{PrepareOptions, PreparePlan};
use edbstress_format::log::LogPosition;
use edbstress_format::{PageSize, Pgno, page_offset};
use edbstress_io::{Access, BackendKind, DataFile, IoClass, IoMode};
use parking_lot::{Condvar, Mutex};

const PAGE: PageSize = PageSize::K8;
const PAGE_LEN: usize = 8192;
/// Where the tests write their marker: inside the page body, away from the header.
const MARK: usize = 4000;
const FRAMES: usize = 16;

fn pos(n: u64) -> LogPosition {
    LogPosition::unpack(n)
}

/// A log whose flushes block while the test says so.
struct HeldWal {
    /// (current, durable, blocked, flush_to calls waiting)
    state: Mutex<(u64, u64, bool, usize)>,
    changed: Condvar,
}

impl HeldWal {
    fn new(start: u64) -> Arc<HeldWal> {
        Arc::new(HeldWal {
            state: Mutex::new((start, start, true, 0)),
            changed: Condvar::new(),
        })
    }

    fn append(&self, bytes: u64) -> u64 {
        let mut s = self.state.lock();
        s.0 += bytes;
        s.0
    }

    fn release(&self) {
        self.state.lock().2 = false;
        self.changed.notify_all();
    }

    fn waiting(&self) -> usize {
        self.state.lock().3
    }
}

impl WalSync for HeldWal {
    fn current(&self) -> LogPosition {
        pos(self.state.lock().0)
    }

    fn durable(&self) -> LogPosition {
        pos(self.state.lock().1)
    }

    fn flush_to(&self, target: LogPosition) -> Result<(), EngineError> {
        let mut s = self.state.lock();
        s.3 += 1;
        while s.2 {
            self.changed.wait(&mut s);
        }
        s.3 -= 1;
        s.1 = s.1.max(target.pack());
        s.0 = s.0.max(s.1);
        Ok(())
    }

    fn bytes_between(&self, older: LogPosition, newer: LogPosition) -> u64 {
        newer.pack().saturating_sub(older.pack())
    }
}

/// Lets the log flush again when dropped: a failed assertion must not leave the page
/// writer (and the scope joining the test's threads) blocked for ever.
struct ReleaseOnDrop<'a>(&'a HeldWal);

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// A prepared 16 MiB database of 8 KiB pages in a temporary directory.
fn database() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = InstanceLayout::new(1, dir.path(), &dir.path().join("logs"));
    let options = PrepareOptions {
        page_size: PAGE,
        database_bytes: 16 << 20,
        mailboxes: 10,
        io_mode: IoMode::Buffered,
        backend: BackendKind::Threads,
        threads: 1,
        ..PrepareOptions::default()
    };
    let plan = PreparePlan::check(vec![layout.clone()], options).expect("plan");
    plan.execute(&mut |_| {}).expect("prepare");
    (dir, layout.db_file)
}

fn open(path: &Path) -> Arc<DataFile> {
    let file = match DataFile::open(path, IoMode::Direct, Access::ReadWrite) {
        Ok(file) => file,
        Err(_) => DataFile::open(path, IoMode::Buffered, Access::ReadWrite).expect("open"),
    };
    Arc::new(file)
}

fn config(backend: BackendKind) -> CacheConfig {
    CacheConfig {
        page_size: PAGE,
        min_frames: FRAMES,
        max_frames: FRAMES,
        checkpoint_depth: 1 << 40,
        coalesce_max: 512 << 10,
        write_depth: 8,
        instance: 1,
        backend,
        verify_structure: false,
        read_class: IoClass::DbRead,
        write_class: IoClass::DbWrite,
    }
}

fn marker(page: &[u8]) -> u64 {
    u64::from_le_bytes(page[MARK..MARK + 8].try_into().expect("8 bytes"))
}

fn disk_page(path: &Path, pgno: u32) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).expect("open");
    let mut buf = vec![0u8; PAGE_LEN];
    file.read_exact_at(&mut buf, page_offset(pgno, PAGE))
        .expect("read page");
    buf
}

fn read_through(cache: &PageCache<()>, pgno: u32) -> Vec<u8> {
    let mut guard = cache.lock();
    if guard.lookup(Pgno::new(pgno)).is_none() {
        guard = cache.fault_in(guard, Pgno::new(pgno)).expect("fault_in");
    }
    let f = guard.lookup(Pgno::new(pgno)).expect("resident");
    guard.page(f).to_vec()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(2));
    }
}

/// Fills every frame with a dirty page (1..=16, marker = end of its change), then a
/// reader of page 1000 finds no frame: the writer chooses pages to evict, takes them
/// out of the map for their writes and blocks in the log flush the write-ahead rule
/// needs. Returns the pages out of the map, with the markers of all 16.
fn pages_in_flight<'scope>(
    cache: &'scope PageCache<()>,
    wal: &HeldWal,
    scope: &'scope thread::Scope<'scope, '_>,
) -> (Vec<u32>, Vec<u64>) {
    let mut markers = Vec::new();
    for p in 1..=FRAMES as u32 {
        let mut guard = cache.lock();
        if guard.lookup(Pgno::new(p)).is_none() {
            guard = cache.fault_in(guard, Pgno::new(p)).expect("fault_in");
        }
        let f = guard.lookup(Pgno::new(p)).expect("resident");
        let end = wal.append(100);
        guard.page_mut(f)[MARK..MARK + 8].copy_from_slice(&end.to_le_bytes());
        guard.mark_dirty(f, pos(end));
        markers.push(end);
    }
    let checkpoint = cache.checkpoint();
    scope.spawn(move || read_through(cache, 1000));
    // The writer may have chosen its pages already (the frames ran low while they were
    // filled), so wait for the reader's stall too: its miss is counted by then.
    wait_until("the reader's stall", || cache.counters().stalls == 1);
    wait_until("the page writer's log flush", || wal.waiting() == 1);
    let out: Vec<u32> = (1..=FRAMES as u32)
        .filter(|&p| !cache.lock().contains(Pgno::new(p)))
        .collect();
    assert!(!out.is_empty(), "no page is being written out of its frame");
    let c = cache.counters();
    assert_eq!(c.dirty, FRAMES, "pages in flight are still dirty: {c:?}");
    assert_eq!(
        cache.checkpoint(),
        checkpoint,
        "the checkpoint passed unwritten pages"
    );
    for &p in &out {
        let on_disk = marker(&disk_page(cache.file().path(), p));
        assert_ne!(on_disk, markers[p as usize - 1], "page {p} written early");
    }
    (out, markers)
}

#[test]
fn a_page_faulted_during_its_eviction_write_comes_back_without_a_read() {
    for backend in [BackendKind::Auto, BackendKind::Threads] {
        let (_dir, path) = database();
        let wal = HeldWal::new(1000);
        let cache = PageCache::new(config(backend), open(&path), wal.clone(), ()).expect("cache");
        let (markers, reads_before) = thread::scope(|s| {
            let _release = ReleaseOnDrop(&wal);
            let (out, markers) = pages_in_flight(&cache, &wal, s);
            let p = out[0];
            let before = cache.counters();
            let cache = &cache;
            let reader = s.spawn(move || read_through(cache, p));
            // Counted under the instance lock in the same hold that registers the wait.
            wait_until("the fault to wait", || {
                cache.counters().misses == before.misses + 1
            });
            wal.release();
            let page = reader.join().expect("join");
            assert_eq!(
                marker(&page),
                markers[p as usize - 1],
                "page {p} ({backend:?})"
            );
            assert!(cache.lock().contains(Pgno::new(p)), "page {p} was evicted");
            (markers, before.reads)
        });
        // Page 1000's read is the only one: page p came back from its own frame.
        let c = cache.counters();
        assert_eq!(c.reads, reads_before + 1, "{backend:?}");
        assert_eq!(c.write_out_waits, 1, "{backend:?}");
        cache.shutdown().expect("shutdown");
        for p in 1..=FRAMES as u32 {
            let on_disk = marker(&disk_page(&path, p));
            assert_eq!(on_disk, markers[p as usize - 1], "page {p} ({backend:?})");
        }
    }
}

#[test]
fn new_page_of_a_page_being_written_out_waits_and_finds_it() {
    let (_dir, path) = database();
    let wal = HeldWal::new(1000);
    let cache =
        PageCache::new(config(BackendKind::Auto), open(&path), wal.clone(), ()).expect("cache");
    thread::scope(|s| {
        let _release = ReleaseOnDrop(&wal);
        let (out, markers) = pages_in_flight(&cache, &wal, s);
        let p = out[0];
        let cache = &cache;
        let creator = s.spawn(move || {
            let mut guard = cache.lock();
            let mut refused = 0;
            let f = loop {
                match guard.new_page(Pgno::new(p)) {
                    Some(f) => break f,
                    None => {
                        refused += 1;
                        guard = cache.try_wait_for_frame(guard).expect("frame");
                    }
                }
            };
            (refused, guard.page(f).to_vec())
        });
        thread::sleep(Duration::from_millis(100));
        assert!(
            !creator.is_finished(),
            "new_page went on while page {p} was in flight"
        );
        wal.release();
        let (refused, page) = creator.join().expect("join");
        // Refused while in flight, then the written page itself: not a zeroed frame.
        assert_eq!(refused, 1);
        assert_eq!(marker(&page), markers[p as usize - 1]);
    });
    cache.shutdown().expect("shutdown");
}
