//! The textual forms of configuration values (sizes, durations, page sizes, operation
//! mixes, names) in TOML and on the command line, the `[thresholds]` table, and a
//! resolved configuration written back as a layer ([`ConfigFile`]).

use std::path::Path;

use edbstress_report::{OpMix, TestType};
use serde::{Deserialize, Serialize};

use super::{ConfigError, ConfigFile, RunConfig};
use crate::profile::{Profile, Thresholds};
use crate::units::{ValueError, bounded};

/// The `[thresholds]` table: overrides of single pass/fail thresholds, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThresholdsFile {
    /// Average database read latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_read_avg_ms: Option<f64>,
    /// Highest per-interval average database read latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_read_max_ms: Option<f64>,
    /// Average log write latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_write_avg_ms: Option<f64>,
    /// Highest per-interval average log write latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_write_max_ms: Option<f64>,
    /// Average database page fault stalls per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_fault_stalls_per_sec: Option<f64>,
    /// 99th percentile database read latency (an extra criterion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_read_p99_ms: Option<f64>,
    /// 99th percentile log write latency (an extra criterion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_write_p99_ms: Option<f64>,
}

impl ThresholdsFile {
    /// Whether no threshold is set.
    pub fn is_empty(&self) -> bool {
        *self == ThresholdsFile::default()
    }

    /// `base` with the thresholds this layer sets replaced.
    pub(super) fn apply(&self, base: Thresholds) -> Thresholds {
        Thresholds {
            db_read_avg_ms: self.db_read_avg_ms.unwrap_or(base.db_read_avg_ms),
            db_read_max_ms: self.db_read_max_ms.unwrap_or(base.db_read_max_ms),
            log_write_avg_ms: self.log_write_avg_ms.unwrap_or(base.log_write_avg_ms),
            log_write_max_ms: self.log_write_max_ms.unwrap_or(base.log_write_max_ms),
            page_fault_stalls_per_sec: self
                .page_fault_stalls_per_sec
                .unwrap_or(base.page_fault_stalls_per_sec),
            db_read_p99_ms: self.db_read_p99_ms.or(base.db_read_p99_ms),
            log_write_p99_ms: self.log_write_p99_ms.or(base.log_write_p99_ms),
        }
    }
}

impl From<Thresholds> for ThresholdsFile {
    fn from(t: Thresholds) -> Self {
        ThresholdsFile {
            db_read_avg_ms: Some(t.db_read_avg_ms),
            db_read_max_ms: Some(t.db_read_max_ms),
            log_write_avg_ms: Some(t.log_write_avg_ms),
            log_write_max_ms: Some(t.log_write_max_ms),
            page_fault_stalls_per_sec: Some(t.page_fault_stalls_per_sec),
            db_read_p99_ms: t.db_read_p99_ms,
            log_write_p99_ms: t.log_write_p99_ms,
        }
    }
}

impl ConfigFile {
    /// Parses TOML text. Errors give the line and name the offending key.
    pub fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: "configuration".to_string(),
            message: bounded(&e.to_string()),
        })
    }

    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            origin: path.display().to_string(),
            message: bounded(&e.to_string()),
        })
    }
}

impl From<&RunConfig> for ConfigFile {
    /// Every setting of a resolved configuration, explicitly.
    fn from(c: &RunConfig) -> Self {
        ConfigFile {
            test: Some(c.test),
            profile: Some(c.profile),
            mailboxes: c.mailboxes,
            iops_per_mailbox: Some(c.iops_per_mailbox),
            mailbox_quota: Some(c.mailbox_quota),
            databases: Some(c.databases),
            database_size: Some(c.database_size),
            // The size it gave is written instead, so the run repeats on any free space.
            capacity_pct: None,
            copies: Some(c.copies),
            db_paths: Some(c.db_paths.clone()),
            log_paths: Some(c.log_paths.clone()),
            page_size: Some(c.page_size),
            cache_min: Some(c.cache_min),
            cache_max: Some(c.cache_max),
            checkpoint_depth: Some(c.checkpoint_depth),
            write_coalesce: Some(c.write_coalesce),
            torn_write_protection: Some(c.torn_write_protection),
            allow_cached_databases: c.allow_cached_databases.then_some(true),
            threads: c.threads,
            session_threads: c.session_threads,
            auto_tune: Some(c.auto_tune),
            pacing: Some(c.pacing),
            auto_tune_growth: c.auto_tune_growth,
            auto_tune_margin: Some(c.auto_tune_margin),
            duration: Some(c.duration),
            sample_interval: Some(c.sample_interval),
            warmup_timeout: Some(c.warmup_timeout),
            op_mix: Some(c.op_mix),
            lazy_commits: Some(c.lazy_commit_pct),
            bdm: Some(c.bdm),
            bdm_rate: Some(c.bdm_mb_per_sec),
            target_margin: Some(c.target_margin),
            results_dir: Some(c.results_dir.clone()),
            seed: Some(c.seed),
            backup_path: c.backup_path.clone(),
            logs_to_replay: Some(c.logs_to_replay),
            compressibility: Some(c.compressibility),
            io_mode: Some(c.io_mode),
            backend: Some(c.backend),
            verify_after: Some(c.verify_after),
            thresholds: c.thresholds.into(),
            fleet: None,
        }
    }
}

/// Parses an operation mix written "insert/delete/replace/read", e.g. "40/20/5/35".
/// Whether it adds up to 100 is checked with the rest of the configuration.
pub fn parse_op_mix(s: &str) -> Result<OpMix, ValueError> {
    let parts: Vec<&str> = s.split('/').map(str::trim).collect();
    let [insert, delete, replace, read] = parts.as_slice() else {
        return Err(ValueError::OpMixShape(s.to_string()));
    };
    let pct = |p: &str| {
        p.parse::<u32>().map_err(|_| ValueError::OpMixPercentage {
            value: s.to_string(),
            part: p.to_string(),
        })
    };
    Ok(OpMix {
        insert: pct(insert)?,
        delete: pct(delete)?,
        replace: pct(replace)?,
        read: pct(read)?,
    })
}

/// Writes an operation mix as "40/20/5/35".
pub fn format_op_mix(mix: OpMix) -> String {
    format!("{}/{}/{}/{}", mix.insert, mix.delete, mix.replace, mix.read)
}

/// Parses a test name: "performance", "stress", "database-backup", "soft-recovery"
/// (also with underscores, or Jetstress's "DatabaseBackup").
pub fn parse_test_type(s: &str) -> Result<TestType, ValueError> {
    let wanted = s.trim().to_ascii_lowercase().replace(['-', '_'], "");
    TestType::ALL
        .into_iter()
        .find(|t| t.label().to_ascii_lowercase() == wanted)
        .ok_or_else(|| ValueError::UnknownTest(s.to_string()))
}

/// Parses a profile name: "exchange2007" … "exchange2019", or the bare year.
pub fn parse_profile(s: &str) -> Result<Profile, ValueError> {
    Profile::from_name(s.trim()).ok_or_else(|| ValueError::UnknownProfile(s.to_string()))
}

/// Parses "on"/"off" (also true/false, yes/no, 1/0).
pub fn parse_on_off(s: &str) -> Result<bool, ValueError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(ValueError::InvalidSwitch(s.to_string())),
    }
}

/// Parses a compressibility: "mail" (1.7), "incompressible" (1.0), or a ratio such as
/// "2.0" or "2:1".
pub fn parse_compressibility(s: &str) -> Result<f64, ValueError> {
    s.parse::<edbstress_engine::Compressibility>()
        .map(|c| c.ratio())
        .map_err(ValueError::Compressibility)
}

impl RunConfig {
    /// The effective configuration as TOML with human units, to store in the run
    /// directory: every key explicit, so it repeats the run even when defaults change.
    /// It parses back as a [`ConfigFile`] that resolves to this configuration.
    pub fn to_toml(&self) -> String {
        let header = "# effective configuration of this run; `edbstress run --config config.toml` repeats it\n";
        match toml::to_string(&ConfigFile::from(self)) {
            Ok(body) => format!("{header}\n{body}"),
            // Only a configuration that skipped validation gets here (validation refuses
            // paths TOML cannot hold); say so in the file rather than fail the run.
            Err(e) => format!("{header}# cannot be written as TOML: {e}\n"),
        }
    }
}

/// `Duration` as a human string ("2h", "90s", "1m 30s") in TOML.
pub mod humantime_serde_compat {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes "1h 30m".
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    /// Reads "90s", "2h", "1m 30s".
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {text:?}: {e} (write e.g. \"90s\", \"15m\", \"2h\")"
            ))
        })
    }
}

/// `PageSize` as its number of bytes.
pub mod page_size_bytes {
    use edbstress_format::PageSize;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes 32768.
    pub fn serialize<S: Serializer>(p: &PageSize, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(p.bytes() as u64)
    }

    /// Reads 4096, 8192, 16384 or 32768.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PageSize, D::Error> {
        let bytes = u64::deserialize(d)?;
        PageSize::from_bytes(bytes as usize).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "page size {bytes} is not supported (use 4096, 8192, 16384 or 32768)"
            ))
        })
    }
}

/// How [`ConfigFile`] values are written in TOML: sizes, durations and page sizes in
/// human units, names for the test and profile, an operation mix as "40/20/5/35".
pub(crate) mod forms {
    use serde::de::{self, Deserializer, Visitor};
    use std::fmt;

    /// A TOML value that is a string or a number.
    pub(super) enum Scalar {
        Text(String),
        Integer(i64),
        Float(f64),
    }

    struct ScalarVisitor(&'static str);

    impl Visitor<'_> for ScalarVisitor {
        type Value = Scalar;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
            Ok(Scalar::Text(v.to_string()))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
            Ok(Scalar::Integer(v))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
            i64::try_from(v)
                .map(Scalar::Integer)
                .map_err(|_| E::custom(format!("{v} is too large")))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
            Ok(Scalar::Float(v))
        }
    }

    /// Reads a string or a number; anything else is an error saying `expecting`.
    pub(super) fn scalar<'de, D: Deserializer<'de>>(
        d: D,
        expecting: &'static str,
    ) -> Result<Scalar, D::Error> {
        d.deserialize_any(ScalarVisitor(expecting))
    }

    pub(crate) mod size {
        use edbstress_io::ByteSize;
        use serde::{Deserialize, Deserializer, Serialize, Serializer};

        pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
            v.map(ByteSize).serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
            ByteSize::deserialize(d).map(|size| Some(size.get()))
        }
    }

    /// A mailbox quota: MB of 1,048,576 bytes, as Exchange counts them.
    pub(crate) mod quota {
        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::units::{format_quota, parse_quota_value};

        pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(bytes) => s.serialize_str(&format_quota(*bytes)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
            match scalar(
                d,
                "a quota such as \"2048MB\" or \"2GB\", or a number of bytes",
            )? {
                Scalar::Text(t) => parse_quota_value(&t)
                    .map(Some)
                    .map_err(|why| D::Error::custom(format!("invalid quota '{t}': {why}"))),
                Scalar::Integer(n) => u64::try_from(n).map(Some).map_err(|_| {
                    D::Error::custom(format!("invalid quota {n}: a quota cannot be negative"))
                }),
                Scalar::Float(x) => Err(D::Error::custom(format!(
                    "invalid quota {x}: give a whole number of bytes or a string such as \"2048MB\""
                ))),
            }
        }
    }

    pub(crate) mod duration {
        use std::time::Duration;

        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::units::{format_duration, parse_duration};

        pub fn serialize<S: Serializer>(v: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(d) => s.serialize_str(&format_duration(*d)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            let fix = "write e.g. \"90s\", \"15m\", \"2h\" or a number of seconds";
            match scalar(
                d,
                "a duration such as \"15s\" or \"2h\", or a number of seconds",
            )? {
                Scalar::Text(t) => parse_duration(&t).map(Some).map_err(D::Error::custom),
                Scalar::Integer(n) => u64::try_from(n)
                    .map(|s| Some(Duration::from_secs(s)))
                    .map_err(|_| D::Error::custom(format!("invalid duration {n}: {fix}"))),
                Scalar::Float(x) => Duration::try_from_secs_f64(x)
                    .map(Some)
                    .map_err(|_| D::Error::custom(format!("invalid duration {x}: {fix}"))),
            }
        }
    }

    pub(crate) mod page_size {
        use edbstress_format::PageSize;
        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::units::{format_page_size, parse_page_size};

        pub fn serialize<S: Serializer>(v: &Option<PageSize>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(p) => s.serialize_str(&format_page_size(*p)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PageSize>, D::Error> {
            match scalar(d, "a page size: \"4KiB\", \"8KiB\", \"16KiB\" or \"32KiB\"")? {
                Scalar::Text(t) => parse_page_size(&t).map(Some).map_err(D::Error::custom),
                Scalar::Integer(n) => usize::try_from(n)
                    .ok()
                    .and_then(PageSize::from_bytes)
                    .map(Some)
                    .ok_or_else(|| {
                        D::Error::custom(format!(
                            "unsupported page size {n}: use 4096, 8192, 16384 or 32768 (or \"32KiB\")"
                        ))
                    }),
                Scalar::Float(x) => Err(D::Error::custom(format!(
                    "unsupported page size {x}: use \"4KiB\", \"8KiB\", \"16KiB\" or \"32KiB\""
                ))),
            }
        }
    }

    pub(crate) mod compressibility {
        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::config::parse_compressibility;

        pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(ratio) => s.serialize_f64(*ratio),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
            // The range is checked with the rest of the configuration.
            match scalar(d, "a ratio such as 1.7, or \"mail\" or \"incompressible\"")? {
                Scalar::Text(t) => parse_compressibility(&t)
                    .map(Some)
                    .map_err(D::Error::custom),
                Scalar::Integer(n) => Ok(Some(n as f64)),
                Scalar::Float(x) => Ok(Some(x)),
            }
        }
    }

    pub(crate) mod test_type {
        use edbstress_report::TestType;
        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::config::parse_test_type;

        pub fn serialize<S: Serializer>(v: &Option<TestType>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(t) => s.serialize_str(t.cli_name()),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TestType>, D::Error> {
            let expecting =
                "a test: \"performance\", \"stress\", \"database-backup\" or \"soft-recovery\"";
            match scalar(d, expecting)? {
                Scalar::Text(t) => parse_test_type(&t).map(Some).map_err(D::Error::custom),
                _ => Err(D::Error::custom(format!("invalid test: use {expecting}"))),
            }
        }
    }

    pub(crate) mod profile {
        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::config::parse_profile;
        use crate::profile::Profile;

        pub fn serialize<S: Serializer>(v: &Option<Profile>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(p) => s.serialize_str(p.name()),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Profile>, D::Error> {
            let expecting = "a profile: \"exchange2007\", \"exchange2010\" or \"exchange2013\"";
            match scalar(d, expecting)? {
                Scalar::Text(t) => parse_profile(&t).map(Some).map_err(D::Error::custom),
                _ => Err(D::Error::custom(format!(
                    "invalid profile: use {expecting}"
                ))),
            }
        }
    }

    pub(crate) mod op_mix {
        use std::fmt;

        use edbstress_report::OpMix;
        use serde::de::{self, Deserializer, MapAccess, Visitor};
        use serde::{Deserialize, Serializer};

        use crate::config::{format_op_mix, parse_op_mix};

        /// The table form; every share must be given.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct OpMixTable {
            insert: u32,
            delete: u32,
            replace: u32,
            read: u32,
        }

        struct OpMixVisitor;

        impl<'de> Visitor<'de> for OpMixVisitor {
            type Value = OpMix;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "an operation mix: \"40/20/5/35\" or { insert = 40, delete = 20, replace = 5, read = 35 }",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<OpMix, E> {
                parse_op_mix(v).map_err(E::custom)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<OpMix, A::Error> {
                let t = OpMixTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(OpMix {
                    insert: t.insert,
                    delete: t.delete,
                    replace: t.replace,
                    read: t.read,
                })
            }
        }

        pub fn serialize<S: Serializer>(v: &Option<OpMix>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(mix) => s.serialize_str(&format_op_mix(*mix)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<OpMix>, D::Error> {
            d.deserialize_any(OpMixVisitor).map(Some)
        }
    }
}
