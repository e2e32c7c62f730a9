//! STUB (local only)
#![allow(missing_docs, dead_code, unused)]
use edbstress_io::{IoMode, IoStats};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
pub struct ReplicationConfig {
    pub instance: u16,
    pub log_dir: PathBuf,
    pub readers: u32,
    pub read_len: usize,
    pub io_mode: IoMode,
}
#[derive(Debug, thiserror::Error)]
#[error("repl")]
pub struct ReplicationError;
pub struct LogReplicator;
pub struct ReplicationHandle;
#[derive(Default, Debug)]
pub struct ReplicationReport {
    pub files_read: u64,
    pub bytes_read: u64,
    pub missed: u64,
    pub behind: u64,
    pub io_errors: u64,
    pub stats: IoStats,
}
impl LogReplicator {
    pub fn spawn(
        config: ReplicationConfig,
        current_generation: Arc<dyn Fn() -> u32 + Send + Sync>,
        stop: Arc<AtomicBool>,
    ) -> Result<ReplicationHandle, ReplicationError> {
        Ok(ReplicationHandle)
    }
}
impl ReplicationHandle {
    pub fn stats(&self) -> IoStats {
        IoStats::new()
    }
    pub fn stop_and_join(self) -> ReplicationReport {
        ReplicationReport::default()
    }
}
