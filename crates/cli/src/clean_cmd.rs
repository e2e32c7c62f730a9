//! `edbstress clean`: removes what edbstress made and nothing else.
//!
//! A database goes only when its name is `edbstressNNN.edb` and its header carries our
//! signature; a log directory's files only when their names are log, checkpoint or
//! next-generation names and they carry our log signature; a run directory's files only
//! when the directory holds a `results.json` we wrote (or, for a killed run, a
//! `test.log` opening with a run's first line) and the file names are ones a run
//! writes. Directories are removed only when nothing else is left in them. Databases
//! and log directories another process holds (their locks) stop the whole clean before
//! anything is removed; a log directory holding another database's logs than the one
//! of its number under the database paths is left alone. Clean never leaves the
//! directories it was given: symbolic links are neither followed nor descended into.

use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use edbstress_engine::log::{LogIdentity, is_log_file_name, is_our_log_file, log_dir_owners};
use edbstress_engine::{
    DatabaseLock, LOCK_SUFFIX, LockError, LockMode, ensure_not_held, is_lock_file_content,
};
use edbstress_engine::{HeaderReadError, read_header};
use edbstress_engine::{LogDirLock, ensure_dir_not_held};
use edbstress_engine::{discover_log_dirs, parse_db_file_name};
use edbstress_format::header::HeaderError;
use edbstress_io::IoMode;
use edbstress_report::export::read_results;
use edbstress_report::run_files;

use crate::common::{CommandError, PathArgs};

/// Files a run writes into its run directory (besides interrupted `.edbstress-*.tmp`).
const RUN_FILES: &[&str] = run_files::ALL;

/// Arguments of `edbstress clean`.
#[derive(Args, Debug)]
pub struct CleanArgs {
    #[command(flatten)]
    paths: PathArgs,
    /// Also remove run directories (those holding an edbstress results.json) under DIR.
    #[arg(long, value_name = "DIR")]
    results_dir: Option<PathBuf>,
    /// Only list what would be removed.
    #[arg(long)]
    dry_run: bool,
    /// Do not ask for confirmation (required when not on a terminal).
    #[arg(long)]
    yes: bool,
}

/// What clean will do.
#[derive(Debug, Default)]
struct CleanPlan {
    /// Databases, each removed under its lock.
    databases: Vec<PathBuf>,
    /// Other files to remove (log files, run files, stale lock files).
    files: Vec<PathBuf>,
    /// Directories to remove if empty afterwards.
    dirs: Vec<PathBuf>,
    /// Instance log directories, locked while their files are removed.
    log_dirs: Vec<PathBuf>,
    /// Paths left alone, with the reason.
    skipped: Vec<(PathBuf, String)>,
}

impl CleanPlan {
    fn skip(&mut self, path: &Path, why: impl Into<String>) {
        self.skipped.push((path.to_path_buf(), why.into()));
    }

    fn is_empty(&self) -> bool {
        self.databases.is_empty() && self.files.is_empty() && self.dirs.is_empty()
    }
}

/// Runs `edbstress clean`.
pub fn run(args: CleanArgs) -> Result<ExitCode, CommandError> {
    let explicit_db = !args.paths.db_paths.is_empty();
    let explicit_log = !args.paths.log_paths.is_empty();
    let db_paths = args.paths.db_paths_or_default();
    let log_paths = args.paths.log_paths_or_default();
    let mut plan = CleanPlan::default();
    for dir in &db_paths {
        if let Some(entries) = list_dir(dir, explicit_db, "--db-path")? {
            plan_databases(dir, &entries, &mut plan)?;
        }
    }
    for root in &log_paths {
        if list_dir(root, explicit_log, "--log-path")?.is_some() {
            plan_log_dirs(root, &db_paths, &mut plan)?;
        }
    }
    if let Some(results_dir) = &args.results_dir {
        if let Some(entries) = list_dir(results_dir, true, "--results-dir")? {
            plan_run_dirs(&entries, &mut plan);
        }
    }
    print_plan(&plan, args.dry_run);
    if plan.is_empty() {
        outln!("nothing to remove");
        return Ok(ExitCode::SUCCESS);
    }
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    if !args.yes && !confirm()? {
        outln!("nothing removed");
        return Ok(ExitCode::SUCCESS);
    }
    execute(&plan)?;
    Ok(ExitCode::SUCCESS)
}

/// The entries of `dir`, or None when it does not exist and was not named explicitly.
fn list_dir(dir: &Path, explicit: bool, flag: &str) -> Result<Option<Vec<PathBuf>>, CommandError> {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut paths = entries
                .map(|e| e.map(|e| e.path()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| {
                    CommandError::Usage(format!("cannot list {flag} {}: {e}", dir.display()))
                })?;
            paths.sort();
            Ok(Some(paths))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => Ok(None),
        Err(e) => Err(CommandError::Usage(format!(
            "cannot list {flag} {}: {e}; give an existing directory",
            dir.display()
        ))),
    }
}

fn held_error(e: LockError) -> CommandError {
    CommandError::Usage(format!("{e}; nothing was removed"))
}

/// Whether `path` is a symbolic link (not followed: it may lead out of the directories
/// clean was given).
fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether `path` is a regular file itself (not through a link).
fn is_plain_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

const LINK_SKIPPED: &str =
    "a symbolic link: clean does not follow links out of the directories it is given";

/// Refuses when another process holds the database `db` (when it is one of ours: a
/// foreign file of that name has no lock).
fn ensure_db_not_held(db: &Path) -> Result<(), CommandError> {
    if std::fs::symlink_metadata(db).is_ok()
        && edbstress_engine::check_database_signature(db).is_err()
    {
        return Ok(());
    }
    ensure_not_held(db).map_err(held_error)
}

fn plan_databases(
    dir: &Path,
    entries: &[PathBuf],
    plan: &mut CleanPlan,
) -> Result<(), CommandError> {
    for path in entries {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if is_link(path) && (name.ends_with(LOCK_SUFFIX) || parse_db_file_name(name).is_some()) {
            plan.skip(path, LINK_SKIPPED);
            continue;
        }
        if let Some(db_name) = name.strip_suffix(LOCK_SUFFIX) {
            // Lock files of databases that are gone: the ones of present databases go
            // with their database.
            let db = dir.join(db_name);
            if parse_db_file_name(db_name).is_some() && std::fs::symlink_metadata(&db).is_err() {
                ensure_not_held(&db).map_err(held_error)?;
                let contents = std::fs::read(path).unwrap_or_default();
                if is_lock_file_content(&contents) {
                    plan.files.push(path.clone());
                } else {
                    plan.skip(path, "not an edbstress lock file");
                }
            }
            continue;
        }
        if parse_db_file_name(name).is_none() {
            continue;
        }
        if !path.is_file() {
            plan.skip(path, "not a regular file");
            continue;
        }
        match read_header(path, IoMode::Buffered) {
            // A database of an older format version is ours too (signature and
            // checksum): clean is how it is removed before preparing again.
            Ok(_) | Err(HeaderReadError::Header(HeaderError::UnsupportedVersion { .. })) => {
                ensure_not_held(path).map_err(held_error)?;
                plan.databases.push(path.clone());
            }
            Err(e) => plan.skip(path, format!("no edbstress database header ({e})")),
        }
    }
    Ok(())
}

fn plan_log_dirs(
    root: &Path,
    db_paths: &[PathBuf],
    plan: &mut CleanPlan,
) -> Result<(), CommandError> {
    let dirs = discover_log_dirs(root).map_err(|e| {
        CommandError::Usage(format!("cannot list --log-path {}: {e}", root.display()))
    })?;
    'dirs: for (instance, dir) in dirs {
        if is_link(&dir) {
            plan.skip(&dir, LINK_SKIPPED);
            continue;
        }
        // In use by a live instance, whatever database path it was given.
        ensure_dir_not_held(&dir).map_err(held_error)?;
        let owners = log_dir_owners(&dir);
        // A log directory belongs to the database of the same number; if that one is in
        // use, so are its logs, and logs of another database are that one's.
        for db_dir in db_paths {
            let db = db_dir.join(edbstress_engine::db_file_name(instance));
            ensure_db_not_held(&db)?;
            let ours = match read_header(&db, IoMode::Buffered) {
                Ok(sel) => LogIdentity {
                    db_signature: sel.header.signature,
                    log_signature: sel.header.log_signature,
                },
                Err(HeaderReadError::Header(HeaderError::UnsupportedVersion {
                    signature,
                    log_signature,
                    ..
                })) => LogIdentity {
                    db_signature: signature,
                    log_signature,
                },
                Err(_) => continue,
            };
            if let Some(other) = owners.others(ours).first() {
                plan.skip(
                    &dir,
                    format!(
                        "it holds the logs of another database ({other}) than {} ({ours}); clean that database's paths to remove them",
                        db.display()
                    ),
                );
                continue 'dirs;
            }
        }
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                plan.skip(&dir, format!("cannot list it: {e}"));
                continue;
            }
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !is_log_file_name(name) {
                plan.skip(&path, "not an edbstress log file name");
            } else if is_link(&path) {
                plan.skip(&path, LINK_SKIPPED);
            } else if !is_plain_file(&path) || !is_our_log_file(&path) {
                plan.skip(&path, "no edbstress log signature");
            } else {
                plan.files.push(path);
            }
        }
        plan.log_dirs.push(dir.clone());
        plan.dirs.push(dir);
    }
    Ok(())
}

fn plan_run_dirs(entries: &[PathBuf], plan: &mut CleanPlan) {
    for dir in entries {
        if is_link(dir) {
            plan.skip(dir, LINK_SKIPPED);
            continue;
        }
        if !dir.is_dir() {
            continue;
        }
        let results = dir.join(run_files::RESULTS_JSON);
        let ours = is_plain_file(&results)
            && std::fs::read(&results)
                .ok()
                .is_some_and(|bytes| read_results(&bytes).is_ok());
        if !ours && !is_killed_run(dir) {
            plan.skip(
                dir,
                "no edbstress results.json, and no test.log of an edbstress run",
            );
            continue;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            plan.skip(dir, "cannot list it");
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let run_file = RUN_FILES.contains(&name)
                || (name.starts_with(".edbstress-") && name.ends_with(".tmp"));
            if run_file && is_plain_file(&path) {
                plan.files.push(path);
            } else {
                plan.skip(&path, "not a file edbstress writes in a run directory");
            }
        }
        plan.dirs.push(dir.clone());
    }
}

/// A run directory whose run was killed before it wrote results.json: its test.log
/// opens with the line every run writes first.
fn is_killed_run(dir: &Path) -> bool {
    let log = dir.join(run_files::TEST_LOG);
    if !is_plain_file(&log) {
        return false;
    }
    let Ok(file) = std::fs::File::open(&log) else {
        return false;
    };
    let mut first = String::new();
    let _ = std::io::BufReader::new(file)
        .take(4096)
        .read_line(&mut first);
    first
        .trim_end()
        .ends_with(" -- edbstress testing begins ...")
}

fn print_plan(plan: &CleanPlan, dry_run: bool) {
    let verb = if dry_run { "would remove" } else { "remove" };
    for path in plan.databases.iter().chain(&plan.files) {
        outln!("{verb} {}", path.display());
    }
    for dir in &plan.dirs {
        outln!("{verb} {} (if empty afterwards)", dir.display());
    }
    for (path, why) in &plan.skipped {
        outln!("skip {}: {why}", path.display());
    }
}

/// Asks on the terminal; refuses when there is none to ask on.
fn confirm() -> Result<bool, CommandError> {
    if !std::io::stdin().is_terminal() {
        return Err(CommandError::Usage(
            "refusing to remove files without confirmation: standard input is not a terminal; pass --yes to remove them, or --dry-run to only list them".into(),
        ));
    }
    out!("Remove these? [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES"))
}

fn execute(plan: &CleanPlan) -> Result<(), CommandError> {
    // Held until everything is removed, so no instance starts on these logs meanwhile.
    let _log_locks = plan
        .log_dirs
        .iter()
        .map(|dir| LogDirLock::acquire_if_exists(dir, LockMode::Exclusive))
        .collect::<Result<Vec<_>, _>>()
        .map_err(held_error)?;
    let remove = |path: &Path| {
        std::fs::remove_file(path)
            .map_err(|e| CommandError::Usage(format!("cannot remove {}: {e}", path.display())))
    };
    for db in &plan.databases {
        // Held while removing so no process opens the database meanwhile; the lock file
        // goes with the lock.
        let _lock = DatabaseLock::acquire(db).map_err(held_error)?;
        remove(db)?;
    }
    for file in &plan.files {
        match std::fs::remove_file(file) {
            Ok(()) => {}
            // A stale lock file taken over and removed by a concurrent edbstress.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(CommandError::Usage(format!(
                    "cannot remove {}: {e}",
                    file.display()
                )));
            }
        }
    }
    for dir in &plan.dirs {
        match std::fs::remove_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {
                outln!("kept {}: other files remain in it", dir.display());
            }
            Err(e) => {
                return Err(CommandError::Usage(format!(
                    "cannot remove {}: {e}",
                    dir.display()
                )));
            }
        }
    }
    outln!(
        "removed {} database(s) and {} other file(s)",
        plan.databases.len(),
        plan.files.len()
    );
    Ok(())
}
