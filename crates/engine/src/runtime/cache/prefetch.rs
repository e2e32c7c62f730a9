//! Recovery prefetch: many page reads in flight through an asynchronous backend,
//! installed as they complete, taking only free frames.

use edbstress_format::Pgno;
use edbstress_io::{
    AlignedBuf, DataFile, FileId, IoBackend, IoClass, IoCompletion, IoOp, IoRequest, IoStats,
    open_backend,
};

use super::frames::FrameState;
use super::{CacheConfig, Shared};
use crate::error::EngineError;

/// A read that is over, verified outside the lock, waiting to be installed.
struct FinishedRead {
    tag: usize,
    /// The repaired bit, if any, or why the page cannot be installed.
    verdict: Result<Option<u32>, EngineError>,
    buf: AlignedBuf,
}

/// The asynchronous reader of [`PageCache::prefetch`], created on first use and kept.
pub(crate) struct Prefetcher {
    backend: Box<dyn IoBackend>,
    file: FileId,
    /// Per tag: (pgno, frame) of the read in flight.
    reserved: Vec<Option<(Pgno, u32)>>,
    free_tags: Vec<usize>,
    completions: Vec<IoCompletion>,
    /// Reads to submit: (tag, pgno, buffer).
    to_submit: Vec<(usize, Pgno, AlignedBuf)>,
    /// Reads over and verified, to install.
    done: Vec<FinishedRead>,
    /// The backend failed: drop it after this call.
    pub(crate) broken: bool,
}

impl Prefetcher {
    pub(crate) fn new(config: &CacheConfig, file: &DataFile) -> Result<Prefetcher, EngineError> {
        let mut backend = open_backend(config.backend, config.write_depth)?;
        let file = backend.register(file)?;
        let depth = backend.depth();
        Ok(Prefetcher {
            backend,
            file,
            reserved: vec![None; depth],
            free_tags: (0..depth).rev().collect(),
            completions: Vec::with_capacity(depth),
            to_submit: Vec::with_capacity(depth),
            done: Vec::with_capacity(depth),
            broken: false,
        })
    }

    /// The counters of the backend: every prefetch read, timed by it.
    pub(crate) fn stats(&self) -> &IoStats {
        self.backend.stats()
    }

    pub(crate) fn run<S>(&mut self, shared: &Shared<S>, pgnos: &[Pgno]) -> Result<(), EngineError> {
        let page_size = shared.config.page_size;
        let page_len = page_size.bytes();
        let instance = shared.config.instance;
        let mut next = 0;
        let mut in_flight = 0;
        let mut first_error: Option<EngineError> = None;
        let mut pool_empty = false;
        loop {
            {
                let mut core = shared.core.lock();
                let mut released = 0;
                for FinishedRead { tag, verdict, buf } in self.done.drain(..) {
                    let Some((pgno, frame)) = self.reserved[tag].take() else {
                        continue;
                    };
                    self.free_tags.push(tag);
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
                if let Err(e) = shared.check(&core) {
                    first_error.get_or_insert(e);
                }
                while first_error.is_none() && !pool_empty && next < pgnos.len() {
                    let Some(&tag) = self.free_tags.last() else {
                        break;
                    };
                    let pgno = pgnos[next];
                    if pgno == Pgno::NONE || core.map.contains_key(&pgno) || core.in_transit(pgno) {
                        next += 1;
                        continue;
                    }
                    let Some(frame) = core.take_frame() else {
                        pool_empty = true;
                        break;
                    };
                    next += 1;
                    self.free_tags.pop();
                    core.frames[frame as usize].state = FrameState::Reading;
                    core.reading.push(pgno);
                    self.reserved[tag] = Some((pgno, frame));
                    let buf = std::mem::take(&mut core.pages[frame as usize]);
                    self.to_submit.push((tag, pgno, buf));
                }
                if core.obtainable() < shared.config.available_start() {
                    shared.writer_wake.notify_one();
                }
            }
            for (tag, pgno, mut buf) in self.to_submit.drain(..) {
                if buf.is_empty() {
                    match AlignedBuf::try_new(page_len) {
                        Ok(b) => buf = b,
                        Err(e) => {
                            self.done.push(FinishedRead {
                                tag,
                                verdict: Err(e.into()),
                                buf,
                            });
                            continue;
                        }
                    }
                }
                let request = IoRequest {
                    file: self.file,
                    op: IoOp::Read,
                    offset: pgno.offset(page_size),
                    buf,
                    len: page_len,
                    class: IoClass::RecoveryRead,
                    instance,
                    tag: tag as u64,
                };
                match self.backend.submit(request) {
                    Ok(()) => in_flight += 1,
                    // The request and its buffer are gone; the frame gets a new one.
                    Err(e) => self.done.push(FinishedRead {
                        tag,
                        verdict: Err(e.into()),
                        buf: AlignedBuf::empty(),
                    }),
                }
            }
            if in_flight == 0 {
                if self.done.is_empty() {
                    break;
                }
                continue;
            }
            match self.backend.wait(1, &mut self.completions) {
                Ok(_) => {
                    for c in self.completions.drain(..) {
                        in_flight -= 1;
                        let tag = c.tag as usize;
                        let pgno = self.reserved[tag].map_or(Pgno::NONE, |(p, _)| p);
                        let mut buf = c.buf;
                        let verdict = match c.result {
                            Ok(n) if n == page_len => shared.verify(&mut buf, pgno),
                            Ok(n) => Err(shared.corrupt(
                                pgno,
                                format!("short read: {n} of {page_len} bytes; is the page beyond the end of the file?"),
                            )),
                            Err(e) => Err(EngineError::Io(edbstress_io::IoError::Io {
                                path: shared.file.path().to_path_buf(),
                                op: "read",
                                offset: c.offset,
                                source: e,
                            })),
                        };
                        self.done.push(FinishedRead { tag, verdict, buf });
                    }
                }
                Err(e) => {
                    // Whatever is in flight stays with the broken backend; its frames
                    // go back to the pool without buffers.
                    self.broken = true;
                    let message = e.to_string();
                    for (tag, reserved) in self.reserved.iter().enumerate() {
                        if reserved.is_some() && !self.done.iter().any(|d| d.tag == tag) {
                            self.done.push(FinishedRead {
                                tag,
                                verdict: Err(EngineError::ShutDown(Some(format!(
                                    "prefetch backend failed: {message}"
                                )))),
                                buf: AlignedBuf::empty(),
                            });
                        }
                    }
                    in_flight = 0;
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
