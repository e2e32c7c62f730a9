//! The registered files of a backend: ids handed out (freed ids reused first), what the
//! backend keeps of each file (`H`: a descriptor, a fixed-table index), where it came
//! from (to explain errors) and how many of its requests are in flight, since a file
//! with requests in flight cannot be unregistered.

use std::io;

use super::{FileId, FileOrigin};
use crate::{DataFile, IoError};

/// One registered file.
pub(crate) struct FileEntry<H> {
    /// What the backend does I/O through.
    pub(crate) handle: H,
    /// The path and mode, for error messages.
    pub(crate) origin: FileOrigin,
    /// Requests on this file submitted and not yet completed.
    pub(crate) in_flight: usize,
}

/// The table of registered files, indexed by [`FileId`].
pub(crate) struct FileTable<H> {
    backend: &'static str,
    entries: Vec<Option<FileEntry<H>>>,
    free_ids: Vec<u32>,
}

impl<H> FileTable<H> {
    /// An empty table; `backend` names the backend in errors.
    pub(crate) fn new(backend: &'static str) -> FileTable<H> {
        FileTable {
            backend,
            entries: Vec::new(),
            free_ids: Vec::new(),
        }
    }

    /// Registers `file` under a new id (a freed one first) with the handle `make`
    /// builds once the id is known to be available.
    pub(crate) fn insert(
        &mut self,
        file: &DataFile,
        make: impl FnOnce() -> H,
    ) -> Result<FileId, IoError> {
        let id = match self.free_ids.pop() {
            Some(id) => id,
            None => u32::try_from(self.entries.len()).map_err(|_| IoError::Backend {
                backend: self.backend,
                op: "register",
                source: io::Error::other("too many files registered"),
            })?,
        };
        let entry = FileEntry {
            handle: make(),
            origin: FileOrigin {
                path: file.path().to_path_buf(),
                mode: file.mode(),
            },
            in_flight: 0,
        };
        let index = id as usize;
        if index == self.entries.len() {
            self.entries.push(Some(entry));
        } else {
            self.entries[index] = Some(entry);
        }
        Ok(FileId(id))
    }

    /// The file registered as `id`.
    pub(crate) fn get(&self, id: FileId) -> Result<&FileEntry<H>, IoError> {
        self.entries
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(IoError::UnknownFile(id.0))
    }

    /// The file registered as `id`, to submit a request on it.
    pub(crate) fn get_mut(&mut self, id: FileId) -> Result<&mut FileEntry<H>, IoError> {
        self.entries
            .get_mut(id.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(IoError::UnknownFile(id.0))
    }

    /// Counts a completed request of `id` and returns where the file came from (None
    /// is unreachable: a file with requests in flight cannot be unregistered).
    pub(crate) fn complete(&mut self, id: FileId) -> Option<&FileOrigin> {
        let entry = self.entries.get_mut(id.0 as usize)?.as_mut()?;
        entry.in_flight -= 1;
        Some(&entry.origin)
    }

    /// Unregisters `id` and returns its handle; refused while requests are in flight.
    /// The id is reused by a later registration.
    pub(crate) fn remove(&mut self, id: FileId) -> Result<H, IoError> {
        let busy = self.get(id)?.in_flight;
        if busy > 0 {
            return Err(IoError::FileBusy {
                file: id.0,
                in_flight: busy,
            });
        }
        let entry = self.entries[id.0 as usize]
            .take()
            .ok_or(IoError::UnknownFile(id.0))?;
        self.free_ids.push(id.0);
        Ok(entry.handle)
    }
}
