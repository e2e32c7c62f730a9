//! `edbstress inject` (hidden): fault injection into edbstress's own files, printing
//! exactly what was done so detection by `checksum` and `recover` can be checked.
//! See docs/reliability.md.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use edbstress_engine::InstanceConfig;
use edbstress_engine::InstanceId;
use edbstress_engine::fault::{
    FaultKind, FaultRequest, InjectedFault, inject_database, inject_log_dir, inject_lost_flush,
};
use edbstress_engine::{InstanceLayout, parse_db_file_name};
use edbstress_io::IoMode;

use crate::common::CommandError;
use crate::units::count;

/// Arguments of `edbstress inject`.
#[derive(Args, Debug)]
pub struct InjectArgs {
    /// Database file to damage (bitflip, torn, misdirect, zero, lost-flush).
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
    /// Instance log directory to damage (log-segment, checkpoint, lost-flush).
    #[arg(long, value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// Fault kind: bitflip, torn, misdirect, zero, lost-flush, log-segment, checkpoint.
    #[arg(long, value_parser = |s: &str| s.parse::<FaultKind>())]
    kind: FaultKind,
    /// Seed of every random choice (same seed, same faults).
    #[arg(long, value_parser = count::<u64>("a seed", 0, None), allow_hyphen_values = true)]
    seed: u64,
    /// Faults to inject, each on a distinct page, segment or checkpoint copy.
    #[arg(long, default_value_t = 1, value_parser = count::<u32>("a count", 1, None), allow_hyphen_values = true)]
    count: u32,
    /// Bits flipped per fault (bitflip: 1 = correctable, 2 = bad, default 1 or 2 at
    /// random; log-segment and checkpoint: at least 2, default 2). 3 or more bits in
    /// one checksum block exceed the checksum's guarantee.
    #[arg(long, value_parser = count::<u32>("a count", 1, None), allow_hyphen_values = true)]
    bits: Option<u32>,
    /// Use buffered I/O for the transactions of lost-flush (filesystems without O_DIRECT).
    #[arg(long)]
    buffered: bool,
    /// Print what was done as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `edbstress inject`.
pub fn run(args: InjectArgs) -> Result<ExitCode, CommandError> {
    let request = FaultRequest {
        kind: args.kind,
        seed: args.seed,
        count: args.count,
        bits: args.bits,
    };
    let faults: Vec<InjectedFault> = match (args.kind, &args.db, &args.log_dir) {
        (FaultKind::LostFlush, Some(db), Some(log_dir)) => {
            if args.count != 1 {
                return Err(CommandError::Usage(
                    "lost-flush injects one dropped write per call: leave out --count".into(),
                ));
            }
            let instance = db
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(parse_db_file_name)
                .unwrap_or(InstanceId::new(1));
            let layout = InstanceLayout {
                instance,
                db_file: db.clone(),
                log_dir: log_dir.clone(),
            };
            let mut config = InstanceConfig::new(layout);
            if args.buffered {
                config.io_mode = IoMode::Buffered;
            }
            vec![inject_lost_flush(&config, args.seed)?]
        }
        (FaultKind::LostFlush, _, _) => {
            return Err(CommandError::Usage(
                "lost-flush runs real transactions: give both --db FILE and --log-dir DIR".into(),
            ));
        }
        (kind, Some(db), None) if kind.targets_database() => inject_database(db, &request)?,
        (kind, None, Some(dir)) if !kind.targets_database() => inject_log_dir(dir, &request)?,
        (kind, _, _) => {
            let wanted = if kind.targets_database() {
                "--db FILE"
            } else {
                "--log-dir DIR"
            };
            return Err(CommandError::Usage(format!(
                "fault kind {} needs {wanted} (and nothing else)",
                kind.name()
            )));
        }
    };
    if args.json {
        let doc = serde_json::json!({ "seed": args.seed, "faults": faults });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        for f in &faults {
            let what = match (f.pgno, f.segment) {
                (Some(p), _) => format!("page {p}"),
                (None, Some(s)) => format!("segment/copy {s}"),
                (None, None) => String::new(),
            };
            outln!(
                "{} {} {} at offset {}: expect {:?}",
                f.fault.name(),
                f.file.display(),
                what,
                f.offset,
                f.expected
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
