//! Database preparation (`edbstress prepare`): checks what already exists at the
//! instance paths and whether there is room, then creates each missing database by
//! bulk load and initialises its log directory.
//!
//! Safety rules: a file is only ever overwritten or removed when it carries the
//! edbstress signature (the database header magic, or the log file magic); a database
//! left half-written by an interrupted prepare is recognised by its `Creating` state
//! and rebuilt; free space is checked per filesystem before anything is written.
//!
//! This file plans (options, the inspection of each instance's paths, space checks);
//! `create` writes what the plan decided.

mod create;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use edbstress_format::Generation;
use edbstress_format::InstanceId;
use edbstress_format::PageSize;
use edbstress_format::header::{DbState, HeaderError};
use edbstress_format::log::{DEFAULT_LOG_FILE_LEN, LogPosition, SEGMENT_LEN, log_file_name};
use edbstress_io::{BackendKind, IoError, IoMode, available_space, filesystem_id};

use crate::dbheader::read_header;
use crate::layout::InstanceLayout;
use crate::offline::bulkload::{BulkLoadError, MIN_PAGES};
use crate::runtime::content::Compressibility;
use crate::runtime::log::LogIdentity;

use self::create::{create_instance, reuse_instance};

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
        u32::try_from(pages).map_err(|_| {
            // 32 KiB is the largest page: advising a larger one would send the user in
            // a circle.
            let larger = if self.page_size.bytes() < 32 * 1024 {
                ", a larger --page-size (up to 32KiB)"
            } else {
                ""
            };
            PrepareError::Invalid(format!(
                "--database-size {} is too large for {} pages (at most {} pages, {} per database); use a smaller --database-size{larger} or more --databases",
                ByteSize(self.database_bytes).approx(),
                self.page_size,
                u32::MAX,
                ByteSize((u64::from(u32::MAX) + 2) * ps).approx()
            ))
        })
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
    /// An edbstress database of another format version exists.
    #[error(
        "{path} is an edbstress database of format version {found}; this build uses version {} (it adds the view index), so the database cannot be used as it is: rebuild it with `edbstress prepare --recreate` and the same --db-path and --log-path, or remove it with `edbstress clean --db-path DIR --log-path DIR` and prepare again",
        edbstress_format::header::FORMAT_VERSION
    )]
    OldFormat {
        /// The database.
        path: PathBuf,
        /// Its format version.
        found: u32,
    },
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
        "not enough free space on the filesystem holding {path}: {} needed, {} available; reduce --database-size or --databases, or use another path",
        needed.approx(),
        available.approx()
    )]
    NoSpace {
        /// A path on the filesystem.
        path: PathBuf,
        /// Bytes needed.
        needed: ByteSize,
        /// Bytes available.
        available: ByteSize,
    },
    /// Not enough free space for a run's databases, their growth and growing logs.
    #[error(
        "not enough free space on the filesystem holding {path} for the run: {} needed (the databases, the growth expected of them over the run, and logs growing to about the checkpoint depth per instance), {} available; shorten --duration, lower the target, checkpoint_depth, --database-size or --databases, or use another path",
        needed.approx(),
        available.approx()
    )]
    NoSpaceForRun {
        /// A path on the filesystem.
        path: PathBuf,
        /// Bytes needed.
        needed: ByteSize,
        /// Bytes available.
        available: ByteSize,
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
    pub instance: InstanceId,
    /// Bytes written so far for it.
    pub bytes_done: u64,
    /// Bytes it will take.
    pub bytes_total: u64,
}

/// The result for one instance.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PrepareReport {
    /// Instance number.
    pub instance: InstanceId,
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

use edbstress_io::ByteSize;

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
            if let Some(dir) = layout.db_file.parent() {
                check_directory_path(dir, "--db-path")?;
            }
            check_directory_path(&layout.log_dir, "--log-path")?;
            let (action, identity) = inspect_instance(&layout, &options, page_count)?;
            // A log directory in use is refused with its holder's PID, whatever the
            // database path of the process that holds it.
            crate::runtime::dirlock::ensure_dir_not_held(&layout.log_dir)?;
            check_log_dir(&layout.log_dir)?;
            check_log_owner(&layout, &action, identity, &options)?;
            instances.push((layout, action));
        }
        let plan = PreparePlan { options, instances };
        plan.check_space(0, 0)?;
        Ok(plan)
    }

    /// Checks free space for a run on top of the plan: besides the databases, each
    /// instance's logs grow to about `log_bytes` (with circular logging, the checkpoint
    /// depth plus a margin); the logs already there count towards it; and each database
    /// grows by about `db_growth_bytes` over the run (inserts outnumber deletes).
    pub fn check_run_space(
        &self,
        log_bytes: u64,
        db_growth_bytes: u64,
    ) -> Result<(), PrepareError> {
        self.check_space(log_bytes, db_growth_bytes)
    }

    fn check_space(&self, run_log_bytes: u64, db_growth_bytes: u64) -> Result<(), PrepareError> {
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
            if db_growth_bytes > 0 {
                add(existing_ancestor(&layout.db_file), db_growth_bytes)?;
            }
            if !layout
                .log_dir
                .join(log_file_name(Generation::FIRST))
                .exists()
            {
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
            // The message names the directory as an absolute path: "." or "db" says
            // nothing once the reader is elsewhere.
            let path = std::path::absolute(&path).unwrap_or(path);
            if bytes > available && (run_log_bytes > 0 || db_growth_bytes > 0) {
                return Err(PrepareError::NoSpaceForRun {
                    path,
                    needed: ByteSize(bytes),
                    available: ByteSize(available),
                });
            }
            if bytes > available {
                return Err(PrepareError::NoSpace {
                    path,
                    needed: ByteSize(bytes),
                    available: ByteSize(available),
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

/// Refuses a directory path one of whose parts is a file (a `--db-path` naming a
/// file), before anything is created: creating the directory would fail with a bare
/// "File exists".
fn check_directory_path(dir: &Path, flag: &str) -> Result<(), PrepareError> {
    for part in dir.ancestors().filter(|p| !p.as_os_str().is_empty()) {
        match std::fs::metadata(part) {
            Ok(meta) if meta.is_dir() => return Ok(()),
            Ok(_) => {
                return Err(PrepareError::Invalid(format!(
                    "{flag}: {} is a file, not a directory; give a directory for {flag} (edbstress creates it when it is missing)",
                    part.display()
                )));
            }
            // Missing parts are created; other errors are reported where they occur.
            Err(_) => continue,
        }
    }
    Ok(())
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
        Err(crate::dbheader::HeaderReadError::Header(HeaderError::NotOurs)) => {
            return Err(PrepareError::NotOurs {
                path: path.clone(),
                why: "it exists and is not an edbstress database (no edbstress signature in its header); move it away or choose another --db-path".into(),
            });
        }
        Err(crate::dbheader::HeaderReadError::Header(HeaderError::BadChecksum)) => {
            // Our signature is no proof of ownership: random bytes with the magic copied
            // in look the same. Neither reused nor overwritten.
            return Err(PrepareError::Damaged(format!(
                "{} is not a valid edbstress database: it carries the edbstress signature but no header copy passes its checksum (bad header checksum); if it was an edbstress database it is damaged: restore it from a good copy, or move it away and run prepare again",
                path.display()
            )));
        }
        Err(crate::dbheader::HeaderReadError::Header(HeaderError::UnsupportedVersion {
            found,
            signature,
            log_signature,
        })) => {
            // Ours (magic and checksum), made by another release: never used as it is.
            let identity = LogIdentity {
                db_signature: signature,
                log_signature,
            };
            if options.recreate {
                return Ok((
                    InstanceAction::Rebuild(format!(
                        "it has database format version {found}, this build uses {}",
                        edbstress_format::header::FORMAT_VERSION
                    )),
                    Some(identity),
                ));
            }
            return Err(PrepareError::OldFormat {
                path: path.clone(),
                found,
            });
        }
        Err(crate::dbheader::HeaderReadError::Header(e)) => {
            return Err(PrepareError::NotOurs {
                path: path.clone(),
                why: format!(
                    "its header cannot be read ({e}); if it is a damaged edbstress database, remove it by hand"
                ),
            });
        }
        Err(crate::dbheader::HeaderReadError::Io(e)) => return Err(e.into()),
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
    let h = match read_header(path, IoMode::Buffered) {
        Ok(sel) => sel.header,
        // A database of another format version, being rebuilt.
        Err(crate::dbheader::HeaderReadError::Header(HeaderError::UnsupportedVersion {
            signature,
            log_signature,
            ..
        })) => {
            return Ok(LogIdentity {
                db_signature: signature,
                log_signature,
            });
        }
        Err(crate::dbheader::HeaderReadError::Io(e)) => return Err(PrepareError::Io(e)),
        Err(crate::dbheader::HeaderReadError::Header(e)) => {
            return Err(PrepareError::Invalid(format!("{}: {e}", path.display())));
        }
    };
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
    generation: Generation::FIRST,
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
