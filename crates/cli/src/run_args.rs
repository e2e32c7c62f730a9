//! The options of a test run: a configuration file, the `--quick` preset, and flags
//! that override both. `edbstress config show` takes them too, to print the
//! configuration a run would use.
//!
//! The flags are not written out here: each comes from its setting's entry in
//! [`SETTINGS`] (spelling, value name, help, parser), so a setting is defined once for
//! the command line, the configuration file, the template and error messages.

use std::path::PathBuf;

use clap::builder::{ArgAction, PossibleValue, TypedValueParser};
use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use edbstress_workload::config::{
    ConfigFile, FlagForm, RunConfig, SETTINGS, Setting, quick_preset,
};

use crate::common::CommandError;
use crate::flags::config_error;

/// Options of a run. Precedence, lowest first: the profile's defaults, `--quick`, the
/// `--config` file, the other flags. Values are checked when resolved, with messages
/// naming the configuration key and its flag.
#[derive(Debug, Clone, Default)]
pub struct RunArgs {
    /// TOML configuration file.
    pub config: Option<PathBuf>,
    /// The quick preset.
    pub quick: bool,
    /// What the setting flags gave: only the settings given on the command line.
    pub flags: ConfigFile,
}

/// The clap argument of the setting `key` (which has a flag), for commands other than
/// `run` that take the same flag.
pub fn setting_arg(key: &str) -> Arg {
    SETTINGS
        .iter()
        .find(|s| s.key == key)
        .and_then(arg_of)
        .unwrap_or_else(|| panic!("`{key}` is not a run setting with a flag"))
}

/// The clap argument of one setting.
fn arg_of(setting: &Setting) -> Option<Arg> {
    // As clap's derive shows a one-paragraph doc comment: without its final period.
    let help = setting.help_text();
    let arg = Arg::new(setting.key).help(help.strip_suffix('.').unwrap_or(&help).to_string());
    Some(match setting.flag {
        FlagForm::FileOnly => return None,
        FlagForm::Value {
            long,
            value_name,
            hyphen,
            check,
            choices,
        } => arg
            .long(&long[2..])
            .value_name(value_name)
            .allow_hyphen_values(hyphen)
            .action(ArgAction::Set)
            // The help already names the values; completion offers them.
            .hide_possible_values(true)
            .value_parser(Offering {
                parser: move |s: &str| check(s).map(|()| s.to_string()),
                choices,
            }),
        FlagForm::Repeated { long, value_name } => arg
            .long(&long[2..])
            .value_name(value_name)
            .action(ArgAction::Append),
        FlagForm::Switch { long } => arg.long(&long[2..]).action(ArgAction::SetTrue),
        FlagForm::Thresholds { long } => arg
            .long(&long[2..])
            .value_name("NAME=MS")
            .action(ArgAction::Append),
    })
}

/// A flag's parser that also tells clap the values to offer (shell completion, the
/// man page): the parser alone decides what is accepted, with its own messages.
#[derive(Clone)]
struct Offering<P> {
    parser: P,
    choices: &'static [&'static str],
}

impl<P> TypedValueParser for Offering<P>
where
    P: TypedValueParser,
{
    type Value = P::Value;

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        self.parser.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        if self.choices.is_empty() {
            return None;
        }
        Some(Box::new(
            self.choices.iter().map(|c| PossibleValue::new(*c)),
        ))
    }
}

impl Args for RunArgs {
    fn augment_args(cmd: Command) -> Command {
        let mut cmd = cmd
            .arg(
                Arg::new("config")
                    .long("config")
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(PathBuf))
                    .help("TOML configuration file (write one with `edbstress config init`)"),
            )
            .arg(
                Arg::new("quick")
                    .long("quick")
                    .action(ArgAction::SetTrue)
                    .help(
                        "A small run of under a minute: 1000 mailboxes on 2 × 256 MiB \
                         databases, 45 s",
                    ),
            );
        for setting in SETTINGS {
            if let Some(arg) = arg_of(setting) {
                cmd = cmd.arg(arg);
            }
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for RunArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = RunArgs::default();
        args.update_from_arg_matches(m)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        if let Some(path) = m.get_one::<PathBuf>("config") {
            self.config = Some(path.clone());
        }
        self.quick |= m.get_flag("quick");
        for setting in SETTINGS {
            let values: Vec<String> = match setting.flag {
                FlagForm::FileOnly => continue,
                FlagForm::Switch { .. } => {
                    if !m.get_flag(setting.key) {
                        continue;
                    }
                    vec![String::new()]
                }
                _ => match m.get_many::<String>(setting.key) {
                    Some(v) => v.cloned().collect(),
                    None => continue,
                },
            };
            self.flags.apply_flag(setting.key, &values).map_err(|e| {
                let flag = setting.flag.long().unwrap_or(setting.key);
                clap::Error::raw(
                    clap::error::ErrorKind::ValueValidation,
                    format!("invalid value for '{flag}': {e}\n"),
                )
            })?;
        }
        Ok(())
    }
}

impl RunArgs {
    /// The layers in precedence order: `--quick`, the `--config` file, the flags.
    pub fn layers(&self) -> Result<Vec<ConfigFile>, CommandError> {
        let mut layers = Vec::with_capacity(3);
        if self.quick {
            layers.push(quick_preset());
        }
        if let Some(path) = &self.config {
            layers.push(ConfigFile::load(path).map_err(config_error)?);
        }
        layers.push(self.flags.clone());
        Ok(layers)
    }

    /// The resolved and validated configuration; an error names the key at fault and
    /// the flag that sets it.
    pub fn resolve(&self) -> Result<RunConfig, CommandError> {
        RunConfig::resolve(&self.layers()?).map_err(config_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut argv = vec!["edbstress"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).map(|c| c.run)
    }

    #[test]
    fn every_setting_with_a_flag_is_on_the_command_line_once() {
        let cmd = RunArgs::augment_args(Command::new("run"));
        for setting in SETTINGS {
            let Some(long) = setting.flag.long() else {
                continue;
            };
            let found: Vec<_> = cmd
                .get_arguments()
                .filter(|a| a.get_long() == Some(&long[2..]))
                .collect();
            assert_eq!(found.len(), 1, "{long}");
        }
        cmd.debug_assert();
    }

    #[test]
    fn flags_make_the_layer_they_name() {
        let a = parse(&[
            "--databases",
            "3",
            "--db-path",
            "/a",
            "--db-path",
            "/b",
            "--buffered",
            "--no-verify",
            "--duration",
            "90s",
            "--threshold",
            "db_read_avg_ms=15",
            "--checkpoint-depth",
            "20MiB",
        ])
        .unwrap();
        assert_eq!(a.flags.databases, Some(3));
        assert_eq!(
            a.flags.db_paths,
            Some(vec![PathBuf::from("/a"), PathBuf::from("/b")])
        );
        assert_eq!(a.flags.io_mode, Some(edbstress_io::IoMode::Buffered));
        assert_eq!(a.flags.verify_after, Some(false));
        assert_eq!(a.flags.duration, Some(std::time::Duration::from_secs(90)));
        assert_eq!(a.flags.thresholds.db_read_avg_ms, Some(15.0));
        assert_eq!(a.flags.checkpoint_depth, Some(20 << 20));
        assert_eq!(a.flags.log_paths, None);
    }

    #[test]
    fn a_layer_written_as_flags_parses_back_to_the_same_layer() {
        let a = parse(&[
            "--test",
            "stress",
            "--profile",
            "exchange2010",
            "--mailboxes",
            "500",
            "--iops-per-mailbox",
            "0.25",
            "--mailbox-quota",
            "1GB",
            "--log-path",
            "/l",
            "--auto-tune",
            "--op-mix",
            "25/10/50/15",
            "--bdm",
            "off",
            "--backend",
            "threads",
            "--threshold",
            "log_write_p99_ms=30",
            "--compressibility",
            "2.5",
        ])
        .unwrap();
        let args = a.flags.to_args().unwrap();
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let again = parse(&argv).unwrap();
        assert_eq!(again.flags, a.flags, "{args:?}");
    }

    #[test]
    fn a_bad_value_names_the_flag_and_what_to_give() {
        let e = parse(&["--databases", "-2"]).err().unwrap().to_string();
        assert!(
            e.contains("--databases") && e.contains("cannot be negative"),
            "{e}"
        );
        let e = parse(&["--threshold", "db_read=3"])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("--threshold") && e.contains("unknown threshold"),
            "{e}"
        );
    }
}
