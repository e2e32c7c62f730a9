use std::path::Path;

use super::devices::*;
use super::proc::*;
use super::*;
use std::io::Write;
use std::time::Duration;

const STAT: &str = "\
cpu  642308 10 127730 799158 74848 0 8084 4631 300 0
cpu0 310022 0 49198 454744 16503 0 246 1937 0 0
cpu1 332286 10 78532 344413 58345 0 7837 2693 300 0
intr 54612382 0 9 0 0 0 0 0 0 0 0
ctxt 123456789
btime 1700000000
processes 400000
procs_running 2
procs_blocked 0
";

#[test]
fn cpu_line_sums_eight_fields_and_counts_iowait_as_idle() {
    let t = parse_cpu_times(STAT).unwrap();
    assert_eq!(t.total, 642308 + 10 + 127730 + 799158 + 74848 + 8084 + 4631);
    assert_eq!(t.idle, 799158 + 74848);
    // Old kernels (2.6.0) had only four fields after "cpu".
    let old = parse_cpu_times("cpu 10 20 30 40\ncpu0 10 20 30 40\n").unwrap();
    assert_eq!(
        old,
        CpuTimes {
            total: 100,
            idle: 40
        }
    );
    assert_eq!(parse_cpu_times("cpu0 1 2 3 4\n"), None);
    assert_eq!(parse_cpu_times("cpu 1 x 3 4\n"), None);
}

#[test]
fn cpu_busy_is_delta_busy_over_delta_total() {
    let a = CpuTimes {
        total: 1000,
        idle: 600,
    };
    let b = CpuTimes {
        total: 1400,
        idle: 700,
    };
    assert_eq!(cpu_busy_pct(&a, &b), 75.0);
    assert_eq!(cpu_busy_pct(&a, &a), 0.0);
    // A counter going backwards (a failed read) gives zero, not nonsense.
    assert_eq!(cpu_busy_pct(&b, &a), 0.0);
}

#[test]
fn meminfo_available_and_its_fallback() {
    let text = "\
MemTotal:       49368168 kB
MemFree:         1234567 kB
MemAvailable:   24249868 kB
Buffers:          102400 kB
Cached:         20480000 kB
SwapCached:            0 kB
HugePages_Total:       0
";
    assert_eq!(
        parse_meminfo(text),
        Some(MemInfo {
            total_kb: 49368168,
            available_kb: 24249868
        })
    );
    let old = "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 20 kB\nCached: 300 kB\n";
    assert_eq!(
        parse_meminfo(old),
        Some(MemInfo {
            total_kb: 1000,
            available_kb: 420
        })
    );
    assert_eq!(parse_meminfo("MemFree: 100 kB\n"), None);
}

#[test]
fn vmstat_faults() {
    let text = "nr_free_pages 123\npgfault 154758680\npgmajfault 45916\npgfree 1\n";
    assert_eq!(
        parse_vmstat_faults(text),
        Some(FaultCounts {
            minor_and_major: 154758680,
            major: 45916
        })
    );
    assert_eq!(parse_vmstat_faults("pgfault 1\n"), None);
}

#[test]
fn diskstats_old_new_and_newest_forms() {
    let text = "\
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 13665859 62406 593125922 5799269 4201242 107663 472307912 1765389 0 1115460 7679607 102227 55 216188656 49968 923300 64979
 254       1 vda1 13665000 62400 593120000 5799000 4201000 107600 472300000 1765000 0 1115000 7679000 102227 55 216188656 49968
   8      16 sdb 1000 5 64000 2500 2000 7 128000 4000 1 3000 6500
   8      17 sdb1 10 20 30 40
 253       0 dm-0 x 0 0 0 0 0 0 0 0 0 0
";
    let lines = parse_diskstats(text);
    let names: Vec<&str> = lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["loop0", "vda", "vda1", "sdb"]);
    assert_eq!((lines[1].major, lines[1].minor), (254, 0));
    assert_eq!(
        lines[1].counters,
        DiskCounters {
            reads: 13665859,
            sectors_read: 593125922,
            ms_reading: 5799269,
            writes: 4201242,
            sectors_written: 472307912,
            ms_writing: 1765389,
        }
    );
    assert_eq!(lines[2].counters.writes, 4201000);
    // The 14-field form (kernels before 4.18).
    assert_eq!(
        lines[3].counters,
        DiskCounters {
            reads: 1000,
            sectors_read: 64000,
            ms_reading: 2500,
            writes: 2000,
            sectors_written: 128000,
            ms_writing: 4000,
        }
    );
}

#[test]
fn mountinfo_fields_escapes_and_optional_fields() {
    let text = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684084k
60 27 0:45 /@home /home rw,relatime shared:30 master:2 - btrfs /dev/nvme0n1p2 rw,ssd
61 27 0:46 / /mnt/my\\040disk rw - ext4 /dev/sdb1 rw
bad line
";
    let mounts = parse_mountinfo(text);
    assert_eq!(mounts.len(), 4);
    assert_eq!(
        mounts[2],
        MountEntry {
            major: 0,
            minor: 45,
            mount_point: PathBuf::from("/home"),
            fs_type: "btrfs".into(),
            source: "/dev/nvme0n1p2".into(),
        }
    );
    assert_eq!(mounts[3].mount_point, PathBuf::from("/mnt/my disk"));
    assert_eq!(unescape_mountinfo(r"a\134b\011c\0"), "a\\b\tc\\0");

    // By device number first; else the deepest mount point above the path.
    let home = find_mount(&mounts, (0, 45), Path::new("/anything")).unwrap();
    assert_eq!(home.source, "/dev/nvme0n1p2");
    let sub = find_mount(&mounts, (0, 99), Path::new("/home/me/sub")).unwrap();
    assert_eq!(sub.source, "/dev/nvme0n1p2");
    let shm = find_mount(&mounts, (0, 99), Path::new("/dev/shm/x")).unwrap();
    assert_eq!(shm.fs_type, "tmpfs");
    assert!(find_mount(&mounts, (0, 99), Path::new("relative")).is_none());
}

#[test]
fn dev_t_split_and_uevent() {
    assert_eq!(dev_major_minor(0xfe00), (254, 0));
    assert_eq!(dev_major_minor(0x0811), (8, 17));
    // Large minors (nvme partitions past 255) spill into the high bits.
    assert_eq!(dev_major_minor(0x0011_0301), (259, 257));
    assert_eq!(
        parse_uevent_devname("MAJOR=253\nMINOR=0\nDEVNAME=dm-0\nDEVTYPE=disk\n"),
        Some("dm-0".into())
    );
    assert_eq!(parse_uevent_devname("MAJOR=7\n"), None);
}

#[test]
fn os_release_and_cpuinfo() {
    let text =
        "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\n";
    assert_eq!(
        parse_os_release_pretty_name(text).as_deref(),
        Some("Debian GNU/Linux 13 (trixie)")
    );
    assert_eq!(
        parse_os_release_pretty_name("PRETTY_NAME='Alpine Linux v3.20'\n").as_deref(),
        Some("Alpine Linux v3.20")
    );
    assert_eq!(
        parse_os_release_pretty_name("PRETTY_NAME=\"say \\\"hi\\\"\"\n").as_deref(),
        Some("say \"hi\"")
    );
    assert_eq!(
        parse_os_release_pretty_name("PRETTY_NAME=Plain\n").as_deref(),
        Some("Plain")
    );
    assert_eq!(parse_os_release_pretty_name("NAME=x\n"), None);
    let cpuinfo = "processor\t: 0\nmodel name\t: X\n\nprocessor\t: 1\nmodel name\t: X\n";
    assert_eq!(count_cpuinfo_processors(cpuinfo), 2);
}

fn crafted(
    at: Instant,
    cpu: CpuTimes,
    mem_kb: u64,
    faults: FaultCounts,
    devices: &Arc<[MonitoredDevice]>,
    disks: Vec<Option<DiskCounters>>,
) -> HostSnapshot {
    HostSnapshot {
        at,
        cpu: Some(cpu),
        available_memory_kb: Some(mem_kb),
        faults: Some(faults),
        devices: Arc::clone(devices),
        disks,
    }
}

#[test]
fn interval_rates_and_latencies() {
    let devices: Arc<[MonitoredDevice]> = vec![
        MonitoredDevice {
            name: "vda1".into(),
            paths: vec![PathBuf::from("/db"), PathBuf::from("/logs")],
        },
        MonitoredDevice {
            name: "sdb".into(),
            paths: vec![PathBuf::from("/gone")],
        },
    ]
    .into();
    let t0 = Instant::now();
    let a = crafted(
        t0,
        CpuTimes {
            total: 10_000,
            idle: 8_000,
        },
        2_048_000,
        FaultCounts {
            minor_and_major: 1_000,
            major: 10,
        },
        &devices,
        vec![
            Some(DiskCounters {
                reads: 100,
                sectors_read: 800,
                ms_reading: 50,
                writes: 200,
                sectors_written: 1_600,
                ms_writing: 20,
            }),
            None,
        ],
    );
    let b = crafted(
        t0 + Duration::from_secs(4),
        CpuTimes {
            total: 10_800,
            idle: 8_600,
        },
        1_024_000,
        FaultCounts {
            minor_and_major: 5_000,
            major: 30,
        },
        &devices,
        vec![
            Some(DiskCounters {
                reads: 500,              // 400 reads = 100/s
                sectors_read: 7_200,     // 6400 sectors × 512 / 400 = 8192 B
                ms_reading: 1_250,       // 1200 ms / 400 = 3 ms
                writes: 1_000,           // 800 writes = 200/s
                sectors_written: 27_200, // 25600 × 512 / 800 = 16384 B
                ms_writing: 420,         // 400 ms / 800 = 0.5 ms
            }),
            Some(DiskCounters::default()),
        ],
    );
    let i = b.interval_since(&a);
    assert_eq!(i.seconds, 4.0);
    assert_eq!(i.cpu_pct, 25.0);
    assert_eq!(i.available_memory_mb, 1000.0);
    assert_eq!(i.page_faults_per_sec, 1000.0);
    assert_eq!(i.major_faults_per_sec, 5.0);
    assert_eq!(
        i.disks[0],
        DiskSummary {
            device: "vda1".into(),
            paths: vec!["/db".into(), "/logs".into()],
            reads_per_sec: 100.0,
            writes_per_sec: 200.0,
            bytes_per_read: 8192.0,
            bytes_per_write: 16384.0,
            avg_read_latency_ms: 3.0,
            avg_write_latency_ms: 0.5,
            reads: 400,
            writes: 800,
            bytes_read: 6_400 * 512,
            bytes_written: 25_600 * 512,
        }
    );
    // Missing in the earlier snapshot: zeros, not counts since boot.
    assert_eq!(
        i.disks[1],
        DiskSummary {
            device: "sdb".into(),
            paths: vec!["/gone".into()],
            ..DiskSummary::default()
        }
    );

    let rows = i.samples(3, 12.0, "2025-01-01T00:00:12Z");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].scope, "Host");
    assert_eq!(rows[0].family, "host");
    assert_eq!(rows[0].cpu_pct, Some(25.0));
    assert_eq!(rows[0].available_memory_mb, Some(1000.0));
    assert_eq!(rows[0].page_faults_per_sec, Some(1000.0));
    assert_eq!(rows[0].device, None);
    assert_eq!(rows[0].reads_per_sec, None);
    assert_eq!(rows[1].family, "disk");
    assert_eq!(rows[1].scope, "Host");
    assert_eq!(rows[1].device.as_deref(), Some("vda1"));
    assert_eq!(rows[1].interval, 3);
    assert_eq!(rows[1].elapsed_s, 12.0);
    assert_eq!(rows[1].timestamp, "2025-01-01T00:00:12Z");
    assert_eq!(rows[1].avg_read_latency_ms, Some(3.0));
    assert_eq!(rows[1].bytes_per_write, Some(16384.0));
    assert_eq!(rows[1].cpu_pct, None);

    // A failed read (None) on either side gives zeros for that counter.
    let failed = HostSnapshot {
        cpu: None,
        faults: None,
        available_memory_kb: None,
        ..b.clone()
    };
    let z = failed.interval_since(&a);
    assert_eq!(
        (z.cpu_pct, z.available_memory_mb, z.page_faults_per_sec),
        (0.0, 0.0, 0.0)
    );
    assert_eq!(z.disks[0], i.disks[0]);
}

#[test]
fn summary_ranges_over_intervals_and_disks_from_whole() {
    let at = |cpu_pct: f64, mem: f64, faults: f64| HostInterval {
        seconds: 1.0,
        cpu_pct,
        available_memory_mb: mem,
        page_faults_per_sec: faults,
        ..HostInterval::default()
    };
    let whole = HostInterval {
        disks: vec![DiskSummary {
            device: "vda".into(),
            reads_per_sec: 7.0,
            ..DiskSummary::default()
        }],
        ..at(30.0, 900.0, 5.0)
    };
    let c = host_counters(&[at(10.0, 1000.0, 2.0), at(50.0, 800.0, 8.0)], &whole);
    assert_eq!(
        c.cpu_pct,
        Range {
            min: 10.0,
            avg: 30.0,
            max: 50.0
        }
    );
    assert_eq!(
        c.available_memory_mb,
        Range {
            min: 800.0,
            avg: 900.0,
            max: 1000.0
        }
    );
    assert_eq!(
        c.page_faults_per_sec,
        Range {
            min: 2.0,
            avg: 5.0,
            max: 8.0
        }
    );
    assert_eq!(c.disks, whole.disks);
    let short = host_counters(&[], &whole);
    assert_eq!(
        short.cpu_pct,
        Range {
            min: 30.0,
            avg: 30.0,
            max: 30.0
        }
    );
}

#[test]
fn paths_on_one_file_system_share_a_device_or_are_all_unresolved() {
    let dir = tempfile::tempdir().unwrap();
    let later = dir.path().join("not/yet/made");
    let paths = vec![dir.path().to_path_buf(), later.clone(), later.clone()];
    let sampler = HostSampler::new(&paths);
    println!(
        "devices {:?} unresolved {:?}",
        sampler.devices(),
        sampler.unresolved()
    );
    match sampler.devices() {
        [] => assert_eq!(sampler.unresolved(), &paths[..2]),
        [device] => {
            assert_eq!(device.paths, &paths[..2]);
            assert!(sampler.unresolved().is_empty());
        }
        more => panic!("one file system, several devices: {more:?}"),
    }
}

#[test]
#[allow(clippy::disallowed_methods)] // plain disk traffic for the sampler to see; not a data file
fn live_snapshot_while_writing() {
    let dir = tempfile::tempdir().unwrap();
    let sampler = HostSampler::new(&[dir.path().to_path_buf()]);
    println!(
        "devices {:?} unresolved {:?}",
        sampler.devices(),
        sampler.unresolved()
    );
    let before = sampler.snapshot();
    let mut file = fs::File::create(dir.path().join("data")).unwrap();
    let block = vec![0x5au8; 1 << 20];
    for _ in 0..8 {
        file.write_all(&block).unwrap();
    }
    file.sync_all().unwrap();
    let after = sampler.snapshot();
    let interval = after.interval_since(&before);
    println!("{interval:?}");
    assert!(
        (0.0..=100.0).contains(&interval.cpu_pct),
        "{}",
        interval.cpu_pct
    );
    assert!(interval.available_memory_mb > 0.0);
    assert!(interval.page_faults_per_sec >= 0.0);
    assert_eq!(interval.disks.len(), sampler.devices().len());
    let rows = interval.samples(1, interval.seconds, "now");
    assert_eq!(rows.len(), 1 + sampler.devices().len());

    let info = host_info();
    println!("{info:?}");
    assert!(info.cpus >= 1);
    assert!(info.memory_mb > 0);
    assert!(!info.kernel.is_empty());
}

/// The device under this crate's own directory, found for real: on a block device
/// (this project's test machines: ext4 on a virtio disk, /dev/vda) the lookup must name
/// a device with a /proc/diskstats line, never give up; on tmpfs or overlay it must say
/// which file system it is.
#[test]
fn the_device_under_a_real_path_is_found_or_named_for_what_it_is() {
    use std::os::unix::fs::MetadataExt;

    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let diskstats = fs::read_to_string("/proc/diskstats").unwrap_or_default();
    let sampler = HostSampler::new(std::slice::from_ref(&here));
    let (major, _) = dev_major_minor(fs::metadata(&here).unwrap().dev());
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    println!(
        "devices {:?}, unresolved {:?}",
        sampler.devices(),
        sampler.unresolved_reasons()
    );
    if major != 0 {
        let [device] = sampler.devices() else {
            panic!(
                "{} is on block device major {major} but no device was found: {:?}",
                here.display(),
                sampler.unresolved_reasons()
            );
        };
        assert!(
            diskstats
                .lines()
                .any(|l| l.split_whitespace().nth(2) == Some(device.name.as_str())),
            "{device:?}"
        );
        if fs::metadata("/dev/vda").is_ok() && mounts.contains(" /dev/vda ") {
            // This machine: ext4 on a virtio disk.
            assert!(device.name.starts_with("vda"), "{device:?}");
        }
    } else if sampler.devices().is_empty() {
        // An anonymous device number: tmpfs, overlay (a container), or a btrfs
        // subvolume whose device was not found; the reason must say which.
        let [why] = sampler.unresolved_reasons() else {
            panic!("neither a device nor a reason: {:?}", sampler.devices());
        };
        assert!(
            why.contains("file system") || why.contains("block device"),
            "{why}"
        );
    }
}

#[test]
fn tmpfs_and_overlay_paths_say_what_they_are() {
    let mounts = parse_mountinfo(
        "30 1 0:25 / /dev/shm rw - tmpfs tmpfs rw\n31 1 0:26 / /merged rw - overlay overlay rw\n",
    );
    for (dir, fs_type) in [("/dev/shm", "tmpfs"), ("/merged", "overlay")] {
        let mount = find_mount(&mounts, (0, 99), Path::new(dir)).unwrap();
        assert_eq!(mount.fs_type, fs_type);
    }
    // A real tmpfs, when there is one: the reason names it.
    let shm = Path::new("/dev/shm");
    let is_tmpfs = fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains(" /dev/shm ") && l.contains(" - tmpfs "));
    if is_tmpfs {
        let sampler = HostSampler::new(&[shm.to_path_buf()]);
        let why = sampler.unresolved_reasons().join("; ");
        assert!(why.contains("tmpfs file system"), "{why}");
        assert!(why.contains("not backed by a block device"), "{why}");
    } else {
        eprintln!(
            "SKIP part of tmpfs_and_overlay_paths_say_what_they_are: /dev/shm is not a tmpfs here"
        );
    }
}
