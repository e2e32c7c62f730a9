//! Writing what the plan decided: a database created by bulk load (its pages written
//! in parallel runs, its header last) with its initial log directory, or a reused one
//! whose log stream is renewed.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use edbstress_format::Generation;
use edbstress_format::Pgno;
use edbstress_format::header::{DatabaseHeader, DbState, TreeRoot};
use edbstress_format::log::{CheckpointState, LogPosition};
use edbstress_io::blocking::FileIo;
use edbstress_io::{
    AlignedBuf, DataFile, IoBackend, IoClass, IoError, IoMode, IoOp, IoRequest, open_backend,
};

use crate::dbfile::write_header;
use crate::dbheader::read_header;
use crate::layout::InstanceLayout;
use crate::offline::bulkload::{
    BULK_LOAD_DBTIME, BulkLoadError, BulkLoadPlan, BulkLoadSpec, DEFAULT_LEAF_FILL,
};

use super::*;

pub(super) fn bulk_spec(options: &PrepareOptions, page_count: u32, signature: u64) -> BulkLoadSpec {
    BulkLoadSpec {
        page_size: options.page_size,
        page_count,
        mailboxes: options.mailboxes,
        signature,
        compressibility: options.compressibility,
        leaf_fill: DEFAULT_LEAF_FILL,
    }
}

pub(super) fn reuse_instance(
    layout: &InstanceLayout,
    options: &PrepareOptions,
) -> Result<PrepareReport, PrepareError> {
    let sel = read_header(&layout.db_file, IoMode::Buffered).map_err(|e| match e {
        crate::dbheader::HeaderReadError::Io(e) => PrepareError::Io(e),
        crate::dbheader::HeaderReadError::Header(e) => {
            PrepareError::Invalid(format!("{}: {e}", layout.db_file.display()))
        }
    })?;
    let mut h = sel.header;
    let mut log_note = None;
    if crate::runtime::log::log_dir_owners(&layout.log_dir)
        .files
        .is_empty()
    {
        if h.checkpoint != INITIAL_CHECKPOINT && options.new_log_stream {
            // A new log stream, as ESE starts for a cleanly shut down database: a new
            // log signature (no log of the old stream can ever be mistaken for one of
            // the new) and the checkpoint at its start. The header goes first, so an
            // interruption leaves a database whose logs prepare simply creates.
            h.log_signature = fresh_signature(&layout.log_dir);
            h.checkpoint = INITIAL_CHECKPOINT;
            // No generation of the new stream holds anything yet.
            h.log_required = Generation::NONE;
            h.update_seq += 1;
            let file = DataFile::open(
                &layout.db_file,
                IoMode::Buffered,
                edbstress_io::Access::ReadWrite,
            )?;
            write_header(&file, &h)?;
            log_note = Some(format!(
                "the log directory {} held no log files: the database was shut down cleanly, so it is kept and a new log stream was started for it",
                layout.log_dir.display()
            ));
        }
        let state = CheckpointState {
            last_dbtime: h.last_dbtime,
            next_unused_page: h.next_unused_page,
            next_message_id: h.next_message_id,
        };
        crate::runtime::log::create_initial_logs(
            &layout.log_dir,
            h.signature,
            h.log_signature,
            state,
            IoMode::Buffered,
        )?;
    }
    Ok(PrepareReport {
        instance: layout.instance,
        db_file: layout.db_file.clone(),
        log_dir: layout.log_dir.clone(),
        reused: true,
        page_size: h.page_size.bytes(),
        pages: h.page_count,
        messages: h.record_count,
        mailboxes: h.mailbox_count,
        bytes_written: 0,
        seconds: 0.0,
        backend: String::new(),
        log_note,
    })
}

/// A signature no other database has: the operating system's random generator, mixed
/// with the process, the time, a counter and `salt` (a path), so that even a failing
/// generator gives distinct values to databases made at the same moment.
pub(super) fn fresh_signature(salt: &Path) -> u64 {
    use rand::TryRngCore;
    use std::hash::{BuildHasher, Hash, Hasher};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let os = rand::rngs::OsRng
        .try_next_u64()
        .unwrap_or_else(|_| rand::random());
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    salt.hash(&mut h);
    std::process::id().hash(&mut h);
    COUNTER.fetch_add(1, Ordering::Relaxed).hash(&mut h);
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        .hash(&mut h);
    crate::runtime::content::splitmix64(os ^ h.finish()) | 1
}

pub(super) fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Creates one database by bulk load, then its log directory. The database file is
/// removed again if anything fails before it is complete.
pub(super) fn create_instance(
    layout: &InstanceLayout,
    options: &PrepareOptions,
    progress: &mut dyn FnMut(PrepareProgress),
) -> Result<PrepareReport, PrepareError> {
    let page_count = options.page_count()?;
    // The seed fixes the content; the log signature always makes the identity unique.
    let signature = match options.seed {
        Some(seed) => crate::runtime::content::splitmix64(seed ^ u64::from(layout.instance)) | 1,
        None => fresh_signature(&layout.db_file),
    };
    let log_signature = fresh_signature(&layout.log_dir);
    let plan = BulkLoadPlan::new(bulk_spec(options, page_count, signature))?;
    if let Some(dir) = layout.db_file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, "create directory", e))?;
    }
    let file = DataFile::create_new(&layout.db_file, options.io_mode)?;
    let result = (|| -> Result<PrepareReport, PrepareError> {
        let file_len = options.file_len()?;
        file.allocate(file_len)?;
        let mut header = DatabaseHeader {
            format_version: edbstress_format::header::FORMAT_VERSION,
            page_size: options.page_size,
            signature,
            created_unix: now_unix(),
            state: DbState::Creating,
            instance: layout.instance,
            update_seq: 1,
            checkpoint: LogPosition {
                generation: Generation::FIRST,
                segment: 1,
                offset: 0,
            },
            last_dbtime: BULK_LOAD_DBTIME,
            page_count,
            next_unused_page: plan.first_free_page,
            mailbox_tree: TreeRoot {
                object_id: plan.table.object_id,
                root: plan.table.root,
            },
            long_value_tree: TreeRoot {
                object_id: plan.long_values.object_id,
                root: plan.long_values.root,
            },
            view_index_tree: TreeRoot {
                object_id: plan.view_index.object_id,
                root: plan.view_index.root,
            },
            mailbox_count: options.mailboxes,
            content_ratio_permille: options.compressibility.permille(),
            record_count: plan.messages,
            next_message_id: plan.messages + 1,
            log_signature,
            creator: edbstress_format::header::creator_field(CREATOR),
            log_required: Generation::NONE,
        };
        write_header(&file, &header)?;
        let mut backend = open_backend(options.backend, options.queue_depth)?;
        let started = Instant::now();
        let total = file_len;
        write_pages(&plan, &file, backend.as_mut(), options, &mut |done| {
            progress(PrepareProgress {
                instance: layout.instance,
                bytes_done: done,
                bytes_total: total,
            })
        })?;
        FileIo::open(&file, options.backend, 0)?.sync(IoClass::OfflineWrite)?;
        let seconds = started.elapsed().as_secs_f64();
        header.state = DbState::Clean;
        header.update_seq += 1;
        write_header(&file, &header)?;
        Ok(PrepareReport {
            instance: layout.instance,
            db_file: layout.db_file.clone(),
            log_dir: layout.log_dir.clone(),
            reused: false,
            page_size: options.page_size.bytes(),
            pages: page_count,
            messages: plan.messages,
            mailboxes: options.mailboxes,
            bytes_written: u64::from(page_count) * options.page_size.bytes() as u64,
            seconds,
            backend: backend.name().to_string(),
            log_note: None,
        })
    })();
    drop(file);
    match result {
        Ok(report) => {
            let state = CheckpointState {
                last_dbtime: BULK_LOAD_DBTIME,
                next_unused_page: plan.first_free_page,
                next_message_id: plan.messages + 1,
            };
            crate::runtime::log::replace_logs(
                &layout.log_dir,
                signature,
                log_signature,
                state,
                options.io_mode,
            )
            .map_err(|source| PrepareError::LogsNotCreated {
                db: layout.db_file.clone(),
                source,
            })?;
            crate::dbfile::sync_dir(layout.db_file.parent().unwrap_or(Path::new(".")));
            Ok(report)
        }
        Err(e) => {
            // We created this file moments ago (O_EXCL); an unfinished one is useless.
            let _ = std::fs::remove_file(&layout.db_file);
            Err(e)
        }
    }
}

/// Streams every data page of the plan to `file`: page-building threads fill
/// `write_len` buffers in parallel while this thread keeps `queue_depth` sequential
/// writes in flight.
pub(super) fn write_pages(
    plan: &BulkLoadPlan,
    file: &DataFile,
    backend: &mut dyn IoBackend,
    options: &PrepareOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<(), PrepareError> {
    let ps = plan.spec().page_size;
    let page_count = plan.spec().page_count;
    let per_chunk = (options.write_len / ps.bytes()).max(1) as u32;
    let chunks = page_count.div_ceil(per_chunk);
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    };
    let depth = backend.depth().max(1);
    let file_id = backend.register(file)?;

    let next_chunk = AtomicU32::new(0);
    let stop = AtomicBool::new(false);
    let (free_tx, free_rx) = mpsc::channel::<AlignedBuf>();
    for _ in 0..depth + threads + 1 {
        free_tx
            .send(AlignedBuf::new(per_chunk as usize * ps.bytes()))
            .ok();
    }
    let free_rx = Mutex::new(free_rx);
    let (built_tx, built_rx) = mpsc::channel::<Result<(u32, AlignedBuf), BulkLoadError>>();

    std::thread::scope(|scope| {
        for _ in 0..threads {
            let built_tx = built_tx.clone();
            let (next_chunk, stop, free_rx) = (&next_chunk, &stop, &free_rx);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let chunk = next_chunk.fetch_add(1, Ordering::Relaxed);
                    if chunk >= chunks {
                        break;
                    }
                    let Ok(mut buf) = free_rx
                        .lock()
                        .map_err(|_| ())
                        .and_then(|rx| rx.recv().map_err(|_| ()))
                    else {
                        break;
                    };
                    let first = 1 + chunk * per_chunk;
                    let last = (first + per_chunk - 1).min(page_count);
                    let mut result = Ok(());
                    for (i, pgno) in (first..=last).enumerate() {
                        result = plan.build_page(
                            Pgno::new(pgno),
                            &mut buf[i * ps.bytes()..(i + 1) * ps.bytes()],
                        );
                        if result.is_err() {
                            break;
                        }
                    }
                    if built_tx.send(result.map(|()| (chunk, buf))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(built_tx);

        let outcome = (|| -> Result<(), PrepareError> {
            let mut completions = Vec::with_capacity(depth);
            let mut written = 0u64;
            let mut received = 0u32;
            while received < chunks || backend.in_flight() > 0 {
                if received < chunks && backend.in_flight() < depth {
                    // Reap what is done without blocking, then wait for the next built buffer.
                    backend.wait(0, &mut completions)?;
                    if completions.is_empty() {
                        let Ok(built) = built_rx.recv() else { break };
                        let (chunk, buf) = built?;
                        received += 1;
                        let first = 1 + chunk * per_chunk;
                        let pages = (page_count - first + 1).min(per_chunk);
                        backend.submit(IoRequest {
                            file: file_id,
                            op: IoOp::Write,
                            offset: edbstress_format::Pgno::new(first).offset(ps),
                            len: pages as usize * ps.bytes(),
                            buf,
                            class: IoClass::DbWrite,
                            instance: 0,
                            tag: u64::from(chunk),
                        })?;
                        backend.flush()?;
                        continue;
                    }
                } else {
                    backend.wait(1, &mut completions)?;
                }
                for c in completions.drain(..) {
                    let first = 1 + c.tag as u32 * per_chunk;
                    let expected = (page_count - first + 1).min(per_chunk) as usize * ps.bytes();
                    let short = |n: usize| {
                        std::io::Error::new(
                            std::io::ErrorKind::WriteZero,
                            format!(
                                "short write: {n} of {expected} bytes (is the filesystem full?)"
                            ),
                        )
                    };
                    let len = c
                        .result
                        .and_then(|n| if n == expected { Ok(n) } else { Err(short(n)) })
                        .map_err(|source| IoError::Io {
                            path: file.path().to_path_buf(),
                            op: "write",
                            offset: c.offset,
                            source,
                        })?;
                    written += len as u64;
                    progress(written);
                    free_tx.send(c.buf).ok();
                }
            }
            if received < chunks {
                return Err(BulkLoadError::Internal {
                    pgno: Pgno::new(1 + received * per_chunk),
                    what: "page builders stopped early".into(),
                }
                .into());
            }
            Ok(())
        })();
        if outcome.is_err() {
            stop.store(true, Ordering::Relaxed);
            // Drain in-flight I/O so buffers return before the scope ends.
            let mut rest = Vec::new();
            while backend.in_flight() > 0 && backend.wait(1, &mut rest).is_ok() {
                rest.clear();
            }
        }
        drop(free_tx);
        outcome
    })
}
