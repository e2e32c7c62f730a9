//! The bound on parallel ssh sessions. A fleet opens sessions to every host in each
//! phase; at most [`FleetOptions::max_ssh_sessions`](super::FleetOptions) of them are
//! opening or working at once: a check (with the opening of the host's shared
//! connection), making a directory, a stop request and a copy hold their session until
//! it ends; a host's run holds it until the run has started
//! there (the remote shell says so), after which the session only carries its test log
//! and keep-alives and no longer counts.
//!
//! Each host has one connection: its check opens a master (`control_master`), and
//! every session after it — the check itself, its directory, its run, stop requests,
//! the copy — is a channel over it, without a handshake. Only opening the master is
//! an unauthenticated connection (what sshd's `MaxStartups` counts); the channels
//! count against sshd's `MaxSessions` (default 10 per connection), of which a host
//! uses at most two at once (its run and a stop request or copy). Hosts sharing one
//! destination (one address under several names) get no master — their runs together
//! would pass `MaxSessions` on one connection — and neither does a host whose ssh
//! configuration shares connections itself: those connect per session as before; the
//! bound holds either way.
//!
//! The default is sshd's own default for unauthenticated connections: `MaxStartups
//! 10:30:100` starts refusing 30 % of new connections past 10 being set up at once. A
//! fleet whose hosts are reached through one sshd (a `ProxyJump` bastion, one address
//! under several names) then never has a connection refused there, which at the start
//! would cost a host its whole run; with an sshd per host, 10 at once costs seconds of
//! a test of hours.

use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The default bound on ssh sessions opening or working at once.
pub const DEFAULT_MAX_SSH_SESSIONS: usize = 10;

/// `f` over every item, on at most `limit` threads at once (each making its ssh calls
/// one after the other, so at most `limit` sessions are open); the results in the
/// items' order, `None` where `f` panicked.
pub(super) fn map_bounded<T: Sync, R: Send>(
    items: &[T],
    limit: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<Option<R>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> =
        Mutex::new(std::iter::repeat_with(|| None).take(items.len()).collect());
    let workers = limit.max(1).min(items.len());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    // A panic loses that item's result only.
                    let r = std::panic::catch_unwind(AssertUnwindSafe(|| f(item))).ok();
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = r;
                }
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn at_most_the_limit_run_at_once_and_every_item_in_order() {
        let now = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let items: Vec<usize> = (0..20).collect();
        let out = map_bounded(&items, 3, |i| {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(n, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            now.fetch_sub(1, Ordering::SeqCst);
            assert!(*i != 7, "one item panics");
            i * 2
        });
        assert_eq!(most.load(Ordering::SeqCst), 3);
        assert_eq!(out.len(), 20);
        assert_eq!(out[7], None);
        assert_eq!(out[8], Some(16));
        assert!(map_bounded(&[] as &[u8], 3, |_| 0).is_empty());
    }
}
