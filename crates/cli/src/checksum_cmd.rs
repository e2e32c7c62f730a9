//! `edbstress checksum`: offline verification of databases and logs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use edbstress_engine::InstanceId;
use edbstress_engine::LogDirLock;
use edbstress_engine::log::is_log_file_name;
use edbstress_engine::{DatabaseLock, LockMode};
use edbstress_engine::{
    DatabaseScanReport, LogScanReport, PageProblemKind, ScanError, ScanOptions, scan_database,
    scan_log_dir,
};
use edbstress_engine::{db_file_name, discover_databases, discover_log_dirs, parse_db_file_name};
use indicatif::{ProgressBar, ProgressStyle};

use crate::common::{CommandError, TargetArgs};
use crate::units::parse_size;

/// Arguments of `edbstress checksum`.
#[derive(Args, Debug)]
pub struct ChecksumArgs {
    /// Database files to verify (in addition to those found under --db-path).
    #[arg(value_name = "DATABASE")]
    files: Vec<PathBuf>,
    /// Rewrite pages with a single flipped bit (correctable) with the bit restored.
    #[arg(long)]
    repair: bool,
    /// Size of each read, e.g. 1MiB.
    #[arg(long, default_value = "1MiB", value_parser = parse_size, allow_hyphen_values = true)]
    read_size: u64,
    #[command(flatten)]
    target: TargetArgs,
}

/// Runs `edbstress checksum`.
pub fn run(args: ChecksumArgs) -> Result<ExitCode, CommandError> {
    if args.read_size < 4096 || args.read_size > 64 << 20 || args.read_size % 4096 != 0 {
        return Err(CommandError::Usage(
            "--read-size must be a multiple of 4 KiB between 4 KiB and 64 MiB".into(),
        ));
    }
    let nothing_named = args.files.is_empty()
        && args.target.paths.db_paths.is_empty()
        && args.target.paths.log_paths.is_empty();
    let db_dirs = if nothing_named {
        args.target.paths.db_paths_or_default()
    } else {
        args.target.paths.db_paths.clone()
    };
    let log_roots = if nothing_named {
        args.target.paths.log_paths_or_default()
    } else {
        args.target.paths.log_paths.clone()
    };

    let mut databases = args.files.clone();
    for dir in &db_dirs {
        let found = discover_databases(dir).map_err(|e| {
            CommandError::Usage(format!("cannot list --db-path {}: {e}", dir.display()))
        })?;
        if found.is_empty() {
            return Err(CommandError::Usage(format!(
                "no edbstress databases (edbstressNNN.edb) in {}; run `edbstress prepare` or pass database files",
                dir.display()
            )));
        }
        databases.extend(found.into_iter().map(|(_, p)| p));
    }
    let mut log_dirs = Vec::new();
    for root in &log_roots {
        let has_logs = std::fs::read_dir(root)
            .map_err(|e| {
                CommandError::Usage(format!("cannot list --log-path {}: {e}", root.display()))
            })?
            .flatten()
            .any(|e| is_log_file_name(&e.file_name().to_string_lossy()));
        if has_logs {
            log_dirs.push(root.clone());
        }
        let found = discover_log_dirs(root)
            .map_err(|e| CommandError::Usage(format!("cannot list {}: {e}", root.display())))?;
        if found.is_empty() && !has_logs {
            return Err(CommandError::Usage(format!(
                "no edbstress log directories in {}",
                root.display()
            )));
        }
        log_dirs.extend(found.into_iter().map(|(_, p)| p));
    }

    let options = ScanOptions {
        io_mode: args.target.io.mode(),
        backend: args.target.io.backend,
        read_len: args.read_size as usize,
        queue_depth: args.target.io.queue_depth.map_or(16, |d| d as usize),
        repair: args.repair,
        ..ScanOptions::default()
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut db_reports = Vec::new();
    for path in &databases {
        bar.set_prefix(
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        let report = scan_database(path, &options, &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        })
        .map_err(|e| match e {
            ScanError::NotOurs { .. } | ScanError::Io(_) | ScanError::Locked(_) => {
                CommandError::Usage(e.to_string())
            }
        })?;
        db_reports.push(report);
    }
    bar.finish_and_clear();
    let mut log_reports = Vec::new();
    for dir in &log_dirs {
        // A log being written would show a half-written segment: hold the shared lock
        // of the instance's database (when it is among those checked) while reading.
        let db_name = log_dir_instance(dir).map(db_file_name);
        let of_instance = |db: &&PathBuf| {
            db_name.is_some() && db.file_name().and_then(|f| f.to_str()) == db_name.as_deref()
        };
        let _locks = databases
            .iter()
            .filter(of_instance)
            .map(|db| DatabaseLock::acquire_shared(db))
            .collect::<Result<Vec<_>, _>>()?;
        // And the directory itself, whatever database path its writer was given.
        let _dir_lock = LogDirLock::acquire(dir, LockMode::Shared)?;
        // The log is checked against its database's header when that database is
        // known: beside the log root (the instance's database among those checked).
        let owner = databases
            .iter()
            .find(of_instance)
            .and_then(|db| edbstress_engine::read_header(db, args.target.io.mode()).ok())
            .map(|s| s.header);
        log_reports.push(scan_log_dir(dir, args.target.io.mode(), owner.as_ref())?);
    }
    let clean = db_reports.iter().all(DatabaseScanReport::is_clean)
        && log_reports.iter().all(LogScanReport::is_clean);
    let result = if clean { "pass" } else { "fail" };
    if args.target.json {
        let doc =
            serde_json::json!({ "result": result, "databases": db_reports, "logs": log_reports });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_text(&db_reports, &log_reports, result);
    }
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The instance whose log directory `dir` is, by its name (`edbstressNNN`).
fn log_dir_instance(dir: &Path) -> Option<InstanceId> {
    let name = dir.file_name()?.to_str()?;
    parse_db_file_name(&format!("{name}.edb"))
}

fn print_text(dbs: &[DatabaseScanReport], logs: &[LogScanReport], result: &str) {
    outln!("Database checksum verification");
    outln!(
        "{:<40} {:>10} {:>6} {:>11} {:>10} {:>8} {:>14} {:>9} {:>8} {:>8}",
        "Database",
        "Seen pages",
        "Bad",
        "Correctable",
        "Wrong pgno",
        "Uninit",
        "Highest dbtime",
        "MiB read",
        "Seconds",
        "MiB/s"
    );
    for r in dbs {
        outln!(
            "{:<40} {:>10} {:>6} {:>11} {:>10} {:>8} {:>14} {:>9.1} {:>8.2} {:>8.1}",
            r.path.display(),
            r.pages_seen,
            r.bad_pages,
            r.correctable_pages,
            r.wrong_pgno_pages,
            r.uninitialized_pages,
            r.highest_dbtime,
            r.mb_read,
            r.seconds,
            r.mb_per_sec
        );
        if let Some(t) = &r.truncated {
            outln!("  {t}");
        }
        if !r.header.primary_valid || !r.header.shadow_valid {
            outln!(
                "  header: primary {}, shadow {} ({})",
                if r.header.primary_valid {
                    "valid"
                } else {
                    "DAMAGED"
                },
                if r.header.shadow_valid {
                    "valid"
                } else {
                    "DAMAGED"
                },
                r.header.state
            );
        }
        for p in &r.problems {
            let what = match p.kind {
                PageProblemKind::Correctable { bit } => {
                    format!("correctable: bit {} of byte {} flipped", bit % 8, bit / 8)
                }
                PageProblemKind::Bad => "bad checksum".to_string(),
                PageProblemKind::WrongPageNumber { found } => {
                    format!("holds page {found} (misdirected write or read)")
                }
                PageProblemKind::Uninitialized => "uninitialized (all zero)".to_string(),
                PageProblemKind::Missing => "missing (beyond end of file)".to_string(),
                PageProblemKind::ReadError => "read error".to_string(),
            };
            let repaired = if p.repaired { " [repaired]" } else { "" };
            outln!(
                "  page {:>10} at offset {:>14}: {what}{repaired}",
                p.pgno,
                p.offset
            );
        }
        if !r.problems_complete {
            outln!("  (more problems not listed; counts above are complete)");
        }
        if r.repaired_pages > 0 {
            outln!("  {} correctable page(s) repaired", r.repaired_pages);
        }
    }
    if !logs.is_empty() {
        outln!();
        outln!("Log checksum verification");
        outln!(
            "{:<40} {:>6} {:>9} {:>7} {:>6} {:>11} {:>9} {:>11}",
            "Log directory",
            "Files",
            "Segments",
            "Unused",
            "Bad",
            "Correctable",
            "Misplaced",
            "Checkpoint"
        );
        for l in logs {
            outln!(
                "{:<40} {:>6} {:>9} {:>7} {:>6} {:>11} {:>9} {:>9}/2",
                l.dir.display(),
                l.files,
                l.segments_seen,
                l.unused_segments,
                l.bad_segments,
                l.correctable_segments,
                l.wrong_position_segments,
                l.checkpoint_copies_valid
            );
            for p in &l.problems {
                outln!("  {} segment {}: {}", p.file.display(), p.segment, p.kind);
            }
        }
    }
    outln!();
    let repaired: u64 = dbs.iter().map(|r| r.repaired_pages).sum();
    if repaired > 0 {
        outln!(
            "Result: {} ({repaired} correctable page(s) repaired)",
            result.to_uppercase()
        );
    } else {
        outln!("Result: {}", result.to_uppercase());
    }
}
