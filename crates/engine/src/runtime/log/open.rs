//! Opening the log for writing at a start position: checking the generation file,
//! closing the segment that holds the start (truncating whatever follows it), zeroing
//! stale slots, and creating the generation file when the start is at its beginning.

use std::path::Path;

use edbstress_format::Generation;
use edbstress_format::InstanceId;
use edbstress_format::log::{
    LogFileHeader, LogPosition, SEGMENT_HEADER_LEN, SEGMENT_LEN, SegmentLen,
};
use edbstress_io::blocking::{self, Target};
use edbstress_io::{Access, AlignedBuf, DataFile, IoBackend, IoClass, IoMode, IoStats};

use super::LogSignatures;
use super::config::LogConfig;
use super::files::{
    FIRST_RECORD_OFFSET, RunningChecksum, SlotState, choose_copy, classify_slot, corrupt,
    create_zeroed_file, generation_path, install_generation, is_closed, list_generations,
    next_file_path, read_exact_via, read_file_header, read_whole_file_via, seal_data_segment,
    with_registered, zero_buffer,
};
use super::reader::{LogReadOptions, LogReader};
use crate::error::EngineError;

/// Where the writer continues after [`open_for_writing`].
pub(crate) struct OpenedLog {
    /// The generation file to write.
    pub(crate) file: DataFile,
    /// Its generation.
    pub(crate) generation: Generation,
    /// Its segment count (header included).
    pub(crate) segments: u32,
    /// Its segment length, which the writer keeps for the generations it creates.
    pub(crate) segment_len: SegmentLen,
    /// The first slot to write: everything before it is final.
    pub(crate) next_index: u16,
    /// Running checksum over the final slots before `next_index`.
    pub(crate) fold: RunningChecksum,
    /// The highest write sequence found or written.
    pub(crate) write_seq: u64,
    /// The oldest generation with a file (for circular logging).
    pub(crate) oldest_generation: Generation,
    /// What the scan that checked the start position read, as its backend counted it
    /// (class `LogRead`); what opening wrote is in the writer's backend.
    pub(crate) scan_io: IoStats,
}

/// One generation file read completely, with every data slot classified.
struct GenerationImage {
    file: DataFile,
    header: LogFileHeader,
    image: AlignedBuf,
    states: Vec<SlotState>,
    max_seq: u64,
    /// Segment length of the file (its header's).
    seg: usize,
}

impl GenerationImage {
    /// Reads generation `generation` at `path` through `io` (class `LogRead`).
    fn read(
        path: &Path,
        generation: Generation,
        signatures: LogSignatures,
        access: Access,
        io: &mut Reopen<'_>,
    ) -> Result<GenerationImage, EngineError> {
        let file = DataFile::open(path, io.mode, access)?;
        let header = read_file_header(
            io.io,
            &file,
            (io.instance.get(), IoClass::LogRead),
            generation,
            signatures,
        )?;
        let mut image = read_whole_file_via(io.io, &file, io.instance, &header)?;
        let n = header.segment_count();
        let seg_len = header.segment_length().bytes();
        let mut states = vec![SlotState::Unused; n];
        let mut max_seq = 0;
        for (slot, seg) in image.chunks_exact_mut(seg_len).enumerate().skip(1) {
            states[slot] = classify_slot(seg, generation, slot as u16);
            if let Some(h) = states[slot].header() {
                max_seq = max_seq.max(h.write_seq);
            }
        }
        Ok(GenerationImage {
            file,
            header,
            image,
            states,
            max_seq,
            seg: seg_len,
        })
    }

    fn segments(&self) -> u32 {
        self.states.len() as u32
    }

    fn slot(&self, slot: u16) -> &[u8] {
        let at = usize::from(slot) * self.seg;
        &self.image[at..at + self.seg]
    }

    /// Folds slots `1..end` into a running checksum, each of which must hold its final,
    /// closed, real segment.
    fn fold_final_slots(&self, end: u32, why: &str) -> Result<RunningChecksum, EngineError> {
        let mut fold = RunningChecksum::seeded(self.header.prev_generation_checksum);
        for slot in 1..end {
            let slot = slot as u16;
            match self.states[usize::from(slot)] {
                SlotState::Valid { header, .. }
                    if !header.is_shadow()
                        && is_closed(header.used, self.header.segment_length()) =>
                {
                    fold.add_segment(self.slot(slot));
                }
                state => {
                    return Err(corrupt(
                        self.file.path(),
                        u32::from(slot),
                        format!(
                            "segment {slot} is not a complete segment ({}); {why}",
                            describe(state)
                        ),
                    ));
                }
            }
        }
        Ok(fold)
    }

    /// Zeroes every non-zero slot from `from` to the end of the file (stale data
    /// beyond the end of the log would confuse a later reader) and makes it durable,
    /// through `io` (class [`IoClass::LogReopen`]).
    fn zero_from(
        &mut self,
        from: u32,
        io: &mut dyn IoBackend,
        instance: InstanceId,
    ) -> Result<(), EngineError> {
        let n = self.segments();
        let seg = self.seg;
        let nonzero = |slot: u32| {
            let at = slot as usize * seg;
            self.image[at..at + seg].iter().any(|&b| b != 0)
        };
        let Some(first) = (from..n).find(|&s| nonzero(s)) else {
            return Ok(());
        };
        let last = (first..n).rev().find(|&s| nonzero(s)).unwrap_or(first);
        let mut zeros = AlignedBuf::new(64 * seg);
        with_registered(io, &self.file, |io, id| {
            let to = Target {
                file: id,
                path: self.file.path(),
                class: IoClass::LogReopen,
                instance: instance.get(),
            };
            let mut slot = first;
            while slot <= last {
                let count = (last + 1 - slot).min(64);
                let len = count as usize * seg;
                let offset = u64::from(slot) * seg as u64;
                blocking::write_all(&mut *io, to, &mut zeros, len, offset, false)?;
                slot += count;
            }
            Ok(blocking::sync(io, to)?)
        })?;
        let (a, b) = (first as usize * seg, (last as usize + 1) * seg);
        self.image[a..b].fill(0);
        Ok(())
    }
}

fn describe(state: SlotState) -> &'static str {
    match state {
        SlotState::Valid { header, .. } if header.is_shadow() => "a shadow copy",
        SlotState::Valid { .. } => "partially filled",
        SlotState::Unused => "never written",
        SlotState::Damaged => "damaged",
    }
}

/// The backend opening the log reads and writes through (the writer's), with what it
/// needs to open files and account the I/O.
struct Reopen<'a> {
    io: &'a mut dyn IoBackend,
    instance: InstanceId,
    mode: IoMode,
}

/// Removes a leftover `E00tmp.log` (zero-filled, or with a header written by a roll
/// that did not complete); refuses a file of that name that is not ours.
fn remove_stale_next_file(dir: &Path, io: &mut Reopen<'_>) -> Result<(), EngineError> {
    let path = next_file_path(dir);
    let file = match DataFile::open(&path, io.mode, Access::ReadOnly) {
        Ok(file) => file,
        Err(edbstress_io::IoError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let len = file.len()?;
    let ours = if len < SEGMENT_LEN as u64 {
        true
    } else {
        let mut head = AlignedBuf::new(SEGMENT_LEN);
        read_exact_via(
            io.io,
            &file,
            (io.instance.get(), IoClass::LogRead),
            &mut head,
            SEGMENT_LEN,
            0,
        )?;
        head.iter().all(|&b| b == 0) || crate::runtime::log::is_our_log_file(&path)
    };
    drop(file);
    if !ours {
        return Err(EngineError::Mismatch {
            what: format!(
                "{} is not an edbstress log file; move it out of the log directory",
                path.display()
            ),
        });
    }
    std::fs::remove_file(&path).map_err(|source| {
        EngineError::Io(edbstress_io::IoError::Io {
            path: path.clone(),
            op: "remove",
            offset: 0,
            source,
        })
    })
}

/// Prepares the log directory of `config` for writing at `start` (see
/// [`super::LogWriter::open`]). What it writes (closing the tail, zeroing stale slots,
/// creating a generation) goes through `io`, the writer's backend, which times and
/// counts it.
pub(crate) fn open_for_writing(
    config: &LogConfig,
    start: LogPosition,
    checkpoint: LogPosition,
    io: &mut dyn IoBackend,
) -> Result<OpenedLog, EngineError> {
    let instance = config.instance;
    let dir = config.dir.as_path();
    let signatures = config.signatures();
    let mode = config.io_mode;
    let g = start.generation;
    let (offset, scan_io) = check_start_is_end_of_log(config, start)?;
    let mut reopen = Reopen {
        io: &mut *io,
        instance,
        mode,
    };
    remove_stale_next_file(dir, &mut reopen)?;
    let generations = list_generations(dir)?;
    let next_exists = g.next().is_some_and(|n| generations.contains(&n));
    if let Some(&beyond) = generations
        .iter()
        .find(|&&x| x > g.next().unwrap_or(Generation::MAX))
    {
        return Err(EngineError::Invalid(format!(
            "the log continues beyond the start position {start}: generation {beyond:#x} exists \
             in {}; start at the end of the log that read_log reports",
            dir.display()
        )));
    }
    let opening = Opening {
        config,
        checkpoint,
        oldest_generation: generations.first().copied().unwrap_or(g).min(g),
        scan_io,
    };
    let path = generation_path(dir, g);

    if !generations.contains(&g) {
        if start.segment != 1 || offset != FIRST_RECORD_OFFSET || next_exists {
            return Err(EngineError::Invalid(format!(
                "log generation file {} is missing; the writer creates it only for a start at \
                 the beginning of the last generation, not at {start}",
                path.display()
            )));
        }
        let (prev, write_seq) = previous_generation_chain(dir, g, signatures, &mut reopen)?;
        return opening.create(opening.new_header(g, prev), write_seq, reopen.io);
    }

    let mut current = GenerationImage::read(&path, g, signatures, Access::ReadWrite, &mut reopen)?;
    if current.header.segment_length() != config.segment_len
        && start.segment == 1
        && offset == FIRST_RECORD_OFFSET
        && !next_exists
        && current.states.iter().all(|s| *s == SlotState::Unused)
    {
        // A generation without records (a prepared database's first) takes the
        // configured segment length: it is removed and created again. A crash in
        // between leaves it missing at the start position, which opening creates.
        drop(current);
        remove_empty_generation(&path, dir)?;
        let (prev, write_seq) = previous_generation_chain(dir, g, signatures, &mut reopen)?;
        return opening.create(opening.new_header(g, prev), write_seq, reopen.io);
    }
    let n = current.segments();
    let s0 = start.segment;
    if u32::from(s0) >= n {
        return Err(EngineError::Invalid(format!(
            "log start position {start} is past the last segment of {} ({} segments)",
            path.display(),
            n
        )));
    }
    // The writer continues in this file unless the start closes its last segment; then
    // a next generation must not exist yet. Checked before anything is written.
    let continues_here = offset == FIRST_RECORD_OFFSET || u32::from(s0) + 1 < n;
    if continues_here && next_exists {
        return Err(EngineError::Invalid(format!(
            "the log continues beyond the start position {start}: generation {:#x} exists; \
             start at the end of the log that read_log reports",
            g.next().unwrap_or(Generation::MAX)
        )));
    }
    let mut fold = current.fold_final_slots(
        u32::from(s0),
        "the start position is not the end of the valid log (use the end_of_log read_log reports)",
    )?;
    // Keep write sequences increasing across the stream even if this file holds no
    // data yet.
    let mut write_seq = current.max_seq.max(last_write_seq_of(
        dir,
        g.prev().unwrap_or(Generation::NONE),
        signatures,
        &mut reopen,
    ));
    let next_index: u32 = if offset > FIRST_RECORD_OFFSET {
        close_start_segment(
            &mut current,
            (&path, start, offset),
            (&mut fold, &mut write_seq),
            &mut reopen,
        )?
    } else {
        u32::from(s0)
    };
    current.zero_from(next_index, &mut *reopen.io, instance)?;

    if next_index < n {
        return Ok(OpenedLog {
            segment_len: current.header.segment_length(),
            file: current.file,
            generation: g,
            segments: n,
            next_index: next_index as u16,
            fold,
            write_seq,
            oldest_generation: opening.oldest_generation,
            scan_io: opening.scan_io,
        });
    }
    continue_in_next_generation(opening, g, (fold, write_seq), next_exists, &mut reopen)
}

/// Checks that `start` is possible and is the end of the log (everything after it is
/// about to be overwritten: it must not be a stale position in the middle of the
/// log); returns the start's offset in its segment and what the scan read.
fn check_start_is_end_of_log(
    config: &LogConfig,
    start: LogPosition,
) -> Result<(u16, IoStats), EngineError> {
    let dir = config.dir.as_path();
    let g = start.generation;
    if g == Generation::NONE || start.segment == 0 {
        return Err(EngineError::Invalid(format!(
            "log start position {start} is impossible: generations and data segments start at 1"
        )));
    }
    let offset = start.offset.max(FIRST_RECORD_OFFSET);
    let normalized = LogPosition {
        generation: g,
        segment: start.segment,
        offset,
    };
    let options = LogReadOptions {
        class: IoClass::LogRead,
        instance: config.instance,
        io_mode: config.io_mode,
        backend: config.backend,
    };
    let mut reader = LogReader::open(dir, normalized, config.signatures(), &options)?;
    while reader.next_record()?.is_some() {}
    let end = reader.summary().map_or(normalized, |s| s.end_of_log);
    if end != normalized {
        return Err(EngineError::Invalid(format!(
            "log start position {start} is not the end of the log in {}: records continue to \
             {end}; open the writer at the end_of_log that read_log reports",
            dir.display()
        )));
    }
    Ok((offset, reader.stats().clone()))
}

/// What opening knows once the start position and the directory are checked: enough
/// to create a generation and to describe where the writer continues.
struct Opening<'a> {
    config: &'a LogConfig,
    /// The checkpoint a generation created now records.
    checkpoint: LogPosition,
    /// The oldest generation with a file (for circular logging).
    oldest_generation: Generation,
    /// What the scan of the start position read.
    scan_io: IoStats,
}

impl Opening<'_> {
    /// The header of a new generation `generation` whose predecessor's running
    /// checksum is `prev`.
    fn new_header(&self, generation: Generation, prev: u64) -> LogFileHeader {
        let signatures = self.config.signatures();
        LogFileHeader {
            generation,
            segment_len: self.config.segment_len.bytes() as u32,
            file_len: self.config.file_len as u32,
            log_signature: signatures.log_signature,
            db_signature: signatures.db_signature,
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            checkpoint_at_creation: self.checkpoint,
            prev_generation_checksum: prev,
        }
    }

    /// Creates the generation of `header` (zero-filled, then installed under its name)
    /// and continues the log at its first data segment.
    fn create(
        &self,
        header: LogFileHeader,
        write_seq: u64,
        io: &mut dyn IoBackend,
    ) -> Result<OpenedLog, EngineError> {
        let config = self.config;
        let (dir, mode, instance) = (config.dir.as_path(), config.io_mode, config.instance);
        let mut zeros = zero_buffer(config.file_len)?;
        let tmp = create_zeroed_file(
            &next_file_path(dir),
            config.file_len,
            mode,
            &mut *io,
            instance,
            &mut zeros,
        )?;
        let file = install_generation(dir, tmp, &header, mode, io, instance)?;
        Ok(OpenedLog {
            file,
            generation: header.generation,
            segments: (config.file_len / config.segment_len.bytes()) as u32,
            segment_len: config.segment_len,
            next_index: 1,
            fold: RunningChecksum::seeded(header.prev_generation_checksum),
            write_seq,
            oldest_generation: self.oldest_generation,
            scan_io: self.scan_io.clone(),
        })
    }
}

/// Closes the segment holding the start position (at `offset` within it) unless it is
/// already final, folding it into `fold`; returns the first slot to write after it.
fn close_start_segment(
    current: &mut GenerationImage,
    (path, start, offset): (&Path, LogPosition, u16),
    (fold, write_seq): (&mut RunningChecksum, &mut u64),
    reopen: &mut Reopen<'_>,
) -> Result<u32, EngineError> {
    let (g, s0, instance) = (start.generation, start.segment, reopen.instance);
    let n = current.segments();
    let shadow = (u32::from(s0) + 1 < n).then(|| current.states[usize::from(s0) + 1]);
    let (slot, header, _) =
        choose_copy(current.states[usize::from(s0)], shadow, s0).ok_or_else(|| {
            corrupt(
                path,
                u32::from(s0),
                format!("no valid copy of segment {s0}, which holds the start position {start}"),
            )
        })?;
    let keep = usize::from(offset) - SEGMENT_HEADER_LEN;
    if keep > usize::from(header.used) {
        return Err(EngineError::Invalid(format!(
            "log start position {start} lies beyond the {} bytes of data in segment {s0} of {}",
            header.used,
            path.display()
        )));
    }
    let copy = current.slot(slot);
    let already_final = slot == s0
        && is_closed(header.used, current.header.segment_length())
        && copy[SEGMENT_HEADER_LEN + keep..].iter().all(|&b| b == 0);
    if already_final {
        fold.add_segment(copy);
    } else {
        // Close the segment at the start position. Its records may have been
        // acknowledged, so no write may cover every copy of them: the remains
        // after it go first (nothing there is needed), then the closed version goes
        // to the slot without the newest copy (the shadow slot if the newest copy
        // is the real one) and is made durable, then, if needed, to the real slot.
        let payload = copy[SEGMENT_HEADER_LEN..SEGMENT_HEADER_LEN + keep].to_vec();
        let newest_in_own_slot = slot == s0;
        current.zero_from(u32::from(s0) + 2, &mut *reopen.io, instance)?;
        let seg_len = current.seg;
        let mut seg = AlignedBuf::new(seg_len);
        let mut put =
            |current: &mut GenerationImage, shadow: bool, seq: u64| -> Result<(), EngineError> {
                seal_data_segment(&mut seg, g, s0, shadow, &payload, true, seq);
                let slot = u64::from(s0) + u64::from(shadow);
                with_registered(&mut *reopen.io, &current.file, |io, id| {
                    let to = Target {
                        file: id,
                        path: current.file.path(),
                        class: IoClass::LogReopen,
                        instance: instance.get(),
                    };
                    let offset = slot * seg_len as u64;
                    Ok(blocking::write_all(
                        io, to, &mut seg, seg_len, offset, true,
                    )?)
                })?;
                let at = slot as usize * seg_len;
                current.image[at..at + seg_len].copy_from_slice(&seg);
                Ok(())
            };
        if newest_in_own_slot && u32::from(s0) + 1 < n {
            *write_seq += 1;
            put(current, true, *write_seq)?;
        }
        *write_seq += 1;
        put(current, false, *write_seq)?;
        fold.add_segment(current.slot(s0));
    }
    Ok(u32::from(s0) + 1)
}

/// The start generation `g` is complete (its running checksum `fold`): continues the
/// log in the next one, created now unless it exists (then it must follow `g`).
fn continue_in_next_generation(
    opening: Opening<'_>,
    g: Generation,
    (fold, write_seq): (RunningChecksum, u64),
    next_exists: bool,
    reopen: &mut Reopen<'_>,
) -> Result<OpenedLog, EngineError> {
    let dir = opening.config.dir.as_path();
    let next_gen = g.checked_add(1).ok_or_else(|| {
        EngineError::Invalid("log generation numbers are exhausted (2^32 generations)".into())
    })?;
    if !next_exists {
        return opening.create(
            opening.new_header(next_gen, fold.value()),
            write_seq,
            reopen.io,
        );
    }
    let next_path = generation_path(dir, next_gen);
    let mut next = GenerationImage::read(
        &next_path,
        next_gen,
        opening.config.signatures(),
        Access::ReadWrite,
        reopen,
    )?;
    if next.header.prev_generation_checksum != fold.value() {
        return Err(corrupt(
            &next_path,
            0,
            format!(
                "its running checksum of generation {g:#x} does not match that generation's \
                 segments: the files are not consecutive generations of one log"
            ),
        ));
    }
    next.zero_from(1, reopen.io, reopen.instance)?;
    Ok(OpenedLog {
        segments: next.segments(),
        segment_len: next.header.segment_length(),
        next_index: 1,
        fold: RunningChecksum::seeded(next.header.prev_generation_checksum),
        write_seq: write_seq.max(next.max_seq),
        generation: next_gen,
        file: next.file,
        oldest_generation: opening.oldest_generation,
        scan_io: opening.scan_io,
    })
}

/// The write sequence of the last slot of generation `generation` (its last write),
/// or 0 if it cannot be read.
fn last_write_seq_of(
    dir: &Path,
    generation: Generation,
    signatures: LogSignatures,
    io: &mut Reopen<'_>,
) -> u64 {
    let path = generation_path(dir, generation);
    if generation == Generation::NONE || !path.exists() {
        return 0;
    }
    let mut read = || -> Result<u64, EngineError> {
        let file = DataFile::open(&path, io.mode, Access::ReadOnly)?;
        let header = read_file_header(
            io.io,
            &file,
            (io.instance.get(), IoClass::LogRead),
            generation,
            signatures,
        )?;
        let last = header.segment_count() - 1;
        let seg_len = header.segment_length().bytes();
        let mut seg = AlignedBuf::new(seg_len);
        let offset = (last * seg_len) as u64;
        read_exact_via(
            io.io,
            &file,
            (io.instance.get(), IoClass::LogRead),
            &mut seg,
            seg_len,
            offset,
        )?;
        Ok(classify_slot(&mut seg, generation, last as u16)
            .header()
            .map_or(0, |h| h.write_seq))
    };
    read().unwrap_or(0)
}

/// Removes the generation file at `path` (checked to hold no records) and makes the
/// removal durable.
fn remove_empty_generation(path: &Path, dir: &Path) -> Result<(), EngineError> {
    std::fs::remove_file(path).map_err(|source| {
        EngineError::Io(edbstress_io::IoError::Io {
            path: path.to_path_buf(),
            op: "remove",
            offset: 0,
            source,
        })
    })?;
    super::files::fsync_dir(dir)
}

/// The running checksum and highest write sequence of generation `g - 1`, which must
/// be complete; `(0, 0)` if it has no file.
fn previous_generation_chain(
    dir: &Path,
    g: Generation,
    signatures: LogSignatures,
    io: &mut Reopen<'_>,
) -> Result<(u64, u64), EngineError> {
    let Some(prev) = g.prev() else {
        return Ok((0, 0));
    };
    let path = generation_path(dir, prev);
    if !path.exists() {
        return Ok((0, 0));
    }
    let image = GenerationImage::read(&path, prev, signatures, Access::ReadOnly, io)?;
    let fold = image.fold_final_slots(
        image.segments(),
        "the previous generation must be complete before the next one starts",
    )?;
    Ok((fold.value(), image.max_seq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use edbstress_format::log::NEXT_LOG_FILE_NAME;

    #[test]
    fn log_stale_next_file_is_removed_but_a_foreign_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(NEXT_LOG_FILE_NAME);
        let mut backend =
            edbstress_io::open_backend(edbstress_io::BackendKind::Threads, 1).unwrap();
        let mut io = Reopen {
            io: &mut *backend,
            instance: InstanceId::new(2),
            mode: IoMode::Buffered,
        };
        std::fs::write(&path, vec![0u8; 8192]).unwrap();
        remove_stale_next_file(dir.path(), &mut io).unwrap();
        assert!(!path.exists());
        std::fs::write(&path, vec![0x55u8; 8192]).unwrap();
        assert!(matches!(
            remove_stale_next_file(dir.path(), &mut io),
            Err(EngineError::Mismatch { .. })
        ));
        assert!(path.exists());
        let read = backend.stats().get(2, IoClass::LogRead).unwrap();
        assert_eq!(
            (read.ops, read.bytes),
            (2, 2 * SEGMENT_LEN as u64),
            "each check read the first segment through the backend"
        );
    }
}
