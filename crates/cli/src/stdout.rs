//! Standard output that may be closed under us (`edbstress aggregate … | head -3`).
//! std's `println!` panics when the reader has gone; here a closed pipe only ends the
//! printing, quietly: the command finishes its work and exits with its own code.
//! Another failure to write (a full disk behind `>`) is said once on standard error and
//! makes the command fail ([`failure`]).

use std::fmt;
use std::io::{ErrorKind, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once standard output cannot be written any more.
static CLOSED: AtomicBool = AtomicBool::new(false);
/// Why, when it was not a closed pipe.
static FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// Prints `args` on standard output, unless it is closed.
pub fn print(args: fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        closed(&e);
    }
}

/// Writes `bytes` on standard output, unless it is closed.
pub fn write_all(bytes: &[u8]) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        closed(&e);
    }
}

fn closed(e: &std::io::Error) {
    CLOSED.store(true, Ordering::Relaxed);
    if e.kind() != ErrorKind::BrokenPipe {
        let mut failure = FAILURE.lock().unwrap_or_else(|p| p.into_inner());
        if failure.is_none() {
            eprintln!("error: cannot write standard output: {e}; the rest of the output is lost");
            *failure = Some(e.to_string());
        }
    }
}

/// Whether writing standard output failed other than by a closed pipe.
pub fn failure() -> bool {
    FAILURE.lock().unwrap_or_else(|p| p.into_inner()).is_some()
}

/// `println!` that survives a closed standard output.
macro_rules! outln {
    () => {
        $crate::stdout::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that survives a closed standard output.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::print(format_args!($($arg)*))
    };
}
