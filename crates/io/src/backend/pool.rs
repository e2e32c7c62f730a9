//! Backends shared by many threads that each need their own I/O done now: the page
//! reads of sessions that missed in the database cache.
//!
//! A backend is driven by one thread at a time (`IoBackend` takes `&mut self`), so the
//! pool keeps several of one kind and lends each to one caller for the length of its
//! request: the caller submits and waits on the backend itself (with io_uring, one
//! `io_uring_enter` that submits and sleeps until the completion; no thread is woken
//! to hand the result over). Backends are opened lazily, lowest slot first, so the pool
//! holds as many as requests were ever outstanding at once. One ring for every session
//! was tried on paper and not built: a session whose read is done must not wait behind
//! another's sleep in the kernel, and handing completions between threads costs two
//! context switches per I/O, more CPU than the read itself on a small machine.
//!
//! Every request is timed and counted by the backend that carried it; [`BackendPool::stats`]
//! merges them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{BackendKind, FileId, IoBackend, IoCompletion, IoRequest, check_depth, open_backend};
use crate::{DataFile, IoError, IoStats};

/// One lendable backend with what survives it.
#[derive(Default)]
struct Slot {
    /// Opened on first use; dropped (its counters kept in `retired`) when it fails.
    backend: Option<Box<dyn IoBackend>>,
    /// Reused for every wait: collecting a completion allocates nothing.
    completions: Vec<IoCompletion>,
    /// Counters of backends of this slot that failed and were dropped.
    retired: IoStats,
}

/// A set of backends of one kind over the same files, lent to one thread per request
/// (see the module documentation). `Sync`: share it by reference or `Arc`.
pub struct BackendPool {
    /// The concrete kind (`Auto` resolved by the first backend opened).
    kind: BackendKind,
    name: &'static str,
    depth: usize,
    /// Registered in this order on every backend, so `FileId(i)` is `files[i]` on all.
    files: Vec<Arc<DataFile>>,
    slots: Box<[Mutex<Slot>]>,
    /// Backends opened so far (the lowest slots), for `backends()`.
    opened: AtomicUsize,
    /// Which slot the next caller that finds every slot lent out waits for: waiters
    /// spread over all slots rather than queueing behind one.
    next_wait: AtomicUsize,
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BackendPool {
    /// A pool of at most `max_backends` backends of `kind`, each with room for `depth`
    /// requests, over `files` (their ids are their indices). Opens the first backend now,
    /// so that an unusable kind is reported here; `Auto` falls back to threads as
    /// [`open_backend`] does, and every later backend is of the kind the first one got.
    pub fn new(
        kind: BackendKind,
        depth: usize,
        max_backends: usize,
        files: Vec<Arc<DataFile>>,
    ) -> Result<BackendPool, IoError> {
        check_depth(depth)?;
        let max_backends = max_backends.max(1);
        let first = open_with_files(kind, depth, &files)?;
        let name = first.name();
        let kind = if name == "io_uring" {
            BackendKind::IoUring
        } else {
            BackendKind::Threads
        };
        let slots: Box<[Mutex<Slot>]> = (0..max_backends)
            .map(|_| Mutex::new(Slot::default()))
            .collect();
        lock(&slots[0]).backend = Some(first);
        Ok(BackendPool {
            kind,
            name,
            depth,
            files,
            slots,
            opened: AtomicUsize::new(1),
            next_wait: AtomicUsize::new(0),
        })
    }

    /// "io_uring" or "threads": the backend that carries this pool's requests.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The kind of every backend of the pool (never `Auto`).
    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    /// Backends opened so far: the most requests that were outstanding at once.
    pub fn backends(&self) -> usize {
        self.opened.load(Ordering::Relaxed)
    }

    /// Carries out one request and returns its completion (the buffer comes back in
    /// it). The request is timed and counted by the backend that carried it. When the
    /// backend itself fails, its buffer may still belong to the kernel: it stays with
    /// the dropped backend, the error is returned and the next request opens a new one.
    pub fn run(&self, request: IoRequest) -> Result<IoCompletion, IoError> {
        let mut slot = self.acquire()?;
        let slot = &mut *slot;
        let Some(backend) = slot.backend.as_mut() else {
            unreachable!("acquire opens the backend of the slot it returns");
        };
        let outcome = match backend.submit(request) {
            Ok(()) => backend.wait(1, &mut slot.completions),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(_) => match slot.completions.pop() {
                Some(completion) => {
                    // Only our request was in flight, so nothing else can be there.
                    debug_assert!(slot.completions.is_empty());
                    Ok(completion)
                }
                None => Err(self.broken(slot, "wait returned no completion")),
            },
            // A request the backend refused (a bad length or file) leaves it usable.
            Err(e) if backend.in_flight() == 0 => Err(e),
            Err(e) => {
                let _ = self.broken(slot, "wait failed");
                Err(e)
            }
        }
    }

    /// The counters of every backend of the pool, merged; waits for backends that are
    /// lent out (at most one request each).
    pub fn stats(&self) -> IoStats {
        let mut stats = IoStats::new();
        for slot in self.slots.iter() {
            let slot = lock(slot);
            stats.merge(&slot.retired);
            if let Some(backend) = &slot.backend {
                stats.merge(backend.stats());
            }
        }
        stats
    }

    /// The lowest free slot, its backend opened; when every slot is lent out, waits for
    /// one (in turn, so that waiters spread over the slots).
    fn acquire(&self) -> Result<MutexGuard<'_, Slot>, IoError> {
        let mut slot = self
            .slots
            .iter()
            .find_map(|slot| slot.try_lock().ok())
            .unwrap_or_else(|| {
                let i = self.next_wait.fetch_add(1, Ordering::Relaxed) % self.slots.len();
                lock(&self.slots[i])
            });
        if slot.backend.is_none() {
            match open_with_files(self.kind, self.depth, &self.files) {
                Ok(backend) => {
                    slot.backend = Some(backend);
                    self.opened.fetch_add(1, Ordering::Relaxed);
                }
                // One more ring may be refused (RLIMIT_MEMLOCK, the per-user ring limit)
                // where the first was not: wait for an open backend rather than fail a
                // transaction; only a pool with none open reports the error.
                Err(e) => {
                    drop(slot);
                    return self.acquire_open().ok_or(e);
                }
            }
        }
        Ok(slot)
    }

    /// An open backend's slot, waiting for it if it is lent out; `None` when the pool
    /// has none open.
    fn acquire_open(&self) -> Option<MutexGuard<'_, Slot>> {
        let open = self.opened.load(Ordering::Relaxed).min(self.slots.len());
        if open == 0 {
            return None;
        }
        // Backends open in the lowest slots; a waiter takes its turn among them.
        let i = self.next_wait.fetch_add(1, Ordering::Relaxed) % open;
        let slot = lock(&self.slots[i]);
        slot.backend.is_some().then_some(slot)
    }

    /// Drops the slot's failed backend, keeping its counters; the kernel may still hold
    /// its requests' buffers, which dropping it waits for (or leaks).
    fn broken(&self, slot: &mut Slot, what: &'static str) -> IoError {
        if let Some(mut backend) = slot.backend.take() {
            slot.retired.merge(&backend.take_stats());
            tracing::warn!(
                backend = self.name,
                what,
                "an I/O backend of a pool failed; it is replaced"
            );
            drop(backend);
            self.opened.fetch_sub(1, Ordering::Relaxed);
        }
        slot.completions.clear();
        IoError::Backend {
            backend: self.name,
            op: what,
            source: std::io::Error::other("the backend lost a request"),
        }
    }
}

/// A backend of `kind` with `files` registered in order (ids 0, 1, …).
fn open_with_files(
    kind: BackendKind,
    depth: usize,
    files: &[Arc<DataFile>],
) -> Result<Box<dyn IoBackend>, IoError> {
    let mut backend = open_backend(kind, depth)?;
    for (i, file) in files.iter().enumerate() {
        let id = backend.register(file)?;
        debug_assert_eq!(id, FileId(i as u32));
    }
    Ok(backend)
}
