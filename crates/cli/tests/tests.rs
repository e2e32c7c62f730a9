//! The CLI's integration tests, one binary (one link instead of one per file), each
//! file a module of `suite`. They run the built `edbstress` binary as a child process,
//! so what a test does to a process (signals, working directory, environment) stays in
//! that child: none needs a test binary of its own.

mod suite {
    mod aggregate;
    mod checksum;
    mod common;
    mod config;
    mod crash;
    mod crash_loop;
    mod esrp;
    mod esrp_pacing;
    mod faults;
    mod fleet;
    mod fleet_scale;
    mod fleet_sessions;
    mod full_disk;
    mod hostile_runs;
    mod install;
    mod kmsg;
    mod loopback_fleet;
    mod lost_logs;
    mod metrics;
    mod misuse;
    mod ownership;
    mod pacing;
    mod probe;
    mod recipes;
    mod report;
    mod run;
    mod safety;
    mod sweep;
    mod templates;
    mod usability;
    mod volumes;
}
