//! Arguments and error handling shared by the subcommands.

use std::path::PathBuf;

use clap::Args;
use edbstress_io::{BackendKind, IoMode};

// The defaults of runs and of the other commands are the same directories.
pub use edbstress_workload::config::{DEFAULT_DB_PATH, DEFAULT_LOG_PATH};

/// A failure that ends the command with this message: exit code 2 for a usage
/// problem, 1 for an integrity problem found in the data.
#[derive(Debug)]
pub enum CommandError {
    /// Usage, configuration or environment problem.
    Usage(String),
    /// The data is damaged (a truncated database, no valid header copy).
    Integrity(String),
}

impl CommandError {
    /// An engine error, as an integrity problem when it is one.
    pub fn engine(e: edbstress_engine::EngineError) -> CommandError {
        if e.is_integrity() {
            CommandError::Integrity(e.to_string())
        } else {
            CommandError::Usage(e.to_string())
        }
    }

    /// A prepare error, as an integrity problem when it is one.
    pub fn prepare(e: edbstress_engine::PrepareError) -> CommandError {
        if e.is_integrity() {
            CommandError::Integrity(e.to_string())
        } else {
            CommandError::Usage(e.to_string())
        }
    }
}

impl<E: std::fmt::Display> From<E> for CommandError {
    fn from(e: E) -> Self {
        CommandError::Usage(e.to_string())
    }
}

/// I/O options common to commands that read or write databases. `--buffered` and
/// `--backend` are the run settings of the same names ([`SETTINGS`]): one spelling,
/// help and parser for every command.
///
/// [`SETTINGS`]: edbstress_workload::config::SETTINGS
#[derive(Debug, Clone)]
pub struct IoArgs {
    /// Use buffered I/O (through the page cache) instead of direct I/O.
    pub buffered: bool,
    /// I/O backend.
    pub backend: BackendKind,
    /// I/Os kept in flight.
    pub queue_depth: Option<u32>,
}

impl clap::Args for IoArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.arg(crate::run_args::setting_arg("io_mode"))
            .arg(crate::run_args::setting_arg("backend"))
            .arg(
                clap::Arg::new("queue_depth")
                    .long("queue-depth")
                    .value_name("N")
                    .allow_hyphen_values(true)
                    .value_parser(crate::units::count::<u32>("a queue depth", 1, Some(1024)))
                    .help("I/Os kept in flight"),
            )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for IoArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let backend = match m.get_one::<String>("backend") {
            // Checked by the flag's parser already.
            Some(text) => parse_backend(text).unwrap_or_default(),
            None => BackendKind::Auto,
        };
        Ok(IoArgs {
            buffered: m.get_flag("io_mode"),
            backend,
            queue_depth: m.get_one::<u32>("queue_depth").copied(),
        })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl IoArgs {
    /// The I/O mode selected.
    pub fn mode(&self) -> IoMode {
        if self.buffered {
            IoMode::Buffered
        } else {
            IoMode::Direct
        }
    }
}

pub use edbstress_workload::config::settings::parse::backend as parse_backend;

/// What every command that works on instances takes: where they are, how to do I/O,
/// and whether to print JSON.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// Print the result as JSON on standard output.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub paths: PathArgs,
    #[command(flatten)]
    pub io: IoArgs,
}

/// Paths of database directories and log directories.
#[derive(Args, Debug, Clone)]
pub struct PathArgs {
    /// Directory for database files (repeatable; instances are spread over them).
    #[arg(long = "db-path", value_name = "DIR")]
    pub db_paths: Vec<PathBuf>,
    /// Directory for instance log directories (repeatable; instances are spread over them).
    #[arg(long = "log-path", value_name = "DIR")]
    pub log_paths: Vec<PathBuf>,
}

impl PathArgs {
    /// The database directories, or the default.
    pub fn db_paths_or_default(&self) -> Vec<PathBuf> {
        if self.db_paths.is_empty() {
            vec![PathBuf::from(DEFAULT_DB_PATH)]
        } else {
            self.db_paths.clone()
        }
    }

    /// The log directories, or the default.
    pub fn log_paths_or_default(&self) -> Vec<PathBuf> {
        if self.log_paths.is_empty() {
            vec![PathBuf::from(DEFAULT_LOG_PATH)]
        } else {
            self.log_paths.clone()
        }
    }
}

/// The instances present under the database paths (default paths when none given),
/// each paired with its log directory under the log paths (same round-robin rule as
/// `prepare`).
pub fn instances_on_disk(
    paths: &PathArgs,
) -> Result<Vec<edbstress_engine::InstanceLayout>, CommandError> {
    use edbstress_engine::{InstanceLayout, discover_databases};
    let db_paths = paths.db_paths_or_default();
    let log_paths = paths.log_paths_or_default();
    let mut found = Vec::new();
    for dir in &db_paths {
        let dbs = discover_databases(dir).map_err(|e| {
            CommandError::Usage(format!("cannot list --db-path {}: {e}", dir.display()))
        })?;
        found.extend(dbs);
    }
    if found.is_empty() {
        return Err(CommandError::Usage(format!(
            "no edbstress databases (edbstressNNN.edb) under {}; run `edbstress prepare` first or give --db-path",
            db_paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    found.sort();
    Ok(found
        .into_iter()
        .map(|(n, db_file)| {
            let log_root = &log_paths[(usize::from(n.get()) - 1) % log_paths.len()];
            let mut layout = InstanceLayout::new(
                n,
                db_file.parent().unwrap_or(std::path::Path::new(".")),
                log_root,
            );
            layout.db_file = db_file;
            layout
        })
        .collect())
}

/// Writes a commented template (`config init`, `sweep init`, `esrp init`) to a file that
/// must not exist yet; `example` names another file in the message when it does.
pub fn write_new_template(
    path: &std::path::Path,
    template: &str,
    example: &str,
) -> Result<(), CommandError> {
    use std::io::{ErrorKind, Write};
    // create_new: refusing an existing file is atomic, not a check that could race.
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            return Err(CommandError::Usage(format!(
                "{} already exists and is left as it is; remove it or name another file, e.g. `{example}`",
                path.display()
            )));
        }
        Err(e) => {
            return Err(CommandError::Usage(format!(
                "cannot create {}: {e}",
                path.display()
            )));
        }
    };
    if let Err(e) = file.write_all(template.as_bytes()) {
        // The file is ours and incomplete: remove it rather than leave half a template.
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(CommandError::Usage(format!(
            "cannot write {}: {e}",
            path.display()
        )));
    }
    Ok(())
}
