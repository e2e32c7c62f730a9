//! `edbstress probe`: what the storage under a path can do with the I/O shapes of a
//! mailbox database (random 32 KiB reads and writes at depth, sequential large
//! transfers, small durable log writes), so the transactional results can be read
//! against the device's ceiling. The measuring is done by `edbstress_io::probe`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use edbstress_io::probe::{
    LogSync, ProbeFile, ProbePattern, ProbeResult, ProbeSpec, probe_path, run_probe,
};
use edbstress_io::{BackendKind, IoMode};
use edbstress_workload::units::parse_duration;
use serde::Serialize;

use crate::common::{CommandError, parse_backend};
use edbstress_io::ByteSize;

use crate::units::{count, parse_size};

/// Arguments of `edbstress probe`.
#[derive(Args, Debug)]
pub struct StorageProbeArgs {
    /// Directory on the storage to measure; the test file edbstress-probe.dat is created
    /// there (and removed afterwards unless --keep).
    #[arg(long, value_name = "DIR", required_unless_present = "file")]
    path: Option<PathBuf>,
    /// Test file to use instead of DIR/edbstress-probe.dat (created if missing; an
    /// existing file is used only if edbstress created it).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Make one measurement of this pattern instead of the default table:
    /// randread, randwrite, read, write or logwrite.
    #[arg(long, value_parser = parse_pattern)]
    pattern: Option<ProbePattern>,
    /// Bytes per request (default: 32KiB random, 1MiB sequential, 4KiB logwrite).
    #[arg(long, value_parser = parse_size, allow_hyphen_values = true)]
    block_size: Option<u64>,
    /// Requests in flight (default: 32 random, 8 sequential; logwrite always 1).
    #[arg(long, value_name = "N", value_parser = count::<u32>("a queue depth", 1, Some(4096)), allow_hyphen_values = true)]
    queue_depth: Option<u32>,
    /// How long each measurement runs, e.g. 10s or 500ms.
    #[arg(long, default_value = "5s", value_parser = parse_duration, allow_hyphen_values = true)]
    duration: Duration,
    /// Size of the test file when it is created.
    #[arg(long, default_value = "1GiB", value_parser = parse_size, allow_hyphen_values = true)]
    size: u64,
    /// How logwrite makes each write durable: fdatasync or dsync (O_DSYNC).
    #[arg(long, default_value = "fdatasync", value_parser = parse_log_sync)]
    sync: LogSync,
    /// Keep the test file afterwards (a later probe reuses it without filling it again).
    #[arg(long)]
    keep: bool,
    /// Print the results as JSON on standard output.
    #[arg(long)]
    json: bool,
    /// Use buffered I/O (through the page cache) instead of direct I/O.
    #[arg(long)]
    buffered: bool,
    /// I/O backend: auto (io_uring, else threads), io_uring or threads.
    #[arg(long, default_value = "auto", value_parser = parse_backend)]
    backend: BackendKind,
}

fn parse_pattern(s: &str) -> Result<ProbePattern, String> {
    s.parse()
}

fn parse_log_sync(s: &str) -> Result<LogSync, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "fdatasync" => Ok(LogSync::Fdatasync),
        "dsync" | "o_dsync" => Ok(LogSync::Dsync),
        _ => Err(format!("unknown sync '{s}': use fdatasync or dsync")),
    }
}

/// The measurements of the default table: the shapes a mailbox database produces.
fn default_table(duration: Duration, backend: BackendKind) -> Vec<ProbeSpec> {
    let spec = |pattern, block_size, queue_depth, log_sync| ProbeSpec {
        pattern,
        block_size,
        queue_depth,
        duration,
        log_sync,
        backend,
    };
    use LogSync::{Dsync, Fdatasync};
    use ProbePattern::*;
    vec![
        spec(RandRead, 32 << 10, 32, Fdatasync),
        spec(RandWrite, 32 << 10, 32, Fdatasync),
        spec(Read, 256 << 10, 8, Fdatasync),
        spec(Read, 1 << 20, 8, Fdatasync),
        spec(Write, 256 << 10, 8, Fdatasync),
        spec(Write, 1 << 20, 8, Fdatasync),
        spec(LogWrite, 4 << 10, 1, Fdatasync),
        spec(LogWrite, 8 << 10, 1, Fdatasync),
        spec(LogWrite, 32 << 10, 1, Fdatasync),
        spec(LogWrite, 4 << 10, 1, Dsync),
        spec(LogWrite, 8 << 10, 1, Dsync),
        spec(LogWrite, 32 << 10, 1, Dsync),
    ]
}

/// The JSON of a default-table run.
#[derive(Serialize)]
struct ProbeTable<'a> {
    file: String,
    file_bytes: u64,
    results: &'a [ProbeResult],
}

/// Runs `edbstress probe`.
pub fn run(args: StorageProbeArgs) -> Result<ExitCode, CommandError> {
    let specs = match args.pattern {
        Some(pattern) => vec![single_spec(&args, pattern)?],
        None => {
            if args.block_size.is_some() || args.queue_depth.is_some() {
                return Err(CommandError::Usage(
                    "--block-size and --queue-depth apply to one measurement: add --pattern".into(),
                ));
            }
            default_table(args.duration, args.backend)
        }
    };
    let path = match (&args.file, &args.path) {
        (Some(file), _) => file.clone(),
        (None, Some(dir)) => {
            if !dir.is_dir() {
                return Err(CommandError::Usage(format!(
                    "--path {} is not a directory; create it or name an existing one",
                    dir.display()
                )));
            }
            probe_path(dir)
        }
        (None, None) => return Err(CommandError::Usage("give --path DIR or --file FILE".into())),
    };
    let mode = if args.buffered {
        IoMode::Buffered
    } else {
        IoMode::Direct
    };
    if !args.json {
        eprintln!(
            "preparing {} ({})...",
            path.display(),
            ByteSize(args.size).approx()
        );
    }
    let probe = ProbeFile::open_or_create(&path, args.size, mode)?;
    let mut results = Vec::with_capacity(specs.len());
    let mut outcome = Ok(());
    if !args.json {
        outln!(
            "{} ({}, {}, {})",
            path.display(),
            ByteSize(probe.size()).approx(),
            if args.buffered {
                "buffered"
            } else {
                "O_DIRECT"
            },
            args.backend
        );
        outln!("{}", table_header());
    }
    for spec in &specs {
        match run_probe(&probe, spec) {
            Ok(result) => {
                if !args.json {
                    outln!("{}", table_row(&result));
                }
                results.push(result);
            }
            Err(err) => {
                outcome = Err(err);
                break;
            }
        }
    }
    let size = probe.size();
    if args.keep {
        if !args.json {
            eprintln!("kept {}", path.display());
        }
    } else {
        probe.remove()?;
    }
    outcome?;
    if args.json {
        let text = if args.pattern.is_some() {
            serde_json::to_string_pretty(&results[0])?
        } else {
            serde_json::to_string_pretty(&ProbeTable {
                file: path.display().to_string(),
                file_bytes: size,
                results: &results,
            })?
        };
        outln!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}

fn single_spec(args: &StorageProbeArgs, pattern: ProbePattern) -> Result<ProbeSpec, CommandError> {
    let (block, depth) = match pattern {
        ProbePattern::RandRead | ProbePattern::RandWrite => (32 << 10, 32),
        ProbePattern::Read | ProbePattern::Write => (1 << 20, 8),
        ProbePattern::LogWrite => (4 << 10, 1),
    };
    let block_size = args.block_size.unwrap_or(block);
    if block_size == 0 || block_size % 4096 != 0 || block_size > 64 << 20 {
        return Err(CommandError::Usage(format!(
            "--block-size {block_size} must be a multiple of 4 KiB between 4 KiB and 64 MiB"
        )));
    }
    Ok(ProbeSpec {
        pattern,
        block_size: block_size as usize,
        queue_depth: args.queue_depth.map_or(depth, |d| d as usize),
        duration: args.duration,
        log_sync: args.sync,
        backend: args.backend,
    })
}

fn table_header() -> String {
    format!(
        "{:<20} {:>6} {:>3} {:>10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "pattern",
        "block",
        "qd",
        "IOPS",
        "MiB/s",
        "avg ms",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "CPU us/IO"
    )
}

fn table_row(r: &ProbeResult) -> String {
    let name = match r.log_sync {
        Some(sync) => format!("{} ({})", r.pattern.name(), sync.name()),
        None => r.pattern.name().to_string(),
    };
    let block = if r.block_size >= 1 << 20 {
        format!("{}M", r.block_size >> 20)
    } else {
        format!("{}K", r.block_size >> 10)
    };
    format!(
        "{:<20} {:>6} {:>3} {:>10.0} {:>9.1} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9.1}",
        name,
        block,
        r.queue_depth,
        r.iops,
        r.mb_per_sec,
        r.avg_latency_ms,
        r.p50_ms,
        r.p99_ms,
        r.p999_ms,
        r.max_ms,
        r.cpu_us_per_op
    )
}
