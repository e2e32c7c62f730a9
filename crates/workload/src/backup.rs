//! The DatabaseBackup test (product.md §2): every database file read front to back in
//! 256 KiB reads, all databases at once, optionally copied to a backup directory —
//! Jetstress's "Database Backup Statistics" (MB read/s per database and in total).
//!
//! Each database gets its own thread and I/O backend with a few reads in flight (class
//! `BackupRead`). Every page is verified as it is read: a backup of a corrupt database
//! is a failed backup, so damaged pages are counted (all-zero pages, never written,
//! are fine). Copies are new files named like the source plus `.bak`; nothing is ever
//! overwritten, and a copy this run could not finish is removed again.
//!
//! MB means 1,048,576 bytes throughout.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use edbstress_engine::DatabaseLock;
use edbstress_engine::InstanceLayout;
use edbstress_engine::{HeaderReadError, read_header_from, sync_dir};
use edbstress_engine::{SequentialReadOptions, read_sequentially};
use edbstress_format::InstanceId;
use edbstress_format::checksum::{PageVerdict, verify_page};
use edbstress_format::header::{DatabaseHeader, HeaderError};
use edbstress_format::{PageSize, Pgno};
use edbstress_io::ByteSize;
use edbstress_io::blocking::FileIo;
use edbstress_io::{
    Access, AlignedBuf, BackendKind, DataFile, IoClass, IoError, IoMode, IoStats, MAX_DEPTH,
    available_space,
};
use serde::Serialize;

use crate::config::RunConfig;
use crate::per_instance::run_each;

/// Bytes in a MB of the backup figures.
const MB: f64 = 1_048_576.0;

/// How to back up.
#[derive(Clone, Debug, PartialEq)]
pub struct BackupOptions {
    /// Bytes per read (Jetstress: 256 KiB); rounded down to whole pages, at least one.
    pub read_len: usize,
    /// Reads in flight per database.
    pub queue_depth: usize,
    /// Direct or buffered I/O (reads and copy writes).
    pub io_mode: IoMode,
    /// I/O backend of the reads.
    pub backend: BackendKind,
    /// Also copy every database into this directory (created if missing).
    pub backup_path: Option<PathBuf>,
}

impl Default for BackupOptions {
    fn default() -> Self {
        BackupOptions {
            read_len: 256 << 10,
            queue_depth: 4,
            io_mode: IoMode::Direct,
            backend: BackendKind::Auto,
            backup_path: None,
        }
    }
}

impl BackupOptions {
    /// The backup a run configuration asks for (Jetstress's read size and depth).
    pub fn from_config(config: &RunConfig) -> BackupOptions {
        BackupOptions {
            io_mode: config.io_mode,
            backend: config.backend,
            backup_path: config.backup_path.clone(),
            ..BackupOptions::default()
        }
    }
}

/// What the backup of one database did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BackupInstanceReport {
    /// Instance number.
    pub instance: InstanceId,
    /// The database file.
    pub db_file: PathBuf,
    /// Bytes read (the file's length when complete).
    pub bytes_read: u64,
    /// Seconds from the first read to the last (copy writes included).
    pub seconds: f64,
    /// Read throughput, MB/s (MB = 1,048,576 bytes).
    pub mb_per_sec: f64,
    /// Pages whose checksum does not match (including unreadable pages and a torn
    /// page at the end of the file); all-zero pages are not counted.
    pub bad_pages: u64,
    /// The finished copy, when copying.
    pub copy: Option<PathBuf>,
    /// Stopped before the end of the file: a partial result (and no copy).
    pub stopped: bool,
}

impl BackupInstanceReport {
    /// MB read (MB = 1,048,576 bytes).
    pub fn mb_read(&self) -> f64 {
        self.bytes_read as f64 / MB
    }

    /// Whether the database was read completely and every page was sound.
    pub fn passed(&self) -> bool {
        !self.stopped && self.bad_pages == 0
    }
}

/// Jetstress's "MB read/sec per database": the mean of the databases' rates.
pub fn mb_per_sec_per_database(reports: &[BackupInstanceReport]) -> f64 {
    if reports.is_empty() {
        return 0.0;
    }
    total_mb_per_sec(reports) / reports.len() as f64
}

/// Jetstress's "MB read/sec total per server": the sum of the databases' rates (they
/// are read at the same time).
pub fn total_mb_per_sec(reports: &[BackupInstanceReport]) -> f64 {
    reports.iter().map(|r| r.mb_per_sec).sum()
}

/// Why a backup could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// An option is out of range.
    #[error("{0}")]
    Invalid(String),
    /// A database file is not an edbstress database.
    #[error(
        "{path} is not an edbstress database ({why}); back up databases made by `edbstress prepare`"
    )]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// What was found.
        why: String,
    },
    /// A copy would overwrite a file.
    #[error(
        "{path} already exists and a backup never overwrites; move or delete it, or choose another backup path"
    )]
    CopyExists {
        /// The existing file.
        path: PathBuf,
    },
    /// The backup path is not a directory.
    #[error("backup path {path} is not a directory; give a directory to put the copies in")]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The copies do not fit.
    #[error(
        "the backup needs {} in {path} but only {} is free; free space or choose another backup path",
        needed.approx(),
        available.approx()
    )]
    NoSpace {
        /// The backup directory.
        path: PathBuf,
        /// Bytes needed.
        needed: ByteSize,
        /// Bytes free.
        available: ByteSize,
    },
    /// A read or write failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Another edbstress process holds a database.
    #[error(transparent)]
    Locked(#[from] edbstress_engine::LockError),
}

/// A database opened for backup.
struct Source<'a> {
    layout: &'a InstanceLayout,
    file: DataFile,
    page_size: PageSize,
    len: u64,
    /// Keeps other processes from changing the database while it is copied.
    _lock: DatabaseLock,
}

/// Backs up every database of `layouts` at once. `progress` receives (instance, bytes
/// read, file length) as reads complete, from the databases' threads. A set `stop`
/// ends the reads early: the reports are then partial and flagged `stopped`, and
/// unfinished copies are removed. Returns a report per database, in `layouts` order,
/// and the `BackupRead` I/O of all of them.
///
/// On error no copy made by this call is left behind.
pub fn run_backup(
    layouts: &[InstanceLayout],
    options: &BackupOptions,
    stop: &AtomicBool,
    progress: &(dyn Fn(u32, u64, u64) + Sync),
) -> Result<(Vec<BackupInstanceReport>, IoStats), BackupError> {
    check_options(options)?;
    let sources = layouts
        .iter()
        .map(|layout| open_source(layout, options.io_mode))
        .collect::<Result<Vec<_>, _>>()?;
    let copies = match &options.backup_path {
        Some(dir) => create_copies(dir, &sources, options.io_mode)?,
        None => sources.iter().map(|_| None).collect(),
    };
    let results = run_each(
        sources.iter().zip(&copies),
        |(source, copy), abort| back_up_one(source, copy.as_ref(), options, stop, abort, progress),
        || BackupError::Invalid("a backup thread panicked; please report this as a bug".into()),
    );
    let mut reports = Vec::with_capacity(results.len());
    let mut stats = IoStats::new();
    let mut first_error = None;
    for result in results {
        match result {
            Ok((report, io)) => {
                stats.merge(&io);
                reports.push(report);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        for (path, _) in copies.iter().flatten() {
            let _ = std::fs::remove_file(path);
        }
        return Err(e);
    }
    Ok((reports, stats))
}

fn check_options(options: &BackupOptions) -> Result<(), BackupError> {
    if options.read_len == 0 || options.read_len % 4096 != 0 {
        return Err(BackupError::Invalid(format!(
            "backup read size {} bytes must be a positive multiple of 4 KiB (Jetstress reads 256 KiB)",
            options.read_len
        )));
    }
    if options.queue_depth == 0 || options.queue_depth > MAX_DEPTH {
        return Err(BackupError::Invalid(format!(
            "backup queue depth {} must be between 1 and {MAX_DEPTH}",
            options.queue_depth
        )));
    }
    Ok(())
}

fn open_source(layout: &InstanceLayout, io_mode: IoMode) -> Result<Source<'_>, BackupError> {
    let path = &layout.db_file;
    let lock = DatabaseLock::acquire(path)?;
    let file = DataFile::open(path, io_mode, Access::ReadOnly)?;
    let not_ours = |why: String| BackupError::NotOurs {
        path: path.clone(),
        why,
    };
    let header = match read_header_from(&file) {
        Ok(selection) => selection.header,
        Err(HeaderReadError::Io(e)) => return Err(e.into()),
        Err(HeaderReadError::Header(HeaderError::NotOurs | HeaderError::Uninitialized)) => {
            return Err(not_ours("no edbstress signature in its header".into()));
        }
        Err(HeaderReadError::Header(e)) => return Err(not_ours(e.to_string())),
    };
    let len = file.len()?;
    Ok(Source {
        layout,
        file,
        page_size: header.page_size,
        len,
        _lock: lock,
    })
}

/// Creates the (empty, preallocated) copy of every source in `dir`, after checking that
/// none exists and that all fit. On error, removes the copies it created.
fn create_copies(
    dir: &Path,
    sources: &[Source<'_>],
    io_mode: IoMode,
) -> Result<Vec<Option<(PathBuf, DataFile)>>, BackupError> {
    if dir.exists() && !dir.is_dir() {
        return Err(BackupError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }
    std::fs::create_dir_all(dir).map_err(|e| IoError::Io {
        path: dir.to_path_buf(),
        op: "create directory",
        offset: 0,
        source: e,
    })?;
    let mut paths: Vec<PathBuf> = Vec::with_capacity(sources.len());
    for source in sources {
        let path = copy_path(dir, &source.layout.db_file)?;
        if paths.contains(&path) {
            return Err(BackupError::Invalid(format!(
                "two databases would be copied to {}; give databases distinct file names",
                path.display()
            )));
        }
        // Checked for every copy before any is created: a refused backup leaves nothing.
        if path.symlink_metadata().is_ok() {
            return Err(BackupError::CopyExists { path });
        }
        paths.push(path);
    }
    let needed: u64 = sources.iter().map(|s| s.len).sum();
    let available = available_space(dir)?;
    if needed > available {
        return Err(BackupError::NoSpace {
            path: dir.to_path_buf(),
            needed: ByteSize(needed),
            available: ByteSize(available),
        });
    }
    let mut copies: Vec<Option<(PathBuf, DataFile)>> = Vec::with_capacity(sources.len());
    let remove_made = |copies: &[Option<(PathBuf, DataFile)>]| {
        for (made, _) in copies.iter().flatten() {
            let _ = std::fs::remove_file(made);
        }
    };
    for (source, path) in sources.iter().zip(paths) {
        match DataFile::create_new(&path, io_mode) {
            Ok(file) => {
                let allocated = file.allocate(source.len);
                copies.push(Some((path, file)));
                if let Err(e) = allocated {
                    remove_made(&copies);
                    return Err(e.into());
                }
            }
            Err(e) => {
                remove_made(&copies);
                return Err(match e {
                    IoError::AlreadyExists { path } => BackupError::CopyExists { path },
                    e => e.into(),
                });
            }
        }
    }
    sync_dir(dir);
    Ok(copies)
}

/// `dir/<file name of db_file>.bak`.
fn copy_path(dir: &Path, db_file: &Path) -> Result<PathBuf, BackupError> {
    let name = db_file.file_name().ok_or_else(|| {
        BackupError::Invalid(format!(
            "database path {} has no file name",
            db_file.display()
        ))
    })?;
    let mut name = name.to_os_string();
    name.push(".bak");
    Ok(dir.join(name))
}

/// Whether the page-sized `page` at file offset `offset` is sound: a header copy that
/// decodes, a data page whose checksum matches, or all zero (never written).
fn page_is_sound(page: &[u8], offset: u64, page_size: PageSize) -> bool {
    let ps = page_size.bytes() as u64;
    if offset < 2 * ps {
        return DatabaseHeader::decode(page).is_ok();
    }
    matches!(
        verify_page(page, Pgno::new((offset / ps - 1) as u32)),
        PageVerdict::Valid | PageVerdict::Uninitialized
    )
}

fn back_up_one(
    source: &Source<'_>,
    copy: Option<&(PathBuf, DataFile)>,
    options: &BackupOptions,
    stop: &AtomicBool,
    abort: &AtomicBool,
    progress: &(dyn Fn(u32, u64, u64) + Sync),
) -> Result<(BackupInstanceReport, IoStats), BackupError> {
    let started = Instant::now();
    let instance = source.layout.instance;
    let ps = source.page_size.bytes();
    // A torn last page (not a whole page) is not read, and counted bad.
    let end = source.len - source.len % ps as u64;
    let mut bad_pages = u64::from(source.len % ps as u64 != 0);
    let read_options = SequentialReadOptions {
        backend: options.backend,
        read_len: (options.read_len / ps).max(1) * ps,
        queue_depth: options.queue_depth,
        class: IoClass::BackupRead,
        instance,
    };
    // The copy is written through a backend of its own, each write one request of
    // class BackupWrite, from a page-aligned staging buffer.
    let mut writer = match copy {
        Some((_, file)) => Some((
            FileIo::open(file, options.backend, instance.get())?,
            AlignedBuf::try_new(read_options.read_len)?,
        )),
        None => None,
    };
    let mut done = 0u64;
    let result = read_sequentially(
        &source.file,
        0..end,
        &read_options,
        &|| stop.load(Ordering::Relaxed) || abort.load(Ordering::Relaxed),
        &mut |chunk| {
            let whole = chunk.data.len() - chunk.data.len() % ps;
            let data = &chunk.data[..whole];
            for (i, page) in data.chunks_exact(ps).enumerate() {
                if !page_is_sound(page, chunk.offset + (i * ps) as u64, source.page_size) {
                    bad_pages += 1;
                }
            }
            if whole < chunk.wanted {
                if let Some((path, _)) = copy {
                    return Err(IoError::Io {
                        path: source.layout.db_file.clone(),
                        op: "read",
                        offset: chunk.offset + whole as u64,
                        source: std::io::Error::other(format!(
                            "the read failed or came back short, so the copy {} would be incomplete",
                            path.display()
                        )),
                    });
                }
                bad_pages += (chunk.wanted - whole).div_ceil(ps) as u64;
            }
            if let Some((io, staging)) = &mut writer {
                if staging.len() < data.len() {
                    *staging = AlignedBuf::try_new(data.len())?;
                }
                staging[..data.len()].copy_from_slice(data);
                io.write_all(
                    IoClass::BackupWrite,
                    staging,
                    data.len(),
                    chunk.offset,
                    false,
                )?;
            }
            done += whole as u64;
            progress(u32::from(instance), done, end);
            Ok(())
        },
    );
    let summary = match result {
        Ok(summary) => summary,
        Err(e) => {
            if let Some((path, _)) = copy {
                let _ = std::fs::remove_file(path);
            }
            return Err(e.into());
        }
    };
    let copy = match (copy, &mut writer) {
        (Some((path, _)), Some((io, _))) if !summary.stopped => {
            io.sync(IoClass::BackupWrite)?;
            Some(path.clone())
        }
        (Some((path, _)), _) => {
            // Unfinished: it must not pass for a backup.
            let _ = std::fs::remove_file(path);
            None
        }
        (None, _) => None,
    };
    let seconds = started.elapsed().as_secs_f64();
    let report = BackupInstanceReport {
        instance,
        db_file: source.layout.db_file.clone(),
        bytes_read: summary.bytes_read,
        seconds,
        mb_per_sec: if seconds > 0.0 {
            summary.bytes_read as f64 / MB / seconds
        } else {
            0.0
        },
        bad_pages,
        copy,
        stopped: summary.stopped,
    };
    let mut stats = summary.stats;
    if let Some((io, _)) = &writer {
        stats.merge(io.stats());
    }
    Ok((report, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(mb_per_sec: f64) -> BackupInstanceReport {
        BackupInstanceReport {
            instance: InstanceId::new(1),
            db_file: PathBuf::from("db"),
            bytes_read: 0,
            seconds: 1.0,
            mb_per_sec,
            bad_pages: 0,
            copy: None,
            stopped: false,
        }
    }

    /// The reference ESRP report's eight databases give its summary figures
    /// (30.846 MB/s per database, 246.77 in total).
    #[test]
    fn summary_rates_match_the_reference_report() {
        let rates = [31.17, 30.69, 28.71, 28.68, 29.54, 32.20, 34.40, 31.38];
        let reports: Vec<_> = rates.into_iter().map(report).collect();
        assert!((total_mb_per_sec(&reports) - 246.77).abs() < 0.005);
        assert!((mb_per_sec_per_database(&reports) - 30.846).abs() < 0.0005);
        assert_eq!(mb_per_sec_per_database(&[]), 0.0);
    }

    #[test]
    fn copies_are_named_like_the_source_plus_bak() {
        assert_eq!(
            copy_path(Path::new("/b"), Path::new("/d/edbstress000.edb")).unwrap(),
            PathBuf::from("/b/edbstress000.edb.bak")
        );
    }

    #[test]
    fn options_out_of_range_are_refused() {
        for options in [
            BackupOptions {
                read_len: 1000,
                ..BackupOptions::default()
            },
            BackupOptions {
                queue_depth: 0,
                ..BackupOptions::default()
            },
        ] {
            let e = run_backup(&[], &options, &AtomicBool::new(false), &|_, _, _| {});
            assert!(matches!(e, Err(BackupError::Invalid(_))), "{e:?}");
        }
    }
}
