//! The power-cut simulation (feature `power-cut-sim`) sees a vectored write as the one
//! write of its concatenated bytes: journalled once, then kept whole, dropped whole or
//! torn by sectors like any single write. Its own test binary: arming is process-wide.
#![cfg(feature = "power-cut-sim")]

#[path = "suite/common/mod.rs"]
mod common;

use edbstress_io::power_cut::{self, CutModel};
use edbstress_io::{
    AlignedBuf, BackendKind, DataFile, IoClass, IoMode, VectoredWrite, open_backend,
};

const SECTOR: usize = power_cut::SECTOR as usize;
/// Sectors of the file; the write covers sectors 2..10 (three buffers: 2, 4 and 2).
const SECTORS: usize = 12;
const FIRST: usize = 2;
const PARTS: [usize; 3] = [2, 4, 2];

#[test]
fn a_vectored_write_is_kept_dropped_or_torn_as_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pc");
    let file = DataFile::create_new(&path, IoMode::Buffered).unwrap();
    let mut old = vec![0u8; SECTORS * SECTOR];
    common::fill_block(&mut old, 1, 1);
    let mut bufs_bytes = Vec::new();
    let written: usize = PARTS.iter().sum::<usize>() * SECTOR;
    let (mut whole_kept, mut whole_dropped, mut torn) = (0, 0, 0);
    for (model, seeds) in [
        (CutModel::WholeWrites, 0..24u64),
        (CutModel::TornSectors, 100..148),
    ] {
        for seed in seeds {
            // The flushed state: the old content.
            common::pwrite(file.path(), &old, 0);
            power_cut::arm();
            let mut backend = open_backend(BackendKind::Auto, 2).unwrap();
            assert_eq!(backend.name(), "threads", "io_uring is avoided while armed");
            let id = backend.register(&file).unwrap();
            let bufs: Vec<AlignedBuf> = PARTS
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let mut b = AlignedBuf::new(n * SECTOR);
                    common::fill_block(&mut b, i as u64, seed + 7);
                    b
                })
                .collect();
            bufs_bytes = bufs.iter().flat_map(|b| b.to_vec()).collect();
            let mut req = VectoredWrite {
                file: id,
                offset: (FIRST * SECTOR) as u64,
                bufs,
                class: IoClass::DbWrite,
                instance: 0,
                tag: 0,
            };
            backend.submit_vectored(&mut req).unwrap();
            let mut done = Vec::new();
            backend.wait(1, &mut done).unwrap();
            assert_eq!(*done[0].result.as_ref().unwrap(), written);
            drop(backend);
            let report = power_cut::cut(seed, model).unwrap();
            power_cut::disarm();
            assert_eq!(
                (report.files, report.writes),
                (1, 1),
                "seed {seed}: journalled as one write, not one per buffer"
            );
            let mut now = vec![0u8; SECTORS * SECTOR];
            common::pread(file.path(), &mut now, 0);
            let range = FIRST * SECTOR..FIRST * SECTOR + written;
            // Outside the write, the flushed content; inside, each sector old or new.
            assert!(now[..range.start] == old[..range.start], "seed {seed}");
            assert!(now[range.end..] == old[range.end..], "seed {seed}");
            let mut new_sectors = 0;
            for s in 0..written / SECTOR {
                let at = range.start + s * SECTOR;
                let sector = &now[at..at + SECTOR];
                if sector == &bufs_bytes[s * SECTOR..(s + 1) * SECTOR] {
                    new_sectors += 1;
                } else {
                    assert!(
                        sector == &old[at..at + SECTOR],
                        "seed {seed}: sector {s} mixed"
                    );
                }
            }
            let total = written / SECTOR;
            match (report.persisted, report.dropped, report.torn) {
                (1, 0, 0) => {
                    assert_eq!(new_sectors, total, "seed {seed}");
                    whole_kept += 1;
                }
                (0, 1, 0) => {
                    assert_eq!(new_sectors, 0, "seed {seed}");
                    whole_dropped += 1;
                }
                (0, 0, 1) => {
                    assert_eq!(model, CutModel::TornSectors, "seed {seed}");
                    assert!(new_sectors > 0 && new_sectors < total, "seed {seed}");
                    torn += 1;
                }
                other => panic!("seed {seed}: unexpected report {other:?}"),
            }
        }
    }
    assert!(!bufs_bytes.is_empty());
    // Over 72 cuts each fate happened: the write was treated as a unit, not per buffer.
    assert!(
        whole_kept > 0 && whole_dropped > 0 && torn > 0,
        "kept {whole_kept}, dropped {whole_dropped}, torn {torn}"
    );
}
