//! STUB (local only)
#![allow(missing_docs, dead_code, unused)]
use edbstress_io::{IoMode, IoStats};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
pub struct BdmConfig {
    pub instance: u16,
    pub db_file: PathBuf,
    pub bytes_per_sec: f64,
    pub read_len: usize,
    pub io_mode: IoMode,
}
#[derive(Debug, thiserror::Error)]
#[error("bdm")]
pub struct BdmError;
pub struct BdmScanner;
pub struct BdmHandle;
#[derive(Default, Debug)]
pub struct BdmReport {
    pub pages_checked: u64,
    pub passes: u64,
    pub bytes_read: u64,
    pub bad_pages: Vec<(u32, String)>,
    pub correctable_pages: u64,
    pub io_errors: u64,
    pub stats: IoStats,
}
impl BdmScanner {
    pub fn spawn(config: BdmConfig, stop: Arc<AtomicBool>) -> Result<BdmHandle, BdmError> {
        Ok(BdmHandle)
    }
}
impl BdmHandle {
    pub fn stats(&self) -> IoStats {
        IoStats::new()
    }
    pub fn stop_and_join(self) -> BdmReport {
        BdmReport::default()
    }
}
