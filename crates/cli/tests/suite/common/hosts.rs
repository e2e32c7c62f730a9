//! The "hosts" of the multi-host tests: loopback addresses of one real sshd
//! ([`super::sshd::Sshd`]), each with its own database, log and results directories
//! under the test's working directory, written the ways a fleet is given them.

use std::path::{Path, PathBuf};

/// One host: the address ssh reaches it at, the name the fleet gives it, and the
/// directory holding its `db/`, `logs/` and `results/`.
pub struct LoopbackHost {
    pub address: String,
    pub name: String,
    pub dir: PathBuf,
}

impl LoopbackHost {
    /// Host `name` at `address`, its directories under `root/name`.
    pub fn new(root: &Path, address: &str, name: &str) -> LoopbackHost {
        LoopbackHost::in_dir(root.join(name), address, name)
    }

    /// Host `name` at `address`, its directories under `dir` (a name that is not a
    /// directory name of its own).
    pub fn in_dir(dir: PathBuf, address: &str, name: &str) -> LoopbackHost {
        LoopbackHost {
            address: address.into(),
            name: name.into(),
            dir,
        }
    }

    /// The host's database directory.
    pub fn db(&self) -> PathBuf {
        self.dir.join("db")
    }

    /// The host's log directory.
    pub fn logs(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// The host's results directory.
    pub fn results(&self) -> PathBuf {
        self.dir.join("results")
    }

    /// Creates the three directories (for commands that want them to exist).
    pub fn create_dirs(&self) {
        for d in [self.db(), self.logs(), self.results()] {
            std::fs::create_dir_all(d).unwrap();
        }
    }

    /// The host as `fleet run --host` takes it.
    pub fn spec(&self) -> String {
        format!(
            "{},name={},db-path={},log-path={},results-dir={}",
            self.address,
            self.name,
            self.db().display(),
            self.logs().display(),
            self.results().display()
        )
    }

    /// The host as a `[[fleet.hosts]]` table of a configuration file.
    pub fn toml(&self) -> String {
        format!(
            "[[fleet.hosts]]\ndest = \"{}\"\nname = \"{}\"\ndb_paths = [\"{}\"]\nlog_paths = [\"{}\"]\nresults_dir = \"{}\"\n",
            self.address,
            self.name,
            self.db().display(),
            self.logs().display(),
            self.results().display()
        )
    }
}
