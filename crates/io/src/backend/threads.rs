//! The portable backend: worker threads doing pread/pwrite/fdatasync (a durable write
//! as one `pwritev2(.., RWF_DSYNC)` where supported, a vectored write as one `pwritev`).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::files::FileTable;
use super::{
    FileId, IoBackend, IoCompletion, IoOp, IoRequest, VectoredWrite, check_depth, check_request,
    check_vectored, duration_ns, request_error,
};
use crate::{AlignedBuf, DataFile, IoClass, IoError, IoStats};

/// Most worker threads one backend starts, whatever its depth.
pub const MAX_WORKER_THREADS: usize = 64;
/// Workers only make system calls; a small stack keeps a large pool cheap.
const WORKER_STACK_BYTES: usize = 256 * 1024;

/// A pool of `min(depth, 64)` worker threads, each doing one blocking `pread`, `pwrite`
/// or `fdatasync` at a time. Works wherever std does; the fallback when io_uring is
/// unavailable.
///
/// Requests are handed to the workers in one batch at `flush`/`wait`; dropping the
/// backend carries out every submitted request first, as the io_uring backend does. Latency is measured
/// from `submit` to the moment the worker's system call returned (not when `wait`
/// collected it), which is the closest this backend can get to the device's completion.
/// Each I/O costs two short mutex sections (taking the job, posting the result) and no
/// allocation.
pub struct ThreadPoolBackend {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    depth: usize,
    /// Submitted, not yet handed to the workers.
    pending: Vec<Job>,
    in_flight: usize,
    /// Registered files: a shared descriptor the workers use.
    files: FileTable<Arc<File>>,
    /// Swapped with the shared completion list so that collecting allocates nothing.
    collected: Vec<Finished>,
    stats: IoStats,
}

/// A request travelling to a worker, owning its buffer.
struct Job {
    file: Arc<File>,
    id: FileId,
    op: IoOp,
    offset: u64,
    buf: AlignedBuf,
    /// A vectored write's buffers (`buf` is then empty); empty otherwise.
    bufs: Vec<AlignedBuf>,
    len: usize,
    class: IoClass,
    instance: u16,
    tag: u64,
    start: Instant,
}

/// A job back from a worker.
struct Finished {
    job: Job,
    result: io::Result<usize>,
    at: Instant,
}

struct Shared {
    queue: Mutex<JobQueue>,
    job_ready: Condvar,
    finished: Mutex<Vec<Finished>>,
    finished_ready: Condvar,
    /// Signalled after each completion once `completion_fd` asked for it.
    completion_wake: OnceLock<crate::tasks::Wake>,
}

struct JobQueue {
    jobs: VecDeque<Job>,
    shutdown: bool,
}

/// Locks, ignoring poisoning: the protected lists stay consistent whatever panicked.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ThreadPoolBackend {
    /// A pool for `depth` requests in flight (1..=4096) with `min(depth, 64)` threads.
    pub fn new(depth: usize) -> Result<ThreadPoolBackend, IoError> {
        Self::with_threads(depth, depth.min(MAX_WORKER_THREADS))
    }

    /// A pool for `depth` requests in flight with `threads` workers (at least 1, at most
    /// `depth` and 64).
    pub fn with_threads(depth: usize, threads: usize) -> Result<ThreadPoolBackend, IoError> {
        check_depth(depth)?;
        let threads = threads.clamp(1, depth.min(MAX_WORKER_THREADS));
        let shared = Arc::new(Shared {
            queue: Mutex::new(JobQueue {
                jobs: VecDeque::with_capacity(depth),
                shutdown: false,
            }),
            job_ready: Condvar::new(),
            finished: Mutex::new(Vec::with_capacity(depth)),
            finished_ready: Condvar::new(),
            completion_wake: OnceLock::new(),
        });
        let mut backend = ThreadPoolBackend {
            shared,
            workers: Vec::with_capacity(threads),
            depth,
            pending: Vec::with_capacity(depth),
            in_flight: 0,
            files: FileTable::new("threads"),
            collected: Vec::with_capacity(depth),
            stats: IoStats::new(),
        };
        for i in 0..threads {
            let shared = Arc::clone(&backend.shared);
            let worker = std::thread::Builder::new()
                .name(format!("edbstress-io-{i}"))
                .stack_size(WORKER_STACK_BYTES)
                .spawn(move || work(&shared))
                .map_err(|source| IoError::Backend {
                    backend: "threads",
                    op: "spawn worker thread",
                    source,
                })?;
            // On error, dropping `backend` stops the workers already started.
            backend.workers.push(worker);
        }
        Ok(backend)
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.workers.len()
    }
}

fn work(shared: &Shared) {
    loop {
        let mut job = {
            let mut queue = lock(&shared.queue);
            loop {
                if let Some(job) = queue.jobs.pop_front() {
                    break job;
                }
                // Only once the queue is empty: every submitted request is carried out.
                if queue.shutdown {
                    return;
                }
                queue = shared
                    .job_ready
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        let result = perform(&mut job);
        let at = Instant::now();
        lock(&shared.finished).push(Finished { job, result, at });
        // Only the backend's owner ever waits on this.
        shared.finished_ready.notify_one();
        if let Some(wake) = shared.completion_wake.get() {
            wake.wake();
        }
    }
}

/// Set once `pwritev2(.., RWF_DSYNC)` turned out unsupported (kernel before 4.7, or a
/// filesystem without it): `WriteSync` is then `pwrite` + `fdatasync`.
static DSYNC_UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// A write and the `fdatasync` of what it wrote in one system call,
/// `pwritev2(.., RWF_DSYNC)`, as the io_uring backend does: the same guarantee as
/// `pwrite` then `fdatasync` for the range written, one system call and one wake-up
/// fewer. `None` when the flag is not supported here (the caller falls back).
#[cfg(target_env = "gnu")]
fn write_dsync(file: &File, data: &[u8], offset: u64) -> Option<io::Result<usize>> {
    use std::os::fd::AsRawFd;
    let Ok(offset) = libc::off_t::try_from(offset) else {
        return Some(Err(io::Error::from(io::ErrorKind::InvalidInput)));
    };
    let iov = libc::iovec {
        iov_base: data.as_ptr().cast_mut().cast(),
        iov_len: data.len(),
    };
    // SAFETY: `iov` describes `data`, which stays borrowed, unmodified and alive for the
    // whole call (the kernel only reads it); the descriptor belongs to `file`, open for
    // the call; one iovec is passed and `iov` outlives the call.
    let n = unsafe { libc::pwritev2(file.as_raw_fd(), &iov, 1, offset, libc::RWF_DSYNC) };
    if n >= 0 {
        return Some(Ok(n as usize));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOSYS | libc::EOPNOTSUPP) => {
            DSYNC_UNSUPPORTED.store(true, Relaxed);
            None
        }
        _ => Some(Err(err)),
    }
}

#[cfg(not(target_env = "gnu"))]
fn write_dsync(_file: &File, _data: &[u8], _offset: u64) -> Option<io::Result<usize>> {
    None
}

/// One `pwritev` of `bufs`, back to back from `offset` (one system call, like a
/// `pwrite` of their concatenation).
fn write_vectored(file: &File, bufs: &[AlignedBuf], offset: u64) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let Ok(offset) = libc::off_t::try_from(offset) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    let slices: Vec<IoSlice<'_>> = bufs.iter().map(|b| IoSlice::new(b)).collect();
    // `check_vectored` bounded the count by IOV_MAX at submission.
    let count = libc::c_int::try_from(slices.len())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix (documented by std);
    // `slices` describes `bufs`, which stay borrowed, unmodified and alive for the whole
    // call (the kernel only reads them); `count` is its length; the descriptor belongs
    // to `file`, open for the call.
    let n = unsafe { libc::pwritev(file.as_raw_fd(), slices.as_ptr().cast(), count, offset) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// One system call (repeated only on EINTR): short transfers are returned as they are.
#[allow(clippy::disallowed_methods)] // the backend issues the I/O
fn perform(job: &mut Job) -> io::Result<usize> {
    loop {
        let result = match job.op {
            IoOp::Read => job.file.read_at(&mut job.buf[..job.len], job.offset),
            IoOp::Write if !job.bufs.is_empty() => {
                let bufs = &job.bufs;
                crate::power_cut::write_parts(&job.file, job.offset, bufs, || {
                    write_vectored(&job.file, bufs, job.offset)
                })
            }
            IoOp::Write => {
                let data = &job.buf[..job.len];
                crate::power_cut::write(&job.file, job.offset, data, || {
                    job.file.write_at(data, job.offset)
                })
            }
            IoOp::WriteSync => {
                let data = &job.buf[..job.len];
                // The power-cut simulation journals the write and its sync apart.
                let dsync = if crate::power_cut::armed() || DSYNC_UNSUPPORTED.load(Relaxed) {
                    None
                } else {
                    write_dsync(&job.file, data, job.offset)
                };
                dsync.unwrap_or_else(|| {
                    let written = crate::power_cut::write(&job.file, job.offset, data, || {
                        job.file.write_at(data, job.offset)
                    });
                    // The sync covers what the write transferred (all or a short part).
                    written.and_then(|n| {
                        crate::power_cut::sync(&job.file, || job.file.sync_data()).map(|()| n)
                    })
                })
            }
            IoOp::Fsync => crate::power_cut::sync(&job.file, || job.file.sync_data()).map(|()| 0),
        };
        match result {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            result => return result,
        }
    }
}

impl ThreadPoolBackend {
    /// Moves the finished requests to `out` (at least `min`, waiting for them), timing
    /// and counting each; returns how many.
    fn collect(&mut self, min: usize, out: &mut Vec<IoCompletion>) -> usize {
        // Everything finished earlier was collected by the previous wait, so the shared
        // list only holds completions not yet seen.
        let min = min.min(self.in_flight);
        if let Some(wake) = self.shared.completion_wake.get() {
            // Before collecting: a completion pushed after the swap below signals anew.
            wake.reset();
        }
        {
            let mut finished = lock(&self.shared.finished);
            while finished.len() < min {
                finished = self
                    .shared
                    .finished_ready
                    .wait(finished)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            std::mem::swap(&mut *finished, &mut self.collected);
        }
        let count = self.collected.len();
        for Finished { job, result, at } in self.collected.drain(..) {
            let Job {
                id,
                op,
                offset,
                buf,
                bufs,
                len,
                class,
                instance,
                tag,
                start,
                ..
            } = job;
            self.in_flight -= 1;
            let result = match self.files.complete(id) {
                Some(origin) => result.map_err(|e| {
                    let first = bufs.first().unwrap_or(&buf);
                    request_error(origin, op, offset, first, len, e)
                }),
                // Unreachable: a file with requests in flight cannot be unregistered.
                None => result,
            };
            let latency_ns = duration_ns(at.saturating_duration_since(start));
            let bytes = *result.as_ref().unwrap_or(&0) as u64;
            self.stats
                .record(instance, class, bytes, latency_ns, result.is_ok());
            out.push(IoCompletion {
                tag,
                file: id,
                op,
                offset,
                buf,
                bufs,
                result,
                latency_ns,
                class,
                instance,
            });
        }
        count
    }
}

impl IoBackend for ThreadPoolBackend {
    fn name(&self) -> &'static str {
        "threads"
    }

    fn register(&mut self, file: &DataFile) -> Result<FileId, IoError> {
        let dup = file
            .file()
            .try_clone()
            .map_err(|e| IoError::file_op(file.path(), "dup", e))?;
        self.files.insert(file, || Arc::new(dup))
    }

    fn unregister(&mut self, file: FileId) -> Result<(), IoError> {
        self.files.remove(file).map(drop)
    }

    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn submit(&mut self, req: IoRequest) -> Result<(), IoError> {
        if self.in_flight >= self.depth {
            return Err(IoError::QueueFull { depth: self.depth });
        }
        check_request(&req)?;
        let file = self.files.get_mut(req.file)?;
        file.in_flight += 1;
        self.in_flight += 1;
        self.pending.push(Job {
            file: Arc::clone(&file.handle),
            id: req.file,
            op: req.op,
            offset: req.offset,
            buf: req.buf,
            bufs: Vec::new(),
            len: req.len,
            class: req.class,
            instance: req.instance,
            tag: req.tag,
            start: Instant::now(),
        });
        Ok(())
    }

    fn submit_vectored(&mut self, req: &mut VectoredWrite) -> Result<(), IoError> {
        if self.in_flight >= self.depth {
            return Err(IoError::QueueFull { depth: self.depth });
        }
        let len = check_vectored(req)?;
        let file = self.files.get_mut(req.file)?;
        file.in_flight += 1;
        self.in_flight += 1;
        self.pending.push(Job {
            file: Arc::clone(&file.handle),
            id: req.file,
            op: IoOp::Write,
            offset: req.offset,
            buf: AlignedBuf::empty(),
            bufs: std::mem::take(&mut req.bufs),
            len,
            class: req.class,
            instance: req.instance,
            tag: req.tag,
            start: Instant::now(),
        });
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IoError> {
        let count = self.pending.len();
        if count == 0 {
            return Ok(());
        }
        // Timed from here, when the workers can take them: a caller that queues
        // several and hands them over together is not charged for its own batching.
        let now = Instant::now();
        for job in &mut self.pending {
            job.start = now;
        }
        lock(&self.shared.queue).jobs.extend(self.pending.drain(..));
        if count == 1 {
            self.shared.job_ready.notify_one();
        } else {
            self.shared.job_ready.notify_all();
        }
        Ok(())
    }

    fn wait(&mut self, min: usize, out: &mut Vec<IoCompletion>) -> Result<usize, IoError> {
        self.flush()?;
        Ok(self.collect(min, out))
    }

    fn reap_ready(&mut self, out: &mut Vec<IoCompletion>) -> Result<usize, IoError> {
        Ok(self.collect(0, out))
    }

    fn stats(&self) -> &IoStats {
        &self.stats
    }

    fn completion_fd(&mut self) -> Result<std::os::fd::RawFd, IoError> {
        use std::os::fd::AsRawFd;
        if self.shared.completion_wake.get().is_none() {
            let wake = crate::tasks::Wake::new()?;
            let _ = self.shared.completion_wake.set(wake);
        }
        match self.shared.completion_wake.get() {
            Some(wake) => Ok(wake.fd.as_raw_fd()),
            None => unreachable!("set just above"),
        }
    }

    fn take_stats(&mut self) -> IoStats {
        self.stats.take()
    }
}

impl Drop for ThreadPoolBackend {
    fn drop(&mut self) {
        // Like the io_uring backend, carry out every submitted request before going
        // (a caller may rely on a submitted write reaching the file); results are
        // discarded. Workers drain the queue, then exit.
        let _ = self.flush();
        lock(&self.shared.queue).shutdown = true;
        self.shared.job_ready.notify_all();
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}
