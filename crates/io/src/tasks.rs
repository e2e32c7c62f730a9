//! Sessions as tasks: many sequences of blocking work (database sessions) run on one
//! thread, each on its own stack (a stackful coroutine), so that a session waiting for
//! its page read or its commit costs no thread of its own and no sleep of the kernel's.
//!
//! [`run_tasks`] runs a set of tasks on the calling thread to completion. Inside a task,
//! the two things a session waits for suspend the task instead of blocking the thread:
//!
//! - a request given to a [`BackendPool`](crate::BackendPool) (`run`) goes to a backend
//!   the pool reserves for this thread, which carries the requests of all its tasks at
//!   once (one ring per thread with io_uring), timed and counted there as every request;
//! - [`TaskEvent::park`] waits until the event is notified (a commit waiting for its log
//!   round, a session waiting for a page another one reads).
//!
//! The thread runs the tasks that can run; when none can, it sleeps once in the kernel
//! for whichever comes first: a completion on one of its backends, or a notification of
//! an event one of its tasks waits for. Everything else a task does runs as it would on
//! a thread of its own, so the code above (the engine) stays synchronous.
//!
//! The rule that keeps this deadlock-free: a task never suspends while it holds a lock
//! another task of the same thread may take (a blocking lock would stop the thread, and
//! with it the holder). The engine suspends only in a page read (taken without its
//! cache lock) and in parks (which release the lock first).

use std::cell::Cell;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::backend::{BackendPool, ReservedSlot};
use crate::{IoCompletion, IoError, IoRequest};

/// A task's stack: generous for the engine's deepest paths (B+tree splits, recovery is
/// not run in tasks); only the pages touched are ever backed by memory.
const STACK_BYTES: usize = 2 << 20;

/// What a task is resumed with.
enum Resume {
    /// Start, or go on after a park.
    Go,
    /// The completion of the request it suspended with.
    Completed(Result<IoCompletion, IoError>),
}

/// Why a task suspended. The pointers point into the suspended task's own frames
/// (`BackendPool::run(&self)`, `TaskEvent::park(&self)`), which cannot end before the
/// task is resumed; the executor uses them only until then.
enum Suspend {
    Io {
        pool: *const BackendPool,
        request: IoRequest,
    },
    Park {
        event: *const TaskEvent,
        seen: u64,
    },
    Sleep {
        until: Instant,
    },
    /// Lets the other ready tasks run first.
    Yield,
}

type TaskYielder = Yielder<Resume, Suspend>;

thread_local! {
    /// The yielder of the task running on this thread, null outside tasks.
    static CURRENT: Cell<*const TaskYielder> = const { Cell::new(std::ptr::null()) };
}

/// Whether the caller runs inside a task of [`run_tasks`].
pub fn in_task() -> bool {
    CURRENT.with(|c| !c.get().is_null())
}

/// Suspends the running task with `why`; `None` outside a task.
fn suspend(why: Suspend) -> Option<Resume> {
    let yielder = CURRENT.with(Cell::get);
    if yielder.is_null() {
        return None;
    }
    // SAFETY: CURRENT is set only by a task's body to its own yielder while that task
    // runs on this thread (reset after every suspend below, cleared when the body
    // ends), so the pointer is valid and we are on the task's stack.
    let resumed = unsafe { &*yielder }.suspend(why);
    // Other tasks of this thread ran meanwhile and set CURRENT to theirs.
    CURRENT.with(|c| c.set(yielder));
    Some(resumed)
}

/// Carries `request` on this thread's reserved backend of `pool` if the caller is a
/// task (`Some`), suspending it until the completion; `None` outside tasks.
pub(crate) fn run_request(
    pool: &BackendPool,
    request: IoRequest,
) -> Result<Result<IoCompletion, IoError>, IoRequest> {
    if !in_task() {
        return Err(request);
    }
    match suspend(Suspend::Io {
        pool: std::ptr::from_ref(pool),
        request,
    }) {
        Some(Resume::Completed(result)) => Ok(result),
        _ => unreachable!("a task suspended for I/O is resumed with its completion"),
    }
}

/// Sleeps until `until`: in a task, the task sleeps and its thread runs the others;
/// elsewhere, the thread sleeps.
pub fn sleep_until(until: Instant) {
    let now = Instant::now();
    if until <= now {
        return;
    }
    match suspend(Suspend::Sleep { until }) {
        Some(Resume::Go) => {}
        Some(Resume::Completed(_)) => unreachable!("a sleeping task is resumed to go on"),
        None => std::thread::sleep(until - now),
    }
}

/// In a task: lets the thread's other ready tasks run before this one goes on. A task
/// only gives its thread up when it waits; one whose work never waits (transactions
/// that hit the cache and commit lazily) would otherwise keep it. Outside tasks: nothing.
pub fn yield_now() {
    if let Some(resumed) = suspend(Suspend::Yield) {
        debug_assert!(matches!(resumed, Resume::Go));
    }
}

/// Something tasks wait for: a counter bumped by every [`TaskEvent::notify`]. A waiter
/// reads [`TaskEvent::epoch`] while it holds the lock that guards the state it waits
/// on, lets go of the lock and parks until the epoch moves; the notifier changes that
/// state under the same lock and then notifies. Threads that are not tasks keep
/// waiting on their condition variables: an event only wakes tasks, and costs a
/// notifier one atomic add when no task's thread sleeps on it.
#[derive(Default)]
pub struct TaskEvent {
    epoch: AtomicU64,
    /// Threads of tasks sleeping until this event moves (each at most once).
    sleepers: Mutex<Vec<Arc<Wake>>>,
    sleeping: AtomicUsize,
}

impl std::fmt::Debug for TaskEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskEvent")
            .field("epoch", &self.epoch.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl TaskEvent {
    /// A new event.
    pub fn new() -> TaskEvent {
        TaskEvent::default()
    }

    /// The current epoch: read it before letting go of the lock, then [`park`](Self::park).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Moves the epoch on and wakes the threads of tasks parked on it.
    pub fn notify(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        // Paired with `sleep_on`: it registers, then re-reads the epoch (both SeqCst),
        // so either it sees this add or this load sees it registered.
        if self.sleeping.load(Ordering::SeqCst) > 0 {
            let woken = {
                let mut sleepers = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
                self.sleeping.store(0, Ordering::SeqCst);
                std::mem::take(&mut *sleepers)
            };
            for wake in woken {
                wake.wake();
            }
        }
    }

    /// In a task: suspends it until the epoch is no longer `seen` (returns at once if
    /// it already moved) and returns true. Outside tasks: returns false at once, and
    /// the caller waits as threads do.
    pub fn park(&self, seen: u64) -> bool {
        if !in_task() {
            return false;
        }
        if self.epoch() != seen {
            return true;
        }
        match suspend(Suspend::Park {
            event: std::ptr::from_ref(self),
            seen,
        }) {
            Some(Resume::Go) => true,
            _ => unreachable!("a parked task is resumed to go on"),
        }
    }

    /// Registers `wake` to be woken at the next notify; false if the epoch already
    /// moved from `seen` (then the caller must not sleep).
    fn sleep_on(&self, wake: &Arc<Wake>, seen: u64) -> bool {
        {
            let mut sleepers = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
            if !sleepers.iter().any(|w| Arc::ptr_eq(w, wake)) {
                sleepers.push(Arc::clone(wake));
                self.sleeping.fetch_add(1, Ordering::SeqCst);
            }
        }
        self.epoch() == seen
    }
}

/// How another thread wakes a sleeping task thread: an eventfd it polls.
#[derive(Debug)]
pub(crate) struct Wake {
    pub(crate) fd: OwnedFd,
}

impl Wake {
    pub(crate) fn new() -> Result<Wake, IoError> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor
        // we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(IoError::Backend {
                backend: "tasks",
                op: "eventfd",
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: `fd` was just returned by eventfd and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Wake { fd })
    }

    pub(crate) fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd. A full counter (EAGAIN)
        // still leaves it readable, which is all a wake needs.
        unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                std::ptr::from_ref(&one).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }

    /// Consumes pending wakes (non-blocking).
    pub(crate) fn reset(&self) {
        let mut count: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64 from our non-blocking eventfd.
        unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                std::ptr::from_mut(&mut count).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }
}

/// Threads of tasks when the user does not choose: one per CPU. Fewer cost less CPU per
/// I/O but carry fewer I/Os: on two CPUs, one thread of 16 sessions against two took a
/// median 8 % less CPU per transactional I/O (half the context switches: a busier
/// thread sleeps less often) and did a median 3 % fewer IOPS (0.2-15 %, six pairs), its
/// sessions queueing for the one thread. A storage test must load the storage first;
/// see docs/performance.md, "The transactional engine: where the CPU goes".
pub fn default_threads() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// One task of [`run_tasks`]: boxed so tasks of different closures share one list.
pub type Task<'a> = Box<dyn FnOnce() + Send + 'a>;

/// Tasks `0..count` made by `task`, dealt round-robin to `threads` lists (at least one),
/// one list per thread that will call [`run_tasks`]: neighbours (often sessions of
/// different databases) land on different threads.
pub fn deal<'a>(
    count: u32,
    threads: u32,
    mut task: impl FnMut(u32) -> Task<'a>,
) -> Vec<Vec<Task<'a>>> {
    let threads = threads.max(1);
    let mut lists: Vec<Vec<Task<'a>>> = (0..threads).map(|_| Vec::new()).collect();
    for i in 0..count {
        lists[(i % threads) as usize].push(task(i));
    }
    lists
}

/// What a task's body returns: the payload of its panic, if it panicked.
type Panic = Option<Box<dyn std::any::Any + Send>>;

struct TaskSlot {
    coroutine: Coroutine<Resume, Suspend, Panic, DefaultStack>,
    /// The event it is parked on, with the epoch it saw.
    parked: Option<(*const TaskEvent, u64)>,
    /// When it wakes from `sleep_until`.
    sleeping: Option<Instant>,
}

/// The executor's backend for one pool: requests of its tasks on that pool go there.
struct PoolBackend {
    pool: *const BackendPool,
    slot: ReservedSlot,
}

/// Runs `tasks` on the calling thread until every one has returned. Tasks run one at a
/// time; a task runs until it finishes or waits (module documentation). A task that
/// panics ends there and the others go on, as threads of a scope do; once all have
/// returned, the first panic is passed on to the caller. A backend that cannot be
/// reserved or fails gives its tasks the error as their requests' result. Errors: only
/// what prevents starting (an eventfd, a task's stack).
pub fn run_tasks(tasks: Vec<Task<'_>>) -> Result<(), IoError> {
    if in_task() {
        return Err(IoError::Backend {
            backend: "tasks",
            op: "run_tasks",
            source: std::io::Error::other("tasks cannot run tasks of their own"),
        });
    }
    let wake = Arc::new(Wake::new()?);
    let depth = tasks.len().max(1);
    let mut slots = Vec::with_capacity(tasks.len());
    for task in tasks {
        let stack = DefaultStack::new(STACK_BYTES).map_err(|source| IoError::Backend {
            backend: "tasks",
            op: "task stack",
            source,
        })?;
        let body = move |yielder: &TaskYielder, _: Resume| -> Panic {
            CURRENT.with(|c| c.set(std::ptr::from_ref(yielder)));
            // Caught here, so that the other tasks are not unwound while suspended in
            // the middle of their work (a page read, a commit): they finish as threads
            // of a scope would, and the panic is passed on after them.
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task));
            CURRENT.with(|c| c.set(std::ptr::null()));
            outcome.err()
        };
        // SAFETY: every coroutine is driven to completion or dropped before this
        // function returns (they live in `slots`, a local), so what `body` borrows
        // (the task's captures, of lifetime '_ which outlives this call) stays valid
        // for as long as the coroutine exists.
        let coroutine = unsafe { Coroutine::with_stack_unchecked(stack, body) };
        slots.push(TaskSlot {
            coroutine,
            parked: None,
            sleeping: None,
        });
    }
    let mut executor = Executor {
        ready: (0..slots.len()).map(|i| (i, Resume::Go)).collect(),
        slots,
        backends: Vec::new(),
        depth,
        wake,
        completions: Vec::new(),
        live: 0,
        panic: None,
        warned: false,
        registered: Vec::new(),
        fds: Vec::new(),
    };
    executor.live = executor.slots.len();
    executor.run();
    if let Some(payload) = executor.panic.take() {
        drop(executor);
        std::panic::resume_unwind(payload);
    }
    Ok(())
}

struct Executor {
    slots: Vec<TaskSlot>,
    ready: VecDeque<(usize, Resume)>,
    backends: Vec<PoolBackend>,
    depth: usize,
    wake: Arc<Wake>,
    completions: Vec<IoCompletion>,
    live: usize,
    /// The first panic of a task, passed on once every task has returned.
    panic: Panic,
    /// A failure to sleep was logged (the thread then naps and polls instead).
    warned: bool,
    /// Reused by every `sleep`: the events registered on, the descriptors polled.
    registered: Vec<*const TaskEvent>,
    fds: Vec<libc::pollfd>,
}

impl Drop for Executor {
    /// Gives the reserved backends back. Every task has returned by then (or the
    /// executor itself panicked, a bug: the tasks' stacks unwind when `slots` drops,
    /// after this), so no task waits for a request these backends carry.
    fn drop(&mut self) {
        for backend in &self.backends {
            backend.slot.release();
        }
    }
}

impl Executor {
    fn run(&mut self) {
        while self.live > 0 {
            // Only the tasks ready now: one that yields goes to the back and waits for
            // this pass to end, so completions are reaped between passes.
            for _ in 0..self.ready.len() {
                let Some((i, input)) = self.ready.pop_front() else {
                    break;
                };
                let outcome = self.slots[i].coroutine.resume(input);
                CURRENT.with(|c| c.set(std::ptr::null()));
                match outcome {
                    CoroutineResult::Return(panic) => {
                        self.live -= 1;
                        if self.panic.is_none() {
                            self.panic = panic;
                        }
                    }
                    CoroutineResult::Yield(Suspend::Io { pool, request }) => {
                        self.submit(i, pool, request)
                    }
                    CoroutineResult::Yield(Suspend::Park { event, seen }) => {
                        self.slots[i].parked = Some((event, seen));
                    }
                    CoroutineResult::Yield(Suspend::Sleep { until }) => {
                        self.slots[i].sleeping = Some(until);
                    }
                    CoroutineResult::Yield(Suspend::Yield) => {
                        self.ready.push_back((i, Resume::Go));
                    }
                }
                // A request is timed when reaped: take what completed while the task
                // ran, rather than at the end of the pass (several tasks' work later).
                self.reap();
            }
            if self.live == 0 {
                break;
            }
            self.submit_queued();
            self.unpark();
            if self.ready.is_empty() {
                if let Err(e) = self.sleep() {
                    // Nothing a task did: polling itself failed. Nap and poll again
                    // rather than abandon tasks in the middle of their work.
                    if !std::mem::replace(&mut self.warned, true) {
                        tracing::warn!(error = %e, "a thread of sessions cannot sleep on its I/O and events; it polls every millisecond");
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                self.reap();
                self.unpark();
            }
        }
    }

    /// Queues task `i`'s request on this thread's backend of `pool` (reserving one at
    /// the pool's first request); a request refused at once resumes it with the error.
    fn submit(&mut self, i: usize, pool: *const BackendPool, mut request: IoRequest) {
        let at = match self.backends.iter().position(|b| b.pool == pool) {
            Some(at) => at,
            None => {
                // SAFETY: `pool` comes from the suspended task `i`, still inside
                // `BackendPool::run(&self)` (see `Suspend`).
                let reserved = unsafe { &*pool }.reserve(self.depth);
                match reserved {
                    Ok(slot) => {
                        self.backends.push(PoolBackend { pool, slot });
                        self.backends.len() - 1
                    }
                    Err(e) => {
                        self.ready.push_back((i, Resume::Completed(Err(e))));
                        return;
                    }
                }
            }
        };
        request.tag = i as u64;
        if let Err(e) = self.backends[at].slot.submit(request) {
            self.ready.push_back((i, Resume::Completed(Err(e))));
        }
    }

    /// Hands the requests the pass queued to the kernel (one system call per backend
    /// for all of them) and moves what completed meanwhile to the ready queue.
    fn submit_queued(&mut self) {
        for at in 0..self.backends.len() {
            let slot = &self.backends[at].slot;
            if let Err(e) = slot.flush() {
                self.fail_lost(at, &e);
            }
        }
        self.reap();
    }

    /// Moves the completions already available on every backend to the ready queue,
    /// submitting nothing and without waiting.
    fn reap(&mut self) {
        for at in 0..self.backends.len() {
            self.reap_one(at, 0);
        }
    }

    /// Moves backend `at`'s completions to the ready queue, waiting for `min`. When the
    /// backend fails, the tasks whose requests it lost get the error.
    fn reap_one(&mut self, at: usize, min: usize) {
        if let Err(e) = self.backends[at].slot.wait(min, &mut self.completions) {
            self.fail_lost(at, &e);
        }
        for completion in self.completions.drain(..) {
            let task = completion.tag as usize;
            self.ready
                .push_back((task, Resume::Completed(Ok(completion))));
        }
    }

    /// Resumes the tasks whose requests backend `at` lost (it failed) with the error.
    fn fail_lost(&mut self, at: usize, e: &IoError) {
        for task in self.backends[at].slot.lost_tags() {
            let lost = IoError::Backend {
                backend: "tasks",
                op: "wait for a task's request",
                source: std::io::Error::other(e.to_string()),
            };
            self.ready
                .push_back((task as usize, Resume::Completed(Err(lost))));
        }
    }

    /// Readies the parked tasks whose event moved and the sleeping ones whose time came.
    fn unpark(&mut self) {
        let mut now = None;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if let Some(until) = slot.sleeping
                && *now.get_or_insert_with(Instant::now) >= until
            {
                slot.sleeping = None;
                self.ready.push_back((i, Resume::Go));
            }
            if let Some((event, seen)) = slot.parked {
                // SAFETY: task `i` is suspended inside `TaskEvent::park(&self)` on this
                // event (see `Suspend`).
                if unsafe { &*event }.epoch() != seen {
                    slot.parked = None;
                    self.ready.push_back((i, Resume::Go));
                }
            }
        }
    }

    /// Sleeps until a completion on one of the backends, a notification of an event a
    /// task is parked on, or the end of a task's sleep.
    fn sleep(&mut self) -> Result<(), IoError> {
        let wake_at = self.slots.iter().filter_map(|s| s.sleeping).min();
        let mut parked = false;
        // Each event once: most parked tasks wait on the same few (the log's rounds).
        // Both lists are the executor's, reused: this runs at every sleep.
        let registered = &mut self.registered;
        registered.clear();
        for slot in &self.slots {
            if let Some((event, seen)) = slot.parked {
                parked = true;
                // SAFETY: as in `unpark`.
                let event_ref = unsafe { &*event };
                let still = if registered.contains(&event) {
                    event_ref.epoch() == seen
                } else {
                    registered.push(event);
                    event_ref.sleep_on(&self.wake, seen)
                };
                if !still {
                    return Ok(());
                }
            }
        }
        let mut busy =
            (0..self.backends.len()).filter(|&at| self.backends[at].slot.in_flight() > 0);
        let first_busy = busy.next();
        let more_busy = busy.next().is_some();
        if let Some(at) = first_busy
            && !more_busy
            && !parked
            && wake_at.is_none()
        {
            // One source of wake-ups: wait in the backend itself (one io_uring_enter).
            self.reap_one(at, 1);
            return Ok(());
        }
        let fds = &mut self.fds;
        fds.clear();
        for backend in &self.backends {
            if backend.slot.in_flight() == 0 {
                continue;
            }
            backend.slot.flush()?;
            fds.push(libc::pollfd {
                fd: backend.slot.completion_fd()?,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if parked {
            fds.push(libc::pollfd {
                fd: self.wake.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if fds.is_empty() && wake_at.is_none() {
            // Nothing can wake a task: a task parked on nothing, which `park` forbids.
            return Err(IoError::Backend {
                backend: "tasks",
                op: "sleep",
                source: std::io::Error::other("every task waits and nothing can wake one"),
            });
        }
        poll(fds, wake_at)?;
        // Our eventfd is last when polled; read it only when it fired.
        if parked && fds.last().is_some_and(|f| f.revents & libc::POLLIN != 0) {
            self.wake.reset();
        }
        Ok(())
    }
}

/// ppoll(2) until `wake_at` (or without a timeout); EINTR counts as a wake-up.
fn poll(fds: &mut [libc::pollfd], wake_at: Option<Instant>) -> Result<(), IoError> {
    let timeout = wake_at.map(|at| {
        let left = at.saturating_duration_since(Instant::now());
        libc::timespec {
            tv_sec: left.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: libc::c_long::from(left.subsec_nanos() as i32),
        }
    });
    let timeout_ptr = timeout
        .as_ref()
        .map_or(std::ptr::null(), std::ptr::from_ref);
    // SAFETY: `fds` is a live, writable array of `fds.len()` pollfd structures; the
    // timeout, when given, points to a live timespec; no signal mask is passed.
    let n = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            timeout_ptr,
            std::ptr::null(),
        )
    };
    if n < 0 {
        let source = std::io::Error::last_os_error();
        if source.raw_os_error() != Some(libc::EINTR) {
            return Err(IoError::Backend {
                backend: "tasks",
                op: "poll",
                source,
            });
        }
    }
    Ok(())
}
