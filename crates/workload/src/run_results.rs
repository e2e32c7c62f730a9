//! The results a run starts from: its parameters as results.json records them and
//! everything but the test's own figures, made before the test runs so that a run
//! refused or stopped early still leaves a complete results file.

use edbstress_io::{BackendKind, IoMode};
use edbstress_report::{
    DatabaseSizing, RunResults, SCHEMA_VERSION, SystemParameters, ToolInfo, Verdict,
};

use crate::config::RunConfig;
use crate::host::host_info;

/// The warning of a mailbox-profile run whose databases are smaller than its profile's
/// (see [`edbstress_report::sizing`]); the report says the same from results.json.
pub fn sizing_warning(config: &RunConfig) -> Option<String> {
    edbstress_report::sizing::ProfileSizing::of(&system_parameters(config, 0))?.warning()
}

/// The parameters section of the results.
pub fn system_parameters(config: &RunConfig, threads: u32) -> SystemParameters {
    SystemParameters {
        profile: config.profile.name().to_string(),
        mailboxes: config.mailboxes,
        iops_per_mailbox: config.mailboxes.map(|_| config.iops_per_mailbox),
        mailbox_quota_mb: config.mailboxes.map(|_| config.mailbox_quota >> 20),
        databases: config.databases,
        copies: config.copies,
        page_size: config.page_size.bytes() as u32,
        database_bytes: config.database_size,
        threads,
        session_threads: config.session_threads_for(threads),
        open_loop: config.open_loop(),
        pacing: config
            .test
            .is_transactional()
            .then(|| config.effective_pacing()),
        cache_min_bytes: config.cache_min_per_instance(),
        cache_max_bytes: config.cache_max_per_instance(),
        checkpoint_depth_bytes: config.checkpoint_depth,
        torn_write_protection: config.torn_write_protection,
        op_mix: config.op_mix,
        lazy_commit_pct: config.lazy_commit_pct,
        bdm: config.bdm,
        bdm_mb_per_sec: if config.bdm {
            config.bdm_mb_per_sec
        } else {
            0.0
        },
        duration_seconds: config.duration.as_secs_f64(),
        sample_interval_seconds: config.sample_interval.as_secs_f64(),
        seed: config.seed,
        io_mode: match config.io_mode {
            IoMode::Direct => "direct",
            IoMode::Buffered => "buffered",
        }
        .to_string(),
        backend: match config.backend {
            BackendKind::Auto => "auto",
            BackendKind::IoUring => "io_uring",
            BackendKind::Threads => "threads",
        }
        .to_string(),
    }
}

/// Results with everything but the test's own figures.
pub fn empty_results(config: &RunConfig, threads: u32) -> RunResults {
    RunResults {
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo {
            name: "edbstress".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        run_id: Some(uuid::Uuid::new_v4().to_string()),
        fleet_id: config.fleet_id.clone(),
        campaign_id: config.campaign_id.clone(),
        test_type: config.test,
        description: None,
        overall_result: Verdict::Fail,
        aborted: false,
        abort_reason: None,
        failed_criteria: Vec::new(),
        criteria: Vec::new(),
        started_at: String::new(),
        ended_at: String::new(),
        measured_seconds: 0.0,
        host: {
            let mut host = host_info();
            if let Some(name) = &config.host_name {
                host.hostname = name.clone();
            }
            host
        },
        parameters: system_parameters(config, threads),
        achieved_transactional_iops: 0.0,
        headroom_pct: None,
        target_transactional_iops: if config.test.is_transactional() {
            config.target_iops()
        } else {
            None
        },
        sizing: DatabaseSizing {
            database_count: config.databases,
            ..Default::default()
        },
        instances: Vec::new(),
        totals: Default::default(),
        host_counters: None,
        volumes: Vec::new(),
        achieved_iops_basis: None,
        autotune: None,
        verification: None,
        sampling_stalls: Vec::new(),
        kernel_log: None,
        storage_devices: Vec::new(),
        inconsistencies: Vec::new(),
        samples: Vec::new(),
    }
}
