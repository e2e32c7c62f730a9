//! The io_uring backend.
//!
//! Memory safety rests on one rule: a buffer whose address went into a submission queue
//! entry stays owned by this backend, untouched and unfreed, until the completion queue
//! entry carrying its slot index has been reaped. The buffer lives in `slots[index]` from
//! `submit` to `reap`; `Drop` waits for every outstanding completion, and if it cannot
//! (the ring fails), it leaks the buffers rather than free memory the kernel may still
//! write.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use io_uring::register::Probe;
use io_uring::{IoUring, opcode, squeue, types};

use super::files::FileTable;
use super::{
    FileId, IoBackend, IoCompletion, IoOp, IoRequest, VectoredWrite, check_depth, check_request,
    check_vectored, duration_ns, request_error,
};
use crate::{AlignedBuf, DataFile, IoClass, IoError, IoStats};

/// Size of the registered (fixed) file table; files beyond it use plain descriptors.
/// Kept well under the usual RLIMIT_NOFILE of 1024, which bounds the table.
const FIXED_FILE_SLOTS: u32 = 128;
/// `IORING_ENTER_GETEVENTS` from the kernel's uapi header: wait for completions.
const IORING_ENTER_GETEVENTS: u32 = 1;
/// user_data of the NOP sent by the availability probe (never a slot index).
const PROBE_USER_DATA: u64 = u64::MAX;
/// Consecutive EAGAIN/EBUSY answers from io_uring_enter, without any completion in
/// between, after which the backend gives up (about 10 s with the 1 ms pause).
const MAX_STALLS: u32 = 10_000;

/// The io_uring backend: one ring of `depth` entries (rounded up to a power of two),
/// registered files when the kernel allows, `IORING_OP_READ`/`WRITE`/`FSYNC(DATASYNC)`
/// (`WRITEV` for a [`VectoredWrite`]; `READ_FIXED`/`WRITE_FIXED` for page-sized buffers,
/// whose slab chunks the ring registers as fixed buffers),
/// and submission batched into one `io_uring_enter` per `flush`/`wait`.
///
/// Needs Linux 5.6 or newer (the opcode probe rejects older kernels).
pub struct IoUringBackend {
    ring: IoUring,
    depth: usize,
    /// Requests in flight, indexed by the user_data of their SQE.
    slots: Box<[Option<InFlight>]>,
    free_slots: Vec<u32>,
    in_flight: usize,
    /// Slots of the SQEs queued and not yet handed to the kernel, in queue order.
    unsubmitted: Vec<u32>,
    files: FileTable<RingFile>,
    /// Free indices of the registered file table (empty when it could not be set up).
    free_fixed: Vec<u32>,
    fixed_bufs: FixedBuffers,
    stats: IoStats,
}

/// The page-buffer slab's chunks as this ring's registered (fixed) buffers, one table
/// entry per chunk index: a request whose buffer lies in a registered chunk is a
/// `READ_FIXED`/`WRITE_FIXED`, for which the kernel does not look up and pin the
/// buffer's pages (it did so once, at registration). A chunk is registered the first
/// time one of its buffers passes through the ring.
struct FixedBuffers {
    /// Whether the kernel gave the ring a sparse buffer table (Linux 5.19).
    table: bool,
    /// Per chunk index: registered (`Some(true)`), refused (`Some(false)`, e.g. over
    /// RLIMIT_MEMLOCK: its buffers go as plain reads and writes) or not tried.
    chunks: Vec<Option<bool>>,
}

impl FixedBuffers {
    fn new(ring: &IoUring) -> FixedBuffers {
        let table = ring
            .submitter()
            .register_buffers_sparse(crate::buf::INDEXED_CHUNKS as u32)
            .is_ok();
        FixedBuffers {
            table,
            chunks: Vec::new(),
        }
    }

    /// The fixed-buffer index for a request on `buf`, registering its chunk if needed.
    fn index(&mut self, ring: &IoUring, buf: &AlignedBuf) -> Option<u16> {
        if !self.table {
            return None;
        }
        let index = buf.fixed_chunk()?;
        let at = usize::from(index);
        if self.chunks.len() <= at {
            self.chunks.resize(at + 1, None);
        }
        let registered = *self.chunks[at].get_or_insert_with(|| {
            let Some(base) = crate::buf::chunk(u32::from(index)) else {
                return false;
            };
            let iovec = libc::iovec {
                iov_base: base as *mut libc::c_void,
                iov_len: crate::buf::CHUNK_BYTES,
            };
            // SAFETY: the iovec describes one whole slab chunk, mapped read-write and
            // never unmapped while the process lives, so the pages the kernel pins stay
            // ours for as long as the ring. The kernel touches them only for requests
            // naming this index, whose buffers the ring owns until their completion.
            unsafe {
                ring.submitter()
                    .register_buffers_update(u32::from(index), &[iovec], None)
            }
            .is_ok()
        });
        registered.then_some(index)
    }
}

/// What the ring does I/O through for a registered file: the backend's own descriptor
/// and, when it got one, its index in the ring's fixed file table.
struct RingFile {
    fd: OwnedFd,
    fixed: Option<u32>,
}

/// A request between `submit` and `reap`, owning its buffer.
struct InFlight {
    file: FileId,
    op: IoOp,
    offset: u64,
    buf: AlignedBuf,
    /// A vectored write's buffers (`buf` is then empty); empty otherwise.
    bufs: Vec<AlignedBuf>,
    /// A vectored write's iovec array, describing `bufs`.
    iovecs: IoVecs,
    len: usize,
    class: IoClass,
    instance: u16,
    tag: u64,
    start: Instant,
}

/// The iovec array of a vectored write in flight. The kernel may read it whenever it
/// takes the request up (at submission, or later in a worker), so it stays with the
/// request, unchanged, until the request is reaped.
#[derive(Default)]
struct IoVecs(Vec<libc::iovec>);

// SAFETY: the array is plain data only the kernel dereferences: its pointers point into
// the heap bytes of the `AlignedBuf`s of the same `InFlight` (which are `Send`), and it
// travels with them, so sending it to another thread is as safe as sending them.
unsafe impl Send for IoVecs {}

/// How an SQE names its file.
#[derive(Clone, Copy)]
enum Target {
    Fixed(u32),
    Fd(RawFd),
}

fn unavailable(reason: &'static str, source: io::Error) -> IoError {
    IoError::IoUringUnavailable { reason, source }
}

impl IoUringBackend {
    /// A ring for `depth` requests in flight (1..=4096), after checking that the kernel
    /// sets it up, supports read/write/fsync opcodes and completes a NOP.
    pub fn new(depth: usize) -> Result<IoUringBackend, IoError> {
        Self::build(depth, true)
    }

    /// [`IoUringBackend::new`] without cooperative task running, so that the ring's
    /// descriptor polls readable as soon as a completion is posted (with it, the
    /// completion waits for the thread's next io_uring_enter, which a thread asleep in
    /// `poll` never makes): for threads of tasks.
    pub(crate) fn pollable(depth: usize) -> Result<IoUringBackend, IoError> {
        Self::build(depth, false)
    }

    fn build(depth: usize, coop: bool) -> Result<IoUringBackend, IoError> {
        check_depth(depth)?;
        // The kernel rounds up to a power of two itself; doing it here keeps SQ and CQ
        // sizes obvious. The CQ gets twice as many entries, so it can never overflow
        // while in_flight <= depth.
        let entries = depth.next_power_of_two() as u32;
        let mut ring = build_ring(entries, coop)?;
        probe_opcodes(&ring)?;
        nop_round_trip(&mut ring)?;
        let free_fixed = register_fixed_table(&ring);
        let fixed_bufs = FixedBuffers::new(&ring);
        Ok(IoUringBackend {
            ring,
            depth,
            slots: (0..depth).map(|_| None).collect(),
            free_slots: (0..depth as u32).rev().collect(),
            in_flight: 0,
            unsubmitted: Vec::with_capacity(depth),
            files: FileTable::new("io_uring"),
            free_fixed,
            fixed_bufs,
            stats: IoStats::new(),
        })
    }

    /// How many page-buffer chunks the ring has registered as fixed buffers, or `None`
    /// when the kernel gave it no buffer table (before Linux 5.19): every request then
    /// goes as a plain read or write.
    pub fn fixed_buffer_chunks(&self) -> Option<usize> {
        self.fixed_bufs.table.then(|| {
            self.fixed_bufs
                .chunks
                .iter()
                .filter(|c| **c == Some(true))
                .count()
        })
    }

    /// Whether `file` is used through the ring's registered file table.
    pub fn is_fixed(&self, file: FileId) -> bool {
        self.files.get(file).is_ok_and(|f| f.handle.fixed.is_some())
    }

    /// Moves every available completion to `out`; returns how many.
    fn reap(&mut self, out: &mut Vec<IoCompletion>) -> usize {
        let mut cq = self.ring.completion();
        if cq.is_empty() {
            return 0;
        }
        // One clock read per batch: every CQE in it was found complete at this moment.
        let now = Instant::now();
        let mut reaped = 0;
        for cqe in &mut cq {
            let Ok(slot) = u32::try_from(cqe.user_data()) else {
                continue; // the availability probe's NOP
            };
            let Some(flight) = self.slots.get_mut(slot as usize).and_then(Option::take) else {
                continue;
            };
            // The kernel is done with the buffer: the slot can be reused.
            self.free_slots.push(slot);
            self.in_flight -= 1;
            let InFlight {
                file,
                op,
                offset,
                buf,
                bufs,
                iovecs,
                len,
                class,
                instance,
                tag,
                start,
            } = flight;
            // The kernel is done with the array too.
            drop(iovecs);
            let res = cqe.result();
            let result = match self.files.complete(file) {
                Some(origin) => {
                    if res >= 0 {
                        Ok(res as usize)
                    } else {
                        Err(request_error(
                            origin,
                            op,
                            offset,
                            bufs.first().unwrap_or(&buf),
                            len,
                            io::Error::from_raw_os_error(-res),
                        ))
                    }
                }
                // Unreachable: a file with requests in flight cannot be unregistered.
                None if res >= 0 => Ok(res as usize),
                None => Err(io::Error::from_raw_os_error(-res)),
            };
            let latency_ns = duration_ns(now.saturating_duration_since(start));
            let bytes = *result.as_ref().unwrap_or(&0) as u64;
            self.stats
                .record(instance, class, bytes, latency_ns, result.is_ok());
            out.push(IoCompletion {
                tag,
                file,
                op,
                offset,
                buf,
                bufs,
                result,
                latency_ns,
                class,
                instance,
            });
            reaped += 1;
        }
        reaped
    }

    /// One io_uring_enter: submits the queued SQEs and waits for `want` completions.
    /// EINTR, EAGAIN and EBUSY are not errors: the caller reaps and calls again, which
    /// `stalls` bounds.
    fn enter(&mut self, want: usize, stalls: &mut u32) -> Result<(), IoError> {
        // Read before the call, which may also wait: the queued requests are the
        // kernel's from the moment it is made.
        let handed_over = Instant::now();
        let err = match self.ring.submit_and_wait(want) {
            Ok(submitted) => {
                self.stamp_submitted(submitted, handed_over);
                *stalls = 0;
                return Ok(());
            }
            Err(err) => err,
        };
        match err.raw_os_error() {
            Some(libc::EINTR) => Ok(()),
            // EAGAIN: the kernel lacks resources for new requests; EBUSY: completions
            // are backed up. Both clear as requests complete and are reaped.
            Some(libc::EAGAIN) | Some(libc::EBUSY) => {
                *stalls += 1;
                if *stalls > MAX_STALLS {
                    return Err(IoError::Backend {
                        backend: "io_uring",
                        op: "io_uring_enter",
                        source: err,
                    });
                }
                let in_kernel = self.in_flight.saturating_sub(self.ring.submission().len());
                if in_kernel > 0 && self.ring.completion().is_empty() {
                    // Wait for one completion without submitting anything.
                    // SAFETY: no argument pointer is passed (None); to_submit = 0 so no
                    // SQE is consumed by this call.
                    let waited = unsafe {
                        self.ring.submitter().enter::<libc::sigset_t>(
                            0,
                            1,
                            IORING_ENTER_GETEVENTS,
                            None,
                        )
                    };
                    match waited {
                        Ok(_) => Ok(()),
                        Err(e)
                            if matches!(
                                e.raw_os_error(),
                                Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                            ) =>
                        {
                            Ok(())
                        }
                        Err(source) => Err(IoError::Backend {
                            backend: "io_uring",
                            op: "io_uring_enter",
                            source,
                        }),
                    }
                } else {
                    if in_kernel == 0 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Ok(())
                }
            }
            _ => Err(IoError::Backend {
                backend: "io_uring",
                op: "io_uring_enter",
                source: err,
            }),
        }
    }

    /// Starts the clock of the first `submitted` queued requests at `handed_over`, the
    /// moment of the io_uring_enter that submitted them: a request is timed from when
    /// the kernel has it, so a caller that queues several and submits them together is
    /// not charged for its own batching.
    fn stamp_submitted(&mut self, submitted: usize, handed_over: Instant) {
        let submitted = submitted.min(self.unsubmitted.len());
        for slot in self.unsubmitted.drain(..submitted) {
            if let Some(flight) = self.slots[slot as usize].as_mut() {
                flight.start = handed_over;
            }
        }
    }

    /// Leaks the buffers of every request that may still be in the kernel's hands.
    fn leak_in_flight_buffers(&mut self) {
        for slot in self.slots.iter_mut() {
            if let Some(flight) = slot.take() {
                std::mem::forget(flight.buf);
                std::mem::forget(flight.bufs);
                std::mem::forget(flight.iovecs);
            }
        }
    }
}

impl IoBackend for IoUringBackend {
    fn name(&self) -> &'static str {
        "io_uring"
    }

    fn register(&mut self, file: &DataFile) -> Result<FileId, IoError> {
        let fd: OwnedFd = file
            .file()
            .try_clone()
            .map_err(|e| IoError::file_op(file.path(), "dup", e))?
            .into();
        let (ring, free_fixed) = (&self.ring, &mut self.free_fixed);
        self.files.insert(file, || {
            let mut fixed = None;
            if let Some(index) = free_fixed.pop() {
                match ring
                    .submitter()
                    .register_files_update(index, &[fd.as_raw_fd()])
                {
                    Ok(1) => fixed = Some(index),
                    // The table is unusable; plain descriptors work as well, a bit slower.
                    _ => free_fixed.clear(),
                }
            }
            RingFile { fd, fixed }
        })
    }

    fn unregister(&mut self, file: FileId) -> Result<(), IoError> {
        let entry = self.files.remove(file)?;
        if let Some(index) = entry.fixed {
            // Only a slot the kernel confirms empty is reused.
            if let Ok(1) = self.ring.submitter().register_files_update(index, &[-1]) {
                self.free_fixed.push(index);
            }
        }
        drop(entry);
        Ok(())
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
        let fixed_buf = match req.op {
            IoOp::Fsync => None,
            _ => self.fixed_bufs.index(&self.ring, &req.buf),
        };
        let file = self.files.get_mut(req.file)?;
        let target = match file.handle.fixed {
            Some(index) => Target::Fixed(index),
            None => Target::Fd(file.handle.fd.as_raw_fd()),
        };
        let Some(slot) = self.free_slots.pop() else {
            return Err(IoError::QueueFull { depth: self.depth });
        };
        let (op, offset, len) = (req.op, req.offset, req.len as u32);
        let flight = self.slots[slot as usize].insert(InFlight {
            file: req.file,
            op,
            offset,
            buf: req.buf,
            bufs: Vec::new(),
            iovecs: IoVecs::default(),
            len: req.len,
            class: req.class,
            instance: req.instance,
            tag: req.tag,
            start: Instant::now(),
        });
        let ptr = flight.buf.as_mut_ptr();
        let dsync = if op == IoOp::WriteSync {
            libc::RWF_DSYNC
        } else {
            0
        };
        macro_rules! sqe {
            ($fd:expr) => {
                match (op, fixed_buf) {
                    (IoOp::Read, Some(index)) => opcode::ReadFixed::new($fd, ptr, len, index)
                        .offset(offset)
                        .build(),
                    (IoOp::Read, None) => opcode::Read::new($fd, ptr, len).offset(offset).build(),
                    (IoOp::Write | IoOp::WriteSync, Some(index)) => {
                        opcode::WriteFixed::new($fd, ptr.cast_const(), len, index)
                            .offset(offset)
                            .rw_flags(dsync)
                            .build()
                    }
                    (IoOp::Write | IoOp::WriteSync, None) => {
                        opcode::Write::new($fd, ptr.cast_const(), len)
                            .offset(offset)
                            .rw_flags(dsync)
                            .build()
                    }
                    (IoOp::Fsync, _) => opcode::Fsync::new($fd)
                        .flags(types::FsyncFlags::DATASYNC)
                        .build(),
                }
            };
        }
        let entry: squeue::Entry = match target {
            Target::Fixed(index) => sqe!(types::Fixed(index)),
            Target::Fd(fd) => sqe!(types::Fd(fd)),
        }
        .user_data(u64::from(slot));
        // SAFETY: the entry points at `len` bytes of the buffer now owned by
        // slots[slot] (check_request ensured len <= buf.len()); with a fixed-buffer
        // index, those bytes lie inside the registered chunk of that index (a slab
        // buffer never straddles chunks). That buffer is neither
        // accessed, moved out nor freed until `reap` sees the CQE with this slot's
        // user_data, and `Drop` waits for all CQEs or leaks the buffers; moving an
        // AlignedBuf value never moves its heap bytes. The descriptor or fixed index
        // stays valid because a file with requests in flight cannot be unregistered.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_err() {
            // Unreachable: the SQ holds at least `depth` entries and at most in_flight
            // of them are queued. The kernel never saw the entry, so dropping the
            // buffer is safe.
            self.slots[slot as usize] = None;
            self.free_slots.push(slot);
            return Err(IoError::QueueFull { depth: self.depth });
        }
        file.in_flight += 1;
        self.in_flight += 1;
        self.unsubmitted.push(slot);
        Ok(())
    }

    fn submit_vectored(&mut self, req: &mut VectoredWrite) -> Result<(), IoError> {
        if self.in_flight >= self.depth {
            return Err(IoError::QueueFull { depth: self.depth });
        }
        let len = check_vectored(req)?;
        // One buffer (most of the page writer's writes) goes as a plain write, which can
        // use a fixed buffer: WRITEV has no fixed form before Linux 6.15.
        let fixed_buf = match &req.bufs[..] {
            [one] => self.fixed_bufs.index(&self.ring, one),
            _ => None,
        };
        let file = self.files.get_mut(req.file)?;
        let target = match file.handle.fixed {
            Some(index) => Target::Fixed(index),
            None => Target::Fd(file.handle.fd.as_raw_fd()),
        };
        let Some(slot) = self.free_slots.pop() else {
            return Err(IoError::QueueFull { depth: self.depth });
        };
        let offset = req.offset;
        let flight = self.slots[slot as usize].insert(InFlight {
            file: req.file,
            op: IoOp::Write,
            offset,
            buf: AlignedBuf::empty(),
            bufs: std::mem::take(&mut req.bufs),
            iovecs: IoVecs::default(),
            len,
            class: req.class,
            instance: req.instance,
            tag: req.tag,
            start: Instant::now(),
        });
        let InFlight { bufs, iovecs, .. } = flight;
        iovecs.0.extend(bufs.iter_mut().map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        }));
        // check_vectored bounded the count by IOV_MAX.
        let (iov, count) = (iovecs.0.as_ptr(), iovecs.0.len() as u32);
        let first = iovecs.0[0].iov_base.cast::<u8>().cast_const();
        macro_rules! sqe {
            ($fd:expr) => {
                match fixed_buf {
                    Some(index) => opcode::WriteFixed::new($fd, first, len as u32, index)
                        .offset(offset)
                        .build(),
                    None => opcode::Writev::new($fd, iov, count).offset(offset).build(),
                }
            };
        }
        let entry: squeue::Entry = match target {
            Target::Fixed(index) => sqe!(types::Fixed(index)),
            Target::Fd(fd) => sqe!(types::Fd(fd)),
        }
        .user_data(u64::from(slot));
        // SAFETY: the entry points at the iovec array and, through it, at every byte of
        // the buffers, all owned by slots[slot] (a fixed write at the one buffer, inside
        // the registered chunk of its index). Neither the array nor the buffers are
        // accessed, moved out or freed until `reap` sees the CQE with this slot's
        // user_data (moving a Vec or an AlignedBuf value never moves its heap bytes), and
        // `Drop` waits for all CQEs or leaks the buffers. The descriptor or fixed index
        // stays valid because a file with requests in flight cannot be unregistered.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_err() {
            // Unreachable (see `submit`). The kernel never saw the entry: the buffers go
            // back to the caller.
            if let Some(flight) = self.slots[slot as usize].take() {
                req.bufs = flight.bufs;
            }
            self.free_slots.push(slot);
            return Err(IoError::QueueFull { depth: self.depth });
        }
        file.in_flight += 1;
        self.in_flight += 1;
        self.unsubmitted.push(slot);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IoError> {
        let mut stalls = 0;
        // On EAGAIN/EBUSY the rest stays queued for the next wait, which can reap.
        while !self.ring.submission().is_empty() && stalls == 0 {
            self.enter(0, &mut stalls)?;
        }
        Ok(())
    }

    fn wait(&mut self, min: usize, out: &mut Vec<IoCompletion>) -> Result<usize, IoError> {
        let min = min.min(self.in_flight);
        let mut got = self.reap(out);
        let mut stalls = 0;
        loop {
            let sq = self.ring.submission();
            // With IORING_SETUP_TASKRUN_FLAG, completions may wait for us to enter the
            // kernel; the flag says when.
            let must_enter = !sq.is_empty() || sq.taskrun();
            drop(sq);
            if got >= min && !must_enter {
                return Ok(got);
            }
            self.enter(min.saturating_sub(got), &mut stalls)?;
            got += self.reap(out);
            // Enough completions, and everything submitted (or the kernel asked us to
            // back off, in which case the rest goes in at the next call).
            if got >= min && (self.ring.submission().is_empty() || stalls > 0) {
                return Ok(got);
            }
        }
    }

    fn stats(&self) -> &IoStats {
        &self.stats
    }

    fn reap_ready(&mut self, out: &mut Vec<IoCompletion>) -> Result<usize, IoError> {
        Ok(self.reap(out))
    }

    fn completion_fd(&mut self) -> Result<std::os::fd::RawFd, IoError> {
        use std::os::fd::AsRawFd;
        Ok(self.ring.as_raw_fd())
    }

    fn take_stats(&mut self) -> IoStats {
        self.stats.take()
    }
}

impl Drop for IoUringBackend {
    fn drop(&mut self) {
        // Freeing a buffer the kernel may still write is undefined behaviour, and
        // closing the ring does not wait for requests already in flight: wait for them.
        let mut done = Vec::with_capacity(self.in_flight);
        while self.in_flight > 0 {
            match self.wait(self.in_flight, &mut done) {
                Ok(_) => done.clear(),
                Err(err) => {
                    tracing::error!(
                        error = %err,
                        in_flight = self.in_flight,
                        "cannot wait for in-flight I/O while closing io_uring; leaking its buffers"
                    );
                    self.leak_in_flight_buffers();
                    return;
                }
            }
        }
    }
}

fn build_ring(entries: u32, coop: bool) -> Result<IoUring, IoError> {
    let mut builder = IoUring::builder();
    // SUBMIT_ALL: one bad SQE does not stop the batch. COOP_TASKRUN + TASKRUN_FLAG:
    // completions do not interrupt the thread with an IPI; the SQ flag tells `wait`
    // when to enter the kernel to collect them.
    builder.setup_submit_all();
    if coop {
        builder.setup_coop_taskrun().setup_taskrun_flag();
    }
    match builder.build(entries) {
        Ok(ring) => Ok(ring),
        // Kernels before 5.19 reject these flags; a plain ring works the same.
        Err(err) if err.raw_os_error() == Some(libc::EINVAL) => {
            IoUring::new(entries).map_err(|e| unavailable("io_uring_setup", e))
        }
        Err(err) => Err(unavailable("io_uring_setup", err)),
    }
}

fn probe_opcodes(ring: &IoUring) -> Result<(), IoError> {
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| unavailable("opcode probe", e))?;
    let needed = [
        opcode::Nop::CODE,
        opcode::Read::CODE,
        opcode::Write::CODE,
        opcode::Writev::CODE,
        opcode::Fsync::CODE,
    ];
    if needed.iter().all(|&code| probe.is_supported(code)) {
        Ok(())
    } else {
        Err(unavailable(
            "opcode probe",
            io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel's io_uring lacks read, write, writev or fsync",
            ),
        ))
    }
}

/// Submits a NOP and waits for its completion: io_uring_setup can succeed where
/// io_uring_enter is refused (seccomp policies).
fn nop_round_trip(ring: &mut IoUring) -> Result<(), IoError> {
    let nop = opcode::Nop::new().build().user_data(PROBE_USER_DATA);
    // SAFETY: a NOP references no memory and no file.
    unsafe { ring.submission().push(&nop) }.map_err(|_| {
        unavailable(
            "NOP probe",
            io::Error::other("submission queue of a new ring is full"),
        )
    })?;
    for _ in 0..1000 {
        if let Some(cqe) = ring.completion().next() {
            return match cqe.result() {
                res if res >= 0 => Ok(()),
                res => Err(unavailable("NOP probe", io::Error::from_raw_os_error(-res))),
            };
        }
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(unavailable("NOP probe", err)),
        }
    }
    Err(unavailable(
        "NOP probe",
        io::Error::new(io::ErrorKind::TimedOut, "no completion for a NOP"),
    ))
}

/// Sets up an empty registered file table; returns its free indices (none if the kernel
/// refuses, in which case files are used by descriptor).
fn register_fixed_table(ring: &IoUring) -> Vec<u32> {
    let submitter = ring.submitter();
    let sparse = [-1; FIXED_FILE_SLOTS as usize];
    // The sparse flag needs 5.19; a table of -1 entries works since 5.5.
    if submitter.register_files_sparse(FIXED_FILE_SLOTS).is_ok()
        || submitter.register_files(&sparse).is_ok()
    {
        (0..FIXED_FILE_SLOTS).rev().collect()
    } else {
        Vec::new()
    }
}
