//! The processes a sweep starts: `sh -c` for the setup, teardown and measure commands,
//! and `edbstress run` (or `clean`) for each point. Each runs in its own process group,
//! so a Ctrl-C at the terminal reaches only the sweep, which passes on one SIGINT to
//! the run (a second would make it quit without writing its results) and lets a
//! command finish (a half-made filesystem helps no one).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Lines of a command's output shown when it fails.
const TAIL_LINES: usize = 30;

/// What a finished child gave.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// Standard output, when captured.
    pub stdout: String,
}

fn open_log(log: &Path) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot write {}: {e}", log.display()))
}

/// Runs `cmd` to its end, in its own process group; SIGINT is passed on once when
/// `stop` is set and `forward` is true.
fn wait(
    mut cmd: Command,
    what: &str,
    stop: &AtomicBool,
    forward: bool,
) -> Result<Finished, String> {
    cmd.process_group(0).stdin(Stdio::null());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let stdout_reader = child.stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut s);
            s
        })
    });
    let mut forwarded = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(format!("cannot wait for {what}: {e}")),
        }
        if forward && !forwarded && stop.load(Ordering::SeqCst) {
            forwarded = true;
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGINT);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = stdout_reader
        .and_then(|h| h.join().ok())
        .unwrap_or_default();
    Ok(Finished { status, stdout })
}

/// Runs `sh -c script` in `cwd`, its output appended to `log` (standard output
/// returned instead when `capture`).
pub fn shell(
    script: &str,
    cwd: &Path,
    log: &Path,
    capture: bool,
    stop: &AtomicBool,
) -> Result<Finished, String> {
    let mut f = open_log(log)?;
    let _ = writeln!(f, "$ {script}");
    let err = f
        .try_clone()
        .map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script).current_dir(cwd).stderr(err);
    if capture {
        cmd.stdout(Stdio::piped());
    } else {
        cmd.stdout(f);
    }
    let out = wait(cmd, "sh", stop, false)?;
    if capture {
        let mut f = open_log(log)?;
        let _ = f.write_all(out.stdout.as_bytes());
    }
    let mut f = open_log(log)?;
    let _ = writeln!(f, "[exit: {}]", describe(out.status));
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
) -> Result<Finished, String> {
    let mut cmd = Command::new(binary);
    cmd.args(args)
        .current_dir(cwd)
        .stdout(open_log(out)?)
        .stderr(open_log(log)?);
    wait(
        cmd,
        &format!("{} {}", binary.display(), args.join(" ")),
        stop,
        true,
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
