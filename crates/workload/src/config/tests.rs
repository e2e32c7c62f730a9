use std::path::PathBuf;
use std::time::Duration;

use edbstress_format::PageSize;
use edbstress_io::{BackendKind, IoMode};
use edbstress_report::{OpMix, TestType};

use super::*;
use crate::profile::Profile;

fn layer(text: &str) -> ConfigFile {
    ConfigFile::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn resolve_text(text: &str) -> Result<RunConfig, ConfigError> {
    RunConfig::resolve(&[layer(text)])
}

#[test]
fn defaults() {
    let c = RunConfig::resolve(&[]).unwrap();
    assert_eq!(c.test, TestType::Performance);
    assert_eq!(c.profile, Profile::Exchange2013);
    assert_eq!(c.mailboxes, None);
    assert_eq!(c.databases, 1);
    assert_eq!(c.copies, 1);
    assert_eq!(c.database_size, GIB);
    assert_eq!(c.db_paths, [PathBuf::from(DEFAULT_DB_PATH)]);
    assert_eq!(c.log_paths, [PathBuf::from(DEFAULT_LOG_PATH)]);
    assert_eq!(c.results_dir, PathBuf::from(DEFAULT_RESULTS_DIR));
    assert_eq!(c.duration, Duration::from_secs(7200));
    assert_eq!(c.sample_interval, Duration::from_secs(15));
    assert_eq!(c.warmup_timeout, Duration::from_secs(600));
    assert_eq!(c.iops_per_mailbox, 0.12);
    assert_eq!(c.mailbox_quota, 2 << 30);
    assert_eq!((c.cache_min, c.cache_max), (32 * MIB, 256 * MIB));
    assert_eq!(c.checkpoint_depth, 100 * MIB);
    assert_eq!(c.page_size, PageSize::K32);
    assert_eq!(c.lazy_commit_pct, 70);
    assert!(c.bdm);
    assert_eq!(c.bdm_mb_per_sec, 2.15);
    assert_eq!(c.target_margin, 1.05);
    assert_eq!(
        c.thresholds,
        Profile::Exchange2013.thresholds(TestType::Performance)
    );
    assert_eq!(c.seed, 1);
    assert_eq!(c.logs_to_replay, 500);
    assert_eq!(c.compressibility, 1.7);
    assert_eq!(c.io_mode, IoMode::Direct);
    assert_eq!(c.backend, BackendKind::Auto);
    assert!(c.verify_after);
    assert!(!c.auto_tune);
    assert_eq!(c.auto_tune_margin, 0.8);
    assert_eq!(c.threads, None);
    assert_eq!(c.session_threads, None, "one per CPU");
    // Unset: one per CPU, and never more threads than sessions; set: as asked, 0 (a
    // thread per session) included.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    assert_eq!(c.session_threads_for(1000), cpus);
    assert_eq!(c.session_threads_for(1), 1);
    let mut asked = c.clone();
    asked.session_threads = Some(3);
    assert_eq!(asked.session_threads_for(1000), 3);
    asked.session_threads = Some(0);
    assert_eq!(asked.session_threads_for(1000), 0);

    let stress = resolve_text("test = \"stress\"").unwrap();
    assert_eq!(stress.duration, Duration::from_secs(24 * 3600));
    assert_eq!(stress.thresholds.db_read_max_ms, 200.0);
}

#[test]
fn layers_override_in_order() {
    let file = layer(
        "profile = \"exchange2007\"\ndatabases = 3\nduration = \"10m\"\nseed = 7\n\
         [thresholds]\ndb_read_avg_ms = 15.0\n",
    );
    let flags = ConfigFile {
        duration: Some(Duration::from_secs(60)),
        thresholds: ThresholdsFile {
            db_read_max_ms: Some(80.0),
            ..ThresholdsFile::default()
        },
        ..ConfigFile::default()
    };
    let c = RunConfig::resolve(&[quick_preset(), file, flags]).unwrap();
    // The file's profile sets the profile defaults the quick preset leaves alone.
    assert_eq!(c.profile, Profile::Exchange2007);
    assert_eq!(c.page_size, PageSize::K8);
    assert_eq!(c.op_mix, Profile::Exchange2007.defaults().op_mix);
    assert!(!c.bdm);
    // Quick preset values the later layers do not touch stay.
    assert_eq!(c.mailboxes, Some(1000));
    assert_eq!(c.cache_max, 16 * MIB);
    assert_eq!(c.sample_interval, Duration::from_secs(5));
    // File over quick, flags over file.
    assert_eq!(c.databases, 3);
    assert_eq!(c.seed, 7);
    assert_eq!(c.duration, Duration::from_secs(60));
    // Thresholds merge per field over the profile's.
    assert_eq!(c.thresholds.db_read_avg_ms, 15.0);
    assert_eq!(c.thresholds.db_read_max_ms, 80.0);
    assert_eq!(c.thresholds.log_write_max_ms, 50.0);
    // The test's default duration follows the last layer's test.
    let c =
        RunConfig::resolve(&[layer("test = \"performance\""), layer("test = \"stress\"")]).unwrap();
    assert_eq!(c.test, TestType::Stress);
    assert_eq!(c.duration, Duration::from_secs(86400));
}

#[test]
fn quick_preset_resolves() {
    let c = RunConfig::resolve(&[quick_preset()]).unwrap();
    assert_eq!(c.databases, 2);
    assert_eq!(c.copies, 2);
    assert_eq!(c.database_size, 256 * MIB);
    assert_eq!((c.cache_min, c.cache_max), (8 * MIB, 16 * MIB));
    assert_eq!(c.cache_max_per_instance(), 8 * MIB);
    assert_eq!(c.duration, Duration::from_secs(45));
    assert_eq!(c.warmup_timeout, Duration::from_secs(30));
    assert!(c.bdm);
    assert_eq!(c.target_iops(), Some(120.0));
}

#[test]
fn cache_bound_given_alone_moves_the_default() {
    let c = resolve_text("databases = 2\ncache_max = \"16MiB\"").unwrap();
    assert_eq!((c.cache_min, c.cache_max), (16 * MIB, 16 * MIB));
    let c = resolve_text("cache_min = \"1GiB\"\ndatabase_size = \"8GiB\"").unwrap();
    assert_eq!((c.cache_min, c.cache_max), (GIB, GIB));
    let c = resolve_text("databases = 4").unwrap();
    assert_eq!((c.cache_min, c.cache_max), (128 * MIB, GIB));
}

#[test]
fn database_size_is_derived() {
    // Mailbox profile: mailboxes × quota / databases, rounded down to GiB (MiB below
    // 64 GiB, so rounding never takes 1 % off), so that config.toml reads "1666GiB",
    // not "1706666MiB".
    // A quota's GB is Exchange's: 2^30 bytes.
    let c = resolve_text("mailboxes = 5000\nmailbox_quota = \"2GB\"\ndatabases = 6").unwrap();
    assert_eq!(c.mailbox_quota, 2 * GIB);
    assert_eq!(c.database_size, 5000 * 2 * GIB / 6 / GIB * GIB);
    assert!(
        c.to_toml().contains("database_size = \"1666GiB\""),
        "{}",
        c.to_toml()
    );
    let c =
        resolve_text("mailboxes = 100\nmailbox_quota = \"10MB\"\ncache_max = \"64MiB\"").unwrap();
    assert_eq!(c.database_size, 100 * 10 * MIB);
    // 10 × 2048 MB over 6 databases: 3413 MiB each, not 3 GiB (12 % short).
    let c = resolve_text("mailboxes = 10\ndatabases = 6\ncache_max = \"64MiB\"").unwrap();
    assert_eq!(c.database_size, 3413 * MIB);
    // Explicit wins.
    let c =
        resolve_text("mailboxes = 5000\ndatabase_size = \"64MiB\"\ncache_max = \"16MiB\"").unwrap();
    assert_eq!(c.database_size, 64 * MIB);
    // Too small a derived size names what to change.
    let err = resolve_text("mailboxes = 1\nmailbox_quota = \"1MiB\"").unwrap_err();
    assert_eq!(err.key(), Some("database_size"));
    assert!(err.to_string().contains("mailbox_quota"), "{err}");
}

#[test]
fn capacity_pct_splits_free_space() {
    let dir = tempfile::tempdir().unwrap();
    // The database directory does not exist yet: its nearest ancestor is asked.
    let db = dir.path().join("not/yet/db");
    let file = ConfigFile {
        databases: Some(2),
        capacity_pct: Some(1.0),
        db_paths: Some(vec![db.clone()]),
        // 1 % of the free space may be smaller than the default cache.
        allow_cached_databases: Some(true),
        ..ConfigFile::default()
    };
    let free = edbstress_io::available_space(dir.path()).unwrap();
    if free / 200 < 2 * MIN_DATABASE_SIZE {
        eprintln!("skipped: too little free space for a 1% test");
        return;
    }
    let c = RunConfig::resolve(std::slice::from_ref(&file)).unwrap();
    assert_eq!(c.database_size % MIB, 0);
    // Free space moves on a busy machine: allow a generous margin.
    let expected = free / 200;
    assert!(
        c.database_size > expected / 2 && c.database_size < expected * 2,
        "{} vs {expected}",
        c.database_size
    );
    // A later layer's database_size wins over an earlier capacity_pct, and the
    // other way round; both in one layer is an error.
    let later_size = layer("database_size = \"8MiB\"");
    let c = RunConfig::resolve(&[file.clone(), later_size.clone()]).unwrap();
    assert_eq!(c.database_size, 8 * MIB);
    let c = RunConfig::resolve(&[later_size, file.clone()]).unwrap();
    assert_ne!(c.database_size, 8 * MIB);
    let both = ConfigFile {
        database_size: Some(8 * MIB),
        ..file
    };
    let err = RunConfig::resolve(&[both]).unwrap_err();
    assert_eq!(err.key(), Some("capacity_pct"));
}

#[test]
fn every_validation_error_names_its_key() {
    let cases = [
        ("op_mix = \"40/20/5/30\"", "op_mix"),
        ("op_mix = \"140/0/0/0\"", "op_mix"),
        ("lazy_commits = 101", "lazy_commits"),
        ("databases = 0", "databases"),
        ("databases = 257", "databases"),
        ("copies = 0", "copies"),
        ("copies = 17", "copies"),
        ("iops_per_mailbox = 0.0", "iops_per_mailbox"),
        ("iops_per_mailbox = nan", "iops_per_mailbox"),
        ("mailboxes = 0", "mailboxes"),
        ("mailbox_quota = 0", "mailbox_quota"),
        ("cache_min = \"64MiB\"\ncache_max = \"32MiB\"", "cache_min"),
        ("databases = 4\ncache_max = \"2MiB\"", "cache_max"),
        ("cache_min = 1000\ncache_max = \"8MiB\"", "cache_min"),
        ("duration = \"500ms\"", "duration"),
        ("duration = \"10s\"\nsample_interval = \"15s\"", "duration"),
        ("sample_interval = \"100ms\"", "sample_interval"),
        ("threads = 0", "threads"),
        ("threads = 1025", "threads"),
        ("threads = 8\nauto_tune = true", "auto_tune"),
        ("session_threads = 129", "session_threads"),
        ("capacity_pct = 0.0", "capacity_pct"),
        ("capacity_pct = 101", "capacity_pct"),
        ("database_size = \"3MiB\"", "database_size"),
        ("db_paths = []", "db_paths"),
        ("log_paths = []", "log_paths"),
        ("compressibility = 0.5", "compressibility"),
        ("compressibility = 11", "compressibility"),
        ("target_margin = 0.9", "target_margin"),
        ("auto_tune_margin = 0.0", "auto_tune_margin"),
        ("auto_tune_margin = 1.2", "auto_tune_margin"),
        ("target_margin = 2.5", "target_margin"),
        ("checkpoint_depth = 0", "checkpoint_depth"),
        ("bdm_rate = -1.0", "bdm_rate"),
        ("profile = \"exchange2007\"\nbdm = true", "bdm_rate"),
        ("logs_to_replay = 0", "logs_to_replay"),
        ("seed = 9223372036854775807\n", ""),
        (
            "[thresholds]\ndb_read_avg_ms = 0.0",
            "thresholds.db_read_avg_ms",
        ),
        (
            "[thresholds]\nlog_write_p99_ms = -5.0",
            "thresholds.log_write_p99_ms",
        ),
    ];
    for (text, key) in cases {
        let result = resolve_text(text);
        if key.is_empty() {
            assert!(result.is_ok(), "{text}: {result:?}");
            continue;
        }
        let err = result.expect_err(text);
        assert_eq!(err.key(), Some(key), "{text}: {err}");
        assert!(
            err.to_string().contains(&format!("`{key}`")),
            "{text}: {err}"
        );
    }
    // The message names the key, never a command-line flag (the CLI adds those).
    let err = resolve_text("databases = 300").unwrap_err();
    assert_eq!(
        err.to_string(),
        "`databases`: 300 is out of range; use 1 to 256"
    );
}

#[test]
fn parse_errors_name_the_key() {
    for (text, needle) in [
        ("databses = 2", "databses"),
        ("[thresholds]\ndb_read_avg = 2.0", "db_read_avg"),
        (
            "op_mix = { insert = 40, delete = 20, replace = 5, reed = 35 }",
            "reed",
        ),
        ("op_mix = { insert = 40 }", "delete"),
        ("page_size = \"64KiB\"", "page_size"),
        ("page_size = 1000", "page_size"),
        ("database_size = \"12 parsecs\"", "database_size"),
        ("database_size = -1", "database_size"),
        ("duration = \"soon\"", "duration"),
        ("test = \"speed\"", "test"),
        ("profile = \"exchange2003\"", "profile"),
        ("io_mode = \"fast\"", "io_mode"),
        ("backend = \"aio\"", "backend"),
        ("databases = \"six\"", "databases"),
        ("compressibility = \"zip\"", "compressibility"),
    ] {
        let err = ConfigFile::parse(text).expect_err(text);
        assert!(matches!(err, ConfigError::Parse { .. }));
        assert!(err.to_string().contains(needle), "{text}: {err}");
    }
}

#[test]
fn value_forms() {
    let f = layer(
        "op_mix = \"25/10/50/15\"\npage_size = 8192\ndatabase_size = 67108864\n\
         duration = 90\nmailbox_quota = \"1.5GiB\"\ncompressibility = \"incompressible\"\n\
         test = \"database-backup\"\nprofile = \"2016\"",
    );
    assert_eq!(f.op_mix, Some(Profile::Exchange2007.defaults().op_mix));
    assert_eq!(f.page_size, Some(PageSize::K8));
    assert_eq!(f.database_size, Some(64 * MIB));
    assert_eq!(f.duration, Some(Duration::from_secs(90)));
    assert_eq!(f.mailbox_quota, Some(3 << 29));
    assert_eq!(f.compressibility, Some(1.0));
    assert_eq!(f.test, Some(TestType::DatabaseBackup));
    assert_eq!(f.profile, Some(Profile::Exchange2016));
    let table = layer("op_mix = { insert = 25, delete = 10, replace = 50, read = 15 }");
    assert_eq!(table.op_mix, f.op_mix);
    assert_eq!(
        layer("test = \"soft_recovery\"").test,
        Some(TestType::SoftRecovery)
    );

    assert_eq!(
        parse_op_mix(" 40 / 20 / 5 / 35 "),
        Ok(OpMix {
            insert: 40,
            delete: 20,
            replace: 5,
            read: 35
        })
    );
    assert!(
        parse_op_mix("40/20/40")
            .unwrap_err()
            .to_string()
            .contains("40/20/5/35")
    );
    assert!(
        parse_op_mix("40/20/x/35")
            .unwrap_err()
            .to_string()
            .contains("'x'")
    );
    assert_eq!(parse_on_off("OFF"), Ok(false));
    assert!(parse_on_off("maybe").is_err());
}

#[test]
fn to_toml_round_trips() {
    let stress = layer(
        "test = \"stress\"\nprofile = \"exchange2010\"\ndatabases = 3\nthreads = 12\nsession_threads = 0\n\
         db_paths = [\"/mnt/a\", \"/mnt/b\"]\nlog_paths = [\"/mnt/log\"]\n\
         backup_path = \"/mnt/backup\"\nio_mode = \"buffered\"\nbackend = \"threads\"\n\
         verify_after = false\ncompressibility = 2.25\ndatabase_size = 123456789\n\
         sample_interval = \"1m 30s\"\ncache_max = \"1GB\"\nallow_cached_databases = true\n\
         [thresholds]\ndb_read_p99_ms = 50.0\n",
    );
    let template = ConfigFile::parse(&config_template()).unwrap();
    for layers in [
        vec![],
        vec![quick_preset()],
        vec![stress],
        vec![template],
        vec![layer(
            "test = \"soft-recovery\"\nauto_tune = true\nlogs_to_replay = 20",
        )],
    ] {
        let config = RunConfig::resolve(&layers).unwrap();
        let text = config.to_toml();
        assert!(text.starts_with("# effective configuration of this run"));
        let again = RunConfig::resolve(&[layer(&text)]).unwrap();
        assert_eq!(again, config, "{text}");
    }
    // Human units.
    let text = RunConfig::resolve(&[quick_preset()]).unwrap().to_toml();
    for line in [
        "database_size = \"256MiB\"",
        "duration = \"45s\"",
        "page_size = \"32KiB\"",
        "mailbox_quota = \"2048 MB\"",
        "op_mix = \"40/20/5/35\"",
        "test = \"performance\"",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[test]
fn template_resolves_and_shows_the_defaults() {
    let template = config_template();
    let c = RunConfig::resolve(&[ConfigFile::parse(&template).unwrap()]).unwrap();
    assert_eq!(c.mailboxes, Some(5000));
    assert_eq!(c.databases, 6);
    assert_eq!(c.copies, 2);
    assert_eq!(c.target_iops(), Some(600.0));
    // Uncommenting every `# key = default` line (not the examples) changes nothing:
    // the defaults the template shows are the real ones.
    let mut uncommented = String::new();
    let mut shown = 0;
    for line in template.lines() {
        let body = line.strip_prefix("# ").unwrap_or("");
        let is_setting = body.starts_with("[thresholds]")
            || body
                .split_once(" = ")
                .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        if is_setting && !body.contains("# example") {
            uncommented.push_str(body);
            shown += 1;
        } else {
            uncommented.push_str(line);
        }
        uncommented.push('\n');
    }
    assert!(shown >= 25, "only {shown} defaults shown");
    let explicit = RunConfig::resolve(&[ConfigFile::parse(&uncommented).unwrap()]).unwrap();
    assert_eq!(explicit, c);
}

#[test]
fn a_cache_holding_the_databases_is_refused_unless_allowed() {
    // 256 MiB databases under the default 256 MiB per-database cache.
    let err = resolve_text("databases = 2\ndatabase_size = \"256MiB\"").unwrap_err();
    assert_eq!(err.key(), Some("cache_max"));
    let msg = err.to_string();
    assert!(msg.contains("1.0 times its cache"), "{msg}");
    assert!(msg.contains("at most 128MiB"), "{msg}");
    assert!(msg.contains("at least 1GiB"), "{msg}");
    assert!(msg.contains("`allow_cached_databases`"), "{msg}");
    // Four times the cache is enough; so is saying a cached run is intended.
    resolve_text("databases = 2\ndatabase_size = \"256MiB\"\ncache_max = \"128MiB\"").unwrap();
    let c =
        resolve_text("databases = 2\ndatabase_size = \"256MiB\"\nallow_cached_databases = true")
            .unwrap();
    assert!(c.allow_cached_databases);
}

#[test]
fn buffered_databases_are_compared_with_the_host_memory() {
    let c = resolve_text(
        "database_size = \"64MiB\"\ncache_max = \"8MiB\"\nallow_cached_databases = true\nio_mode = \"buffered\"",
    )
    .unwrap();
    let strict = RunConfig {
        allow_cached_databases: false,
        ..c.clone()
    };
    let err = guard::check_not_cached(&strict, Some(16 * GIB)).unwrap_err();
    assert_eq!(err.key(), Some("io_mode"));
    assert!(err.to_string().contains("16.0 GiB of memory"), "{err}");
    assert!(err.to_string().contains("at least 16GiB"), "{err}");
    // Larger than memory, or memory unknown, or direct I/O: accepted.
    guard::check_not_cached(&strict, Some(32 * MIB)).unwrap();
    guard::check_not_cached(&strict, None).unwrap();
    let direct = RunConfig {
        io_mode: IoMode::Direct,
        ..strict
    };
    guard::check_not_cached(&direct, Some(16 * GIB)).unwrap();
}
