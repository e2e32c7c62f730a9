//! The workload crate's integration tests, one binary (one link instead of one per
//! file): runs end to end, background activities, offline tests and hostile
//! configuration input, each a module of `suite`.

mod suite {
    mod background;
    mod backup_recovery;
    mod common;
    mod delete_target;
    mod hostile_input;
    mod log_sectors;
    mod offline_runs;
    mod performance;
}
