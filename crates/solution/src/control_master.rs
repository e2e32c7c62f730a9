//! One shared ssh connection per host (OpenSSH multiplexing): a master `ssh -M` per
//! host (its own session a `cat` of a pipe from us), its control socket in a private
//! temporary directory made here, and every later session to that host (the check,
//! its directory, its run, stop requests, the copy back) a channel over it instead of
//! a connection and handshake of its own.
//!
//! The masters are children here (`ControlPersist=no`, each in its own process group),
//! so nothing outlives the fleet: [`ControlMasters::close`] (also on drop: errors,
//! Ctrl-C, a panic's unwinding) ends each by its PID and removes the directory, and
//! quitting at once ([`crate::process_group::kill_all`]) kills them with every session.
//! Were edbstress killed outright, each master's pipe closes, which ends its own
//! session, and the master ends once the sessions over it (the runs) ended. A host
//! whose ssh configuration multiplexes already (`ControlMaster`/`ControlPath` in the
//! user's config or `-o` options) keeps the user's own; a session to a host without a
//! master (its socket gone, or never made) connects as usual.

use std::os::unix::fs::PermissionsExt;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::process_group::GroupChild;
use crate::ssh::{ControlSockets, Ssh, no_answer};

/// The longest control socket path we make: `sun_path` holds 108 bytes, and ssh binds a
/// temporary name 17 bytes longer first.
const MAX_SOCKET_PATH: usize = 90;

/// Why a host's master connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum MasterError {
    /// ssh could not be started.
    #[error("cannot run ssh: {0}")]
    Spawn(#[source] std::io::Error),
    /// No connection within the limit (the master was ended).
    #[error("{0}")]
    TimedOut(#[source] std::io::Error),
    /// The connection failed: ssh's exit code and error output.
    #[error("ssh exited with {code:?}: {stderr}")]
    Failed {
        /// ssh's exit code (`None`: by a signal).
        code: Option<i32>,
        /// Its error output.
        stderr: String,
    },
}

/// The fleet's master connections and their private directory.
pub struct ControlMasters {
    dir: tempfile::TempDir,
    /// Each destination with a live master, its control socket (shared with the
    /// [`Ssh`] whose sessions use them).
    sockets: Arc<ControlSockets>,
    /// Each master with the input of its own session (closed to end it).
    masters: Mutex<Vec<(GroupChild, Option<ChildStdin>)>>,
    /// Names the next socket.
    next: AtomicUsize,
}

impl std::fmt::Debug for ControlMasters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlMasters")
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl ControlMasters {
    /// A new private directory (mode 0700) for the control sockets; `None` when it
    /// cannot be made or its path would be too long for a socket (sessions then
    /// connect one by one, as without multiplexing).
    pub fn new() -> Option<ControlMasters> {
        // Only we may reach the sockets' names (ssh makes the sockets 0600 too).
        let dir = tempfile::Builder::new()
            .prefix("edbstress-ssh-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .ok()?;
        // A socket name: "m" and a number of up to 5 digits.
        if dir.path().as_os_str().len() + 7 > MAX_SOCKET_PATH {
            return None;
        }
        Some(ControlMasters {
            dir,
            sockets: Arc::default(),
            masters: Mutex::new(Vec::new()),
            next: AtomicUsize::new(0),
        })
    }

    /// The control sockets, for [`Ssh::sockets`]: sessions to a host with a master go
    /// over its connection.
    pub fn sockets(&self) -> Arc<ControlSockets> {
        self.sockets.clone()
    }

    /// Opens a master connection to `dest` (`ssh` as sessions are made), waiting
    /// at most `limit` for it; `Ok(false)` when the user's ssh configuration
    /// multiplexes `dest` already (theirs is used), `Ok(true)` when ours is open.
    pub fn open(&self, ssh: &Ssh, dest: &str, limit: Duration) -> Result<bool, MasterError> {
        if self.sockets.get(dest).is_some() {
            return Ok(true);
        }
        if users_own(ssh, dest) {
            return Ok(false);
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let socket = self.dir.path().join(format!("m{n}"));
        let log = self.dir.path().join(format!("m{n}.log"));
        let stderr = std::fs::File::create(&log).map_err(MasterError::Spawn)?;
        let mut cmd = ssh.base_command();
        // Its own session reads our pipe: were we killed outright, the pipe's end ends
        // that session, and the master once the sessions over it ended.
        cmd.arg("-M")
            .arg("-o")
            .arg(format!("ControlPath={}", socket.display()))
            .args(["-o", "ControlPersist=no"])
            .arg(dest)
            .args(["--", "cat >/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr));
        let mut master = GroupChild::spawn(&mut cmd).map_err(MasterError::Spawn)?;
        let lifeline = master.child_mut().stdin.take();
        let deadline = Instant::now() + limit;
        loop {
            if socket.exists() {
                lock(&self.masters).push((master, lifeline));
                self.sockets.insert(dest, socket);
                return Ok(true);
            }
            if let Ok(Some(status)) = master.try_wait() {
                let stderr = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(MasterError::Failed {
                    code: status.code(),
                    stderr,
                });
            }
            if Instant::now() >= deadline {
                master.kill();
                return Err(MasterError::TimedOut(no_answer(dest, limit)));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ends every master (SIGTERM: ssh removes its socket; SIGKILL after the grace).
    pub fn close(&self) {
        self.sockets.clear();
        let mut masters = lock(&self.masters);
        for (m, lifeline) in masters.iter_mut() {
            drop(lifeline.take());
            m.terminate();
        }
        for (mut m, _) in masters.drain(..) {
            let _ = m.end();
        }
    }
}

impl Drop for ControlMasters {
    fn drop(&mut self) {
        self.close();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the user's ssh configuration for `dest` (their config file and `-o`
/// options) sets up multiplexing of its own: then it is left to them.
fn users_own(ssh: &Ssh, dest: &str) -> bool {
    let named = |o: &str| {
        let key = o
            .split(['=', ' '])
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        key.starts_with("control")
    };
    if ssh.options.iter().any(|o| named(o)) {
        return true;
    }
    let mut cmd = Command::new(ssh.program());
    if let Some(cfg) = &ssh.config {
        cmd.arg("-F").arg(cfg);
    }
    let Ok(out) = cmd.arg("-G").arg(dest).stdin(Stdio::null()).output() else {
        // ssh -G cannot tell: the master's own start will say what is wrong.
        return false;
    };
    String::from_utf8_lossy(&out.stdout).lines().any(|l| {
        let mut w = l.split_whitespace();
        match (w.next(), w.next()) {
            (Some("controlpath"), Some(p)) => p != "none",
            (Some("controlmaster"), Some(m)) => m != "false",
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sockets_directory_is_private_and_removed_with_the_masters() {
        let masters = ControlMasters::new().expect("a temporary directory");
        let dir = masters.dir.path().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        assert!(masters.sockets().get("anywhere").is_none());
        drop(masters);
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}
