//! STUB (local only)
#![allow(missing_docs, dead_code, unused)]
use edbstress_report::{DiskSummary, HostCounters, HostInfo, Sample};
use std::path::PathBuf;
use std::time::Instant;
pub struct HostSampler;
pub struct HostSnapshot {
    at: Instant,
}
pub struct HostInterval {
    pub seconds: f64,
    pub cpu_pct: f64,
    pub available_memory_mb: f64,
    pub page_faults_per_sec: f64,
    pub major_faults_per_sec: f64,
    pub disks: Vec<DiskSummary>,
}
impl HostSampler {
    pub fn new(paths: &[PathBuf]) -> HostSampler {
        HostSampler
    }
    pub fn snapshot(&self) -> HostSnapshot {
        HostSnapshot { at: Instant::now() }
    }
}
impl HostSnapshot {
    pub fn interval_since(&self, e: &HostSnapshot) -> HostInterval {
        HostInterval {
            seconds: (self.at - e.at).as_secs_f64(),
            cpu_pct: 0.0,
            available_memory_mb: 0.0,
            page_faults_per_sec: 0.0,
            major_faults_per_sec: 0.0,
            disks: vec![],
        }
    }
}
impl HostInterval {
    pub fn samples(&self, interval: u32, elapsed_s: f64, timestamp: &str) -> Vec<Sample> {
        vec![]
    }
}
pub fn host_counters(intervals: &[HostInterval], whole: &HostInterval) -> HostCounters {
    HostCounters::default()
}
pub fn host_info() -> HostInfo {
    HostInfo::default()
}
