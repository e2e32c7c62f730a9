//! `edbstress durability-probe` (hidden, for tests and for checking a storage stack by
//! hand): runs sessions that insert messages with durable commits and prints one line
//! per acknowledged commit, flushed at once, so whoever kills the process (SIGKILL, a
//! power cut) knows exactly which commits the storage promised to keep:
//!
//! `ack <mailbox> <message> <body_len> <body_fnv64>`

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use edbstress_engine::MessageKey;
use edbstress_engine::{Compressibility, ContentGenerator};
use edbstress_engine::{Durability, Instance, InstanceConfig, TxnOp};

use crate::common::{CommandError, IoArgs, PathArgs, instances_on_disk};
use crate::units::{count, parse_size};

/// Arguments of `edbstress durability-probe`.
#[derive(Args, Debug)]
pub struct DurabilityProbeArgs {
    /// Concurrent sessions.
    #[arg(long, default_value_t = 4, value_parser = count::<u32>("a count", 1, Some(256)), allow_hyphen_values = true)]
    sessions: u32,
    /// Stop (and shut down cleanly) after this many seconds; default: run until killed.
    #[arg(long)]
    seconds: Option<f64>,
    /// Database cache, e.g. 4MiB (small caches make the engine write pages often).
    #[arg(long, default_value = "4MiB", value_parser = parse_size, allow_hyphen_values = true)]
    cache: u64,
    #[command(flatten)]
    paths: PathArgs,
    #[command(flatten)]
    io: IoArgs,
}

/// FNV-1a, 64-bit: a cheap fingerprint of a body.
pub fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs the probe.
pub fn run(args: DurabilityProbeArgs) -> Result<ExitCode, CommandError> {
    let layout = instances_on_disk(&args.paths)?
        .into_iter()
        .next()
        .ok_or_else(|| CommandError::Usage("no database found".into()))?;
    // Checked: a negative, NaN or huge value must not panic with the database open.
    let deadline = match args.seconds {
        None => None,
        Some(s) => Some(
            Duration::try_from_secs_f64(s)
                .ok()
                .and_then(|d| Instant::now().checked_add(d))
                .ok_or_else(|| {
                    CommandError::Usage(format!(
                        "--seconds {s} is not a usable number of seconds; give e.g. 30"
                    ))
                })?,
        ),
    };
    let mut config = InstanceConfig::new(layout);
    config.cache_min_bytes = args.cache;
    config.cache_max_bytes = args.cache;
    config.checkpoint_depth = 1 << 20;
    config.io_mode = args.io.mode();
    config.backend = args.io.backend;
    let instance = Instance::open(config)?;
    let mailboxes = instance.mailbox_count().max(1);
    let stop = AtomicBool::new(false);
    let failure = std::sync::Mutex::new(None::<String>);
    std::thread::scope(|scope| {
        for session in 0..args.sessions {
            let (instance, stop, failure) = (&instance, &stop, &failure);
            scope.spawn(move || {
                let mut content = ContentGenerator::for_stream(
                    u64::from(session) << 32 | u64::from(std::process::id()),
                    Compressibility::MAIL,
                );
                let mut acked: Vec<MessageKey> = Vec::new();
                let mut props = vec![0u8; 240];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
                    n += 1;
                    let result = if n % 4 == 0 && !acked.is_empty() {
                        // Replace the properties of an earlier message: page rewrites in place.
                        let key = acked[content.range(0..acked.len() as u64) as usize];
                        content.fill(&mut props);
                        instance
                            .commit(
                                &[TxnOp::Replace {
                                    key,
                                    props: &props,
                                    body: None,
                                    resort: None,
                                }],
                                Durability::Durable,
                            )
                            .map(|_| ())
                    } else {
                        let mailbox = content.range(0..u64::from(mailboxes)) as u32;
                        let mut body = vec![0u8; content.range(100..60_000) as usize];
                        content.fill(&mut body);
                        content.fill(&mut props);
                        instance
                            .commit(
                                &[TxnOp::Insert {
                                    mailbox,
                                    props: &props,
                                    body: &body,
                                }],
                                Durability::Durable,
                            )
                            .map(|outcome| {
                                let key = outcome.inserted[0];
                                acked.push(key);
                                let mut out = std::io::stdout().lock();
                                let _ = writeln!(
                                    out,
                                    "ack {} {} {} {}",
                                    key.mailbox,
                                    key.message,
                                    body.len(),
                                    fnv64(&body)
                                );
                                let _ = out.flush();
                            })
                    };
                    if let Err(e) = result {
                        *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(CommandError::Usage(e));
    }
    instance.shutdown()?;
    Ok(ExitCode::SUCCESS)
}
