//! Other hosts through the system's OpenSSH client. Every call is `ssh -o
//! BatchMode=yes` (never a password prompt in an unattended run), with keep-alives (a
//! host that stops answering ends the session instead of holding it open), with the
//! user's keys and `~/.ssh/config`, or the `-F` file and `-o` options given. Each ssh runs
//! in its own process group ([`GroupChild`]), so a Ctrl-C at the terminal reaches only
//! edbstress (which stops the hosts cleanly), a session given up on is ended whole, and
//! quitting at once ([`crate::process_group::kill_all`]) ends every session.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::process_group::GroupChild;

/// How to reach hosts.
#[derive(Clone, Debug, Default)]
pub struct Ssh {
    /// An ssh configuration file (`ssh -F`), instead of `~/.ssh/config`.
    pub config: Option<PathBuf>,
    /// Extra `-o KEY=VALUE` options (they take precedence over the defaults).
    pub options: Vec<String>,
    /// The ssh client to run (default `ssh`).
    pub program: Option<PathBuf>,
    /// The control sockets of shared connections (a fleet's masters): a session to a
    /// host with one is a channel over its connection.
    pub sockets: Option<Arc<ControlSockets>>,
}

/// The control sockets of shared connections (OpenSSH multiplexing), by destination.
#[derive(Debug, Default)]
pub struct ControlSockets(Mutex<HashMap<String, PathBuf>>);

impl ControlSockets {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, PathBuf>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `dest`'s control socket, when it has one.
    pub fn get(&self, dest: &str) -> Option<PathBuf> {
        self.map().get(dest).cloned()
    }

    /// Sessions to `dest` go over the connection of `socket` from now on.
    pub fn insert(&self, dest: &str, socket: PathBuf) {
        self.map().insert(dest.to_string(), socket);
    }

    /// Sessions connect on their own again (the connections are being closed).
    pub fn clear(&self) {
        self.map().clear();
    }
}

/// Quotes `s` for a POSIX shell: the remote side runs commands through one.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `words` quoted and joined into one shell command line.
pub fn command_line(words: &[String]) -> String {
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Ssh {
    /// A `Command` running `remote` (a shell command line) on `dest`; start it with
    /// [`GroupChild::spawn`] (a process group of its own, ended with [`GroupChild::kill`]).
    pub fn command(&self, dest: &str, remote: &str) -> Command {
        let mut c = self.base_command();
        if let Some(socket) = self.sockets.as_ref().and_then(|m| m.get(dest)) {
            c.arg("-o")
                .arg(format!("ControlPath={}", socket.display()))
                .args(["-o", "ControlMaster=no"]);
        }
        c.arg(dest).arg("--").arg(remote).stdin(Stdio::null());
        c
    }

    /// The ssh client to run.
    pub fn program(&self) -> &Path {
        self.program.as_deref().unwrap_or("ssh".as_ref())
    }

    /// ssh with the configuration, the user's options and ours, before the
    /// destination.
    pub fn base_command(&self) -> Command {
        let mut c = Command::new(self.program());
        if let Some(cfg) = &self.config {
            c.arg("-F").arg(cfg);
        }
        // ssh keeps the first value it is given for an option: the user's come first.
        for o in &self.options {
            c.arg("-o").arg(o);
        }
        c.args([
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=15",
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=4",
        ]);
        c
    }

    /// Runs `remote` on `dest` and waits without a time limit (a `prepare` can take
    /// hours), with the time it took.
    pub fn run(&self, dest: &str, remote: &str) -> std::io::Result<(Output, Duration)> {
        self.run_within(dest, remote, None, None)
    }

    /// Runs `remote` on `dest` with `input` on its standard input, waiting at most
    /// `limit` (when given): past it the session is ended and the error is `TimedOut`.
    pub fn run_within(
        &self,
        dest: &str,
        remote: &str,
        input: Option<Vec<u8>>,
        limit: impl Into<Option<Duration>>,
    ) -> std::io::Result<(Output, Duration)> {
        let limit: Option<Duration> = limit.into();
        let started = Instant::now();
        let mut cmd = self.command(dest, remote);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = GroupChild::spawn(&mut cmd)?;
        let writer = match (input, child.child_mut().stdin.take()) {
            (Some(bytes), Some(mut stdin)) => Some(std::thread::spawn(move || {
                let _ = stdin.write_all(&bytes);
            })),
            _ => None,
        };
        let stdout = read_to_end(child.child_mut().stdout.take());
        let stderr = read_to_end(child.child_mut().stderr.take());
        let status = wait_until(&mut child, limit.map(|l| started + l));
        let Some(status) = status else {
            child.kill();
            return Err(match limit {
                Some(limit) => no_answer(dest, limit),
                None => std::io::Error::other("ssh could not be waited for"),
            });
        };
        if let Some(w) = writer {
            let _ = w.join();
        }
        let out = Output {
            status,
            stdout: stdout.join().unwrap_or_default(),
            stderr: stderr.join().unwrap_or_default(),
        };
        Ok((out, started.elapsed()))
    }
}

fn read_to_end(stream: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut s) = stream {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    })
}

/// Waits for `child` until `deadline` (without one, until it ends); `None` when it is
/// still running then.
pub fn wait_until(child: &mut GroupChild, deadline: Option<Instant>) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if deadline.is_none_or(|d| Instant::now() < d) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            // Still running at the deadline, or it cannot be waited for: give up on it.
            _ => return None,
        }
    }
}

/// The error of an ssh call to `dest` that did not end within `limit` (`TimedOut`).
pub fn no_answer(dest: &str, limit: Duration) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "no answer from {dest} within {} s: the host or its sshd stopped answering",
            limit.as_secs()
        ),
    )
}

/// What went wrong, from a failed ssh call to `dest`: a sentence naming the cause and
/// what to check, told from ssh's exit code and its last error line.
pub fn failure_to(dest: &str, out: &Output) -> String {
    failure_of(
        dest,
        out.status.code(),
        &String::from_utf8_lossy(&out.stderr),
    )
}

/// [`failure_to`] from the exit code (`None`: ended by a signal) and the error output
/// of a call, or of one step of a longer remote shell.
pub fn failure_of(dest: &str, code: Option<i32>, err: &str) -> String {
    let last = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let has = |s: &str| err.contains(s);
    match code {
        Some(255) if has("Permission denied") => format!(
            "ssh could not log in to {dest} ({last}): check the user (user@host, or User in \
             the ssh config) and the keys (ssh-agent, IdentityFile, authorized_keys on the \
             host); a fleet never prompts for a password"
        ),
        Some(255) if has("banner exchange") => format!(
            "{dest} took the connection but its sshd did not answer within the connect \
             timeout ({last}): the host or its sshd is frozen or overloaded"
        ),
        Some(255) if has("Connection refused") => format!(
            "no sshd answers at {dest} ({last}): start sshd there, or check the address and \
             Port"
        ),
        Some(255)
            if has("timed out")
                || has("No route to host")
                || has("Network is unreachable")
                || has("Could not resolve") =>
        {
            format!("cannot reach {dest} ({last}): check the address, the network and firewalls")
        }
        Some(255) if has("not responding") => format!(
            "the connection to {dest} was lost ({last}): the host stopped answering ssh \
             keep-alives"
        ),
        Some(255) if has("Host key verification failed") => {
            format!("{dest}'s host key is not the one known ({last}): check known_hosts")
        }
        Some(255) => {
            format!("ssh failed (exit 255: cannot connect or the connection was lost): {last}")
        }
        Some(127) => format!("exit code 127, command not found on {dest}: {last}"),
        Some(126) => format!("exit code 126, not executable on {dest}: {last}"),
        Some(code) => format!("exit code {code}: {last}"),
        None => format!("ended by a signal: {last}"),
    }
}

/// What an ssh call said when it failed: its exit code and its last stderr line.
pub fn failure(out: &Output) -> String {
    failure_to("the host", out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_a_shell() {
        let words: Vec<String> = ["plain", "with space", "it's", "$HOME", "", "a;b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let line = format!("printf '%s\\n' {}", command_line(&words));
        let out = Command::new("sh").arg("-c").arg(&line).output().unwrap();
        let got: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
        assert_eq!(got, ["plain", "with space", "it's", "$HOME", "", "a;b"]);
    }
}
