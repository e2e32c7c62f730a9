//! Other hosts through the system's OpenSSH client. Every call is `ssh -o
//! BatchMode=yes` (never a password prompt in an unattended run), with the user's keys
//! and `~/.ssh/config`, or the `-F` file and `-o` options given.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How to reach hosts.
#[derive(Clone, Debug, Default)]
pub struct Ssh {
    /// An ssh configuration file (`ssh -F`), instead of `~/.ssh/config`.
    pub config: Option<PathBuf>,
    /// Extra `-o KEY=VALUE` options.
    pub options: Vec<String>,
    /// The ssh client to run (default `ssh`).
    pub program: Option<PathBuf>,
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
    /// A `Command` running `remote` (a shell command line) on `dest`.
    pub fn command(&self, dest: &str, remote: &str) -> Command {
        let mut c = Command::new(self.program.as_deref().unwrap_or("ssh".as_ref()));
        c.args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=15"]);
        if let Some(cfg) = &self.config {
            c.arg("-F").arg(cfg);
        }
        for o in &self.options {
            c.arg("-o").arg(o);
        }
        c.arg(dest).arg("--").arg(remote).stdin(Stdio::null());
        c
    }

    /// Runs `remote` on `dest` and waits, with the time it took.
    pub fn run(&self, dest: &str, remote: &str) -> std::io::Result<(Output, Duration)> {
        let started = Instant::now();
        let out = self.command(dest, remote).output()?;
        Ok((out, started.elapsed()))
    }
}

/// What an ssh call said when it failed: its exit code and its last stderr line.
pub fn failure(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    match out.status.code() {
        Some(255) => {
            format!("ssh failed (exit 255: cannot connect or the connection was lost): {last}")
        }
        Some(code) => format!("exit code {code}: {last}"),
        None => format!("ended by a signal: {last}"),
    }
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
