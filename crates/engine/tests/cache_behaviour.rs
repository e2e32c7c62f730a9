//! Behaviour of the page cache on real database files made by `prepare`: faults, LRU-2
//! eviction, write-back under the write-ahead rule, coalescing, stalls, checkpoint
//! depth, crash abandon, concurrency, corruption, writer failures and prefetch.

mod cache {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock};
    use std::thread;
    use std::time::{Duration, Instant};

    use edbstress_engine::EngineError;
    use edbstress_engine::InstanceLayout;
    use edbstress_engine::{CacheConfig, PageCache, WalSync};
    use edbstress_engine::{PrepareOptions, PreparePlan};
    use edbstress_format::checksum::{PageVerdict, verify_page};
    use edbstress_format::log::LogPosition;
    use edbstress_format::{PageSize, Pgno, page_offset};
    use edbstress_io::{Access, BackendKind, DataFile, IoClass, IoMode};
    use parking_lot::{Condvar, Mutex};

    const PAGE: PageSize = PageSize::K8;
    const PAGE_LEN: usize = 8192;
    /// Where the tests write their marker: inside the page body, away from the header.
    const MARK: usize = 4000;

    // ---------------------------------------------------------------- database files

    struct Template {
        _dir: tempfile::TempDir,
        path: PathBuf,
        pages: u32,
    }

    /// One 16 MiB database of 8 KiB pages prepared once; each test copies it.
    fn template() -> &'static Template {
        static TEMPLATE: OnceLock<Template> = OnceLock::new();
        TEMPLATE.get_or_init(|| {
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

    struct Db {
        _dir: tempfile::TempDir,
        path: PathBuf,
        pages: u32,
    }

    fn database() -> Db {
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

    fn open(path: &Path, access: Access) -> Arc<DataFile> {
        let file = match DataFile::open(path, IoMode::Direct, access) {
            Ok(file) => file,
            Err(_) => DataFile::open(path, IoMode::Buffered, access).expect("open database"),
        };
        Arc::new(file)
    }

    /// Page `pgno` as it is on disk now.
    fn disk_page(path: &Path, pgno: u32) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open(path).expect("open");
        let mut buf = vec![0u8; PAGE_LEN];
        file.read_exact_at(&mut buf, page_offset(pgno, PAGE))
            .expect("read page");
        buf
    }

    fn write_disk_page(path: &Path, pgno: u32, page: &[u8]) {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("open");
        file.write_all_at(page, page_offset(pgno, PAGE))
            .expect("write page");
    }

    /// Written after every marker, so that page content that happens to look like a
    /// marker is not taken for one.
    const MARK_TAG: u64 = 0x7E57_CAC4_E5EA_1ED0;

    fn marker(page: &[u8]) -> u64 {
        u64::from_le_bytes(page[MARK..MARK + 8].try_into().expect("8 bytes"))
    }

    /// The marker a test wrote, if the page carries one.
    fn test_marker(page: &[u8]) -> Option<u64> {
        let tag = u64::from_le_bytes(page[MARK + 8..MARK + 16].try_into().expect("8 bytes"));
        (tag == MARK_TAG).then(|| marker(page))
    }

    fn set_marker(page: &mut [u8], value: u64) {
        page[MARK..MARK + 8].copy_from_slice(&value.to_le_bytes());
        page[MARK + 8..MARK + 16].copy_from_slice(&MARK_TAG.to_le_bytes());
    }

    // ---------------------------------------------------------------- a log we control

    /// Log positions are plain byte counts here (`LogPosition::unpack(n)`).
    fn pos(n: u64) -> LogPosition {
        LogPosition::unpack(n)
    }

    #[derive(Default)]
    struct WalState {
        current: u64,
        durable: u64,
        /// flush_to blocks while set.
        blocked: bool,
        /// flush_to calls waiting right now.
        waiting: usize,
        /// flush_to fails while set.
        broken: bool,
        flushes: Vec<u64>,
    }

    /// A transaction log whose durability the test controls. With an audit file, every
    /// flush_to first checks that no page on disk carries a marker (= the log position
    /// of its last change) beyond the durable end: the write-ahead rule, checked on the
    /// real file.
    struct FakeWal {
        state: Mutex<WalState>,
        changed: Condvar,
        audit: Option<(PathBuf, Vec<u32>)>,
        violations: Mutex<Vec<String>>,
    }

    impl FakeWal {
        fn new(start: u64) -> Arc<FakeWal> {
            Self::with_audit(start, None)
        }

        fn with_audit(start: u64, audit: Option<(PathBuf, Vec<u32>)>) -> Arc<FakeWal> {
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
        fn append(&self, bytes: u64) -> u64 {
            let mut s = self.state.lock();
            s.current += bytes;
            s.current
        }

        fn set_current(&self, n: u64) {
            self.state.lock().current = n;
        }

        fn block(&self, blocked: bool) {
            self.state.lock().blocked = blocked;
            self.changed.notify_all();
        }

        fn waiting(&self) -> usize {
            self.state.lock().waiting
        }

        fn durable_n(&self) -> u64 {
            self.state.lock().durable
        }

        /// Checks the audited pages on disk against the durable end read afterwards
        /// (a page found on disk was written while durable was at most that).
        fn audit_now(&self) {
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

    fn config(max_frames: usize) -> CacheConfig {
        CacheConfig {
            page_size: PAGE,
            min_frames: max_frames / 4,
            max_frames,
            checkpoint_depth: 1 << 40,
            coalesce_max: 512 << 10,
            write_depth: 8,
            instance: 3,
            backend: BackendKind::Auto,
            verify_structure: false,
            read_class: IoClass::DbRead,
            write_class: IoClass::DbWrite,
        }
    }

    /// Faults `pgno` in (if needed) and returns a copy of it.
    fn read_through<S: Send + 'static>(cache: &PageCache<S>, pgno: u32) -> Vec<u8> {
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
    fn modify<S: Send + 'static>(cache: &PageCache<S>, wal: &FakeWal, pgno: u32) -> u64 {
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

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            thread::sleep(Duration::from_millis(5));
        }
    }

    // ---------------------------------------------------------------- tests

    #[test]
    fn fault_in_returns_disk_bytes_then_hits() {
        let db = database();
        let cache = PageCache::new(
            config(64),
            open(&db.path, Access::ReadWrite),
            FakeWal::new(1000),
            (),
        )
        .expect("cache");
        for pgno in 1..=10 {
            let mut guard = cache.lock();
            assert!(guard.lookup(Pgno::new(pgno)).is_none());
            assert!(!guard.contains(Pgno::new(pgno)));
            let mut guard = cache.fault_in(guard, Pgno::new(pgno)).expect("fault_in");
            let f = guard.lookup(Pgno::new(pgno)).expect("installed");
            assert_eq!(guard.page(f), &disk_page(&db.path, pgno)[..], "page {pgno}");
            assert_eq!(guard.pgno(f), pgno);
        }
        let c = cache.counters();
        assert_eq!((c.misses, c.reads, c.hits), (10, 10, 0), "{c:?}");
        for pgno in 1..=10 {
            let mut guard = cache.lock();
            assert!(guard.lookup(Pgno::new(pgno)).is_some());
        }
        let c = cache.counters();
        assert_eq!(c.hits, 10);
        // The retry may also come through a new guard (the fault's guard dropped).
        drop(
            cache
                .fault_in(cache.lock(), Pgno::new(11))
                .expect("fault_in"),
        );
        assert!(cache.lock().lookup(Pgno::new(11)).is_some());
        assert_eq!(
            cache.counters().hits,
            10,
            "the retry after a fault is not a hit"
        );
        assert!(cache.lock().lookup(Pgno::new(11)).is_some());
        assert_eq!(cache.counters().hits, 11);
        assert_eq!(
            c.frames, 16,
            "min_frames allocated, no growth needed yet: {c:?}"
        );
        let stats = cache.io_stats();
        let reads = stats.get(3, IoClass::DbRead).expect("db reads recorded");
        assert_eq!((reads.ops, reads.bytes), (11, 11 * PAGE_LEN as u64));
        assert!(stats.get(3, IoClass::DbWrite).is_none());
        // A second fault_in of a cached page reads nothing.
        let guard = cache
            .fault_in(cache.lock(), Pgno::new(5))
            .expect("fault_in");
        drop(guard);
        assert_eq!(cache.counters().reads, 11);
        assert!(matches!(
            cache.fault_in(cache.lock(), Pgno::new(0)),
            Err(EngineError::Invalid(_))
        ));
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn random_reads_stay_within_max_frames() {
        let db = database();
        let cache = PageCache::new(
            config(64),
            open(&db.path, Access::ReadWrite),
            FakeWal::new(1000),
            (),
        )
        .expect("cache");
        let mut rng = 0x1234_5678_9abc_def0u64;
        for i in 0..3000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let pgno = 1 + (rng % u64::from(db.pages)) as u32;
            let page = read_through(&cache, pgno);
            if i % 500 == 0 {
                assert_eq!(page, disk_page(&db.path, pgno));
            }
            let c = cache.counters();
            assert!(c.frames <= 64, "{c:?}");
        }
        let c = cache.counters();
        assert_eq!(c.max_frames, 64);
        assert!(c.evictions > 2000, "{c:?}");
        assert!(c.hits > 0 && c.misses > 2000, "{c:?}");
        assert_eq!(c.reads, c.misses);
        assert_eq!(c.pages_written, 0, "clean pages are never written");
        cache.shutdown().expect("shutdown");
    }

    /// A cache whose pool reserve is over a tenth of it (128 frames: 16–32 free) still
    /// reaches its maximum size: the reserve comes out of the maximum, so a warm-up
    /// waiting for 90 % ends. Each read waits for the page writer to refill the pool, so
    /// no burst empties it (a burst used to be the only way past 87 %).
    #[test]
    fn a_small_cache_reaches_its_maximum_before_it_evicts() {
        let db = database();
        let config = config(128);
        let reserve = config.available_start();
        assert!(reserve * 10 > 128, "the reserve is over a tenth: {reserve}");
        let cache = PageCache::new(
            config,
            open(&db.path, Access::ReadWrite),
            FakeWal::new(1000),
            (),
        )
        .expect("cache");
        for pgno in 10..600 {
            read_through(&cache, pgno);
            wait_until("the pool refilled", || {
                let c = cache.counters();
                c.available + (c.max_frames - c.frames) >= reserve
            });
        }
        let c = cache.counters();
        assert_eq!(c.frames, 128, "{c:?}");
        assert!(c.evictions > 400 && c.stalls == 0, "{c:?}");
        assert!(
            c.available <= 2 * reserve,
            "the pool stays within its thresholds: {c:?}"
        );
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn lru2_keeps_a_twice_referenced_page_through_a_scan() {
        let db = database();
        let cache = PageCache::new(
            config(32),
            open(&db.path, Access::ReadWrite),
            FakeWal::new(1000),
            (),
        )
        .expect("cache");
        cache.set_correlation_window(4);
        let hot = 100;
        read_through(&cache, hot);
        // Uncorrelated second reference: far enough on the reference clock.
        for p in 200..210 {
            read_through(&cache, p);
            read_through(&cache, p);
        }
        assert!(cache.lock().lookup(Pgno::new(hot)).is_some());
        // A page referenced twice in quick succession (correlated): counts as once.
        let burst = 101;
        read_through(&cache, burst);
        read_through(&cache, burst);
        read_through(&cache, burst);
        // A scan of pages referenced once each, 10 times the cache.
        for p in 300..620 {
            read_through(&cache, p);
        }
        let guard = cache.lock();
        assert!(
            guard.contains(Pgno::new(hot)),
            "the page referenced twice was evicted by a scan"
        );
        assert!(
            !guard.contains(Pgno::new(burst)),
            "a correlated burst must not protect a page"
        );
        assert!(
            !guard.contains(Pgno::new(200)),
            "a page referenced long ago must go"
        );
        drop(guard);
        let c = cache.counters();
        assert!(c.evictions >= 300, "{c:?}");
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn flush_all_writes_sealed_pages_after_the_log() {
        let db = database();
        let pages: Vec<u32> = (0..60).map(|i| 7 + i * 31).collect();
        let wal = FakeWal::with_audit(1000, Some((db.path.clone(), pages.clone())));
        let cache = PageCache::new(
            config(128),
            open(&db.path, Access::ReadWrite),
            wal.clone(),
            (),
        )
        .expect("cache");
        let mut last = 0;
        for &p in &pages {
            last = modify(&cache, &wal, p);
        }
        assert_eq!(cache.lock().dirty_count(), pages.len());
        assert!(
            cache.checkpoint() <= pos(1000),
            "checkpoint before the first change"
        );
        cache.flush_all().expect("flush_all");
        assert_eq!(cache.lock().dirty_count(), 0);
        assert!(wal.durable_n() >= last);
        assert_eq!(cache.checkpoint(), pos(wal.state.lock().current));
        for &p in &pages {
            let on_disk = disk_page(&db.path, p);
            assert_eq!(verify_page(&on_disk, p), PageVerdict::Valid, "page {p}");
            let mut guard = cache.lock();
            let f = guard.lookup(Pgno::new(p)).expect("still cached");
            assert_eq!(
                guard.page(f),
                &on_disk[..],
                "cache and disk differ for page {p}"
            );
            assert!(!guard.is_dirty(f));
        }
        wal.audit_now();
        let violations = wal.violations.lock().clone();
        assert!(violations.is_empty(), "{violations:?}");
        let c = cache.counters();
        assert_eq!(c.pages_written, pages.len() as u64);
        assert_eq!(c.requested_flushes, pages.len() as u64);
        let writes = cache.io_stats().total(IoClass::DbWrite);
        assert_eq!(writes.bytes, (pages.len() * PAGE_LEN) as u64);
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn no_page_is_written_before_the_log_is_durable() {
        let db = database();
        let wal = FakeWal::new(1000);
        wal.block(true);
        let cache = PageCache::new(
            config(64),
            open(&db.path, Access::ReadWrite),
            wal.clone(),
            (),
        )
        .expect("cache");
        let before: Vec<Vec<u8>> = (1..=5).map(|p| disk_page(&db.path, p)).collect();
        for p in 1..=5 {
            modify(&cache, &wal, p);
        }
        thread::scope(|s| {
            let flusher = s.spawn(|| cache.flush_all());
            wait_until("the writer to ask for the log", || wal.waiting() > 0);
            thread::sleep(Duration::from_millis(100));
            for p in 1..=5u32 {
                assert_eq!(
                    disk_page(&db.path, p),
                    before[p as usize - 1],
                    "page {p} written early"
                );
            }
            assert!(!flusher.is_finished());
            wal.block(false);
            flusher.join().expect("join").expect("flush_all");
        });
        for p in 1..=5 {
            assert_eq!(marker(&disk_page(&db.path, p)), 1000 + 100 * u64::from(p));
        }
        assert!(cache.counters().wal_waits >= 1);
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn contiguous_dirty_pages_are_coalesced() {
        let db = database();
        let wal = FakeWal::new(1000);
        let cache = PageCache::new(
            config(64),
            open(&db.path, Access::ReadWrite),
            wal.clone(),
            (),
        )
        .expect("cache");
        for p in 500..516 {
            modify(&cache, &wal, p);
        }
        // And two isolated pages.
        modify(&cache, &wal, 600);
        modify(&cache, &wal, 700);
        cache.flush_all().expect("flush_all");
        let c = cache.counters();
        assert_eq!(c.pages_written, 18, "{c:?}");
        assert!(
            c.writes <= 4,
            "16 contiguous pages took {} writes: {c:?}",
            c.writes
        );
        let writes = cache.io_stats().total(IoClass::DbWrite);
        assert_eq!(writes.ops, c.writes);
        assert!(writes.mean_bytes() > PAGE_LEN as f64);
        for p in 500..516 {
            let on_disk = disk_page(&db.path, p);
            assert_eq!(verify_page(&on_disk, p), PageVerdict::Valid);
            assert_eq!(marker(&on_disk), 1000 + 100 * u64::from(p - 499));
        }
        cache.shutdown().expect("shutdown");
    }

    /// The page writer's own writes (checkpoint depth here, pool refills alike) join a
    /// dirty neighbour only when it is due itself (here: past the checkpoint depth)
    /// and its changes are durable already, as ESE gathers writes: a neighbour that
    /// would force a log flush waits for its own turn.
    #[test]
    fn neighbours_join_a_write_only_when_their_log_is_durable() {
        let db = database();
        let wal = FakeWal::new(1000);
        let mut cfg = config(64);
        cfg.checkpoint_depth = 1;
        let cache =
            PageCache::new(cfg, open(&db.path, Access::ReadWrite), wal.clone(), ()).expect("cache");
        // Four contiguous pages changed in one hold of the lock (so the writer plans them
        // together), each by its own log append; `durable`: make the log durable to the
        // last change before releasing the lock.
        let change_run = |first: u32, durable: bool| {
            let mut guard = cache.lock();
            for p in first..first + 4 {
                while guard.lookup(Pgno::new(p)).is_none() {
                    guard = cache.fault_in(guard, Pgno::new(p)).expect("fault_in");
                }
            }
            let mut end = 0;
            for p in first..first + 4 {
                let f = guard.lookup(Pgno::new(p)).expect("resident");
                end = wal.append(100);
                set_marker(guard.page_mut(f), end);
                guard.mark_dirty(f, pos(end));
            }
            if durable {
                wal.flush_to(pos(end)).expect("flush");
            }
        };
        change_run(500, false);
        wait_until("the checkpoint writes", || cache.counters().dirty == 0);
        let c = cache.counters();
        assert_eq!(
            (c.pages_written, c.writes),
            (4, 4),
            "each page waits for its own turn: {c:?}"
        );
        change_run(600, true);
        wait_until("the checkpoint writes", || cache.counters().dirty == 0);
        let c = cache.counters();
        assert_eq!(
            (c.pages_written, c.writes),
            (8, 5),
            "durable neighbours join one write: {c:?}"
        );
        for p in (500..504).chain(600..604) {
            assert_eq!(verify_page(&disk_page(&db.path, p), p), PageVerdict::Valid);
        }
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn coalescing_stops_at_coalesce_max() {
        let db = database();
        let wal = FakeWal::new(1000);
        let mut cfg = config(64);
        cfg.coalesce_max = 4 * PAGE_LEN;
        let cache =
            PageCache::new(cfg, open(&db.path, Access::ReadWrite), wal.clone(), ()).expect("cache");
        for p in 500..520 {
            modify(&cache, &wal, p);
        }
        cache.flush_all().expect("flush_all");
        let c = cache.counters();
        assert_eq!(c.pages_written, 20);
        assert_eq!(c.writes, 5, "20 pages in runs of at most 4: {c:?}");
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn fault_stalls_while_every_frame_is_dirty_and_the_log_is_not_durable() {
        let db = database();
        let wal = FakeWal::new(1000);
        wal.block(true);
        let mut cfg = config(16);
        cfg.min_frames = 16;
        let cache =
            PageCache::new(cfg, open(&db.path, Access::ReadWrite), wal.clone(), ()).expect("cache");
        for p in 1..=16 {
            modify(&cache, &wal, p);
        }
        let c = cache.counters();
        assert_eq!((c.frames, c.available, c.dirty), (16, 0, 16));
        let faulted = AtomicBool::new(false);
        thread::scope(|s| {
            let reader = s.spawn(|| {
                let page = read_through(&cache, 1000);
                faulted.store(true, Ordering::SeqCst);
                page
            });
            wait_until("a stall", || cache.counters().stalls == 1);
            thread::sleep(Duration::from_millis(150));
            assert!(
                !faulted.load(Ordering::SeqCst),
                "a dirty page was evicted unwritten"
            );
            for p in 1..=16 {
                assert_eq!(
                    test_marker(&disk_page(&db.path, p)),
                    None,
                    "page {p} written early"
                );
            }
            wal.block(false);
            let page = reader.join().expect("join");
            assert_eq!(page, disk_page(&db.path, 1000));
        });
        let c = cache.counters();
        assert_eq!(c.stalls, 1);
        assert!(c.stall_ns >= 150_000_000, "{c:?}");
        assert!(c.pool_flushes >= 1, "{c:?}");
        assert!(c.frames <= 16);
        cache.shutdown().expect("shutdown");
        for p in 1..=16 {
            assert_eq!(marker(&disk_page(&db.path, p)), 1000 + 100 * u64::from(p));
        }
    }

    #[test]
    fn wait_for_frame_and_new_page() {
        let db = database();
        let wal = FakeWal::new(1000);
        let mut cfg = config(8);
        cfg.min_frames = 0;
        let cache =
            PageCache::new(cfg, open(&db.path, Access::ReadWrite), wal.clone(), ()).expect("cache");
        let mut created = Vec::new();
        for p in 900..940 {
            let mut guard = cache.lock();
            let f = loop {
                match guard.new_page(Pgno::new(p)) {
                    Some(f) => break f,
                    None => guard = cache.try_wait_for_frame(guard).expect("frame"),
                }
            };
            assert!(
                guard.page(f).iter().all(|&b| b == 0),
                "a new page starts zeroed"
            );
            let end = wal.append(10);
            let page = guard.page_mut(f);
            page[100] = 0xAB;
            set_marker(page, end);
            guard.mark_dirty(f, pos(end));
            created.push((p, end));
        }
        cache.shutdown().expect("shutdown");
        for (p, end) in created {
            let on_disk = disk_page(&db.path, p);
            assert_eq!(verify_page(&on_disk, p), PageVerdict::Valid);
            assert_eq!((on_disk[100], marker(&on_disk)), (0xAB, end));
        }
    }

    #[test]
    fn checkpoint_depth_flushes_old_pages_only() {
        let db = database();
        let wal = FakeWal::new(1000);
        let mut cfg = config(64);
        cfg.checkpoint_depth = 10_000;
        let cache =
            PageCache::new(cfg, open(&db.path, Access::ReadWrite), wal.clone(), ()).expect("cache");
        for p in 1..=5 {
            modify(&cache, &wal, p * 3);
        }
        thread::sleep(Duration::from_millis(120));
        assert_eq!(
            cache.counters().dirty,
            5,
            "within the depth: nothing written"
        );
        let old_checkpoint = cache.checkpoint();
        assert!(old_checkpoint <= pos(1100), "{old_checkpoint}");
        // The log moves on far beyond the depth; one recent change stays within it.
        wal.set_current(50_000);
        let recent = {
            let mut guard = cache.lock();
            if guard.lookup(Pgno::new(40)).is_none() {
                guard = cache.fault_in(guard, Pgno::new(40)).expect("fault_in");
            }
            let f = guard.lookup(Pgno::new(40)).expect("cached");
            let end = wal.append(100);
            set_marker(guard.page_mut(f), end);
            guard.mark_dirty_span(f, pos(end - 100), pos(end));
            end
        };
        wait_until("checkpoint flushing", || cache.counters().dirty == 1);
        assert_eq!(cache.checkpoint(), pos(recent - 100));
        let c = cache.counters();
        assert_eq!(c.checkpoint_flushes, 5, "{c:?}");
        for p in 1..=5 {
            assert_eq!(
                verify_page(&disk_page(&db.path, p * 3), p * 3),
                PageVerdict::Valid
            );
        }
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn abandon_leaves_dirty_pages_unwritten() {
        let db = database();
        let wal = FakeWal::new(1000);
        let cache = PageCache::new(
            config(64),
            open(&db.path, Access::ReadWrite),
            wal.clone(),
            (),
        )
        .expect("cache");
        let flushed = modify(&cache, &wal, 10);
        cache.flush_all().expect("flush_all");
        let before: Vec<Vec<u8>> = (20..30).map(|p| disk_page(&db.path, p)).collect();
        for p in 20..30 {
            modify(&cache, &wal, p);
        }
        cache.abandon();
        assert_eq!(marker(&disk_page(&db.path, 10)), flushed);
        for p in 20..30u32 {
            assert_eq!(disk_page(&db.path, p), before[p as usize - 20], "page {p}");
        }
    }

    #[test]
    fn concurrent_sessions_keep_the_last_value_of_every_page() {
        concurrent_sessions(BackendKind::Auto);
    }

    #[test]
    fn concurrent_sessions_with_the_threads_backend() {
        concurrent_sessions(BackendKind::Threads);
    }

    fn concurrent_sessions(backend: BackendKind) {
        let db = database();
        let wal = FakeWal::new(1000);
        let mut cfg = config(48);
        cfg.checkpoint_depth = 20_000;
        cfg.backend = backend;
        // The engine state under the instance lock: the value each page must end with.
        let cache = PageCache::new(
            cfg,
            open(&db.path, Access::ReadWrite),
            wal.clone(),
            HashMap::<u32, u64>::new(),
        )
        .expect("cache");
        const THREADS: u64 = 4;
        const OPS: u64 = 1500;
        thread::scope(|s| {
            for t in 0..THREADS {
                let cache = &cache;
                let wal = &wal;
                s.spawn(move || {
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
                    for _ in 0..OPS {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let pgno = 1 + (rng % 300) as u32;
                        let mut guard = cache.lock();
                        let f = loop {
                            match guard.lookup(Pgno::new(pgno)) {
                                Some(f) => break f,
                                None => {
                                    guard =
                                        cache.fault_in(guard, Pgno::new(pgno)).expect("fault_in")
                                }
                            }
                        };
                        // Appending under the instance lock, as the engine does.
                        let end = wal.append(50);
                        let value = end << 8 | t;
                        set_marker(guard.page_mut(f), value);
                        guard.mark_dirty(f, pos(end));
                        guard.state().insert(pgno, value);
                    }
                });
            }
        });
        let c = cache.counters();
        assert!(
            c.evictions > 0 && c.pool_flushes > 0,
            "the test must force write-back: {c:?}"
        );
        let expected = cache.shutdown().expect("shutdown");
        assert!(expected.len() > 250);
        for (&p, &value) in &expected {
            let on_disk = disk_page(&db.path, p);
            assert_eq!(verify_page(&on_disk, p), PageVerdict::Valid, "page {p}");
            assert_eq!(marker(&on_disk), value, "page {p} lost its last change");
        }
    }

    #[test]
    fn a_page_changed_while_being_written_stays_dirty() {
        let db = database();
        let wal = FakeWal::new(1000);
        wal.block(true);
        let cache = PageCache::new(
            config(64),
            open(&db.path, Access::ReadWrite),
            wal.clone(),
            (),
        )
        .expect("cache");
        let first = modify(&cache, &wal, 77);
        let second = thread::scope(|s| {
            let flusher = s.spawn(|| cache.flush_all());
            // The snapshot is taken; the writer waits for the log.
            wait_until("the writer to ask for the log", || wal.waiting() > 0);
            let second = modify(&cache, &wal, 77);
            wal.block(false);
            flusher.join().expect("join").expect("flush_all");
            second
        });
        assert_eq!(
            marker(&disk_page(&db.path, 77)),
            first,
            "the snapshot was written"
        );
        {
            let mut guard = cache.lock();
            let f = guard.lookup(Pgno::new(77)).expect("cached");
            assert!(guard.is_dirty(f), "the newer change is not on disk yet");
            assert_eq!(marker(guard.page(f)), second);
        }
        assert!(
            cache.checkpoint() > pos(first - 100),
            "checkpoint moved past the written change"
        );
        cache.flush_all().expect("flush_all");
        assert_eq!(marker(&disk_page(&db.path, 77)), second);
        assert_eq!(cache.counters().dirty, 0);
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn corrupt_pages_are_reported_and_single_bits_repaired() {
        let db = database();
        let good = disk_page(&db.path, 50);
        let mut flipped = good.clone();
        flipped[3000] ^= 0x10;
        write_disk_page(&db.path, 50, &flipped);
        let mut bad = disk_page(&db.path, 51);
        bad[3000] ^= 0x10;
        bad[5000] ^= 0x03;
        write_disk_page(&db.path, 51, &bad);
        write_disk_page(&db.path, 52, &disk_page(&db.path, 60));
        write_disk_page(&db.path, 53, &[0u8; PAGE_LEN]);
        let cache = PageCache::new(
            config(64),
            open(&db.path, Access::ReadWrite),
            FakeWal::new(1000),
            (),
        )
        .expect("cache");
        assert_eq!(read_through(&cache, 50), good, "repaired in memory");
        assert_eq!(cache.counters().correctable_repaired, 1);
        for (pgno, what) in [
            (51, "checksum"),
            (52, "holds page 60"),
            (53, "uninitialized"),
        ] {
            match cache.fault_in(cache.lock(), Pgno::new(pgno)) {
                Err(EngineError::CorruptPage {
                    pgno: p,
                    what: w,
                    path,
                }) => {
                    assert_eq!(p, pgno);
                    assert!(w.contains(what), "{w}");
                    assert_eq!(path, db.path);
                }
                Err(e) => panic!("page {pgno}: unexpected error {e}"),
                Ok(_) => panic!("page {pgno}: corruption not detected"),
            }
            assert!(!cache.lock().contains(Pgno::new(pgno)));
        }
        let c = cache.counters();
        assert_eq!(
            c.frames - c.available,
            1,
            "failed reads gave their frames back: {c:?}"
        );
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn write_failures_are_reported_everywhere() {
        let db = database();
        let wal = FakeWal::new(1000);
        // Writes to a read-only descriptor fail with EBADF.
        let cache = PageCache::new(
            config(64),
            open(&db.path, Access::ReadOnly),
            wal.clone(),
            (),
        )
        .expect("cache");
        modify(&cache, &wal, 9);
        assert!(cache.failed().is_none());
        let err = cache.flush_all().expect_err("the write must fail");
        let message = err.to_string();
        assert!(matches!(err, EngineError::ShutDown(Some(_))), "{message}");
        assert!(
            message.contains("write") && message.contains("db.edb"),
            "{message}"
        );
        assert!(cache.failed().is_some());
        assert!(matches!(
            cache.fault_in(cache.lock(), Pgno::new(11)),
            Err(EngineError::ShutDown(_))
        ));
        assert!(matches!(
            cache.prefetch(&[Pgno::new(12)]),
            Err(EngineError::ShutDown(_))
        ));
        assert!(cache.try_wait_for_frame(cache.lock()).is_err());
        assert_eq!(
            cache.counters().dirty,
            1,
            "the page stays dirty: never dropped"
        );
        assert!(cache.io_stats().total(IoClass::DbWrite).errors >= 1);
        assert!(cache.shutdown().is_err());
    }

    #[test]
    fn log_failures_hold_pages_back_and_are_reported() {
        let db = database();
        let wal = FakeWal::new(1000);
        wal.state.lock().broken = true;
        let before = disk_page(&db.path, 9);
        let cache = PageCache::new(
            config(64),
            open(&db.path, Access::ReadWrite),
            wal.clone(),
            (),
        )
        .expect("cache");
        modify(&cache, &wal, 9);
        let err = cache.flush_all().expect_err("the log failed");
        assert!(err.to_string().contains("log device failed"), "{err}");
        cache.abandon();
        assert_eq!(disk_page(&db.path, 9), before);
    }

    #[test]
    fn prefetch_installs_pages_without_evicting() {
        let db = database();
        let wal = FakeWal::new(1000);
        let mut cfg = config(16);
        cfg.min_frames = 16;
        let cache =
            PageCache::new(cfg, open(&db.path, Access::ReadWrite), wal.clone(), ()).expect("cache");
        let pgnos: Vec<u32> = (0..10).map(|i| 30 + i * 7).collect();
        cache
            .prefetch(&pgnos.iter().copied().map(Pgno::new).collect::<Vec<_>>())
            .expect("prefetch");
        let c = cache.counters();
        assert_eq!((c.prefetched, c.reads), (10, 0));
        {
            let mut guard = cache.lock();
            for &p in &pgnos {
                let f = guard.lookup(Pgno::new(p)).expect("prefetched");
                assert_eq!(guard.page(f), &disk_page(&db.path, p)[..]);
            }
        }
        let stats = cache.io_stats();
        assert_eq!(stats.get(3, IoClass::RecoveryRead).map(|s| s.ops), Some(10));
        cache.shutdown().expect("shutdown");

        // Every frame dirty and the log stuck: prefetch finds no free frame and must
        // neither evict nor wait.
        wal.block(true);
        let mut cfg = config(16);
        cfg.min_frames = 16;
        let cache =
            PageCache::new(cfg, open(&db.path, Access::ReadWrite), wal.clone(), ()).expect("cache");
        for p in 500..516 {
            modify(&cache, &wal, p);
        }
        cache
            .prefetch(&[900, 901, 902].map(Pgno::new))
            .expect("prefetch with no free frame");
        let c = cache.counters();
        assert_eq!((c.prefetched, c.dirty, c.stalls), (0, 16, 0), "{c:?}");
        assert!(!cache.lock().contains(Pgno::new(900)));
        wal.block(false);
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn dropped_write_is_reported_done_but_not_issued() {
        let db = database();
        let wal = FakeWal::new(1000);
        let cache = PageCache::new(
            config(64),
            open(&db.path, Access::ReadWrite),
            wal.clone(),
            (),
        )
        .expect("cache");
        let before = disk_page(&db.path, 33);
        cache.drop_next_write(Pgno::new(33));
        modify(&cache, &wal, 32);
        modify(&cache, &wal, 33);
        modify(&cache, &wal, 34);
        cache.flush_all().expect("flush_all");
        let c = cache.counters();
        assert_eq!(
            (c.dirty, c.dropped_writes, c.pages_written),
            (0, 1, 2),
            "{c:?}"
        );
        assert_eq!(
            disk_page(&db.path, 33),
            before,
            "the dropped write reached the disk"
        );
        assert_ne!(disk_page(&db.path, 32), before);
        // Only the next write is dropped.
        let again = modify(&cache, &wal, 33);
        cache.flush_all().expect("flush_all");
        assert_eq!(marker(&disk_page(&db.path, 33)), again);
        cache.shutdown().expect("shutdown");
    }

    #[test]
    fn invalid_configurations_are_refused() {
        let db = database();
        let file = open(&db.path, Access::ReadWrite);
        let mut cfg = config(64);
        cfg.max_frames = 2;
        cfg.min_frames = 0;
        assert!(matches!(
            PageCache::new(cfg, file.clone(), FakeWal::new(0), ()),
            Err(EngineError::Invalid(_))
        ));
        let mut cfg = config(64);
        cfg.min_frames = 65;
        assert!(PageCache::new(cfg, file.clone(), FakeWal::new(0), ()).is_err());
        let mut cfg = config(64);
        cfg.write_depth = 0;
        assert!(PageCache::new(cfg, file, FakeWal::new(0), ()).is_err());
        let cfg = config(100_000);
        assert_eq!((cfg.available_start(), cfg.available_stop()), (1000, 2000));
        let cfg = config(1000);
        assert_eq!((cfg.available_start(), cfg.available_stop()), (24, 48));
        let cfg = config(10);
        assert_eq!((cfg.available_start(), cfg.available_stop()), (1, 2));
    }

    /// CPU time of this process (user + system), from /proc/self/stat, in seconds.
    fn process_cpu_seconds() -> f64 {
        let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
        let after = &stat[stat.rfind(')').expect("comm") + 2..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 =
            fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
        ticks as f64 / 100.0
    }

    /// Throughput and CPU cost; run with
    /// `cargo test -p edbstress-engine --release --test cache_behaviour -- --ignored --nocapture`.
    #[test]
    #[ignore = "measurement, prints numbers"]
    fn perf_numbers() {
        let db = database();
        for mode in [IoMode::Buffered, IoMode::Direct] {
            let file = Arc::new(DataFile::open(&db.path, mode, Access::ReadWrite).expect("open"));
            let wal = FakeWal::new(1000);
            let mut cfg = config(1024);
            cfg.min_frames = 1024;
            let cache = PageCache::new(cfg, file.clone(), wal.clone(), ()).expect("cache");
            for p in 1..=1000 {
                read_through(&cache, p);
            }
            // Hits: lock, lookup, read a byte, unlock.
            let n = 2_000_000u64;
            let start = Instant::now();
            let mut sum = 0u64;
            for i in 0..n {
                let pgno = 1 + (i.wrapping_mul(0x9E37_79B9) % 1000) as u32;
                let mut guard = cache.lock();
                let f = guard.lookup(Pgno::new(pgno)).expect("hit");
                sum += u64::from(guard.page(f)[MARK]);
            }
            let lock_lookup_ns = start.elapsed().as_nanos() as f64 / n as f64;
            let start = Instant::now();
            {
                let mut guard = cache.lock();
                for i in 0..n {
                    let pgno = 1 + (i.wrapping_mul(0x9E37_79B9) % 1000) as u32;
                    let f = guard.lookup(Pgno::new(pgno)).expect("hit");
                    sum += u64::from(guard.page(f)[MARK]);
                }
            }
            let lookup_ns = start.elapsed().as_nanos() as f64 / n as f64;
            cache.shutdown().expect("shutdown");

            // Misses with write-back over ~2000 pages; every page read is modified, so
            // every eviction writes (pool flushes).
            for frames in [64, 1024] {
                let mut cfg = config(frames);
                cfg.min_frames = frames;
                let cache = PageCache::new(cfg, file.clone(), wal.clone(), ()).expect("cache");
                let ops = if mode == IoMode::Buffered {
                    40_000u64
                } else {
                    10_000
                };
                let cpu0 = process_cpu_seconds();
                let start = Instant::now();
                let mut rng = 0x2545_F491_4F6C_DD1Du64;
                for _ in 0..ops {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    modify(&cache, &wal, 1 + (rng % u64::from(db.pages)) as u32);
                }
                cache.flush_all().expect("flush");
                let wall = start.elapsed().as_secs_f64();
                let cpu = process_cpu_seconds() - cpu0;
                let c = cache.counters();
                let stats = cache.io_stats();
                let r = stats.total(IoClass::DbRead);
                let w = stats.total(IoClass::DbWrite);
                println!(
                    "{mode:?}: hit (lock+lookup+unlock) {lock_lookup_ns:.1} ns, lookup under one lock {lookup_ns:.1} ns; \
                 {frames} frames, {} misses: miss+modify+write-back: {:.1} µs CPU/miss, {:.0} ops/s wall; reads {} (mean {:.0} µs), writes {} of {} pages (mean {:.0} µs), stalls {}, evictions {} [{sum}]",
                    c.misses,
                    cpu * 1e6 / c.misses.max(1) as f64,
                    ops as f64 / wall,
                    c.reads,
                    r.latency.mean_ns() / 1000.0,
                    c.writes,
                    c.pages_written,
                    w.latency.mean_ns() / 1000.0,
                    c.stalls,
                    c.evictions,
                );
                cache.shutdown().expect("shutdown");
            }
        }
    }
}
