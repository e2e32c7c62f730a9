//! A condition variable that sessions wait on whether they run as threads or as tasks
//! ([`edbstress_io::tasks`]): a thread blocks on the condition variable; a task lets go
//! of the lock and parks on an event, so the thread runs its other sessions meanwhile.
//! Notifying wakes both kinds.

use edbstress_io::tasks::{self, TaskEvent};
use parking_lot::{Condvar, MutexGuard};

#[derive(Debug, Default)]
pub(crate) struct SessionCondvar {
    threads: Condvar,
    tasks: TaskEvent,
}

impl SessionCondvar {
    pub(crate) fn new() -> SessionCondvar {
        SessionCondvar::default()
    }

    /// Waits for a notification with `guard`'s lock released meanwhile, as
    /// `Condvar::wait` does (spurious wake-ups included: callers loop on their
    /// condition).
    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        if tasks::in_task() {
            // Read under the lock: a notification after the caller's check moves it.
            let seen = self.tasks.epoch();
            MutexGuard::unlocked(guard, || {
                self.tasks.park(seen);
            });
        } else {
            self.threads.wait(guard);
        }
    }

    pub(crate) fn notify_all(&self) {
        self.threads.notify_all();
        self.tasks.notify();
    }

    /// Wakes one waiting thread, and every waiting task (each checks its condition).
    pub(crate) fn notify_one(&self) {
        self.threads.notify_one();
        self.tasks.notify();
    }
}
