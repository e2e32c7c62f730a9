//! The pre-creation thread: makes the zero-filled, synced `E00tmp.log` in the
//! background so that a roll to the next generation only writes its header. Its
//! zero-fill goes through a backend of its own (of the log's `--backend` kind), which
//! times and counts it as [`IoClass::LogCreate`](edbstress_io::IoClass::LogCreate).

use std::sync::Arc;

use edbstress_io::{AlignedBuf, DataFile, IoBackend};

use super::counters::bump;
use super::shared::{PanicGuard, Shared};
use crate::error::EngineError;
use crate::runtime::log::files::{create_zeroed_file, next_file_path, zero_buffer};

impl Shared {
    pub(super) fn request_next_file(&self) {
        let mut p = self.precreate.lock();
        p.wanted = true;
        self.precreate_cv.notify_all();
    }

    /// The zero-filled next file: the pre-created one, or one made now (through the
    /// log's backend, by the round that rolls and needs it).
    pub(super) fn take_next_file(&self) -> Result<DataFile, EngineError> {
        let path = next_file_path(&self.dir);
        {
            let mut p = self.precreate.lock();
            let mut waited = false;
            while p.creating || (p.wanted && !p.stop && !p.ready && p.error.is_none()) {
                waited = true;
                self.precreate_cv.wait(&mut p);
            }
            if waited {
                bump(&self.counters.roll_waits, 1);
            }
            if p.ready {
                p.ready = false;
                drop(p);
                return Ok(DataFile::open(
                    &path,
                    self.io_mode,
                    edbstress_io::Access::ReadWrite,
                )?);
            }
            if let Some(e) = p.error.take() {
                tracing::warn!(
                    "pre-creating {} failed ({e}); creating it during the roll",
                    path.display()
                );
            }
            p.wanted = false;
        }
        bump(&self.counters.roll_waits, 1);
        let mut zeros = zero_buffer(self.file_len)?;
        let mut io = self.log_io.lock();
        create_zeroed_file(
            &path,
            self.file_len,
            self.io_mode,
            &mut **io,
            self.instance,
            &mut zeros,
        )
    }
}

/// The pre-creation thread: makes `E00tmp.log` whenever a roll asks, through
/// `io`, with one zero buffer for every file.
pub(super) fn run_precreator(shared: Arc<Shared>, mut io: Box<dyn IoBackend>) {
    let _guard = PanicGuard(&shared);
    let path = next_file_path(&shared.dir);
    let mut zeros: Option<AlignedBuf> = None;
    loop {
        {
            let mut p = shared.precreate.lock();
            while !p.wanted && !p.stop {
                shared.precreate_cv.wait(&mut p);
            }
            if p.stop {
                return;
            }
            p.wanted = false;
            p.creating = true;
        }
        let result = match &mut zeros {
            Some(zeros) => Ok(zeros),
            None => zero_buffer(shared.file_len)
                .map(|buf| zeros.insert(buf))
                .map_err(EngineError::from),
        }
        .and_then(|zeros| {
            create_zeroed_file(
                &path,
                shared.file_len,
                shared.io_mode,
                &mut *io,
                shared.instance,
                zeros,
            )
        });
        let mut p = shared.precreate.lock();
        p.creating = false;
        // In place: the counters hold ~200 KB histograms per class, and a clone would
        // allocate (and fault in) fresh ones for every file.
        p.stats.clone_from(io.stats());
        match result {
            Ok(_) => {
                p.ready = true;
                bump(&shared.counters.files_precreated, 1);
            }
            Err(e) => p.error = Some(e.to_string()),
        }
        shared.precreate_cv.notify_all();
    }
}
