//! Child processes that are ended with everything they started. Each child is the
//! leader of its own process group, so a Ctrl-C at the terminal reaches only us (we
//! decide what the child gets), and ending it reaches what it started too (`sh -c`
//! and its commands): SIGTERM to the group, SIGKILL after [`GRACE`]. Every running
//! group is listed, so quitting at once ([`kill_all`]) leaves no orphan behind. The
//! sweep's and campaign's children and every ssh session of a fleet are such children.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// How long a group has between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);

/// How often a waiting loop looks at the child and the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// The process groups of the children running now.
static RUNNING: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn running() -> MutexGuard<'static, Vec<i32>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kills every child's whole process group at once (SIGKILL): for quitting without
/// waiting (a second Ctrl-C), so nothing we started outlives us.
pub fn kill_all() {
    for &group in running().iter() {
        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
    }
}

/// What a stop request (Ctrl-C) does to a running child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnStop {
    /// Nothing: it runs to its end or its deadline (a teardown after a Ctrl-C).
    Wait,
    /// One SIGINT to the child itself (an `edbstress run` then shuts down cleanly and
    /// writes its results).
    Interrupt,
    /// Ended with its group: SIGTERM, then SIGKILL after [`GRACE`].
    End,
}

/// How a waited-for child came to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself (perhaps after an interrupt).
    Exited,
    /// Ended because a stop was asked ([`OnStop::End`]).
    Stopped,
    /// Ended because it overran its deadline.
    TimedOut,
}

/// A child process leading its own process group; dropping it before it was waited
/// for kills the group.
pub struct GroupChild {
    child: Child,
    group: i32,
    reaped: bool,
}

impl GroupChild {
    /// Starts `cmd` as the leader of a new process group.
    pub fn spawn(cmd: &mut Command) -> io::Result<GroupChild> {
        cmd.process_group(0);
        // Held across the spawn, so a kill_all at that moment cannot miss the child.
        let mut running = running();
        let child = cmd.spawn()?;
        let group = i32::try_from(child.id()).map_err(io::Error::other)?;
        running.push(group);
        Ok(GroupChild {
            child,
            group,
            reaped: false,
        })
    }

    /// The child's process id (also its group's id).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The underlying child (for its pipes).
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Waits for the child: what a stop does is `on_stop`; past `deadline` (from now)
    /// the group is ended.
    pub fn wait(
        &mut self,
        stop: &AtomicBool,
        on_stop: OnStop,
        deadline: Option<Duration>,
    ) -> io::Result<(ExitStatus, Ending)> {
        let started = Instant::now();
        let mut interrupted = false;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok((status, Ending::Exited));
            }
            if stop.load(Ordering::SeqCst) {
                match on_stop {
                    OnStop::Wait => {}
                    OnStop::Interrupt if !interrupted => {
                        interrupted = true;
                        let _ = kill(Pid::from_raw(self.group), Signal::SIGINT);
                    }
                    OnStop::Interrupt => {}
                    OnStop::End => return Ok((self.end()?, Ending::Stopped)),
                }
            }
            if deadline.is_some_and(|d| started.elapsed() >= d) {
                return Ok((self.end()?, Ending::TimedOut));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Asks the group to end (SIGTERM) without waiting: many are ended at once, then
    /// each waited for with [`GroupChild::end`].
    pub fn terminate(&self) {
        if !self.reaped {
            let _ = killpg(Pid::from_raw(self.group), Signal::SIGTERM);
        }
    }

    /// Ends the group: SIGTERM, SIGKILL after [`GRACE`] to whatever is left of it
    /// (also what outlived the leader); returns the leader's status.
    pub fn end(&mut self) -> io::Result<ExitStatus> {
        let group = Pid::from_raw(self.group);
        let _ = killpg(group, Signal::SIGTERM);
        let until = Instant::now() + GRACE;
        let mut status = None;
        while Instant::now() < until {
            status = self.try_wait()?;
            if status.is_some() && killpg(group, None).is_err() {
                break;
            }
            std::thread::sleep(POLL);
        }
        // Only while the group is there: once empty, its number may be another's.
        if killpg(group, None).is_ok() {
            let _ = killpg(group, Signal::SIGKILL);
        }
        match status {
            Some(s) => Ok(s),
            None => {
                let s = self.child.wait()?;
                self.reaped();
                Ok(s)
            }
        }
    }

    /// Ends the group at once with SIGKILL (which also ends a stopped process: an ssh
    /// session given up on), then reaps the leader.
    pub fn kill(&mut self) {
        if !self.reaped {
            let _ = killpg(Pid::from_raw(self.group), Signal::SIGKILL);
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped();
        }
    }

    /// The leader's status once it exited (reaping it), `None` while it runs.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        let status = self.child.try_wait()?;
        if status.is_some() {
            self.reaped();
        }
        Ok(status)
    }

    fn reaped(&mut self) {
        if !self.reaped {
            self.reaped = true;
            running().retain(|g| *g != self.group);
        }
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        self.kill();
    }
}
