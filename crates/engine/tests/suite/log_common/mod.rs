//! Helpers shared by the transaction log tests: a prepared log directory, records
//! with recognisable contents, and raw access to segment slots for fault injection.

#![allow(dead_code)] // the suite and power_cut's binary use different subsets

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use edbstress_engine::log::create_initial_logs;
use edbstress_engine::log::{LogConfig, LogScan, LogSignatures, LogWriter, read_log};
use edbstress_engine::{InstanceId, Pgno};
use edbstress_format::Generation;
use edbstress_format::log::{LogPosition, LogRecord, SEGMENT_LEN, log_file_name};
use edbstress_io::{IoClass, IoMode};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use tempfile::TempDir;

pub const DB_SIG: u64 = 0xDB5E_ED00_1234_5678;
pub const LOG_SIG: u64 = 0x1065_16A7_0000_0001;
/// Small log files so tests roll often (15 data segments each).
pub const SMALL_FILE: usize = 64 * 1024;
/// Where prepare starts the log.
pub const START: LogPosition = LogPosition {
    generation: Generation::new(1),
    segment: 1,
    offset: 0,
};

pub fn sigs() -> LogSignatures {
    LogSignatures {
        log_signature: LOG_SIG,
        db_signature: DB_SIG,
    }
}

/// A temporary directory with a freshly prepared log directory `logs` in it.
pub fn new_log_dir() -> (TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("logs");
    create_initial_logs(
        &dir,
        DB_SIG,
        LOG_SIG,
        edbstress_format::log::CheckpointState::default(),
        IoMode::Direct,
    )
    .unwrap();
    (tmp, dir)
}

pub fn config(dir: &Path, file_len: usize) -> LogConfig {
    let mut c = LogConfig::new(dir, InstanceId::new(0), DB_SIG, LOG_SIG);
    c.file_len = file_len;
    c.lazy_flush_interval = Some(Duration::from_millis(5));
    c
}

/// A page redo record of `payload_len` payload bytes derived from `(trx, n)`.
pub fn redo(trx: u64, n: u64, payload_len: usize) -> LogRecord {
    let seed = trx.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ n;
    let payload = (0..payload_len)
        .map(|i| {
            (seed
                .wrapping_add(i as u64)
                .wrapping_mul(0x2545_F491_4F6C_DD1D)
                >> 56) as u8
        })
        .collect();
    LogRecord::PageRedo {
        pgno: Pgno::new((trx as u32).wrapping_mul(7).wrapping_add(n as u32)),
        dbtime_before: trx * 100 + n,
        dbtime_after: trx * 100 + n + 1,
        trx,
        op: (n % 5) as u8,
        payload,
    }
}

/// Begin, one redo per payload size, Commit.
pub fn txn(trx: u64, payload_sizes: &[usize]) -> Vec<LogRecord> {
    let mut records = vec![LogRecord::Begin { trx }];
    for (n, &len) in payload_sizes.iter().enumerate() {
        records.push(redo(trx, n as u64, len));
    }
    records.push(LogRecord::Commit { trx, lazy: false });
    records
}

/// Reads the whole log from its start.
pub fn read_all(dir: &Path) -> LogScan {
    read_log(dir, START, sigs(), IoClass::LogRead).unwrap()
}

pub fn records_of(scan: &LogScan) -> Vec<LogRecord> {
    scan.records.iter().map(|e| e.record.clone()).collect()
}

pub fn log_path(dir: &Path, generation: u32) -> PathBuf {
    dir.join(log_file_name(Generation::new(generation)))
}

/// The bytes of slot `slot` of generation `generation`.
#[allow(clippy::disallowed_methods)] // reads what is on disk, behind the engine's back
pub fn read_slot(dir: &Path, generation: u32, slot: u16) -> Vec<u8> {
    let file = std::fs::File::open(log_path(dir, generation)).unwrap();
    let mut buf = vec![0u8; SEGMENT_LEN];
    file.read_exact_at(&mut buf, u64::from(slot) * SEGMENT_LEN as u64)
        .unwrap();
    buf
}

/// Overwrites slot `slot` of generation `generation` (as a failing disk would).
#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
pub fn write_slot(dir: &Path, generation: u32, slot: u16, bytes: &[u8]) {
    assert_eq!(bytes.len(), SEGMENT_LEN);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(log_path(dir, generation))
        .unwrap();
    file.write_all_at(bytes, u64::from(slot) * SEGMENT_LEN as u64)
        .unwrap();
    file.sync_all().unwrap();
}

/// A torn version of `new` over `old`: the first sectors new, the rest old.
pub fn torn(new: &[u8], old: &[u8], new_sectors: usize) -> Vec<u8> {
    let cut = new_sectors * 512;
    let mut out = old.to_vec();
    out[..cut].copy_from_slice(&new[..cut]);
    out
}

/// Generations with a file in `dir`, ascending.
pub fn generations(dir: &Path) -> Vec<u32> {
    let mut g: Vec<u32> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            edbstress_format::log::parse_log_file_name(e.file_name().to_str()?).map(Generation::get)
        })
        .collect();
    g.sort_unstable();
    g
}

/// Checks that entries are in log order and do not overlap.
pub fn assert_ordered(scan: &LogScan) {
    for pair in scan.records.windows(2) {
        assert!(pair[0].start < pair[0].end, "{:?}", pair[0]);
        assert!(
            pair[0].end <= pair[1].start,
            "{:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
}

/// Asserts the scan holds exactly `expected`, naming the first difference (without
/// printing kilobytes of payload).
pub fn assert_records(scan: &LogScan, expected: &[LogRecord]) {
    let got = records_of(scan);
    if let Some(i) = got.iter().zip(expected).position(|(a, b)| a != b) {
        panic!(
            "record {i} (at {}) differs from the expected one",
            scan.records[i].start
        );
    }
    assert_eq!(got.len(), expected.len(), "number of records");
}

/// `threads` committers, `commits` transactions each (transaction `t * 1000 + i`, one
/// record of `size(rng)` bytes, thread `t` seeded with `seed_base + t`), appending to
/// `writer` at once; every `lazy_every`-th is lazy, the others wait in `flush_to` and
/// must then be durable. Returns the acknowledged (durable) ones as (trx, size).
pub fn commit_concurrently(
    writer: &Arc<LogWriter>,
    threads: u64,
    commits: u64,
    seed_base: u64,
    lazy_every: u64,
    size: fn(&mut SmallRng) -> usize,
) -> Vec<(u64, usize)> {
    let threads: Vec<_> = (0..threads)
        .map(|t| {
            let writer = Arc::clone(writer);
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed_base + t);
                let mut acknowledged = Vec::new();
                for i in 0..commits {
                    let trx = t * 1_000 + i;
                    let size = size(&mut rng);
                    let end = writer.append(&txn(trx, &[size])).unwrap();
                    if i % lazy_every != 0 {
                        writer.flush_to(end).unwrap();
                        assert!(writer.durable() >= end, "acknowledged but not durable");
                        acknowledged.push((trx, size));
                    }
                }
                acknowledged
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

/// Every acknowledged transaction (made by [`txn`] with one record of its size) is in
/// `found`, whole and contiguous.
pub fn assert_acknowledged_present(found: &[LogRecord], acknowledged: &[(u64, usize)]) {
    for &(trx, size) in acknowledged {
        let records = txn(trx, &[size]);
        let at = found
            .iter()
            .position(|r| *r == records[0])
            .unwrap_or_else(|| panic!("acknowledged transaction {trx} is missing"));
        assert_eq!(
            &found[at..at + records.len()],
            &records[..],
            "transaction {trx} is not whole and contiguous"
        );
    }
}
