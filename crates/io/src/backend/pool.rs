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

use std::os::fd::RawFd;
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
    /// Reserved by a thread of tasks (`reserve`): never lent to others.
    reserved: bool,
    /// Tags of the requests in flight on a reserved slot's backend (the tasks waiting
    /// for them), so that a failed backend can tell each its request is lost.
    tags: Vec<u64>,
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
    /// Shared with the threads of tasks that reserved one (`reserve`).
    slots: Box<[Arc<Mutex<Slot>>]>,
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
        let slots: Box<[Arc<Mutex<Slot>>]> = (0..max_backends)
            .map(|_| Arc::new(Mutex::new(Slot::default())))
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
    ///
    /// Inside a task of [`run_tasks`](crate::tasks::run_tasks), the request goes to the
    /// backend this pool reserved for the task's thread instead, and the task (not the
    /// thread) waits for it.
    pub fn run(&self, request: IoRequest) -> Result<IoCompletion, IoError> {
        let request = match crate::tasks::run_request(self, request) {
            Ok(result) => return result,
            Err(request) => request,
        };
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
        let mut slot = match self
            .slots
            .iter()
            .find_map(|slot| slot.try_lock().ok().filter(|s| !s.reserved))
        {
            Some(slot) => slot,
            None => self.wait_for_slot(self.slots.len())?,
        };
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
        let slot = self.wait_for_slot(open).ok()?;
        slot.backend.is_some().then_some(slot)
    }

    /// One of the first `among` slots that is not reserved, waiting for it in turn
    /// (waiters spread over the slots rather than queueing behind one).
    fn wait_for_slot(&self, among: usize) -> Result<MutexGuard<'_, Slot>, IoError> {
        for _ in 0..among {
            let i = self.next_wait.fetch_add(1, Ordering::Relaxed) % among;
            let slot = lock(&self.slots[i]);
            if !slot.reserved {
                return Ok(slot);
            }
        }
        Err(IoError::Backend {
            backend: self.name,
            op: "lend a backend",
            source: std::io::Error::other(
                "every backend of the pool is reserved by threads of tasks",
            ),
        })
    }

    /// Reserves a slot for the calling thread of tasks, with a backend of room for
    /// `depth` requests whose completions can be polled for
    /// ([`ReservedSlot::completion_fd`]). Its counters stay in the pool's
    /// [`stats`](Self::stats).
    pub(crate) fn reserve(&self, depth: usize) -> Result<ReservedSlot, IoError> {
        let depth = depth.clamp(1, super::MAX_DEPTH);
        let backend = open_with_files_pollable(self.kind, depth, &self.files)?;
        for slot in self.slots.iter() {
            let Ok(mut guard) = slot.try_lock() else {
                continue;
            };
            if guard.reserved {
                continue;
            }
            guard.reserved = true;
            if let Some(mut old) = guard.backend.take() {
                let old_stats = old.take_stats();
                guard.retired.merge(&old_stats);
            } else {
                self.opened.fetch_add(1, Ordering::Relaxed);
            }
            guard.backend = Some(backend);
            drop(guard);
            return Ok(ReservedSlot {
                slot: Arc::clone(slot),
                name: self.name,
            });
        }
        Err(IoError::Backend {
            backend: self.name,
            op: "reserve a backend for tasks",
            source: std::io::Error::other(format!(
                "all {} backends of the pool are in use; run fewer threads of tasks",
                self.slots.len()
            )),
        })
    }

    /// Drops the slot's failed backend, keeping its counters; the kernel may still hold
    /// its requests' buffers, which dropping it waits for (or leaks).
    fn broken(&self, slot: &mut Slot, what: &'static str) -> IoError {
        if broken_backend(slot, self.name, what) {
            self.opened.fetch_sub(1, Ordering::Relaxed);
        }
        lost_request(self.name, what)
    }
}

/// Drops the slot's failed backend, keeping its counters; true if it had one.
fn broken_backend(slot: &mut Slot, name: &'static str, what: &'static str) -> bool {
    slot.completions.clear();
    let Some(mut backend) = slot.backend.take() else {
        return false;
    };
    slot.retired.merge(&backend.take_stats());
    tracing::warn!(
        backend = name,
        what,
        "an I/O backend of a pool failed; it is replaced"
    );
    drop(backend);
    true
}

fn lost_request(name: &'static str, what: &'static str) -> IoError {
    IoError::Backend {
        backend: name,
        op: what,
        source: std::io::Error::other("the backend lost a request"),
    }
}

/// A pool's slot reserved for one thread of tasks: the requests of all its tasks go to
/// its backend, submitted and reaped by that thread only. The slot's lock is taken
/// only for each call, so the pool's `stats` can read its counters meanwhile.
pub(crate) struct ReservedSlot {
    slot: Arc<Mutex<Slot>>,
    name: &'static str,
}

impl ReservedSlot {
    /// Queues `request` (its `tag` names the waiting task).
    pub(crate) fn submit(&self, request: IoRequest) -> Result<(), IoError> {
        let mut slot = lock(&self.slot);
        let tag = request.tag;
        let backend = slot
            .backend
            .as_mut()
            .ok_or_else(|| lost_request(self.name, "submit"))?;
        backend.submit(request)?;
        slot.tags.push(tag);
        Ok(())
    }

    /// Moves at least `min` completions (when that many are in flight) to `out`,
    /// submitting what is queued first; with `min` 0, only those already available,
    /// submitting nothing. When the backend fails, it is dropped: the tasks waiting
    /// for its requests are in [`ReservedSlot::lost_tags`].
    pub(crate) fn wait(&self, min: usize, out: &mut Vec<IoCompletion>) -> Result<(), IoError> {
        let mut guard = lock(&self.slot);
        let slot = &mut *guard;
        let Some(backend) = slot.backend.as_mut() else {
            return Ok(());
        };
        if backend.in_flight() == 0 {
            return Ok(());
        }
        let before = out.len();
        let outcome = if min == 0 {
            backend.reap_ready(out)
        } else {
            backend.wait(min, out)
        };
        match outcome {
            Ok(_) => {
                for completion in &out[before..] {
                    if let Some(i) = slot.tags.iter().position(|&t| t == completion.tag) {
                        slot.tags.swap_remove(i);
                    }
                }
                Ok(())
            }
            Err(e) => {
                broken_backend(slot, self.name, "wait for a task's request");
                Err(e)
            }
        }
    }

    /// The tags of requests lost with a failed backend (taken: each is told once).
    pub(crate) fn lost_tags(&self) -> Vec<u64> {
        let mut slot = lock(&self.slot);
        if slot.backend.is_some() {
            return Vec::new();
        }
        std::mem::take(&mut slot.tags)
    }

    /// Requests in flight.
    pub(crate) fn in_flight(&self) -> usize {
        lock(&self.slot)
            .backend
            .as_ref()
            .map_or(0, |b| b.in_flight())
    }

    /// Submits what is queued without waiting. When the backend fails, it is dropped:
    /// the tasks waiting for its requests are in [`ReservedSlot::lost_tags`].
    pub(crate) fn flush(&self) -> Result<(), IoError> {
        let mut guard = lock(&self.slot);
        let slot = &mut *guard;
        let Some(backend) = slot.backend.as_mut() else {
            return Ok(());
        };
        backend.flush().inspect_err(|_| {
            broken_backend(slot, self.name, "submit a task's request");
        })
    }

    /// A descriptor that polls readable when completions wait to be reaped.
    pub(crate) fn completion_fd(&self) -> Result<RawFd, IoError> {
        match lock(&self.slot).backend.as_mut() {
            Some(backend) => backend.completion_fd(),
            None => Err(lost_request(self.name, "poll")),
        }
    }

    /// Gives the slot back to the pool. Its backend stays open for lending unless
    /// requests are still in flight (their tasks are gone, after a panic or a failed
    /// executor): then it is dropped, which waits for them, so that no later borrower
    /// reaps a stranger's completion.
    pub(crate) fn release(&self) {
        let mut guard = lock(&self.slot);
        let slot = &mut *guard;
        if slot.backend.as_ref().is_some_and(|b| b.in_flight() > 0) {
            broken_backend(slot, self.name, "release a backend with requests in flight");
        }
        slot.reserved = false;
        slot.tags.clear();
    }
}

/// A backend of `kind` with `files` registered in order (ids 0, 1, …).
fn open_with_files(
    kind: BackendKind,
    depth: usize,
    files: &[Arc<DataFile>],
) -> Result<Box<dyn IoBackend>, IoError> {
    register_files(open_backend(kind, depth)?, files)
}

/// [`open_with_files`] for a thread of tasks: completions can be polled for.
fn open_with_files_pollable(
    kind: BackendKind,
    depth: usize,
    files: &[Arc<DataFile>],
) -> Result<Box<dyn IoBackend>, IoError> {
    register_files(super::open_backend_pollable(kind, depth)?, files)
}

fn register_files(
    mut backend: Box<dyn IoBackend>,
    files: &[Arc<DataFile>],
) -> Result<Box<dyn IoBackend>, IoError> {
    for (i, file) in files.iter().enumerate() {
        let id = backend.register(file)?;
        debug_assert_eq!(id, FileId(i as u32));
    }
    Ok(backend)
}
