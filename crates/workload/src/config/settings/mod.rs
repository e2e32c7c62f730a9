//! Every run setting, defined once.
//!
//! One [`run_settings!`] entry per setting gives its configuration key and type, how it
//! is written in TOML, its command-line flag (spelling, value name, parser), its help
//! line and its paragraph in `config init`'s commented template. From that list come:
//!
//! - [`ConfigFile`], one layer of configuration as written in TOML (serde);
//! - [`SETTINGS`], the table the command line builds its flags from, and that maps a
//!   key named in an error to its flag ([`flag_for_key`]);
//! - [`keys`], the only [`SettingKey`]s validation can name in an error;
//! - [`ConfigFile::apply_flag`], a flag's text into a layer, with the flag's own parser;
//! - [`ConfigFile::to_args`], a layer as `edbstress run` flags, for the child command
//!   lines of fleets, sweeps and ESRP campaigns;
//! - [`config_template`], the commented template.
//!
//! Adding a setting is one entry here and its use ([`RunConfig`](super::RunConfig)'s
//! field and how [`resolve`](super::resolve) derives it).

use super::ThresholdsFile;
use crate::units::ValueError;

/// A configuration key validation can name: only the [`keys`] constants exist, so an
/// error can only point at a setting this table defines (and so at its flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SettingKey(&'static str);

impl SettingKey {
    /// The key as written in TOML: `databases`, `thresholds.db_read_avg_ms`.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for SettingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// How a setting is given on the command line.
#[derive(Clone, Copy, Debug)]
pub enum FlagForm {
    /// Only in a configuration file.
    FileOnly,
    /// `--flag VALUE`; `hyphen`: values starting with '-' reach the parser (numbers and
    /// sizes, so that `-5` is refused as negative rather than taken for a flag).
    Value {
        /// "--duration".
        long: &'static str,
        /// "DURATION".
        value_name: &'static str,
        /// Values may start with '-'.
        hyphen: bool,
        /// Checks the text as the flag's parser does; the error says what is wrong.
        check: fn(&str) -> Result<(), ValueError>,
        /// The values to offer (shell completion), for a flag with a fixed set; the
        /// parser still decides what is accepted and says why not.
        choices: &'static [&'static str],
    },
    /// `--flag VALUE`, repeatable: each gives one element of a list.
    Repeated {
        /// "--db-path".
        long: &'static str,
        /// "DIR".
        value_name: &'static str,
    },
    /// `--flag` alone sets one value (`--buffered`: io_mode = "buffered").
    Switch {
        /// "--buffered".
        long: &'static str,
    },
    /// `--threshold NAME=MS`, repeatable: one key of the `[thresholds]` table each.
    Thresholds {
        /// "--threshold".
        long: &'static str,
    },
}

impl FlagForm {
    /// The flag's spelling, if it has one.
    pub fn long(&self) -> Option<&'static str> {
        match *self {
            FlagForm::FileOnly => None,
            FlagForm::Value { long, .. }
            | FlagForm::Repeated { long, .. }
            | FlagForm::Switch { long }
            | FlagForm::Thresholds { long } => Some(long),
        }
    }
}

/// One run setting.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// The configuration key.
    pub key: &'static str,
    /// Its flag.
    pub flag: FlagForm,
    /// The flag's help, one paragraph (lines joined with spaces).
    pub help: &'static [&'static str],
    /// Its paragraph in the template: comment lines, then the `key = value` line.
    pub template: &'static str,
    /// A section heading (and text) the template prints before it.
    pub section: Option<&'static str>,
}

impl Setting {
    /// The help as one line.
    pub fn help_text(&self) -> String {
        self.help
            .iter()
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

macro_rules! flag_form {
    (file_only) => {
        FlagForm::FileOnly
    };
    (value $long:literal $name:literal $parse:expr) => {
        FlagForm::Value {
            long: $long,
            value_name: $name,
            hyphen: false,
            check: |s| ($parse)(s).map(|_| ()),
            choices: &[],
        }
    };
    (choice $long:literal $name:literal $parse:expr, [$($choice:literal),+]) => {
        FlagForm::Value {
            long: $long,
            value_name: $name,
            hyphen: false,
            check: |s| ($parse)(s).map(|_| ()),
            choices: &[$($choice),+],
        }
    };
    (number $long:literal $name:literal $parse:expr) => {
        FlagForm::Value {
            long: $long,
            value_name: $name,
            hyphen: true,
            check: |s| ($parse)(s).map(|_| ()),
            choices: &[],
        }
    };
    (repeated $long:literal $name:literal) => {
        FlagForm::Repeated {
            long: $long,
            value_name: $name,
        }
    };
    (switch $long:literal $value:expr) => {
        FlagForm::Switch { long: $long }
    };
    (thresholds $long:literal) => {
        FlagForm::Thresholds { long: $long }
    };
}

macro_rules! apply_flag {
    ($layer:ident . $key:ident, $values:ident, file_only) => {{
        let _ = $values;
        Err($crate::units::ValueError::NoFlag(stringify!($key)))
    }};
    ($layer:ident . $key:ident, $values:ident, value $long:literal $name:literal $parse:expr) => {{
        let text = $values.last().ok_or($crate::units::ValueError::NoValue)?;
        $layer.$key = Some(($parse)(text)?);
        Ok(())
    }};
    ($layer:ident . $key:ident, $values:ident, number $long:literal $name:literal $parse:expr) => {
        apply_flag!($layer.$key, $values, value $long $name $parse)
    };
    ($layer:ident . $key:ident, $values:ident, choice $long:literal $name:literal $parse:expr, [$($choice:literal),+]) => {
        apply_flag!($layer.$key, $values, value $long $name $parse)
    };
    ($layer:ident . $key:ident, $values:ident, repeated $long:literal $name:literal) => {{
        $layer.$key = Some($values.iter().map(PathBuf::from).collect());
        Ok(())
    }};
    ($layer:ident . $key:ident, $values:ident, switch $long:literal $value:expr) => {{
        if !$values.is_empty() {
            $layer.$key = Some($value);
        }
        Ok(())
    }};
}

/// Defines [`ConfigFile`], [`SETTINGS`], [`keys`] and [`ConfigFile::apply_flag`] from
/// one entry per setting:
///
/// ```text
/// /// Help line(s) of the flag.
/// key: Type [with = "serde_module"] {
///     flag: (value "--flag" "VALUE" parser) | (number …) | (repeated "--flag" "DIR")
///           | (choice "--flag" "VALUE" parser, ["a", "b"]) | (switch "--flag" value)
///           | (file_only),
///     template: "comment lines\n# key = default",
///     section: "heading",   // optional
/// }
/// ```
macro_rules! run_settings {
    ($(
        $(#[doc = $help:literal])*
        $key:ident : $ty:ty $([with = $with:literal])? {
            flag: ($($flag:tt)*),
            template: $template:expr
            $(, section: $section:expr)? $(,)?
        }
    )*) => {
        /// One layer of configuration as written in TOML: a `--config` file, the
        /// `--quick` preset or the command-line flags. Every key is optional; a key a
        /// layer leaves out comes from an earlier layer or the defaults. Unknown keys
        /// are an error naming them.
        ///
        /// Sizes accept `"256MiB"`, `"2GB"` or a number of bytes; durations `"2h"`,
        /// `"15s"` or a number of seconds; `op_mix` a table `{ insert, delete, replace,
        /// read }` or a string `"40/20/5/35"`.
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct ConfigFile {
            $(
                $(#[doc = $help])*
                #[serde(skip_serializing_if = "Option::is_none" $(, with = $with)?)]
                pub $key: Option<$ty>,
            )*
            /// Pass/fail threshold overrides, per field. Last so that TOML writes the
            /// table after the plain keys.
            #[serde(skip_serializing_if = "ThresholdsFile::is_empty")]
            pub thresholds: ThresholdsFile,
            /// The `[fleet]` table: the hosts of `edbstress fleet` and how to reach
            /// them. Read by the solution crate; a run on one host ignores it, so one
            /// file serves both.
            #[serde(skip_serializing)]
            pub fleet: Option<toml::Table>,
        }

        /// Every run setting, in the template's order; the `[thresholds]` table last.
        pub const SETTINGS: &[Setting] = &[
            $(
                Setting {
                    key: stringify!($key),
                    flag: flag_form!($($flag)*),
                    help: &[$($help),*],
                    template: $template,
                    section: run_settings!(@section $($section)?),
                },
            )*
            Setting {
                key: "thresholds",
                flag: FlagForm::Thresholds { long: "--threshold" },
                help: &[
                    "Override one pass/fail threshold, NAME=MS (repeatable): db_read_avg_ms,",
                    "db_read_max_ms, log_write_avg_ms, log_write_max_ms, page_fault_stalls_per_sec,",
                    "db_read_p99_ms or log_write_p99_ms [default: the profile's].",
                ],
                template: THRESHOLDS_TEMPLATE,
                section: Some(THRESHOLDS_SECTION),
            },
        ];

        /// The keys validation can name in an error.
        #[allow(non_upper_case_globals)]
        pub mod keys {
            use super::SettingKey;
            $(
                #[doc = concat!("`", stringify!($key), "`")]
                pub const $key: SettingKey = SettingKey(stringify!($key));
            )*
            /// `thresholds.db_read_avg_ms`.
            pub const thresholds_db_read_avg_ms: SettingKey = SettingKey("thresholds.db_read_avg_ms");
            /// `thresholds.db_read_max_ms`.
            pub const thresholds_db_read_max_ms: SettingKey = SettingKey("thresholds.db_read_max_ms");
            /// `thresholds.log_write_avg_ms`.
            pub const thresholds_log_write_avg_ms: SettingKey = SettingKey("thresholds.log_write_avg_ms");
            /// `thresholds.log_write_max_ms`.
            pub const thresholds_log_write_max_ms: SettingKey = SettingKey("thresholds.log_write_max_ms");
            /// `thresholds.page_fault_stalls_per_sec`.
            pub const thresholds_page_fault_stalls_per_sec: SettingKey =
                SettingKey("thresholds.page_fault_stalls_per_sec");
            /// `thresholds.db_read_p99_ms`.
            pub const thresholds_db_read_p99_ms: SettingKey = SettingKey("thresholds.db_read_p99_ms");
            /// `thresholds.log_write_p99_ms`.
            pub const thresholds_log_write_p99_ms: SettingKey = SettingKey("thresholds.log_write_p99_ms");

            /// Every key.
            pub const ALL: &[SettingKey] = &[
                $($key,)*
                thresholds_db_read_avg_ms,
                thresholds_db_read_max_ms,
                thresholds_log_write_avg_ms,
                thresholds_log_write_max_ms,
                thresholds_page_fault_stalls_per_sec,
                thresholds_db_read_p99_ms,
                thresholds_log_write_p99_ms,
            ];
        }

        impl ConfigFile {
            /// Sets `key` from its flag's values as given on the command line (the last
            /// one for a single-value flag; every one for a repeatable flag; any for a
            /// switch), with the flag's own parser.
            pub fn apply_flag(
                &mut self,
                key: &str,
                values: &[String],
            ) -> Result<(), $crate::units::ValueError> {
                let layer = self;
                match key {
                    $(stringify!($key) => apply_flag!(layer.$key, values, $($flag)*),)*
                    "thresholds" => {
                        for v in values {
                            layer.thresholds.set_from_flag(v)?;
                        }
                        Ok(())
                    }
                    _ => Err($crate::units::ValueError::NotARunSetting(key.to_string())),
                }
            }
        }
    };
    (@section $s:expr) => { Some($s) };
    (@section) => { None };
}

/// The flag that sets `key`, as error messages print it: `--databases`,
/// `--threshold db_read_avg_ms=MS`; None for keys only a file sets.
pub fn flag_for_key(key: &str) -> Option<String> {
    if let Some(name) = key.strip_prefix("thresholds.") {
        return Some(format!("--threshold {name}=MS"));
    }
    SETTINGS
        .iter()
        .find(|s| s.key == key)
        .and_then(|s| s.flag.long())
        .map(str::to_string)
}

/// Flag parsers: each returns the setting's value or says what is wrong (the command
/// line quotes the value and names the flag around it).
pub mod parse {
    use std::time::Duration;

    use edbstress_format::PageSize;
    use edbstress_io::BackendKind;
    use edbstress_report::{OpMix, TestType};

    use crate::profile::Profile;
    use crate::units::{ValueError, count};

    /// `--test`.
    pub fn test_type(s: &str) -> Result<TestType, ValueError> {
        crate::config::parse_test_type(s)
    }

    /// `--profile`.
    pub fn profile(s: &str) -> Result<Profile, ValueError> {
        crate::config::parse_profile(s)
    }

    /// A count (`--mailboxes`, `--databases`, `--threads`).
    pub fn count_u64(s: &str) -> Result<u64, ValueError> {
        count::<u64>("a count", 0, None)(s)
    }

    /// A count that fits 32 bits.
    pub fn count_u32(s: &str) -> Result<u32, ValueError> {
        count::<u32>("a count", 0, None)(s)
    }

    /// `--seed`.
    pub fn seed(s: &str) -> Result<u64, ValueError> {
        count::<u64>("a seed", 0, None)(s)
    }

    /// `--lazy-commits`.
    pub fn percentage(s: &str) -> Result<u32, ValueError> {
        count::<u32>("a percentage", 0, None)(s)
    }

    /// A decimal number (`--iops-per-mailbox`, `--bdm-rate`); its range is checked with
    /// the rest of the configuration.
    pub fn number(s: &str) -> Result<f64, ValueError> {
        s.trim().parse::<f64>().map_err(ValueError::NotANumber)
    }

    /// A size (`--cache-max`).
    pub fn size(s: &str) -> Result<u64, ValueError> {
        crate::units::parse_size_value(s)
    }

    /// A mailbox quota (`--mailbox-quota`): MB and GB of 2^20 and 2^30 bytes.
    pub fn quota(s: &str) -> Result<u64, ValueError> {
        crate::units::parse_quota_value(s)
    }

    /// `--page-size`.
    pub fn page_size(s: &str) -> Result<PageSize, ValueError> {
        crate::units::parse_page_size(s)
    }

    /// A duration (`--duration`).
    pub fn duration(s: &str) -> Result<Duration, ValueError> {
        crate::units::parse_duration(s)
    }

    /// `--op-mix`.
    pub fn op_mix(s: &str) -> Result<OpMix, ValueError> {
        crate::config::parse_op_mix(s)
    }

    /// `--bdm`.
    pub fn on_off(s: &str) -> Result<bool, ValueError> {
        crate::config::parse_on_off(s)
    }

    /// `--compressibility`.
    pub fn compressibility(s: &str) -> Result<f64, ValueError> {
        crate::config::parse_compressibility(s)
    }

    /// `--pacing`.
    pub fn pacing(s: &str) -> Result<edbstress_report::Pacing, ValueError> {
        match s.trim() {
            "jetstress" => Ok(edbstress_report::Pacing::Jetstress),
            "open-loop" => Ok(edbstress_report::Pacing::OpenLoop),
            other => Err(ValueError::UnknownPacing(other.to_string())),
        }
    }

    /// `--backend`.
    pub fn backend(s: &str) -> Result<BackendKind, ValueError> {
        s.parse::<BackendKind>()
            .map_err(|_| ValueError::UnknownBackend(s.to_string()))
    }

    /// A directory (`--results-dir`).
    pub fn path(s: &str) -> Result<std::path::PathBuf, ValueError> {
        Ok(std::path::PathBuf::from(s))
    }
}

mod list;

use list::TEMPLATE_HEADER;
pub use list::{ConfigFile, SETTINGS, keys};

impl ThresholdsFile {
    /// Sets one threshold from `--threshold NAME=MS`.
    fn set_from_flag(&mut self, text: &str) -> Result<(), ValueError> {
        let (name, value) = text
            .split_once('=')
            .ok_or_else(|| ValueError::ThresholdShape(text.to_string()))?;
        let ms: f64 = value
            .trim()
            .parse()
            .map_err(|_| ValueError::ThresholdNotANumber {
                name: name.to_string(),
                value: value.to_string(),
            })?;
        let slot = match name.trim() {
            "db_read_avg_ms" => &mut self.db_read_avg_ms,
            "db_read_max_ms" => &mut self.db_read_max_ms,
            "log_write_avg_ms" => &mut self.log_write_avg_ms,
            "log_write_max_ms" => &mut self.log_write_max_ms,
            "page_fault_stalls_per_sec" => &mut self.page_fault_stalls_per_sec,
            "db_read_p99_ms" => &mut self.db_read_p99_ms,
            "log_write_p99_ms" => &mut self.log_write_p99_ms,
            other => return Err(ValueError::UnknownThreshold(other.to_string())),
        };
        *slot = Some(ms);
        Ok(())
    }
}

/// Why a configuration layer cannot be given as `edbstress run` flags.
#[derive(Debug, thiserror::Error)]
pub enum ToArgsError {
    /// The layer does not serialize as TOML.
    #[error("{0}")]
    Toml(#[from] toml::ser::Error),
    /// A setting only a configuration file sets.
    #[error("`{0}` has no flag; give it in a configuration file")]
    FileOnly(&'static str),
    /// A switch set to the value its flag does not set.
    #[error(
        "`{key} = {value}` cannot be given as a flag ({long} sets the other value); \
         give it in a configuration file"
    )]
    OtherSwitchValue {
        /// The setting.
        key: &'static str,
        /// Its value in the layer.
        value: toml::Value,
        /// The switch.
        long: &'static str,
    },
    /// A repeated flag's setting that is not a list.
    #[error("a list was expected")]
    NotAList,
    /// The thresholds that are not a table.
    #[error("a table was expected")]
    NotATable,
    /// A value that is not a scalar.
    #[error("{0} cannot be given as a flag's value")]
    NotAScalar(toml::Value),
    /// A switch's own flag refused (a defect of the settings table).
    #[error(transparent)]
    Value(#[from] ValueError),
}

/// For callers that still carry errors as text.
impl ConfigFile {
    /// The layer as `edbstress run` flags, each setting it holds with its flag and the
    /// value in the file's text form ("2GiB", "90s"): how fleets, sweeps and campaigns
    /// pass settings to the runs they start. A value no flag can express (a switch set
    /// to its other value, a file-only key) is an error naming it.
    pub fn to_args(&self) -> Result<Vec<String>, ToArgsError> {
        let table = toml::Table::try_from(self)?;
        let mut args = Vec::new();
        for setting in SETTINGS {
            let Some(value) = table.get(setting.key) else {
                continue;
            };
            match setting.flag {
                FlagForm::FileOnly => return Err(ToArgsError::FileOnly(setting.key)),
                FlagForm::Value { long, .. } => {
                    args.extend([long.to_string(), value_text(value)?]);
                }
                FlagForm::Repeated { long, .. } => {
                    let items = value.as_array().ok_or(ToArgsError::NotAList)?;
                    for item in items {
                        args.extend([long.to_string(), value_text(item)?]);
                    }
                }
                FlagForm::Switch { long } => {
                    let mut on = ConfigFile::default();
                    on.apply_flag(setting.key, &[String::new()])?;
                    let on = toml::Table::try_from(&on)?;
                    if on.get(setting.key) != Some(value) {
                        return Err(ToArgsError::OtherSwitchValue {
                            key: setting.key,
                            value: value.clone(),
                            long,
                        });
                    }
                    args.push(long.to_string());
                }
                FlagForm::Thresholds { long } => {
                    let items = value.as_table().ok_or(ToArgsError::NotATable)?;
                    for (name, ms) in items {
                        args.extend([long.to_string(), format!("{name}={}", value_text(ms)?)]);
                    }
                }
            }
        }
        Ok(args)
    }
}

/// A TOML scalar as a flag's text: strings as they are, numbers as written.
fn value_text(v: &toml::Value) -> Result<String, ToArgsError> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(if *b { "on" } else { "off" }.to_string()),
        other => Err(ToArgsError::NotAScalar(other.clone())),
    }
}

/// The commented TOML `edbstress config init` writes: every key with what it means and
/// its default; the mailbox-profile keys set to an example (5000 mailboxes at 0.12 IOPS
/// with 2 GB quotas on 6 databases with 2 copies), the rest commented out.
pub fn config_template() -> String {
    let mut out = String::from(TEMPLATE_HEADER);
    for setting in SETTINGS {
        out.push('\n');
        if let Some(section) = setting.section {
            out.push_str(section);
            out.push_str("\n\n");
        }
        out.push_str(setting.template);
        out.push('\n');
    }
    out
}
