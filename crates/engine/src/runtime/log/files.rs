//! Generation files and segment images: helpers shared by the writer and the reader.

use std::path::{Path, PathBuf};

use edbstress_format::Generation;
use edbstress_format::InstanceId;
use edbstress_format::log::{
    FRAGMENT_HEADER_LEN, LogFileHeader, NEXT_LOG_FILE_NAME, SEGMENT_HEADER_LEN, SEGMENT_LEN,
    SegmentHeader, SegmentLen, SegmentVerdict, fragment_flags, log_file_name, parse_log_file_name,
    repair_segment, seal_segment, segment_flags, verify_log_file_header, verify_segment,
};
use edbstress_io::blocking::{self, Target};
use edbstress_io::{Access, AlignedBuf, DataFile, FileId, IoBackend, IoClass, IoError, IoMode};

use super::LogSignatures;
use crate::error::EngineError;

/// A segment of a stream of `len` segments whose `used` is at least this is closed:
/// the packer starts a new segment once fewer than a fragment header and one body
/// byte are left, and segments closed early are written padded to the full payload
/// length.
pub(crate) const fn closed_min_used(len: SegmentLen) -> usize {
    len.payload_len() - FRAGMENT_HEADER_LEN
}

/// Offset of the first payload byte in a segment (positions count the header).
pub(crate) const FIRST_RECORD_OFFSET: u16 = SEGMENT_HEADER_LEN as u16;

/// Zero-fill writes are issued in chunks of at most this size (one write for a log
/// file of the default 1 MiB).
pub(crate) const ZERO_CHUNK: usize = 1 << 20;

/// A zeroed buffer for [`create_zeroed_file`] of files `len` bytes long: allocate it
/// once and pass it to every creation (it stays all zero).
pub(crate) fn zero_buffer(len: usize) -> Result<AlignedBuf, IoError> {
    AlignedBuf::try_new(ZERO_CHUNK.min(len).next_multiple_of(4096))
}

/// Runs `f` with `file` registered with `io`, then unregisters it (also when `f`
/// failed, unless the backend still holds a request on it).
pub(crate) fn with_registered<T>(
    io: &mut dyn IoBackend,
    file: &DataFile,
    f: impl FnOnce(&mut dyn IoBackend, FileId) -> Result<T, EngineError>,
) -> Result<T, EngineError> {
    let id = io.register(file)?;
    let result = f(&mut *io, id);
    let unregistered = io.unregister(id);
    let value = result?;
    unregistered?;
    Ok(value)
}

/// Whether a data segment of a stream of `len` segments with `used` payload bytes is
/// closed (nothing more will be appended to it; the next segment may hold data).
pub(crate) fn is_closed(used: u16, len: SegmentLen) -> bool {
    usize::from(used) >= closed_min_used(len)
}

/// Path of generation `generation` in `dir`.
pub(crate) fn generation_path(dir: &Path, generation: Generation) -> PathBuf {
    dir.join(log_file_name(generation))
}

/// Path of the pre-created next log file.
pub(crate) fn next_file_path(dir: &Path) -> PathBuf {
    dir.join(NEXT_LOG_FILE_NAME)
}

/// Generations with a file in `dir`, ascending.
pub(crate) fn list_generations(dir: &Path) -> Result<Vec<Generation>, EngineError> {
    let io = |source: std::io::Error| IoError::Io {
        path: dir.to_path_buf(),
        op: "list directory",
        offset: 0,
        source,
    };
    let mut generations = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        if let Some(generation) = entry.file_name().to_str().and_then(parse_log_file_name) {
            generations.push(generation);
        }
    }
    generations.sort_unstable();
    Ok(generations)
}

/// Makes the entries of `dir` durable (a renamed log file survives a crash).
pub(crate) fn fsync_dir(dir: &Path) -> Result<(), EngineError> {
    Ok(edbstress_io::sync_dir(dir)?)
}

/// A "log damaged" error naming the file and segment.
pub(crate) fn corrupt(file: &Path, segment: u32, what: impl Into<String>) -> EngineError {
    EngineError::CorruptLog {
        file: file.to_path_buf(),
        segment,
        what: what.into(),
    }
}

/// The running checksum that chains generations: FNV-1a (64-bit) over the stored
/// checksums (bytes 0..8, little-endian) of the final copies of data slots 1..n-1 of a
/// generation, in slot order, starting from the FNV offset basis XOR that generation's
/// own `prev_generation_checksum`. The value becomes the next generation's
/// `prev_generation_checksum`, so the chain covers the whole history of the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunningChecksum(u64);

impl RunningChecksum {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    /// The checksum of a generation whose header carries `prev_generation_checksum`.
    pub(crate) fn seeded(prev_generation_checksum: u64) -> RunningChecksum {
        RunningChecksum(Self::OFFSET_BASIS ^ prev_generation_checksum)
    }

    /// Folds in the next sealed segment of the generation.
    pub(crate) fn add_segment(&mut self, segment: &[u8]) {
        for &byte in &segment[..8] {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(Self::PRIME);
        }
    }

    /// The value to store in the next generation's header.
    pub(crate) fn value(self) -> u64 {
        self.0
    }
}

/// How many bytes to read from the start of a log file of `file_len` bytes to hold its
/// header, whatever its segment length: the first 4096, or the whole of a shorter file
/// in 512-byte units (at least one).
pub(crate) fn header_read_len(file_len: u64) -> usize {
    let unit = SegmentLen::Sector512.bytes();
    (file_len.min(SEGMENT_LEN as u64) as usize / unit).max(1) * unit
}

/// Reads and checks segment 0 of `file` through `io`, counted as `class` of
/// `instance` (`file` registered for the duration); it must hold generation
/// `generation` of the log stream `signatures`. Its segment length is the one the
/// header records.
pub(crate) fn read_file_header(
    io: &mut dyn IoBackend,
    file: &DataFile,
    (instance, class): (u16, IoClass),
    generation: Generation,
    signatures: LogSignatures,
) -> Result<LogFileHeader, EngineError> {
    let len = header_read_len(file.len()?);
    let mut seg = AlignedBuf::new(len);
    read_exact_via(io, file, (instance, class), &mut seg, len, 0)?;
    decode_file_header(&seg, file.path(), generation, signatures)
}

/// Decodes and checks a log file header read from `path`: `head` holds the first
/// bytes of the file, at least its header segment (see [`header_read_len`]).
pub(crate) fn decode_file_header(
    head: &[u8],
    path: &Path,
    generation: Generation,
    signatures: LogSignatures,
) -> Result<LogFileHeader, EngineError> {
    let header = verify_log_file_header(LogFileHeader::bytes_in(head), generation)
        .map_err(|e| corrupt(path, 0, format!("bad log file header: {e}")))?;
    if header.log_signature != signatures.log_signature
        || header.db_signature != signatures.db_signature
    {
        return Err(EngineError::Mismatch {
            what: format!(
                "{} belongs to another database or log stream (log signature {:#018x}, \
                 database signature {:#018x}; expected {:#018x} and {:#018x}); move it out of \
                 the log directory or point the instance at the right one",
                path.display(),
                header.log_signature,
                header.db_signature,
                signatures.log_signature,
                signatures.db_signature
            ),
        });
    }
    let len = file_len_of(&header);
    if len < 3 * header.segment_length().bytes() {
        return Err(corrupt(
            path,
            0,
            format!("file length {len} in the header is below the 3-segment minimum"),
        ));
    }
    Ok(header)
}

/// The file length recorded in a header, in bytes.
pub(crate) fn file_len_of(header: &LogFileHeader) -> usize {
    header.file_len as usize
}

/// Reads exactly `len` bytes at `offset` of `file` into `buf` through `io`, which
/// times and counts them as `class` of `instance` (`file` registered for the
/// duration). Reaching the end of the file first is an error.
pub(crate) fn read_exact_via(
    io: &mut dyn IoBackend,
    file: &DataFile,
    (instance, class): (u16, IoClass),
    buf: &mut AlignedBuf,
    len: usize,
    offset: u64,
) -> Result<(), EngineError> {
    with_registered(io, file, |io, id| {
        let from = Target {
            file: id,
            path: file.path(),
            class,
            instance,
        };
        Ok(blocking::read_exact(io, from, buf, len, offset)?)
    })
}

/// Reads the whole generation file described by `header` into memory through `io`
/// (see [`read_exact_via`]), checking that the file is as long as the header says.
pub(crate) fn read_whole_file_via(
    io: &mut dyn IoBackend,
    file: &DataFile,
    instance: InstanceId,
    header: &LogFileHeader,
) -> Result<AlignedBuf, EngineError> {
    let len = file_len_of(header);
    let actual = file.len()?;
    if actual < len as u64 {
        return Err(corrupt(
            file.path(),
            (actual / header.segment_length().bytes() as u64) as u32,
            format!("the file is {actual} bytes long, its header says {len}: it was truncated"),
        ));
    }
    let mut image = AlignedBuf::try_new(len)?;
    read_exact_via(
        io,
        file,
        (instance.get(), IoClass::LogRead),
        &mut image,
        len,
        0,
    )?;
    Ok(image)
}

/// What a data slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// A valid segment (possibly after flipping back one bit, `corrected_bit`).
    Valid {
        /// Its header.
        header: SegmentHeader,
        /// The bit flipped back in memory, if the copy on disk had one flipped bit.
        corrected_bit: Option<u32>,
    },
    /// All zero: never written.
    Unused,
    /// Damaged (torn, bad checksum, or written for another position).
    Damaged,
}

impl SlotState {
    /// The header if the slot is valid.
    pub(crate) fn header(self) -> Option<SegmentHeader> {
        match self {
            SlotState::Valid { header, .. } => Some(header),
            _ => None,
        }
    }
}

/// Classifies slot `slot` of generation `generation`, repairing a single flipped bit
/// in `seg` (in memory) when that yields a valid segment.
pub(crate) fn classify_slot(seg: &mut [u8], generation: Generation, slot: u16) -> SlotState {
    match repair_segment(seg, generation, slot) {
        SegmentVerdict::Valid(header) => SlotState::Valid {
            header,
            corrected_bit: None,
        },
        SegmentVerdict::Unused => SlotState::Unused,
        SegmentVerdict::Correctable { bit } => match verify_segment(seg, generation, slot) {
            SegmentVerdict::Valid(header) => SlotState::Valid {
                header,
                corrected_bit: Some(bit),
            },
            _ => SlotState::Damaged,
        },
        SegmentVerdict::WrongPosition { .. } | SegmentVerdict::Bad => SlotState::Damaged,
    }
}

/// The copy of logical segment `k` to use, given the states of slot `k` (where the
/// real segment lives) and slot `k + 1` (where its shadow lives, if `k + 1` exists):
/// the valid one with the higher write sequence, the real one on a tie.
pub(crate) fn choose_copy(
    real: SlotState,
    shadow: Option<SlotState>,
    k: u16,
) -> Option<(u16, SegmentHeader, Option<u32>)> {
    let real = match real {
        SlotState::Valid {
            header,
            corrected_bit,
        } if !header.is_shadow() && header.logical_index == k => Some((k, header, corrected_bit)),
        _ => None,
    };
    let shadow = match shadow {
        Some(SlotState::Valid {
            header,
            corrected_bit,
        }) if header.is_shadow() && header.logical_index == k => {
            Some((k + 1, header, corrected_bit))
        }
        _ => None,
    };
    match (real, shadow) {
        (Some(r), Some(s)) => Some(if s.1.write_seq > r.1.write_seq { s } else { r }),
        (r, s) => r.or(s),
    }
}

/// Fills `seg` (one segment, as long as the stream's) with a data segment of generation `generation`, logical
/// index `logical`, holding `payload`, and seals it for its physical slot (`logical`,
/// or `logical + 1` for a shadow copy). A `closed` segment is padded with zeros to the
/// full payload length so that readers know nothing more follows in it.
pub(crate) fn seal_data_segment(
    seg: &mut [u8],
    generation: Generation,
    logical: u16,
    shadow: bool,
    payload: &[u8],
    closed: bool,
    write_seq: u64,
) {
    let end = SEGMENT_HEADER_LEN + payload.len();
    seg[SEGMENT_HEADER_LEN..end].copy_from_slice(payload);
    seg[end..].fill(0);
    let used = if closed {
        seg.len() - SEGMENT_HEADER_LEN
    } else {
        payload.len()
    };
    let header = SegmentHeader {
        generation,
        logical_index: logical,
        flags: if shadow { segment_flags::SHADOW } else { 0 },
        used: used as u16,
        write_seq,
    };
    seal_segment(seg, &header, logical + u16::from(shadow));
}

/// If `payload` starts with a continuation fragment (a record that began in an
/// earlier segment), the payload offset just after it and whether it ends its record.
pub(crate) fn leading_continuation(payload: &[u8]) -> Result<Option<(usize, bool)>, String> {
    if payload.len() < FRAGMENT_HEADER_LEN || payload[0] == 0 {
        return Ok(None);
    }
    let flags = payload[1];
    if flags & fragment_flags::FIRST != 0 {
        return Ok(None);
    }
    let len = usize::from(u16::from_le_bytes([payload[2], payload[3]]));
    let end = FRAGMENT_HEADER_LEN + len;
    if end > payload.len() {
        return Err("a continuation fragment extends past the used payload".into());
    }
    Ok(Some((end, flags & fragment_flags::LAST != 0)))
}

/// Payload offset of the first fragment of the record left unfinished at the end of
/// `payload` (the last fragment flagged FIRST but not LAST), if any.
pub(crate) fn unfinished_record_offset(payload: &[u8]) -> Option<usize> {
    let mut pos = 0;
    let mut found = None;
    while payload.len().saturating_sub(pos) >= FRAGMENT_HEADER_LEN && payload[pos] != 0 {
        let flags = payload[pos + 1];
        let len = usize::from(u16::from_le_bytes([payload[pos + 2], payload[pos + 3]]));
        if flags & fragment_flags::FIRST != 0 && flags & fragment_flags::LAST == 0 {
            found = Some(pos);
        }
        pos += FRAGMENT_HEADER_LEN + len;
    }
    found
}

/// Creates `path` (replacing a leftover of an earlier attempt) as a file of `len`
/// zero bytes written for real, and makes it durable: ESE zero-fills its log files, so
/// that a later log write never needs the filesystem to allocate or convert an extent
/// (which `fallocate` alone would leave it to do). The blocks are reserved first
/// (`fallocate`, so that running out of space shows here, not in a log write), then
/// the zeros are written from `zeros` (see [`zero_buffer`], which stays zero) and
/// synced through `io`, which times and counts them as [`IoClass::LogCreate`].
pub(crate) fn create_zeroed_file(
    path: &Path,
    len: usize,
    mode: IoMode,
    io: &mut dyn IoBackend,
    instance: InstanceId,
    zeros: &mut AlignedBuf,
) -> Result<DataFile, EngineError> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(EngineError::Io(IoError::Io {
                path: path.to_path_buf(),
                op: "remove",
                offset: 0,
                source,
            }));
        }
    }
    let mut fill = |io: &mut dyn IoBackend| -> Result<DataFile, EngineError> {
        let file = DataFile::create_new(path, mode)?;
        file.allocate(len as u64)?;
        with_registered(io, &file, |io, id| {
            let to = Target {
                file: id,
                path,
                class: IoClass::LogCreate,
                instance: instance.get(),
            };
            let chunk = zeros.len().min(len);
            let mut offset = 0;
            while offset < len {
                let n = chunk.min(len - offset);
                blocking::write_all(&mut *io, to, zeros, n, offset as u64, false)?;
                offset += n;
            }
            blocking::sync(io, to)?;
            Ok(())
        })?;
        Ok(file)
    };
    // A full log filesystem is the usual way a run fills its disk: say which directory
    // and how much the new file needs.
    fill(io).map_err(|e| {
        e.in_full_dir(
            "log directory",
            path.parent().unwrap_or(Path::new(".")),
            || {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                format!("creating log file {name}")
            },
            len as u64,
            "free space there or put --log-path on a bigger filesystem (a run keeps about checkpoint_depth of log per instance, plus the file being filled)",
        )
    })
}

/// Turns a zero-filled file into generation `header.generation`: writes the header
/// segment through `io` (one durable write, class [`IoClass::LogCreate`]), renames the
/// file to its generation name and makes the directory entry durable. Returns the file
/// reopened under its new name.
pub(crate) fn install_generation(
    dir: &Path,
    tmp: DataFile,
    header: &LogFileHeader,
    mode: IoMode,
    io: &mut dyn IoBackend,
    instance: InstanceId,
) -> Result<DataFile, EngineError> {
    let target = generation_path(dir, header.generation);
    if target.exists() {
        return Err(EngineError::Invalid(format!(
            "cannot create log generation {:#x}: {} already exists; the log directory \
             holds files of another run, move them away",
            header.generation,
            target.display()
        )));
    }
    let len = header.segment_length().bytes();
    let mut seg = AlignedBuf::new(len);
    header.encode(&mut seg);
    with_registered(io, &tmp, |io, id| {
        let to = Target {
            file: id,
            path: tmp.path(),
            class: IoClass::LogCreate,
            instance: instance.get(),
        };
        Ok(blocking::write_all(io, to, &mut seg, len, 0, true)?)
    })?;
    std::fs::rename(tmp.path(), &target).map_err(|source| {
        EngineError::Io(IoError::Io {
            path: tmp.path().to_path_buf(),
            op: "rename",
            offset: 0,
            source,
        })
    })?;
    fsync_dir(dir)?;
    drop(tmp);
    Ok(DataFile::open(&target, mode, Access::ReadWrite)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use edbstress_format::log::{LogRecord, SegmentPacker};

    #[test]
    fn log_choose_copy_prefers_the_newer_valid_copy() {
        let hdr = |shadow: bool, seq: u64| SegmentHeader {
            generation: Generation::new(1),
            logical_index: 4,
            flags: if shadow { segment_flags::SHADOW } else { 0 },
            used: 10,
            write_seq: seq,
        };
        let valid = |h| SlotState::Valid {
            header: h,
            corrected_bit: None,
        };
        let pick = |r, s| choose_copy(r, s, 4).map(|(slot, h, _)| (slot, h.write_seq));
        assert_eq!(
            pick(valid(hdr(false, 5)), Some(valid(hdr(true, 6)))),
            Some((5, 6))
        );
        assert_eq!(
            pick(valid(hdr(false, 6)), Some(valid(hdr(true, 6)))),
            Some((4, 6))
        );
        assert_eq!(
            pick(SlotState::Damaged, Some(valid(hdr(true, 3)))),
            Some((5, 3))
        );
        assert_eq!(
            pick(valid(hdr(false, 3)), Some(SlotState::Unused)),
            Some((4, 3))
        );
        // A real segment in the shadow slot is the next segment, not a copy of this one.
        assert_eq!(pick(SlotState::Damaged, Some(valid(hdr(false, 9)))), None);
        assert_eq!(pick(SlotState::Unused, None), None);
    }

    #[test]
    fn log_fragment_walkers_find_continuations_and_unfinished_records() {
        let mut packer = SegmentPacker::new();
        let mut full = Vec::new();
        let small = LogRecord::Begin { trx: 1 };
        let big = LogRecord::PageRedo {
            pgno: edbstress_format::Pgno::new(1),
            dbtime_before: 1,
            dbtime_after: 2,
            trx: 1,
            op: 0,
            payload: vec![7; 6000],
        };
        packer.push(&small, |p| full.push(p.to_vec())).unwrap();
        packer.push(&big, |p| full.push(p.to_vec())).unwrap();
        packer.push(&small, |p| full.push(p.to_vec())).unwrap();
        assert_eq!(full.len(), 1);
        // The first segment: a whole record, then the start of the big one.
        assert_eq!(leading_continuation(&full[0]), Ok(None));
        assert_eq!(unfinished_record_offset(&full[0]), Some(4 + 8));
        // The tail: the end of the big record, then a whole record.
        let tail = packer.pending();
        let (end, last) = leading_continuation(tail).unwrap().unwrap();
        assert!(last);
        assert_eq!(tail[end], 1, "a Begin record follows the continuation");
        assert_eq!(unfinished_record_offset(tail), None);
    }

    #[test]
    fn log_running_checksum_depends_on_order_and_seed() {
        let a = [1u8; 16];
        let b = [2u8; 16];
        let mut x = RunningChecksum::seeded(0);
        x.add_segment(&a);
        x.add_segment(&b);
        let mut y = RunningChecksum::seeded(0);
        y.add_segment(&b);
        y.add_segment(&a);
        let mut z = RunningChecksum::seeded(1);
        z.add_segment(&a);
        z.add_segment(&b);
        assert_ne!(x, y);
        assert_ne!(x, z);
    }
}
