//! The host check's one ssh session: a remote POSIX shell that reports the remote
//! edbstress's version, answers clock samples over the open session (a line sent, the
//! remote clock printed back, NTP-style), and on request makes the run's paths and
//! measures their free space. One handshake per host instead of one per question, and
//! a clock sample's round trip is the open session's, not a handshake's (whose
//! asymmetry under load was the error of the old per-sample sessions).
//!
//! Every answer is framed by [`MARK`] lines, so what a login script prints is ignored;
//! each step's error output follows a `MARK STEP` line on standard error, so a failure
//! is told with its own step's last error line.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

use crate::process_group::GroupChild;
use crate::ssh::{Ssh, command_line, no_answer, shell_quote};

/// Frames the remote shell's answers and its steps' error output.
const MARK: &str = "@edbstress-check@";

/// The remote shell: the version (step `version`), then a clock answer per `time` line
/// read, then on `paths` the paths made and measured (step `paths`); any other line or
/// the end of its input ends it.
pub(super) fn script(remote_edbstress: &str, paths: &[PathBuf]) -> String {
    let words = |first: &[&str]| {
        let mut w: Vec<String> = first.iter().map(|s| s.to_string()).collect();
        w.extend(paths.iter().map(|p| p.display().to_string()));
        command_line(&w)
    };
    format!(
        "M={mark}\n\
         echo \"$M version\" >&2\n\
         echo \"$M begin version\"\n\
         {version} </dev/null\n\
         echo \"$M end version $?\"\n\
         while IFS= read -r l && [ \"$l\" = time ]; do printf '%s time %s\\n' \"$M\" \"$(date +%s.%N)\"; done\n\
         [ \"$l\" = paths ] || exit 0\n\
         echo \"$M paths\" >&2\n\
         echo \"$M begin paths\"\n\
         {mkdir} </dev/null && {df} </dev/null\n\
         echo \"$M end paths $?\"\n",
        mark = shell_quote(MARK),
        version = command_line(&[remote_edbstress.to_string(), "--version".into()]),
        mkdir = words(&["mkdir", "-p", "--"]),
        df = words(&["df", "-Pk", "--"]),
    )
}

/// Why the session did not answer as asked.
#[derive(Debug)]
pub(super) enum Interrupted {
    /// No answer within the limit: the session was ended (`TimedOut`).
    TimedOut(std::io::Error),
    /// The session ended (or its output closed) first: see [`CheckSession::finish`].
    Closed,
}

/// One step's answer: its exit code and its standard output.
pub(super) struct Block {
    /// The exit code the shell reported.
    pub(super) status: i32,
    /// Its standard output, line by line.
    pub(super) lines: Vec<String>,
}

/// One clock sample: what the remote shell said and our clock around it.
pub(super) struct ClockSample {
    /// The remote `date +%s.%N`.
    pub(super) answer: String,
    /// Our clock when the request was sent.
    pub(super) sent: SystemTime,
    /// Our clock when the answer came.
    pub(super) received: SystemTime,
    /// The round trip (monotonic).
    pub(super) round_trip: Duration,
}

/// How the session ended: ssh's exit code (`None`: killed or by a signal) and its
/// error output.
pub(super) struct Finished {
    pub(super) code: Option<i32>,
    pub(super) stderr: String,
}

impl Finished {
    /// The error output of `step` (the lines after its mark up to the next mark), else
    /// all of it (ssh's own failure, before any step).
    pub(super) fn of_step(&self, step: &str) -> String {
        let start = format!("{MARK} {step}");
        let mut lines = self.stderr.lines().skip_while(|l| *l != start);
        if lines.next().is_none() {
            return self.without_marks();
        }
        lines
            .take_while(|l| !l.starts_with(MARK))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The error output without the step marks.
    pub(super) fn without_marks(&self) -> String {
        self.stderr
            .lines()
            .filter(|l| !l.starts_with(MARK))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The open session to one host.
pub(super) struct CheckSession {
    dest: String,
    child: GroupChild,
    stdin: Option<ChildStdin>,
    /// Standard output's lines with our clock when each came.
    lines: Receiver<(String, SystemTime, Instant)>,
    /// The error output, once it ended (a session over a shared connection may keep it
    /// open after its ssh was killed: the master holds it while the host's command
    /// runs, so it is waited for with a limit).
    stderr: Receiver<Vec<u8>>,
    limit: Duration,
    deadline: Instant,
}

impl CheckSession {
    /// Starts `script` on `dest`; everything must be answered within `limit`.
    pub(super) fn open(
        ssh: &Ssh,
        dest: &str,
        script: &str,
        limit: Duration,
    ) -> std::io::Result<CheckSession> {
        let deadline = Instant::now() + limit;
        let mut cmd = ssh.command(dest, script);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = GroupChild::spawn(&mut cmd)?;
        let stdin = child.child_mut().stdin.take();
        let stdout = child.child_mut().stdout.take();
        let mut stderr = child.child_mut().stderr.take();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let Some(stdout) = stdout else { return };
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Taken as soon as the line is read: the sample's receive time.
                let at = (line, SystemTime::now(), Instant::now());
                if tx.send(at).is_err() {
                    break;
                }
            }
        });
        let (errors, stderr_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(s) = stderr.as_mut() {
                let _ = s.read_to_end(&mut buf);
            }
            let _ = errors.send(buf);
        });
        Ok(CheckSession {
            dest: dest.to_string(),
            child,
            stdin,
            lines,
            stderr: stderr_rx,
            limit,
            deadline,
        })
    }

    /// The next line of standard output, with our clock when it came.
    fn next_line(&mut self) -> Result<(String, SystemTime, Instant), Interrupted> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Disconnected) => Err(Interrupted::Closed),
            Err(RecvTimeoutError::Timeout) => {
                self.child.kill();
                Err(Interrupted::TimedOut(no_answer(&self.dest, self.limit)))
            }
        }
    }

    /// Sends one request line.
    fn send(&mut self, line: &str) -> Result<(), Interrupted> {
        let stdin = self.stdin.as_mut().ok_or(Interrupted::Closed)?;
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|_| Interrupted::Closed)
    }

    /// The answer of `step`: the lines between its begin and end marks, and the exit
    /// code on its end mark.
    pub(super) fn read_block(&mut self, step: &str) -> Result<Block, Interrupted> {
        let begin = format!("{MARK} begin {step}");
        let end = format!("{MARK} end {step} ");
        while self.next_line()?.0 != begin {}
        let mut lines = Vec::new();
        loop {
            let (line, _, _) = self.next_line()?;
            if let Some(code) = line.strip_prefix(&end) {
                let status = code.trim().parse().map_err(|_| Interrupted::Closed)?;
                return Ok(Block { status, lines });
            }
            lines.push(line);
        }
    }

    /// One clock sample over the open session.
    pub(super) fn clock_sample(&mut self) -> Result<ClockSample, Interrupted> {
        let answer_mark = format!("{MARK} time ");
        let (sent, started) = (SystemTime::now(), Instant::now());
        self.send("time")?;
        loop {
            let (line, received, at) = self.next_line()?;
            if let Some(answer) = line.strip_prefix(&answer_mark) {
                return Ok(ClockSample {
                    answer: answer.trim().to_string(),
                    sent,
                    received,
                    round_trip: at.duration_since(started),
                });
            }
        }
    }

    /// Asks for the paths to be made and measured: the `paths` step's answer.
    pub(super) fn paths(&mut self) -> Result<Block, Interrupted> {
        self.send("paths")?;
        self.read_block("paths")
    }

    /// Ends the session (its input closed: the remote shell exits) and waits for it
    /// until the deadline, past which it is killed.
    pub(super) fn finish(mut self) -> Finished {
        drop(self.stdin.take());
        let code = match crate::ssh::wait_until(&mut self.child, Some(self.deadline)) {
            Some(status) => status.code(),
            None => {
                self.child.kill();
                None
            }
        };
        let wait = self
            .deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        let stderr = self.stderr.recv_timeout(wait).unwrap_or_default();
        Finished {
            code,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }
}
