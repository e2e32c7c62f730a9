//! The engine's integration tests, one binary (one link instead of one per file), each
//! file a module of `suite`. `power_cut` keeps a binary of its own: arming the
//! power-cut simulation journals every write of the process, so no other test may run
//! beside it.

mod suite {
    mod bookkeeping_io;
    mod cache_behaviour;
    mod cache_common;
    mod cache_faults;
    mod cache_pacing;
    mod cache_runs_from_frames;
    mod cache_sessions;
    mod cache_write_out;
    mod checkpoint_depth;
    mod cold_long_values;
    mod database_lock;
    mod fault_suite;
    mod growth_limit;
    mod held_checkpoint;
    mod instance_common;
    mod io_path;
    mod log_common;
    mod log_group_commit;
    mod log_lazy_commit;
    mod log_partial_tail;
    mod log_recovery;
    mod log_sector512;
    mod log_split_tail;
    mod log_writer;
    mod lost_log;
    mod model;
    mod recovery_damage;
    mod session_tasks;
    mod tree_growth;
    mod view_index;
}
