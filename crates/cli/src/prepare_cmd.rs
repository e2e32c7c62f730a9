//! `edbstress prepare`.

use std::process::ExitCode;

use clap::Args;
use edbstress_engine::Compressibility;
use edbstress_engine::InstanceLayout;
use edbstress_engine::{InstanceAction, PrepareOptions, PreparePlan, PrepareReport};
use edbstress_format::PageSize;
use indicatif::{ProgressBar, ProgressStyle};

use crate::common::{CommandError, TargetArgs};
use edbstress_io::ByteSize;

use crate::units::{count, parse_page_size, parse_size};

/// Arguments of `edbstress prepare`.
#[derive(Args, Debug)]
pub struct PrepareArgs {
    /// Number of databases (instances) to create.
    #[arg(long, default_value_t = 2, value_parser = count::<u32>("a count", 1, Some(999)), allow_hyphen_values = true)]
    databases: u32,
    /// Size of each database file, e.g. 256MiB, 20GiB, 500GB.
    #[arg(long, default_value = "256MiB", value_parser = parse_size, allow_hyphen_values = true)]
    database_size: u64,
    /// Database page size: 4KiB, 8KiB, 16KiB or 32KiB.
    #[arg(long, default_value = "32KiB", value_parser = parse_page_size, allow_hyphen_values = true)]
    page_size: PageSize,
    /// Mailboxes per database (the key space of the mailbox table).
    #[arg(long, default_value_t = 100, value_parser = count::<u32>("a count", 1, None), allow_hyphen_values = true)]
    mailboxes: u32,
    /// Page content compressibility: 'mail' (1.7:1), 'incompressible', or a ratio like 2.0.
    #[arg(long, default_value = "mail")]
    compressibility: Compressibility,
    /// Rebuild existing edbstress databases of another size or page size.
    #[arg(long)]
    recreate: bool,
    /// Page-building threads (default: one per core).
    #[arg(long, value_name = "N", value_parser = count::<usize>("a count", 0, None), allow_hyphen_values = true)]
    threads: Option<usize>,
    /// Size of each write, e.g. 1MiB.
    #[arg(long, default_value = "1MiB", value_parser = parse_size, allow_hyphen_values = true)]
    write_size: u64,
    /// Seed for signatures and content: the same seed prepares identical databases.
    #[arg(long, value_parser = count::<u64>("a seed", 0, None), allow_hyphen_values = true)]
    seed: Option<u64>,
    #[command(flatten)]
    target: TargetArgs,
}

/// Runs `edbstress prepare`.
pub fn run(args: PrepareArgs) -> Result<ExitCode, CommandError> {
    if args.write_size < args.page_size.bytes() as u64
        || args.write_size > 64 << 20
        || args.write_size % 4096 != 0
    {
        return Err(CommandError::Usage(format!(
            "--write-size {} must be a multiple of 4 KiB between the page size and 64 MiB",
            ByteSize(args.write_size).approx()
        )));
    }
    let options = PrepareOptions {
        page_size: args.page_size,
        database_bytes: args.database_size,
        mailboxes: args.mailboxes,
        compressibility: args.compressibility,
        io_mode: args.target.io.mode(),
        backend: args.target.io.backend,
        recreate: args.recreate,
        write_len: args.write_size as usize,
        queue_depth: args.target.io.queue_depth.map_or(8, |d| d as usize),
        threads: args.threads.unwrap_or(0),
        seed: args.seed,
        new_log_stream: true,
    };
    let layouts = InstanceLayout::spread(
        args.databases,
        &args.target.paths.db_paths_or_default(),
        &args.target.paths.log_paths_or_default(),
    );
    let plan = PreparePlan::check(layouts, options).map_err(CommandError::prepare)?;
    if !args.target.json {
        for (layout, action) in &plan.instances {
            let what = match action {
                InstanceAction::Create => "create".to_string(),
                InstanceAction::Reuse => "reuse (already prepared)".to_string(),
                InstanceAction::Rebuild(why) => format!("rebuild ({why})"),
            };
            eprintln!(
                "instance {:>3}: {}  {}",
                layout.instance,
                layout.db_file.display(),
                what
            );
        }
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let started = std::time::Instant::now();
    let reports = plan
        .execute(&mut |p| {
            bar.set_length(p.bytes_total);
            bar.set_prefix(format!("db {:03}", p.instance));
            bar.set_position(p.bytes_done);
        })
        .map_err(CommandError::prepare)?;
    bar.finish_and_clear();
    if !args.target.json {
        for r in &reports {
            if let Some(note) = &r.log_note {
                eprintln!("instance {:>3}: {note}", r.instance);
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    if args.target.json {
        let doc = serde_json::json!({ "databases": reports, "seconds": elapsed });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_reports(&reports, elapsed);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_reports(reports: &[PrepareReport], elapsed: f64) {
    outln!(
        "{:<40} {:>9} {:>10} {:>10} {:>8} {:>9}",
        "Database",
        "Page",
        "Messages",
        "Size",
        "Seconds",
        "MiB/s"
    );
    let mut written = 0u64;
    let mut write_secs = 0.0;
    for r in reports {
        let size = ByteSize(u64::from(r.pages) * r.page_size as u64).approx();
        if r.reused {
            outln!(
                "{:<40} {:>9} {:>10} {:>10} {:>8} {:>9}",
                r.db_file.display(),
                ByteSize(r.page_size as u64).approx(),
                r.messages,
                size,
                "reused",
                "-"
            );
        } else {
            outln!(
                "{:<40} {:>9} {:>10} {:>10} {:>8.2} {:>9.1}",
                r.db_file.display(),
                ByteSize(r.page_size as u64).approx(),
                r.messages,
                size,
                r.seconds,
                r.mb_per_sec()
            );
            written += r.bytes_written;
            write_secs += r.seconds;
        }
    }
    if written > 0 {
        let backend = reports
            .iter()
            .find(|r| !r.reused)
            .map_or("", |r| r.backend.as_str());
        outln!(
            "Wrote {} in {:.2} s: {:.1} MiB/s while writing ({} backend), {:.2} s in total.",
            ByteSize(written).approx(),
            write_secs,
            written as f64 / 1048576.0 / write_secs.max(1e-9),
            backend,
            elapsed
        );
    } else {
        outln!("All databases were already prepared; nothing written.");
    }
}
