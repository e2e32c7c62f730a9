//! Recovery pre-read, as ESE's soft recovery reads the pages a log file references:
//! sorted and de-duplicated, adjacent pages joined into one read, at most
//! [`PREREAD_IO_MAX`] reads outstanding through an asynchronous backend; pages are
//! installed as their reads complete, taking only free frames.

use edbstress_format::Pgno;
use edbstress_io::{
    AlignedBuf, DataFile, FileId, IoBackend, IoClass, IoCompletion, IoOp, IoRequest, IoStats,
    open_backend,
};

use super::frames::FrameState;
use super::{CacheConfig, Shared};
use crate::error::EngineError;

/// Most pre-reads outstanding at once: ESE's `JET_paramPrereadIOMax` default.
pub const PREREAD_IO_MAX: usize = 8;
/// Largest pre-read of adjacent pages, bytes. ESE joins adjacent pages up to its
/// coalesced-read limit; the reports' recovery reads (~40 KB on 32 KB pages) stay far
/// below this cap.
pub const PREREAD_JOIN_MAX: usize = 256 << 10;

/// A page whose read is over, verified outside the lock, waiting to be installed.
struct FinishedRead {
    pgno: Pgno,
    frame: u32,
    /// The repaired bit, if any, or why the page cannot be installed.
    verdict: Result<Option<u32>, EngineError>,
    buf: AlignedBuf,
}

/// One read in flight: `frames.len()` adjacent pages from `first`.
struct JoinedRead {
    first: Pgno,
    /// The frame reserved for each page, with its own buffer (empty when it had none).
    frames: Vec<(u32, AlignedBuf)>,
}

/// Where a pre-read stands in its sorted page list.
struct PrereadPlan {
    pgnos: Vec<Pgno>,
    /// First page not yet taken (or skipped).
    next: usize,
    /// Most pages joined into one read.
    join_max: usize,
    /// No frame was free: take no more pages.
    pool_empty: bool,
}

/// The asynchronous reader of [`PageCache::prefetch`], created on first use and kept.
pub(crate) struct Prefetcher {
    backend: Box<dyn IoBackend>,
    file: FileId,
    /// Per tag: the read in flight.
    reserved: Vec<Option<JoinedRead>>,
    free_tags: Vec<usize>,
    completions: Vec<IoCompletion>,
    /// Reads to submit: (tag, first page, pages, buffer).
    to_submit: Vec<(usize, Pgno, usize, AlignedBuf)>,
    /// Pages read and verified, to install.
    done: Vec<FinishedRead>,
    /// The backend failed: drop it after this call.
    pub(crate) broken: bool,
}

impl Prefetcher {
    pub(crate) fn new(config: &CacheConfig, file: &DataFile) -> Result<Prefetcher, EngineError> {
        let mut backend = open_backend(config.backend, config.write_depth.max(PREREAD_IO_MAX))?;
        let file = backend.register(file)?;
        let depth = backend.depth().min(PREREAD_IO_MAX);
        Ok(Prefetcher {
            backend,
            file,
            reserved: (0..depth).map(|_| None).collect(),
            free_tags: (0..depth).rev().collect(),
            completions: Vec::with_capacity(depth),
            to_submit: Vec::with_capacity(depth),
            done: Vec::new(),
            broken: false,
        })
    }

    /// The counters of the backend: every prefetch read, timed by it.
    pub(crate) fn stats(&self) -> &IoStats {
        self.backend.stats()
    }

    /// Reads `pgnos` (sorted and de-duplicated here), joining adjacent pages that are
    /// neither cached nor in transit into one read of at most [`PREREAD_JOIN_MAX`]
    /// bytes, and installs them. Stops taking new pages when no frame is free.
    pub(crate) fn run<S>(&mut self, shared: &Shared<S>, pgnos: &[Pgno]) -> Result<(), EngineError> {
        let mut pgnos = pgnos.to_vec();
        pgnos.sort_unstable();
        pgnos.dedup();
        let page_len = shared.config.page_size.bytes();
        let mut plan = PrereadPlan {
            pgnos,
            next: 0,
            join_max: (PREREAD_JOIN_MAX / page_len).max(1),
            pool_empty: false,
        };
        let mut in_flight = 0;
        let mut first_error: Option<EngineError> = None;
        loop {
            {
                let mut core = shared.core.lock();
                self.install_finished(shared, &mut core, &mut first_error);
                if let Err(e) = shared.check(&core) {
                    first_error.get_or_insert(e);
                }
                if first_error.is_none() {
                    self.reserve_reads(&mut core, &mut plan);
                }
                if core.obtainable() < shared.config.available_start() {
                    shared.writer_wake.notify_one();
                }
            }
            in_flight += self.submit_reserved(shared);
            if in_flight == 0 {
                if self.done.is_empty() {
                    break;
                }
                continue;
            }
            in_flight -= self.await_completions(shared, in_flight);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Installs the pages whose reads are over (or releases their frames, keeping the
    /// first error), under the cache's lock, and wakes whoever waits for them.
    fn install_finished<S>(
        &mut self,
        shared: &Shared<S>,
        core: &mut super::Core<S>,
        first_error: &mut Option<EngineError>,
    ) {
        let mut released = 0;
        for FinishedRead {
            pgno,
            frame,
            verdict,
            buf,
        } in self.done.drain(..)
        {
            if let Some(i) = core.reading.iter().position(|&p| p == pgno) {
                core.reading.swap_remove(i);
            }
            core.pages[frame as usize] = buf;
            let lru = &shared.lru[frame as usize];
            match verdict {
                Ok(repaired) if !core.map.contains_key(&pgno) => {
                    core.counts.prefetched += 1;
                    if repaired.is_some() {
                        core.counts.correctable_repaired += 1;
                    }
                    core.install(frame, pgno, lru, false);
                }
                Ok(_) => {
                    core.release_frame(frame, lru);
                    released += 1;
                }
                Err(e) => {
                    core.release_frame(frame, lru);
                    released += 1;
                    first_error.get_or_insert(e);
                }
            }
        }
        shared.read_done.notify_all();
        if released > 0 {
            shared.frame_freed.notify_all();
        }
    }

    /// Reserves frames for the next runs of adjacent wanted pages, one read per free
    /// tag, under the cache's lock; the reads are submitted after it is released.
    fn reserve_reads<S>(&mut self, core: &mut super::Core<S>, plan: &mut PrereadPlan) {
        let wanted = |core: &super::Core<S>, p: Pgno| {
            p != Pgno::NONE && !core.map.contains_key(&p) && !core.in_transit(p)
        };
        let pgnos = &plan.pgnos;
        while !plan.pool_empty && plan.next < pgnos.len() {
            let Some(&tag) = self.free_tags.last() else {
                break;
            };
            let first = pgnos[plan.next];
            if !wanted(core, first) {
                plan.next += 1;
                continue;
            }
            let mut frames = Vec::new();
            while frames.len() < plan.join_max && plan.next < pgnos.len() {
                let pgno = pgnos[plan.next];
                if pgno != first + frames.len() as u32 || !wanted(core, pgno) {
                    break;
                }
                let Some(frame) = core.take_frame() else {
                    plan.pool_empty = true;
                    break;
                };
                plan.next += 1;
                core.frames[frame as usize].state = FrameState::Reading;
                core.reading.push(pgno);
                frames.push((frame, std::mem::take(&mut core.pages[frame as usize])));
            }
            if frames.is_empty() {
                break;
            }
            self.free_tags.pop();
            let count = frames.len();
            // One page reads into its frame's own buffer; a joined read into a
            // buffer of its own, copied into the frames when it completes.
            let buf = if count == 1 {
                std::mem::take(&mut frames[0].1)
            } else {
                AlignedBuf::empty()
            };
            self.reserved[tag] = Some(JoinedRead { first, frames });
            self.to_submit.push((tag, first, count, buf));
        }
    }

    /// Submits the reserved reads; returns how many are now in flight (a read that
    /// cannot be submitted is finished as failed).
    fn submit_reserved<S>(&mut self, shared: &Shared<S>) -> usize {
        let page_size = shared.config.page_size;
        let mut submitted = 0;
        for (tag, first, count, mut buf) in std::mem::take(&mut self.to_submit) {
            let len = count * page_size.bytes();
            if buf.len() < len {
                match AlignedBuf::try_new(len) {
                    Ok(b) => buf = b,
                    Err(e) => {
                        self.finish_read(shared, tag, Err(ReadFailure::Failed(e.into())), buf);
                        continue;
                    }
                }
            }
            let request = IoRequest {
                file: self.file,
                op: IoOp::Read,
                offset: first.offset(page_size),
                buf,
                len,
                class: IoClass::RecoveryRead,
                instance: shared.config.instance.get(),
                tag: tag as u64,
            };
            match self.backend.submit(request) {
                Ok(()) => submitted += 1,
                // The request and its buffer are gone; the frames get new ones.
                Err(e) => self.finish_read(
                    shared,
                    tag,
                    Err(ReadFailure::Failed(e.into())),
                    AlignedBuf::empty(),
                ),
            }
        }
        submitted
    }

    /// Waits for at least one of the `in_flight` reads and finishes those that
    /// completed; returns how many are no longer in flight (all of them when the
    /// backend failed).
    fn await_completions<S>(&mut self, shared: &Shared<S>, in_flight: usize) -> usize {
        let page_len = shared.config.page_size.bytes();
        match self.backend.wait(1, &mut self.completions) {
            Ok(_) => {
                let completions = std::mem::take(&mut self.completions);
                let over = completions.len();
                for c in completions {
                    let tag = c.tag as usize;
                    let len = self.reserved[tag]
                        .as_ref()
                        .map_or(0, |r| r.frames.len() * page_len);
                    let result = match c.result {
                        Ok(n) if n == len => Ok(()),
                        Ok(n) => Err(ReadFailure::Short(format!(
                            "short read: {n} of {len} bytes; is the page beyond the end of the file?"
                        ))),
                        Err(source) => Err(ReadFailure::Failed(EngineError::Io(
                            edbstress_io::IoError::Io {
                                path: shared.file.path().to_path_buf(),
                                op: "read",
                                offset: c.offset,
                                source,
                            },
                        ))),
                    };
                    self.finish_read(shared, tag, result, c.buf);
                }
                over
            }
            Err(e) => {
                // Whatever is in flight stays with the broken backend; its frames
                // go back to the pool without buffers.
                self.broken = true;
                let message = e.to_string();
                for tag in 0..self.reserved.len() {
                    if self.reserved[tag].is_some() {
                        let e = EngineError::ShutDown(Some(format!(
                            "prefetch backend failed: {message}"
                        )));
                        self.finish_read(
                            shared,
                            tag,
                            Err(ReadFailure::Failed(e)),
                            AlignedBuf::empty(),
                        );
                    }
                }
                in_flight
            }
        }
    }

    /// A read that is over (or never ran): each page verified and handed to its frame,
    /// or failed. Of a failed read, the first page carries the error itself, the
    /// others its message.
    fn finish_read<S>(
        &mut self,
        shared: &Shared<S>,
        tag: usize,
        result: Result<(), ReadFailure>,
        mut buf: AlignedBuf,
    ) {
        let Some(read) = self.reserved[tag].take() else {
            return;
        };
        self.free_tags.push(tag);
        let page_len = shared.config.page_size.bytes();
        let joined = read.frames.len() > 1;
        let mut failure = result.err();
        let message = match &failure {
            Some(ReadFailure::Failed(e)) => e.to_string(),
            Some(ReadFailure::Short(what)) => what.clone(),
            None => String::new(),
        };
        for (i, (frame, own)) in read.frames.into_iter().enumerate() {
            let pgno = read.first + i as u32;
            let (verdict, page) = match failure.take() {
                Some(ReadFailure::Failed(e)) => (Err(e), own),
                Some(ReadFailure::Short(what)) => {
                    failure = Some(ReadFailure::Short(what.clone()));
                    (Err(shared.corrupt(pgno, what)), own)
                }
                None if !message.is_empty() => {
                    (Err(EngineError::ShutDown(Some(message.clone()))), own)
                }
                None if !joined => {
                    let mut page = std::mem::replace(&mut buf, AlignedBuf::empty());
                    (shared.verify(&mut page, pgno), page)
                }
                None => {
                    let mut page = own;
                    if page.len() != page_len {
                        match AlignedBuf::try_new(page_len) {
                            Ok(b) => page = b,
                            Err(e) => {
                                self.done.push(FinishedRead {
                                    pgno,
                                    frame,
                                    verdict: Err(e.into()),
                                    buf: AlignedBuf::empty(),
                                });
                                continue;
                            }
                        }
                    }
                    page.copy_from_slice(&buf[i * page_len..(i + 1) * page_len]);
                    (shared.verify(&mut page, pgno), page)
                }
            };
            self.done.push(FinishedRead {
                pgno,
                frame,
                verdict,
                buf: page,
            });
        }
    }
}

/// Why a read gave no pages.
enum ReadFailure {
    /// Fewer bytes than asked: the pages are reported corrupt (beyond the file's end).
    Short(String),
    /// The read failed, or never ran.
    Failed(EngineError),
}
