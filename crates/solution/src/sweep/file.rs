//! The sweep file (`sweep.toml`): the `[sweep]` settings, the base `[run]` settings,
//! `[vars]`, the `[[axis]]` entries and the `[commands]`; checked whole before anything
//! runs, and expanded into the grid of points. Also the commented template of
//! `edbstress sweep init`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use edbstress_workload::config::ConfigFile;
use serde::Deserialize;

use super::template::{BUILTINS, Template, TemplateError};

/// Run settings the sweep sets itself.
const MANAGED: [&str; 1] = ["results_dir"];

/// The sweep file as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    /// How the grid is run.
    #[serde(default)]
    pub sweep: SweepSettings,
    /// Run settings every point starts from: keys of an `edbstress config` file.
    #[serde(default)]
    pub run: toml::Table,
    /// Constant names for the commands and the run settings' text (`{dev}`, `{mnt}`).
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    /// The axes, in order: the first is the charts' x axis unless `[sweep] x_axis`.
    #[serde(default, rename = "axis")]
    pub axes: Vec<AxisEntry>,
    /// Commands run around each point.
    #[serde(default)]
    pub commands: Commands,
}

/// The `[sweep]` table.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSettings {
    /// A name for the report.
    pub name: Option<String>,
    /// Runs of each point [default: 1].
    pub repeats: Option<u32>,
    /// "as-written" (default) or "shuffled".
    pub order: Option<String>,
    /// Seed of the shuffle [default: from the clock, recorded in sweep.json].
    pub seed: Option<u64>,
    /// "fresh" (default: remove the databases before each point) or "keep".
    pub databases: Option<String>,
    /// The axis on the charts' x axis [default: the first].
    pub x_axis: Option<String>,
}

/// One `[[axis]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AxisEntry {
    /// A run setting (a key of `[run]`) or, with `storage = true`, any name.
    pub name: String,
    /// The values, in the order charted.
    pub values: Vec<toml::Value>,
    /// Only passed to the commands as `{name}`, not a run setting.
    #[serde(default)]
    pub storage: bool,
}

/// The `[commands]` table: shell command templates (`sh -c`), `{name}` replaced.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Commands {
    /// Before each point (e.g. re-create and mount the filesystem).
    pub setup: Option<String>,
    /// After each point, also when its run failed.
    pub teardown: Option<String>,
    /// After each run: its standard output's last line becomes a column.
    pub measure: Option<String>,
    /// The measured column's name [default: "measured"].
    pub measure_name: Option<String>,
    /// The longest one command may take before it is ended [default: 1h].
    pub timeout: Option<String>,
}

/// How long one command may take when `[commands] timeout` is not given.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(3600);

/// A checked sweep: the file, its axes' values as text and the grid.
#[derive(Clone, Debug)]
pub struct SweepPlan {
    /// The file.
    pub file: SweepFile,
    /// The file's text, verbatim.
    pub text: String,
    /// Each axis's values as text.
    pub values: Vec<Vec<String>>,
    /// The points: for each, the index of its value on every axis (last axis fastest).
    pub points: Vec<Vec<usize>>,
    /// Repeats of each point.
    pub repeats: u32,
    /// Shuffled order.
    pub shuffled: bool,
    /// Fresh databases at each point.
    pub fresh: bool,
    /// The x axis.
    pub x_axis: String,
    /// The longest one command may take.
    pub command_timeout: Duration,
}

/// A value as text: strings as written, other values in TOML form.
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a sweep file cannot be used; each message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The file cannot be read.
    #[error("cannot read the sweep file {}: {source}", path.display())]
    Read {
        /// The sweep file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// What is wrong in a file, with its path.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The sweep file.
        path: PathBuf,
        /// What is wrong.
        source: Box<PlanError>,
    },
    /// Not TOML of a sweep file.
    #[error("{0}")]
    Toml(Box<toml::de::Error>),
    /// No axis.
    #[error(
        "no [[axis]]: give at least one axis with its values \
         (`edbstress sweep init` writes an example)"
    )]
    NoAxis,
    /// An axis name that is not an identifier.
    #[error("axis name '{0}' is not a name: use letters, digits and _")]
    AxisName(String),
    /// A name given twice.
    #[error("'{0}' is given twice (axes and [vars] share one set of names)")]
    NameTwice(String),
    /// An axis named as a built-in name.
    #[error("'{0}' is a name the sweep sets itself ({builtins}); rename the axis", builtins = BUILTINS.join(", "))]
    BuiltinName(String),
    /// An axis without values.
    #[error("axis '{0}' has no values")]
    NoValues(String),
    /// A run axis over a setting the sweep sets.
    #[error("'{0}' is set by the sweep itself")]
    ManagedAxis(String),
    /// A run axis also in `[run]`.
    #[error("'{0}' is both an axis and a [run] setting; leave it out of [run]")]
    AxisAndRun(String),
    /// A `[run]` setting the sweep sets.
    #[error(
        "[run] {0} is set by the sweep itself (each point's run directory is \
         in the sweep directory); leave it out"
    )]
    ManagedRun(&'static str),
    /// Repeats out of range.
    #[error("[sweep] repeats = {0}: give 1 to 100")]
    Repeats(u32),
    /// An order other than as-written or shuffled.
    #[error("[sweep] order = '{0}': give \"as-written\" or \"shuffled\"")]
    Order(String),
    /// A databases policy other than fresh or keep.
    #[error(
        "[sweep] databases = '{0}': give \"fresh\" (removed before each \
         point) or \"keep\""
    )]
    Databases(String),
    /// A command timeout that is not a duration above zero.
    #[error("[commands] timeout = '{0}' is not a duration: give e.g. \"30m\" or \"2h\"")]
    Timeout(String),
    /// An x axis that is no axis.
    #[error("[sweep] x_axis = '{x}' is not an axis; give one of {axes}")]
    XAxis {
        /// The name given.
        x: String,
        /// The axes, comma separated.
        axes: String,
    },
    /// Too many points.
    #[error("the grid has {0} points; at most 10,000")]
    TooManyPoints(usize),
    /// A command's template.
    #[error("[commands] {what}: {source}")]
    Command {
        /// "setup", "teardown" or "measure".
        what: &'static str,
        /// What is wrong with it.
        source: TemplateError,
    },
    /// A `[run]` value's template.
    #[error("[run] value '{value}': {source}")]
    RunValue {
        /// The value as written.
        value: String,
        /// What is wrong with it.
        source: TemplateError,
    },
    /// A point whose run settings are not a run configuration.
    #[error(
        "point {number} ({described}): {source}(an axis without storage = true is a run \
         setting: a key of `edbstress config init`'s file)"
    )]
    Point {
        /// The point's number, from 1.
        number: usize,
        /// Its axes' values.
        described: String,
        /// What the configuration parser said.
        source: Box<toml::de::Error>,
    },
}

impl SweepPlan {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<SweepPlan, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlanError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        SweepPlan::parse(&text).map_err(|e| PlanError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// Checks a sweep file's text: names, values, every point's run settings, every
    /// command's `{names}`.
    pub fn parse(text: &str) -> Result<SweepPlan, PlanError> {
        let file: SweepFile = toml::from_str(text).map_err(|e| PlanError::Toml(Box::new(e)))?;
        if file.axes.is_empty() {
            return Err(PlanError::NoAxis);
        }
        let mut names: Vec<&str> = Vec::new();
        for a in &file.axes {
            if !valid_name(&a.name) {
                return Err(PlanError::AxisName(a.name.clone()));
            }
            if names.contains(&a.name.as_str()) || file.vars.contains_key(&a.name) {
                return Err(PlanError::NameTwice(a.name.clone()));
            }
            if BUILTINS.contains(&a.name.as_str()) {
                return Err(PlanError::BuiltinName(a.name.clone()));
            }
            if a.values.is_empty() {
                return Err(PlanError::NoValues(a.name.clone()));
            }
            if MANAGED.contains(&a.name.as_str()) && !a.storage {
                return Err(PlanError::ManagedAxis(a.name.clone()));
            }
            if !a.storage && file.run.contains_key(&a.name) {
                return Err(PlanError::AxisAndRun(a.name.clone()));
            }
            names.push(&a.name);
        }
        for key in MANAGED {
            if file.run.contains_key(key) {
                return Err(PlanError::ManagedRun(key));
            }
        }
        let repeats = file.sweep.repeats.unwrap_or(1);
        if !(1..=100).contains(&repeats) {
            return Err(PlanError::Repeats(repeats));
        }
        let shuffled = match file.sweep.order.as_deref().unwrap_or("as-written") {
            "as-written" => false,
            "shuffled" => true,
            other => {
                return Err(PlanError::Order(other.to_string()));
            }
        };
        let fresh = match file.sweep.databases.as_deref().unwrap_or("fresh") {
            "fresh" => true,
            "keep" => false,
            other => {
                return Err(PlanError::Databases(other.to_string()));
            }
        };
        let command_timeout = match &file.commands.timeout {
            None => DEFAULT_COMMAND_TIMEOUT,
            Some(t) => edbstress_workload::units::parse_duration(t)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| PlanError::Timeout(t.clone()))?,
        };
        let x_axis = match &file.sweep.x_axis {
            Some(x) if names.contains(&x.as_str()) => x.clone(),
            Some(x) => {
                return Err(PlanError::XAxis {
                    x: x.clone(),
                    axes: names.join(", "),
                });
            }
            None => file.axes[0].name.clone(),
        };
        let values: Vec<Vec<String>> = file
            .axes
            .iter()
            .map(|a| a.values.iter().map(value_text).collect())
            .collect();
        let mut points: Vec<Vec<usize>> = vec![Vec::new()];
        for a in &values {
            points = points
                .into_iter()
                .flat_map(|p| {
                    (0..a.len()).map(move |i| {
                        let mut q = p.clone();
                        q.push(i);
                        q
                    })
                })
                .collect();
        }
        if points.len() > 10_000 {
            return Err(PlanError::TooManyPoints(points.len()));
        }
        let plan = SweepPlan {
            file,
            text: text.to_string(),
            values,
            points,
            repeats,
            shuffled,
            fresh,
            x_axis,
            command_timeout,
        };
        plan.check_commands()?;
        for p in 0..plan.points.len() {
            let table = plan.run_table(p, Path::new("/"), 1)?;
            toml::Value::Table(table)
                .try_into::<ConfigFile>()
                .map_err(|source| PlanError::Point {
                    number: p + 1,
                    described: plan.describe(p),
                    source: Box::new(source),
                })?;
        }
        Ok(plan)
    }

    fn check_commands(&self) -> Result<(), PlanError> {
        let mut known: Vec<&str> = self.file.axes.iter().map(|a| a.name.as_str()).collect();
        known.extend(self.file.vars.keys().map(String::as_str));
        known.extend(BUILTINS);
        let c = &self.file.commands;
        for (what, cmd) in [
            ("setup", &c.setup),
            ("teardown", &c.teardown),
            ("measure", &c.measure),
        ] {
            if let Some(cmd) = cmd {
                // The run directory exists only once the point has run.
                let names: Vec<&str> = known
                    .iter()
                    .copied()
                    .filter(|n| what != "setup" || *n != "run_dir")
                    .collect();
                Template::parse(cmd)
                    .and_then(|t| t.check(&names))
                    .map_err(|source| PlanError::Command { what, source })?;
            }
        }
        Ok(())
    }

    /// "compression=lzo, threads=8".
    pub fn describe(&self, point: usize) -> String {
        self.file
            .axes
            .iter()
            .zip(&self.points[point])
            .zip(&self.values)
            .map(|((a, &i), v)| format!("{}={}", a.name, v[i]))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The names a point's commands and run settings see: the vars, the axes' values
    /// and the built-in names.
    pub fn names(&self, point: usize, point_dir: &Path, repeat: u32) -> BTreeMap<String, String> {
        let mut m: BTreeMap<String, String> = self.file.vars.clone();
        for ((a, &i), v) in self
            .file
            .axes
            .iter()
            .zip(&self.points[point])
            .zip(&self.values)
        {
            m.insert(a.name.clone(), v[i].clone());
        }
        m.insert("point".into(), format!("p{:02}", point + 1));
        m.insert("repeat".into(), repeat.to_string());
        m.insert("point_dir".into(), point_dir.display().to_string());
        if let Some(sweep_dir) = point_dir.parent().and_then(Path::parent) {
            m.insert("sweep_dir".into(), sweep_dir.display().to_string());
        }
        m
    }

    /// The run settings of a point: `[run]`, then its run axes' values, `{names}` in
    /// strings replaced, `results_dir` the point's directory.
    pub fn run_table(
        &self,
        point: usize,
        point_dir: &Path,
        repeat: u32,
    ) -> Result<toml::Table, PlanError> {
        let names = self.names(point, point_dir, repeat);
        let mut t = self.file.run.clone();
        for (a, &i) in self.file.axes.iter().zip(&self.points[point]) {
            if !a.storage {
                t.insert(a.name.clone(), a.values[i].clone());
            }
        }
        let mut t = toml::Value::Table(t);
        substitute(&mut t, &names)?;
        let toml::Value::Table(mut t) = t else {
            unreachable!("a table stays a table")
        };
        t.insert(
            "results_dir".into(),
            toml::Value::String(point_dir.display().to_string()),
        );
        Ok(t)
    }
}

/// Replaces `{names}` in every string of `v`.
fn substitute(v: &mut toml::Value, names: &BTreeMap<String, String>) -> Result<(), PlanError> {
    match v {
        toml::Value::String(s) => {
            *s = Template::parse(s)
                .and_then(|t| t.render(names))
                .map_err(|source| PlanError::RunValue {
                    value: s.clone(),
                    source,
                })?;
        }
        toml::Value::Array(a) => {
            for x in a {
                substitute(x, names)?;
            }
        }
        toml::Value::Table(t) => {
            for (_, x) in t.iter_mut() {
                substitute(x, names)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The commented template `edbstress sweep init` writes: a sweep over run settings
/// only, which runs anywhere, with a storage axis and its commands commented out.
pub const TEMPLATE: &str = r#"# edbstress sweep file: `edbstress sweep --config sweep.toml --output DIR`
#
# A sweep runs an ordinary `edbstress run` at every point of a grid of settings
# (every value of every axis, times `repeats`), each into its own run directory under
# DIR/points/, and writes DIR/sweep.json, sweep.csv and sweep.html (charts with the
# first axis on the x axis, the best point). Run it again with the same file and DIR
# to resume: finished points are kept.

[sweep]
name = "sessions and content compressibility"
repeats = 2                  # runs of each point (the spread between them is reported)
order = "shuffled"           # or "as-written"; shuffling spreads drift over the grid
# seed = 7                   # of the shuffle [default: from the clock; recorded]
databases = "fresh"          # "fresh": removed before each point (needed when setup
                             # re-creates the filesystem, or page size or database
                             # size change); "keep": prepared once, reused
# x_axis = "threads"         # [default: the first axis]

# Run settings of every point: any key of `edbstress config init`'s file. Strings may
# use {names}: the axes, the [vars], and point, repeat, point_dir, sweep_dir.
[run]
test = "performance"         # any test: performance, stress, database-backup, soft-recovery
duration = "30s"
sample_interval = "5s"
databases = 1
database_size = "256MiB"
cache_max = "64MiB"          # each database at least 4 × its cache: the run measures storage
db_paths = ["./sweep-data/db"]
log_paths = ["./sweep-data/log"]
# Direct I/O by default. On a compressing filesystem (which compresses buffered writes)
# use io_mode = "buffered" with databases larger than this host's memory, else the page
# cache serves the reads and the run is refused (allow_cached_databases = true runs it
# anyway, measuring memory).
# io_mode = "buffered"

# Constant names for the commands, e.g. the device and mount point.
[vars]
# dev = "/dev/sdX"
# mnt = "/mnt/sweep"

# An axis whose name is a run setting sets it at each point.
[[axis]]
name = "threads"
values = [4, 8, 16]

[[axis]]
name = "compressibility"
values = ["incompressible", "mail"]

# A storage axis: its values only reach the commands, as {compression}.
# [[axis]]
# name = "compression"
# storage = true
# values = ["none", "lzo", "zstd"]

# Commands around each point, run with `sh -c` in the sweep directory; their output
# goes to points/<point>/setup.log, teardown.log, measure.log. A failing setup stops
# the sweep and shows its output; teardown runs after every point that was set up.
[commands]
# setup = "mkfs.btrfs -q -f {dev} && mount -o compress={compression} {dev} {mnt} && mkdir -p {mnt}/db {mnt}/log"
# teardown = "umount {mnt}"
# measure: the last line of its standard output becomes a column (and a chart when
# it is a number); {run_dir} is the point's run directory.
# measure = "du -sk --apparent-size {mnt}/db | cut -f1"
# measure_name = "database KiB"
# The longest one command may take; past it (or at Ctrl-C, for setup and measure)
# the command is ended with everything it started.
# timeout = "1h"
"#;
