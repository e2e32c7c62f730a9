//! Version profiles: the defaults of Exchange 2007, 2010, 2013, 2016 and 2019 (product
//! spec §3) and the latency thresholds of the pass/fail rules (§4). Each workload
//! parameter's source is in docs/fidelity.md.

use crate::transaction::DeleteTarget;
use edbstress_engine::InsertKeyOrder;
use edbstress_format::PageSize;
use edbstress_format::log::SegmentLen;
use edbstress_report::{OpMix, TestType};
use serde::{Deserialize, Serialize};

/// An Exchange version whose I/O profile a run imitates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Exchange 2007 (Jetstress 2007): 8 KB pages, no BDM.
    Exchange2007,
    /// Exchange 2010 (Jetstress 2010): 32 KB pages, BDM ~6.8 MB/s per database
    /// (Jetstress 2010: ~27 reads/s of 256 KB).
    Exchange2010,
    /// Exchange 2013 (Jetstress 2013): 32 KB pages, BDM ~2.15 MB/s (Jetstress 2013:
    /// ~8.6 reads/s of 256 KB), 100 MB checkpoint depth.
    #[default]
    Exchange2013,
    /// Exchange 2016: Microsoft's tool for it is Jetstress 2013, run with the ESE of
    /// the Exchange 2016 media. The workload is Jetstress 2013's configuration, so the
    /// defaults are exchange2013's; what the newer ESE changes is not modelled.
    Exchange2016,
    /// Exchange 2019: as [`Profile::Exchange2016`], with the ESE of Exchange 2019.
    Exchange2019,
}

/// Latency limits of the pass/fail rules, ms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Average database read latency.
    pub db_read_avg_ms: f64,
    /// Highest per-interval average database read latency.
    pub db_read_max_ms: f64,
    /// Average log write latency.
    pub log_write_avg_ms: f64,
    /// Highest per-interval average log write latency.
    pub log_write_max_ms: f64,
    /// Average database page fault stalls per second.
    pub page_fault_stalls_per_sec: f64,
    /// Optional: 99th percentile database read latency (Jetstress has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_read_p99_ms: Option<f64>,
    /// Optional: 99th percentile log write latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_write_p99_ms: Option<f64>,
}

/// Everything a profile sets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProfileDefaults {
    /// Database page size.
    pub page_size: PageSize,
    /// Operation mix (Jetstress's `OperationMix`: inserts, deletes, replaces, the rest
    /// seeks).
    pub op_mix: OpMix,
    /// Share of lazy commits, percent (`LazyCommits`).
    pub lazy_commit_pct: u32,
    /// Minimum database cache per database, bytes.
    pub cache_min_per_db: u64,
    /// Maximum database cache per database, bytes.
    pub cache_max_per_db: u64,
    /// BDM on.
    pub bdm: bool,
    /// BDM read rate per database, MB/s.
    pub bdm_mb_per_sec: f64,
    /// Checkpoint depth of a database without copies, bytes.
    pub checkpoint_depth: u64,
    /// Checkpoint depth of an active copy with two or more copies, when the version
    /// sets one of its own (Exchange 2010: 100 MB, against 20 MB stand-alone).
    pub checkpoint_depth_replicated: Option<u64>,
    /// Largest database write of contiguous dirty pages, bytes: one page for ESE 2007
    /// (Exchange 2007 transfers its 8 KB page; docs/fidelity.md), ESE's documented default
    /// `JET_paramMaxCoalesceWriteSize` (384 KiB) for 2010/2013. How large writes are on
    /// average follows from which neighbours are dirty and durable when a page is
    /// written (docs/fidelity.md: ~36 KB in the 2010 and 2013 reports).
    pub write_coalesce: u64,
    /// Log buffer, bytes: half of it ready starts a log write (ESE's capacity write).
    /// 9000 × 512 bytes, the `LogBuffers` Jetstress 2007 prints among its settings;
    /// later versions print none and are given the same (docs/fidelity.md).
    pub log_buffer: usize,
    /// Whether a lazy commit starts a log write of its own, the committer not waiting
    /// for it (on for 2007/2010). Off (2013 and later, ESE's published lazy commit): a
    /// lazy commit only appends to the log buffer, written with the next durable
    /// commit, capacity write, new generation or page write-ahead. No published ESE
    /// source gives the earlier behaviour; the 2010 rows need it (Jetstress 2010 writes
    /// the log ~0.38 times per database I/O, about once per commit: docs/fidelity.md).
    pub lazy_commit_signals_write: bool,
    /// Whether a log flush writes its closed 4 KiB segments and its partially filled
    /// tail in two writes (ESE's full-sector write, then its partial-sector write; records
    /// appended during the first join the second). On for ESE 2007/2010, whose 512-byte
    /// log sectors make a write that ends mid-sector a second write; off for 2013 and
    /// later, whose 4 KiB log sectors end every write on a sector boundary. See
    /// docs/fidelity.md.
    pub split_tail_write: bool,
    /// The log sector: the segment every log write is made of. A 512-byte sector also
    /// turns on ESE's partial-sector write with its shadow
    /// ([`ProfileDefaults::partial_sector_writes`]). 4 KiB in every profile: ESE
    /// 2007/2010 wrote 512-byte sectors, and 512-byte sectors with their partial
    /// writes were measured to move exchange2010 away from the Cisco report and to
    /// leave exchange2007 outside its bands (docs/fidelity.md, "Log sectors").
    pub log_sector: SegmentLen,
    /// Where an insert's row goes among its mailbox's rows. Jetstress's insert key
    /// order is not published; random keys were measured against the reports and
    /// moved them away (more database I/O per transaction, less log per I/O), so every
    /// profile appends (docs/fidelity.md, "Insert key order").
    pub insert_keys: InsertKeyOrder,
    /// Operations per transaction: 1, each operation committed on its own. Jetstress
    /// 2013's configuration sets `BatchUpdates = 16`, undocumented; reading it as 16
    /// operations per transaction was measured against the reports and rejected
    /// (docs/fidelity.md, "Batching").
    pub ops_per_transaction: u32,
    /// Which record a delete removes: Jetstress's choice is not published; both
    /// candidates were measured (docs/fidelity.md, "Delete target").
    pub delete_target: DeleteTarget,
}

const MB: u64 = 1 << 20;

impl ProfileDefaults {
    /// Whether a log write that ends inside a sector writes it partially filled with a
    /// shadow copy in the next slot and continues it in the next write, which rewrites
    /// it first (ESE's partial-sector write and its shadow): with 512-byte log
    /// sectors, as ESE 2007/2010. With 4 KiB sectors a write ends on a sector boundary
    /// (the tail is padded), as ESE 2013 and later.
    pub fn partial_sector_writes(&self) -> bool {
        self.log_sector == SegmentLen::Sector512
    }
}

impl Profile {
    /// Every profile.
    pub const ALL: [Profile; 5] = [
        Profile::Exchange2007,
        Profile::Exchange2010,
        Profile::Exchange2013,
        Profile::Exchange2016,
        Profile::Exchange2019,
    ];

    /// The name used in configuration and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Exchange2007 => "exchange2007",
            Profile::Exchange2010 => "exchange2010",
            Profile::Exchange2013 => "exchange2013",
            Profile::Exchange2016 => "exchange2016",
            Profile::Exchange2019 => "exchange2019",
        }
    }

    /// Parses a profile name ("exchange2013" or the bare year "2013").
    pub fn from_name(name: &str) -> Option<Profile> {
        match name.to_ascii_lowercase().as_str() {
            "exchange2007" | "2007" => Some(Profile::Exchange2007),
            "exchange2010" | "2010" => Some(Profile::Exchange2010),
            "exchange2013" | "2013" => Some(Profile::Exchange2013),
            "exchange2016" | "2016" => Some(Profile::Exchange2016),
            "exchange2019" | "2019" => Some(Profile::Exchange2019),
            _ => None,
        }
    }

    /// The Jetstress release that tests this version: Jetstress 2013 for 2013, 2016
    /// and 2019 (the later ones with their own ESE).
    pub fn jetstress(self) -> &'static str {
        match self {
            Profile::Exchange2007 => "Jetstress 2007",
            Profile::Exchange2010 => "Jetstress 2010",
            Profile::Exchange2013 | Profile::Exchange2016 | Profile::Exchange2019 => {
                "Jetstress 2013"
            }
        }
    }

    /// The checkpoint depth of a database with `copies` copies (itself included).
    pub fn checkpoint_depth(self, copies: u32) -> u64 {
        let d = self.defaults();
        match d.checkpoint_depth_replicated {
            Some(depth) if copies >= 2 => depth,
            _ => d.checkpoint_depth,
        }
    }

    /// Sets how `instance` writes its log as this version's ESE does (the log buffer,
    /// whether lazy commits start a write, the split partial-sector write, the partial
    /// sector with its shadow) and where its inserts go.
    pub fn configure_instance(self, instance: &mut edbstress_engine::InstanceConfig) {
        let d = self.defaults();
        instance.insert_keys = d.insert_keys;
        instance.log_buffer = d.log_buffer;
        instance.lazy_flush_interval = d
            .lazy_commit_signals_write
            .then_some(std::time::Duration::ZERO);
        instance.split_tail_write = d.split_tail_write;
        instance.partial_tail_shadow = d.partial_sector_writes();
        instance.log_segment_len = d.log_sector;
    }

    /// The profile's defaults.
    pub fn defaults(self) -> ProfileDefaults {
        // Jetstress 2013's configuration file (OperationMix 40/20/5, LazyCommits 70);
        // Jetstress 2010 ran the same mix (product spec §3).
        let jetstress_mix = OpMix {
            insert: 40,
            delete: 20,
            replace: 5,
            read: 35,
        };
        match self {
            Profile::Exchange2007 => ProfileDefaults {
                page_size: PageSize::K8,
                op_mix: OpMix {
                    insert: 25,
                    delete: 10,
                    replace: 50,
                    read: 15,
                },
                lazy_commit_pct: 80,
                cache_min_per_db: 32 * MB,
                cache_max_per_db: 256 * MB,
                bdm: false,
                bdm_mb_per_sec: 0.0,
                checkpoint_depth: 20 * MB,
                checkpoint_depth_replicated: None,
                write_coalesce: 8 << 10,
                log_buffer: 9000 * 512,
                lazy_commit_signals_write: true,
                split_tail_write: true,
                log_sector: SegmentLen::Page4096,
                insert_keys: InsertKeyOrder::Ascending,
                ops_per_transaction: 1,
                delete_target: DeleteTarget::ViewSeek,
            },
            Profile::Exchange2010 => ProfileDefaults {
                page_size: PageSize::K32,
                op_mix: jetstress_mix,
                lazy_commit_pct: 70,
                cache_min_per_db: 32 * MB,
                cache_max_per_db: 256 * MB,
                bdm: true,
                bdm_mb_per_sec: 6.8,
                checkpoint_depth: 20 * MB,
                checkpoint_depth_replicated: Some(100 * MB),
                write_coalesce: 384 << 10,
                log_buffer: 9000 * 512,
                lazy_commit_signals_write: true,
                split_tail_write: true,
                log_sector: SegmentLen::Page4096,
                insert_keys: InsertKeyOrder::Ascending,
                ops_per_transaction: 1,
                delete_target: DeleteTarget::ViewSeek,
            },
            Profile::Exchange2013 | Profile::Exchange2016 | Profile::Exchange2019 => {
                ProfileDefaults {
                    page_size: PageSize::K32,
                    op_mix: jetstress_mix,
                    lazy_commit_pct: 70,
                    cache_min_per_db: 32 * MB,
                    cache_max_per_db: 256 * MB,
                    bdm: true,
                    bdm_mb_per_sec: 2.15,
                    checkpoint_depth: 100 * MB,
                    checkpoint_depth_replicated: None,
                    write_coalesce: 384 << 10,
                    log_buffer: 9000 * 512,
                    lazy_commit_signals_write: false,
                    split_tail_write: false,
                    log_sector: SegmentLen::Page4096,
                    insert_keys: InsertKeyOrder::Ascending,
                    ops_per_transaction: 1,
                    delete_target: DeleteTarget::ViewSeek,
                }
            }
        }
    }

    /// The thresholds of `test` under this profile. Stress keeps the averages and
    /// relaxes the maxima (200 ms for 2010/2013; 2007 publishes no stress value, so its
    /// 50 ms maxima double to 100 ms).
    pub fn thresholds(self, test: TestType) -> Thresholds {
        let stress = test == TestType::Stress;
        let max = match (self, stress) {
            (Profile::Exchange2007, false) => 50.0,
            (Profile::Exchange2007, true) => 100.0,
            (_, false) => 100.0,
            (_, true) => 200.0,
        };
        Thresholds {
            db_read_avg_ms: 20.0,
            db_read_max_ms: max,
            log_write_avg_ms: 10.0,
            log_write_max_ms: max,
            page_fault_stalls_per_sec: 1.0,
            db_read_p99_ms: None,
            log_write_p99_ms: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigFile, RunConfig};

    fn resolve(text: &str) -> RunConfig {
        RunConfig::resolve(&[ConfigFile::parse(text).unwrap()]).unwrap()
    }

    #[test]
    fn exchange2010_checkpoint_depth_follows_the_copies() {
        let alone = resolve("profile = \"exchange2010\"\ncopies = 1\n");
        assert_eq!(alone.checkpoint_depth, 20 * MB);
        let replicated = resolve("profile = \"exchange2010\"\ncopies = 3\n");
        assert_eq!(replicated.checkpoint_depth, 100 * MB);
        // A depth given wins over the profile's.
        let given =
            resolve("profile = \"exchange2010\"\ncopies = 3\ncheckpoint_depth = \"30MiB\"\n");
        assert_eq!(given.checkpoint_depth, 30 * MB);
        // 2013's depth does not depend on copies.
        for copies in [1, 2, 4] {
            let c = resolve(&format!("profile = \"exchange2013\"\ncopies = {copies}\n"));
            assert_eq!(c.checkpoint_depth, 100 * MB);
        }
    }

    #[test]
    fn exchange2016_and_2019_run_jetstress_2013s_workload_under_their_own_name() {
        for (name, profile) in [
            ("exchange2016", Profile::Exchange2016),
            ("exchange2019", Profile::Exchange2019),
        ] {
            assert_eq!(Profile::from_name(name), Some(profile));
            assert_eq!(profile.name(), name);
            assert_eq!(profile.jetstress(), "Jetstress 2013");
            assert_eq!(profile.defaults(), Profile::Exchange2013.defaults());
            let c = resolve(&format!("profile = \"{name}\"\n"));
            assert_eq!(c.profile, profile);
        }
        assert_eq!(Profile::from_name("2019"), Some(Profile::Exchange2019));
    }

    #[test]
    fn every_profile_has_jetstress_2007s_log_buffer() {
        for p in Profile::ALL {
            let d = p.defaults();
            assert_eq!(d.log_buffer, 9000 * 512, "{}", p.name());
        }
        // 512-byte log sectors (2007, 2010) write a flush's partial sector apart, and
        // their lazy commits start a write; 2013's wait for the next one.
        let d2010 = Profile::Exchange2010.defaults();
        assert!(d2010.split_tail_write && d2010.lazy_commit_signals_write);
        let d2013 = Profile::Exchange2013.defaults();
        assert!(!d2013.split_tail_write && !d2013.lazy_commit_signals_write);
        // Every profile writes 4 KiB log sectors and pads the tail; a 512-byte sector
        // would write partial sectors with their shadow.
        for p in Profile::ALL {
            let mut d = p.defaults();
            assert_eq!(d.log_sector, SegmentLen::Page4096, "{}", p.name());
            assert!(!d.partial_sector_writes());
            d.log_sector = SegmentLen::Sector512;
            assert!(d.partial_sector_writes());
        }
    }
}
