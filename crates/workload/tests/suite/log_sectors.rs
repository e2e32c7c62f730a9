//! 512-byte log sectors end to end: an instance configured as exchange2010 but with
//! the profile's log sector set to 512 bytes (and so partial-sector writes) writes its
//! log in 512-byte segments, and a log replication reader follows it, reading each
//! closed file once while the log wrote more (each partial sector and its shadow,
//! rewritten), as in ESE 2010.

use super::common::{insert_durably, prepare_instance};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use edbstress_engine::{Instance, InstanceConfig, InstanceId, InstanceLayout, PrepareOptions};
use edbstress_format::PageSize;
use edbstress_format::log::{LogFileHeader, SegmentLen, log_file_name};
use edbstress_io::{BackendKind, IoClass, IoMode};
use edbstress_workload::profile::Profile;
use edbstress_workload::replication::{LogReplicator, ReplicationConfig};

const DEADLINE: Duration = Duration::from_secs(60);

fn prepare(dir: &Path) -> InstanceLayout {
    prepare_instance(
        dir,
        PrepareOptions {
            page_size: PageSize::K32,
            database_bytes: 8 << 20,
            mailboxes: 8,
            seed: Some(5),
            ..PrepareOptions::default()
        },
    )
}

#[test]
fn a_replication_reader_follows_a_log_of_512_byte_sectors() {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepare(dir.path());
    let mut config = InstanceConfig::new(layout.clone());
    Profile::Exchange2010.configure_instance(&mut config);
    // The profile's log sector at 512 bytes, and what it turns on with it.
    let mut d = Profile::Exchange2010.defaults();
    d.log_sector = SegmentLen::Sector512;
    config.log_segment_len = d.log_sector;
    config.partial_tail_shadow = d.partial_sector_writes();
    config.io_mode = IoMode::Buffered;
    config.cache_min_bytes = 4 << 20;
    config.cache_max_bytes = 4 << 20;
    let instance = Arc::new(Instance::open(config).unwrap());
    let start = instance.log_generation();
    let source = Arc::clone(&instance);
    let handle = LogReplicator::spawn(
        ReplicationConfig {
            instance: InstanceId::new(1),
            log_dir: layout.log_dir.clone(),
            readers: 1,
            read_len: 256 << 10,
            io_mode: IoMode::Buffered,
            backend: BackendKind::Threads,
        },
        Arc::new(move || source.log_durable()),
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    // Durable commits of a few hundred bytes: most log writes end inside a sector.
    let body = vec![0x33; 700];
    let mut i = 0u32;
    while instance.log_generation().since(start) < 3 {
        insert_durably(&instance, i, &body);
        i += 1;
    }
    let closed = u64::from(instance.log_generation().since(start));
    let begun = Instant::now();
    while handle.progress().files_read < closed {
        assert!(begun.elapsed() < DEADLINE, "the reader did not catch up");
        std::thread::sleep(Duration::from_millis(5));
    }
    let report = handle.stop_and_join();
    let counters = instance.log_counters();
    Arc::try_unwrap(instance)
        .ok()
        .expect("the reader lets go of the instance")
        .shutdown()
        .unwrap();

    assert_eq!(report.io_errors, 0, "{:?}", report.last_error);
    assert_eq!(report.missed, 0);
    assert!(report.files_read >= closed, "{report:?}");
    let head = std::fs::read(layout.log_dir.join(log_file_name(start))).unwrap();
    let header = LogFileHeader::decode(LogFileHeader::bytes_in(&head[..4096])).unwrap();
    assert_eq!((header.segment_len, header.file_len), (512, 1 << 20));
    // Each closed file read once (its header's 4 KiB, then the rest); the log wrote
    // every partial sector and its shadow, some more than once.
    assert!(counters.partial_writes > 0, "{counters:?}");
    let read = report.stats.total(IoClass::ReplicationRead).bytes;
    assert!(read >= closed * (1 << 20), "{read}");
    assert!(
        counters.bytes_written > closed * (1 << 20) * 5 / 4,
        "the log wrote {} bytes for {closed} files",
        counters.bytes_written
    );
}
