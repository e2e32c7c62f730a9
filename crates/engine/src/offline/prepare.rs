//! Database preparation (`edbstress prepare`): checks what already exists at the
//! instance paths and whether there is room, then creates each missing database by
//! bulk load and initialises its log directory.
//!
//! Safety rules: a file is only ever overwritten or removed when it carries the
//! edbstress signature (the database header magic, or the log file magic); a database
//! left half-written by an interrupted prepare is recognised by its `Creating` state
//! and rebuilt; free space is checked per filesystem before anything is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use edbstress_format::header::{DatabaseHeader, DbState, HeaderError, TreeRoot};
use edbstress_format::log::{
    CheckpointState, DEFAULT_LOG_FILE_LEN, LogPosition, SEGMENT_LEN, log_file_name,
};
use edbstress_format::{PageSize, page_offset};
use edbstress_io::{
    AlignedBuf, BackendKind, DataFile, IoBackend, IoClass, IoError, IoMode, IoOp, IoRequest,
    available_space, filesystem_id, open_backend,
};

use crate::dbfile::{read_header, write_header};
use crate::layout::InstanceLayout;
use crate::offline::bulkload::{
    BULK_LOAD_DBTIME, BulkLoadError, BulkLoadPlan, BulkLoadSpec, DEFAULT_LEAF_FILL, MIN_PAGES,
};
use crate::runtime::content::Compressibility;
use crate::runtime::log::LogIdentity;

/// Creator string stored in every header.
pub const CREATOR: &str = concat!("edbstress ", env!("CARGO_PKG_VERSION"));

/// How to prepare databases.
#[derive(Clone, Debug)]
pub struct PrepareOptions {
    /// Page size of new databases.
    pub page_size: PageSize,
    /// Size of each database file in bytes (header slots included).
    pub database_bytes: u64,
    /// Mailboxes per database.
    pub mailboxes: u32,
    /// Compressibility of page content.
    pub compressibility: Compressibility,
    /// Direct or buffered I/O.
    pub io_mode: IoMode,
    /// I/O backend.
    pub backend: BackendKind,
    /// Rebuild existing edbstress databases whose size or page size differ.
    pub recreate: bool,
    /// Bytes per write.
    pub write_len: usize,
    /// Writes in flight.
    pub queue_depth: usize,
    /// Page-building threads (0 = one per core).
    pub threads: usize,
    /// Seed for the database signature (and so all page content and message sizes):
    /// the same seed prepares the same pages. None: random. The log signature, which
    /// with it identifies the database to its logs, is unique either way.
    pub seed: Option<u64>,
    /// Start a new log stream for a cleanly shut down database whose log directory
    /// holds no log files (the `prepare` command does; a run refuses and names it).
    pub new_log_stream: bool,
}

impl Default for PrepareOptions {
    fn default() -> Self {
        PrepareOptions {
            page_size: PageSize::K32,
            database_bytes: 1 << 30,
            mailboxes: 100,
            compressibility: Compressibility::MAIL,
            io_mode: IoMode::Direct,
            backend: BackendKind::Auto,
            recreate: false,
            write_len: 1 << 20,
            queue_depth: 8,
            threads: 0,
            seed: None,
            new_log_stream: false,
        }
    }
}

impl PrepareOptions {
    /// Data pages of each database (the file minus its two header slots).
    pub fn page_count(&self) -> Result<u32, PrepareError> {
        let ps = self.page_size.bytes() as u64;
        let pages = (self.database_bytes / ps).saturating_sub(2);
        u32::try_from(pages).map_err(|_| PrepareError::Invalid(format!(
            "--database-size {} is too large for {} pages (at most {} pages per database); use a larger --page-size or more --databases",
            human_bytes(self.database_bytes), self.page_size, u32::MAX
        )))
    }

    /// Length of each database file.
    pub fn file_len(&self) -> Result<u64, PrepareError> {
        Ok((u64::from(self.page_count()?) + 2) * self.page_size.bytes() as u64)
    }
}

/// Why preparation failed.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// A configuration value is invalid.
    #[error("{0}")]
    Invalid(String),
    /// A file at an instance path is not ours.
    #[error("refusing to touch {path}: {why}")]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// What was found.
        why: String,
    },
    /// A database at an instance path is damaged (truncated, or no valid header copy);
    /// an integrity problem, reported with exit code 1.
    #[error("{0}")]
    Damaged(String),
    /// An edbstress database exists with another shape.
    #[error(
        "{path} is an edbstress database with {found}, but {wanted} was asked for; pass --recreate to rebuild it, or use another --db-path"
    )]
    Mismatch {
        /// The database.
        path: PathBuf,
        /// What it is.
        found: String,
        /// What was asked.
        wanted: String,
    },
    /// A database needs soft recovery first.
    #[error(
        "{path} was not shut down cleanly and needs recovery first: run `edbstress recover` on it"
    )]
    NeedsRecovery {
        /// The database.
        path: PathBuf,
    },
    /// Not enough free space.
    #[error(
        "not enough free space on the filesystem holding {path}: {needed} needed, {available} available; reduce --database-size or --databases, or use another path"
    )]
    NoSpace {
        /// A path on the filesystem.
        path: PathBuf,
        /// Bytes needed, formatted.
        needed: String,
        /// Bytes available, formatted.
        available: String,
    },
    /// Not enough free space for a run's databases and growing logs.
    #[error(
        "not enough free space on the filesystem holding {path} for the run: {needed} needed (the databases, and logs growing to about the checkpoint depth per instance), {available} available; lower checkpoint_depth, --database-size or --databases, or use another path"
    )]
    NoSpaceForRun {
        /// A path on the filesystem.
        path: PathBuf,
        /// Bytes needed, formatted.
        needed: String,
        /// Bytes available, formatted.
        available: String,
    },
    /// The bulk load could not be planned.
    #[error(transparent)]
    BulkLoad(#[from] BulkLoadError),
    /// An I/O error.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The database was built but its log files could not be created (the log
    /// directory is left without them).
    #[error(
        "{db} is complete, but its log files could not be created: {source}; once that is fixed, run prepare again: it keeps the database and creates its logs"
    )]
    LogsNotCreated {
        /// The finished database.
        db: PathBuf,
        /// Why the logs could not be created.
        #[source]
        source: IoError,
    },
    /// Another edbstress process holds a database.
    #[error(transparent)]
    Locked(#[from] crate::runtime::lock::LockError),
    /// The instance's log directory holds another database's logs.
    #[error(
        "refusing to use the log directory {log_dir} for {db}: it holds the logs of another database ({theirs}), while {db} {ours}; that database may still need them for recovery. Give this instance another --log-path, or, if that database is no longer needed, remove its files with `edbstress clean --db-path ITS_DB_PATH --log-path {log_root}`"
    )]
    LogDirTaken {
        /// The log directory.
        log_dir: PathBuf,
        /// Its root (the --log-path).
        log_root: PathBuf,
        /// The database being prepared.
        db: PathBuf,
        /// What the database being prepared is ("is to be created", its identity).
        ours: String,
        /// Whose logs are there.
        theirs: String,
    },
    /// A cleanly shut down database's log directory holds no logs (a run was asked).
    #[error(
        "{db} was shut down cleanly, but its log directory {log_dir} holds no log files; run `edbstress prepare` with the same --db-path and --log-path: it keeps the database and starts a new log stream for it"
    )]
    LogsMissing {
        /// The database.
        db: PathBuf,
        /// Its log directory.
        log_dir: PathBuf,
    },
}

impl PrepareError {
    /// Whether this is an integrity problem found in existing data (exit code 1)
    /// rather than a usage, configuration or environment error (exit code 2).
    pub fn is_integrity(&self) -> bool {
        matches!(self, PrepareError::Damaged(_))
    }
}

/// What will happen to one instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstanceAction {
    /// Create the database.
    Create,
    /// An edbstress database of the right shape is there: reuse it.
    Reuse,
    /// An edbstress database is there but unfinished or of another shape: rebuild it.
    Rebuild(String),
}

/// The checked plan of a prepare: what happens to each instance.
#[derive(Debug)]
pub struct PreparePlan {
    options: PrepareOptions,
    /// Instances and what happens to each.
    pub instances: Vec<(InstanceLayout, InstanceAction)>,
}

/// Progress of a database being created.
#[derive(Clone, Copy, Debug)]
pub struct PrepareProgress {
    /// Instance being created.
    pub instance: u32,
    /// Bytes written so far for it.
    pub bytes_done: u64,
    /// Bytes it will take.
    pub bytes_total: u64,
}

/// The result for one instance.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PrepareReport {
    /// Instance number.
    pub instance: u32,
    /// Database file.
    pub db_file: PathBuf,
    /// Log directory.
    pub log_dir: PathBuf,
    /// Whether an existing database was reused.
    pub reused: bool,
    /// Page size in bytes.
    pub page_size: usize,
    /// Data pages.
    pub pages: u32,
    /// Messages loaded.
    pub messages: u64,
    /// Mailboxes.
    pub mailboxes: u32,
    /// Bytes written (0 when reused).
    pub bytes_written: u64,
    /// Seconds spent writing.
    pub seconds: f64,
    /// I/O backend used.
    pub backend: String,
    /// What was done to the instance's logs besides the usual, for the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_note: Option<String>,
}

impl PrepareReport {
    /// Write throughput in MB/s (MB = 2^20 bytes).
    pub fn mb_per_sec(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes_written as f64 / 1048576.0 / self.seconds
        } else {
            0.0
        }
    }
}

/// Formats a byte count with a binary unit ("1.5 GiB"); the I/O layer's, so that every
/// message writes sizes alike.
pub use edbstress_io::human_bytes;

/// Bytes the initial log files of an instance take.
const LOG_BYTES: u64 = DEFAULT_LOG_FILE_LEN as u64 + 2 * SEGMENT_LEN as u64;

impl PreparePlan {
    /// Inspects every instance's paths and checks free space; writes nothing.
    pub fn check(
        layouts: Vec<InstanceLayout>,
        options: PrepareOptions,
    ) -> Result<PreparePlan, PrepareError> {
        let page_count = options.page_count()?;
        if page_count < MIN_PAGES {
            return Err(BulkLoadError::TooSmall {
                pages: page_count,
                page_size: options.page_size,
                min_pages: MIN_PAGES,
            }
            .into());
        }
        let mut instances = Vec::new();
        for layout in layouts {
            let (action, identity) = inspect_instance(&layout, &options, page_count)?;
            // A log directory in use is refused with its holder's PID, whatever the
            // database path of the process that holds it.
            crate::runtime::dirlock::ensure_dir_not_held(&layout.log_dir)?;
            check_log_dir(&layout.log_dir)?;
            check_log_owner(&layout, &action, identity, &options)?;
            instances.push((layout, action));
        }
        let plan = PreparePlan { options, instances };
        plan.check_space(0)?;
        Ok(plan)
    }

    /// Checks free space for a run on top of the plan: besides the databases, each
    /// instance's logs grow to about `log_bytes` (with circular logging, the checkpoint
    /// depth plus a margin); the logs already there count towards it.
    pub fn check_run_space(&self, log_bytes: u64) -> Result<(), PrepareError> {
        self.check_space(log_bytes)
    }

    fn check_space(&self, run_log_bytes: u64) -> Result<(), PrepareError> {
        let file_len = self.options.file_len()?;
        // Needed bytes per filesystem; rebuilt files free their old space first.
        let mut needed: BTreeMap<u64, (PathBuf, u64)> = BTreeMap::new();
        for (layout, action) in &self.instances {
            let db_dir = existing_ancestor(&layout.db_file);
            let log_dir = existing_ancestor(&layout.log_dir);
            let mut add = |dir: PathBuf, bytes: u64| -> Result<(), PrepareError> {
                let fs = filesystem_id(&dir)?;
                needed.entry(fs).or_insert((dir, 0)).1 += bytes;
                Ok(())
            };
            match action {
                InstanceAction::Create => add(db_dir, file_len)?,
                InstanceAction::Rebuild(_) => {
                    let old = std::fs::metadata(&layout.db_file)
                        .map(|m| m.len())
                        .unwrap_or(0);
                    add(db_dir, file_len.saturating_sub(old))?
                }
                InstanceAction::Reuse => {}
            }
            if !layout.log_dir.join(log_file_name(1)).exists() {
                add(log_dir, LOG_BYTES.max(run_log_bytes))?;
            } else if run_log_bytes > 0 {
                add(
                    log_dir,
                    run_log_bytes.saturating_sub(dir_bytes(&layout.log_dir)),
                )?;
            }
        }
        for (path, bytes) in needed.into_values() {
            let available = available_space(&path)?;
            if bytes > available && run_log_bytes > 0 {
                return Err(PrepareError::NoSpaceForRun {
                    path,
                    needed: human_bytes(bytes),
                    available: human_bytes(available),
                });
            }
            if bytes > available {
                return Err(PrepareError::NoSpace {
                    path,
                    needed: human_bytes(bytes),
                    available: human_bytes(available),
                });
            }
        }
        Ok(())
    }

    /// The options the plan was checked with.
    pub fn options(&self) -> &PrepareOptions {
        &self.options
    }

    /// Creates (or reuses) every instance in turn.
    pub fn execute(
        &self,
        progress: &mut dyn FnMut(PrepareProgress),
    ) -> Result<Vec<PrepareReport>, PrepareError> {
        let mut reports = Vec::new();
        for (layout, action) in &self.instances {
            if let Some(dir) = layout.db_file.parent() {
                std::fs::create_dir_all(dir).map_err(|e| io_err(dir, "create directory", e))?;
            }
            let _lock = crate::runtime::lock::DatabaseLock::acquire(&layout.db_file)?;
            std::fs::create_dir_all(&layout.log_dir)
                .map_err(|e| io_err(&layout.log_dir, "create directory", e))?;
            let _log_lock = crate::runtime::dirlock::LogDirLock::acquire(
                &layout.log_dir,
                crate::runtime::lock::LockMode::Exclusive,
            )?;
            // Checked again under both locks: nobody can have changed them since.
            let identity = match action {
                InstanceAction::Create => None,
                _ => Some(database_identity(&layout.db_file)?),
            };
            check_log_dir(&layout.log_dir)?;
            check_log_owner(layout, action, identity, &self.options)?;
            let report = match action {
                InstanceAction::Reuse => reuse_instance(layout, &self.options)?,
                InstanceAction::Create | InstanceAction::Rebuild(_) => {
                    if matches!(action, InstanceAction::Rebuild(_)) {
                        // The old database's logs first (check_log_owner found only its
                        // own), so an interrupted rebuild leaves none behind to refuse.
                        crate::runtime::log::remove_our_logs(&layout.log_dir)?;
                        // inspect_instance verified the signature of this file.
                        std::fs::remove_file(&layout.db_file)
                            .map_err(|e| io_err(&layout.db_file, "remove", e))?;
                    }
                    create_instance(layout, &self.options, progress)?
                }
            };
            reports.push(report);
        }
        Ok(reports)
    }
}

fn io_err(path: &Path, op: &'static str, source: std::io::Error) -> IoError {
    IoError::Io {
        path: path.to_path_buf(),
        op,
        offset: 0,
        source,
    }
}

/// Bytes the files directly in `dir` take (0 when it cannot be read).
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The closest existing directory at or above `path` (for free-space checks of files
/// and directories not created yet).
fn existing_ancestor(path: &Path) -> PathBuf {
    let mut p = path.parent().unwrap_or(Path::new("."));
    loop {
        if p.as_os_str().is_empty() {
            return PathBuf::from(".");
        }
        if p.is_dir() {
            return p.to_path_buf();
        }
        match p.parent() {
            Some(parent) => p = parent,
            None => return PathBuf::from("/"),
        }
    }
}

fn bulk_spec(options: &PrepareOptions, page_count: u32, signature: u64) -> BulkLoadSpec {
    BulkLoadSpec {
        page_size: options.page_size,
        page_count,
        mailboxes: options.mailboxes,
        signature,
        compressibility: options.compressibility,
        leaf_fill: DEFAULT_LEAF_FILL,
    }
}

fn inspect_instance(
    layout: &InstanceLayout,
    options: &PrepareOptions,
    page_count: u32,
) -> Result<(InstanceAction, Option<LogIdentity>), PrepareError> {
    let path = &layout.db_file;
    if std::fs::symlink_metadata(path).is_err() {
        return Ok((InstanceAction::Create, None));
    }
    // A database in use looks unclean; name the holder instead.
    crate::runtime::lock::ensure_not_held(path)?;
    let header = match read_header(path, IoMode::Buffered) {
        Ok(sel) => sel.header,
        Err(crate::dbfile::HeaderReadError::Header(HeaderError::NotOurs)) => {
            return Err(PrepareError::NotOurs {
                path: path.clone(),
                why: "it exists and is not an edbstress database (no edbstress signature in its header); move it away or choose another --db-path".into(),
            });
        }
        Err(crate::dbfile::HeaderReadError::Header(HeaderError::BadChecksum)) => {
            // Our signature is no proof of ownership: random bytes with the magic copied
            // in look the same. Neither reused nor overwritten.
            return Err(PrepareError::Damaged(format!(
                "{} is not a valid edbstress database: it carries the edbstress signature but no header copy passes its checksum (bad header checksum); if it was an edbstress database it is damaged: restore it from a good copy, or move it away and run prepare again",
                path.display()
            )));
        }
        Err(crate::dbfile::HeaderReadError::Header(e)) => {
            return Err(PrepareError::NotOurs {
                path: path.clone(),
                why: format!(
                    "its header cannot be read ({e}); if it is a damaged edbstress database, remove it by hand"
                ),
            });
        }
        Err(crate::dbfile::HeaderReadError::Io(e)) => return Err(e.into()),
    };
    // A truncated database is not prepared, whatever its header says; its valid
    // header makes it ours, so --recreate may rebuild it.
    if header.state != DbState::Creating {
        let len = std::fs::metadata(path)
            .map_err(|e| io_err(path, "read the length of", e))?
            .len();
        if let Err(t) = crate::dbfile::check_length(path, len, &header) {
            if options.recreate {
                let identity = LogIdentity {
                    db_signature: header.signature,
                    log_signature: header.log_signature,
                };
                return Ok((
                    InstanceAction::Rebuild(format!(
                        "truncated: the file has {} bytes, its header says {}",
                        t.len, t.expected
                    )),
                    Some(identity),
                ));
            }
            return Err(PrepareError::Damaged(t.to_string()));
        }
    }
    let wanted = format!("{} pages of {}", page_count, options.page_size);
    let found = format!("{} pages of {}", header.page_count, header.page_size);
    let identity = LogIdentity {
        db_signature: header.signature,
        log_signature: header.log_signature,
    };
    let action = match header.state {
        DbState::Creating => Ok(InstanceAction::Rebuild(
            "left unfinished by an interrupted prepare".into(),
        )),
        DbState::DirtyNeedsRecovery => Err(PrepareError::NeedsRecovery { path: path.clone() }),
        // Runs grow databases: a grown database of the requested size is still ours to reuse.
        DbState::Clean
            if header.page_size == options.page_size && header.page_count >= page_count =>
        {
            Ok(InstanceAction::Reuse)
        }
        DbState::Clean if options.recreate => Ok(InstanceAction::Rebuild(format!(
            "it has {found}, {wanted} asked"
        ))),
        DbState::Clean => Err(PrepareError::Mismatch {
            path: path.clone(),
            found,
            wanted,
        }),
    }?;
    Ok((action, Some(identity)))
}

/// The identity of the existing database at `path`.
fn database_identity(path: &Path) -> Result<LogIdentity, PrepareError> {
    let h = read_header(path, IoMode::Buffered)
        .map_err(|e| match e {
            crate::dbfile::HeaderReadError::Io(e) => PrepareError::Io(e),
            crate::dbfile::HeaderReadError::Header(e) => {
                PrepareError::Invalid(format!("{}: {e}", path.display()))
            }
        })?
        .header;
    Ok(LogIdentity {
        db_signature: h.signature,
        log_signature: h.log_signature,
    })
}

/// One ownership rule for log directories: an instance's log directory holds only its
/// own database's logs. A database to be created (`identity` None) gets an empty one;
/// an existing one only its own. Another database's logs are never replaced (they may
/// be all that can recover it). A cleanly shut down database with no logs at all gets
/// a new log stream from `prepare`; a run is told to prepare first.
fn check_log_owner(
    layout: &InstanceLayout,
    action: &InstanceAction,
    identity: Option<LogIdentity>,
    options: &PrepareOptions,
) -> Result<(), PrepareError> {
    let owners = crate::runtime::log::log_dir_owners(&layout.log_dir);
    let taken = |theirs: String| PrepareError::LogDirTaken {
        log_dir: layout.log_dir.clone(),
        log_root: layout
            .log_dir
            .parent()
            .unwrap_or(&layout.log_dir)
            .to_path_buf(),
        db: layout.db_file.clone(),
        ours: identity.map_or_else(|| "is a new database".to_string(), |id| format!("has {id}")),
        theirs,
    };
    let others = match identity {
        None => owners.identities.clone(),
        Some(ours) => owners.others(ours),
    };
    if let Some(other) = others.first() {
        return Err(taken(other.to_string()));
    }
    if identity.is_none() && !owners.files.is_empty() {
        return Err(taken(format!(
            "unreadable log headers, e.g. {}",
            owners.files[0].display()
        )));
    }
    if *action == InstanceAction::Reuse && owners.files.is_empty() && !options.new_log_stream {
        let header = read_header(&layout.db_file, IoMode::Buffered)
            .map_err(|e| PrepareError::Invalid(format!("{}: {e}", layout.db_file.display())))?
            .header;
        // Never run: its first log is what prepare makes anyway.
        if header.checkpoint != INITIAL_CHECKPOINT {
            return Err(PrepareError::LogsMissing {
                db: layout.db_file.clone(),
                log_dir: layout.log_dir.clone(),
            });
        }
    }
    Ok(())
}

/// Where a new database's log starts.
const INITIAL_CHECKPOINT: LogPosition = LogPosition {
    generation: 1,
    segment: 1,
    offset: 0,
};

/// Log files in `dir` must be ours before anything is written there.
fn check_log_dir(dir: &Path) -> Result<(), PrepareError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if crate::runtime::log::is_log_file_name(&name)
            && !crate::runtime::log::is_our_log_file(&entry.path())
        {
            return Err(PrepareError::NotOurs {
                path: entry.path(),
                why: "it is in an instance log directory but is not an edbstress log or checkpoint file; move it away or choose another --log-path".into(),
            });
        }
    }
    Ok(())
}

fn reuse_instance(
    layout: &InstanceLayout,
    options: &PrepareOptions,
) -> Result<PrepareReport, PrepareError> {
    let sel = read_header(&layout.db_file, IoMode::Buffered).map_err(|e| match e {
        crate::dbfile::HeaderReadError::Io(e) => PrepareError::Io(e),
        crate::dbfile::HeaderReadError::Header(e) => {
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
            h.log_required = 0;
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
fn fresh_signature(salt: &Path) -> u64 {
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

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Creates one database by bulk load, then its log directory. The database file is
/// removed again if anything fails before it is complete.
fn create_instance(
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
                generation: 1,
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
            mailbox_count: options.mailboxes,
            content_ratio_permille: options.compressibility.permille(),
            record_count: plan.messages,
            next_message_id: plan.messages + 1,
            log_signature,
            creator: edbstress_format::header::creator_field(CREATOR),
            log_required: 0,
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
        file.sync_data()?;
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
fn write_pages(
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
                        result =
                            plan.build_page(pgno, &mut buf[i * ps.bytes()..(i + 1) * ps.bytes()]);
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
                            offset: page_offset(first, ps),
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
                    pgno: 1 + received * per_chunk,
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
