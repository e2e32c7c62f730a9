//! The processes a sweep starts: `sh -c` for the setup, teardown and measure commands,
//! and `edbstress run` (or `clean`) for each point. Each leads its own process group
//! ([`crate::process_group`]), so a Ctrl-C at the terminal reaches only the sweep: it
//! passes on one SIGINT to a run (a second would make it quit without writing its
//! results), ends a setup or measure command with everything it started, and lets a
//! teardown finish. A command that overruns `[commands] timeout` is ended the same way.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::process_group::{Ending, GroupChild, OnStop};

/// Lines of a command's output shown when it fails.
const TAIL_LINES: usize = 30;

/// Why a child could not be run to its end.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// Its log (or output file) cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Log {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// It did not start.
    #[error("cannot start {what}: {source}")]
    Start {
        /// The program (and arguments).
        what: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// Waiting for it failed.
    #[error("cannot wait for {what}: {source}")]
    Wait {
        /// The program (and arguments).
        what: String,
        /// What the system said.
        source: std::io::Error,
    },
}

/// What a finished child gave.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// How it ended.
    pub ending: Ending,
    /// Standard output, when captured.
    pub stdout: String,
}

fn open_log(log: &Path) -> Result<File, ChildError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|source| ChildError::Log {
            path: log.to_path_buf(),
            source,
        })
}

/// Runs `cmd` to its end in its own process group: `on_stop` says what a stop does,
/// `deadline` how long it may take.
fn wait(
    mut cmd: Command,
    what: &str,
    stop: &AtomicBool,
    on_stop: OnStop,
    deadline: Option<Duration>,
) -> Result<Finished, ChildError> {
    cmd.stdin(Stdio::null());
    let mut child = GroupChild::spawn(&mut cmd).map_err(|source| ChildError::Start {
        what: what.to_string(),
        source,
    })?;
    let stdout_reader = child.child_mut().stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut s);
            s
        })
    });
    let (status, ending) =
        child
            .wait(stop, on_stop, deadline)
            .map_err(|source| ChildError::Wait {
                what: what.to_string(),
                source,
            })?;
    let stdout = stdout_reader
        .and_then(|h| h.join().ok())
        .unwrap_or_default();
    Ok(Finished {
        status,
        ending,
        stdout,
    })
}

/// How a sweep runs one shell command.
#[derive(Clone, Copy, Debug)]
pub struct ShellRules {
    /// Standard output returned instead of logged.
    pub capture: bool,
    /// What a stop (Ctrl-C) does to it.
    pub on_stop: OnStop,
    /// The longest it may take.
    pub timeout: Duration,
}

/// Runs `sh -c script` in `cwd`, its output appended to `log` (standard output
/// returned instead when `rules.capture`).
pub fn shell(
    script: &str,
    cwd: &Path,
    log: &Path,
    rules: ShellRules,
    stop: &AtomicBool,
) -> Result<Finished, ChildError> {
    let capture = rules.capture;
    let mut f = open_log(log)?;
    let _ = writeln!(f, "$ {script}");
    let err = f.try_clone().map_err(|source| ChildError::Log {
        path: log.to_path_buf(),
        source,
    })?;
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script).current_dir(cwd).stderr(err);
    if capture {
        cmd.stdout(Stdio::piped());
    } else {
        cmd.stdout(f);
    }
    let out = wait(cmd, "sh", stop, rules.on_stop, Some(rules.timeout))?;
    if capture {
        let mut f = open_log(log)?;
        let _ = f.write_all(out.stdout.as_bytes());
    }
    let mut f = open_log(log)?;
    let _ = match out.ending {
        Ending::Exited => writeln!(f, "[exit: {}]", describe(out.status)),
        Ending::Stopped => writeln!(f, "[stopped (Ctrl-C): {}]", describe(out.status)),
        Ending::TimedOut => writeln!(
            f,
            "[ended after [commands] timeout = \"{}\": {}]",
            edbstress_workload::units::format_duration(rules.timeout),
            describe(out.status)
        ),
    };
    Ok(out)
}

/// Runs `edbstress ARGS` in `cwd`: standard output to `out`, standard error (its test
/// log lines) to `log`.
pub fn edbstress(
    binary: &Path,
    args: &[&str],
    cwd: &Path,
    out: &Path,
    log: &Path,
    stop: &AtomicBool,
) -> Result<Finished, ChildError> {
    let mut cmd = Command::new(binary);
    cmd.args(args)
        .current_dir(cwd)
        .stdout(open_log(out)?)
        .stderr(open_log(log)?);
    wait(
        cmd,
        &format!("{} {}", binary.display(), args.join(" ")),
        stop,
        OnStop::Interrupt,
        None,
    )
}

/// "code 3" or "killed by signal 9".
pub fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "unknown".into(),
    }
}

/// The last lines of `log`, for an error message.
pub fn tail(log: &Path) -> String {
    let text = std::fs::read(log)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(TAIL_LINES);
    lines[from..]
        .iter()
        .map(|l| format!("  | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
