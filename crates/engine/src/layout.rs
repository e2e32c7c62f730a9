//! Where an instance's files live: one database file and one log directory per
//! instance, instances spread round-robin over the database and log paths given.

use std::path::{Path, PathBuf};

use edbstress_format::InstanceId;

/// Database file name prefix; files are `edbstress001.edb`, `edbstress002.edb`, ...
const DB_PREFIX: &str = "edbstress";
const DB_SUFFIX: &str = ".edb";

/// The files of one instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceLayout {
    /// Instance number, from 1.
    pub instance: InstanceId,
    /// The database file.
    pub db_file: PathBuf,
    /// The instance's log directory (log generations and checkpoint file).
    pub log_dir: PathBuf,
}

impl InstanceLayout {
    /// Instance `instance` with its database in `db_dir` and logs under `log_root`.
    pub fn new(instance: InstanceId, db_dir: &Path, log_root: &Path) -> InstanceLayout {
        InstanceLayout {
            instance,
            db_file: db_dir.join(db_file_name(instance)),
            log_dir: log_root.join(format!("{DB_PREFIX}{instance:03}")),
        }
    }

    /// `count` instances spread round-robin over `db_paths` and `log_paths`
    /// (both non-empty); at most `u16::MAX` of them (a run has at most 256).
    pub fn spread(count: u32, db_paths: &[PathBuf], log_paths: &[PathBuf]) -> Vec<InstanceLayout> {
        (1..=count.min(u32::from(u16::MAX)) as u16)
            .map(|i| {
                let k = usize::from(i - 1);
                InstanceLayout::new(
                    InstanceId::new(i),
                    &db_paths[k % db_paths.len()],
                    &log_paths[k % log_paths.len()],
                )
            })
            .collect()
    }
}

/// The database file name of an instance.
pub fn db_file_name(instance: InstanceId) -> String {
    format!("{DB_PREFIX}{instance:03}{DB_SUFFIX}")
}

/// The instance number of a database file name made by [`db_file_name`].
pub fn parse_db_file_name(name: &str) -> Option<InstanceId> {
    let digits = name.strip_prefix(DB_PREFIX)?.strip_suffix(DB_SUFFIX)?;
    if digits.len() < 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n > 0).map(InstanceId::new)
}

/// Database files (by name) in `dir`, sorted by instance.
pub fn discover_databases(dir: &Path) -> std::io::Result<Vec<(InstanceId, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(n) = entry.file_name().to_str().and_then(parse_db_file_name) {
            found.push((n, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Instance log directories (by name) under `root`, sorted by instance.
pub fn discover_log_dirs(root: &Path) -> std::io::Result<Vec<(InstanceId, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(digits) = name.strip_prefix(DB_PREFIX) else {
            continue;
        };
        if digits.len() >= 3 && digits.bytes().all(|b| b.is_ascii_digit()) && entry.path().is_dir()
        {
            if let Ok(n) = digits.parse::<u16>() {
                found.push((InstanceId::new(n), entry.path()));
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(db_file_name(InstanceId::new(7)), "edbstress007.edb");
        assert_eq!(
            parse_db_file_name("edbstress007.edb"),
            Some(InstanceId::new(7))
        );
        assert_eq!(
            parse_db_file_name("edbstress1234.edb"),
            Some(InstanceId::new(1234))
        );
        // Beyond 16 bits: no instance edbstress makes.
        assert_eq!(parse_db_file_name("edbstress70000.edb"), None);
        assert_eq!(parse_db_file_name("edbstress07.edb"), None);
        assert_eq!(parse_db_file_name("other007.edb"), None);
        assert_eq!(parse_db_file_name("edbstress000.edb"), None);
    }

    #[test]
    fn spreads_round_robin() {
        let dbs = [PathBuf::from("/a"), PathBuf::from("/b")];
        let logs = [PathBuf::from("/l")];
        let l = InstanceLayout::spread(3, &dbs, &logs);
        assert_eq!(l[0].db_file, PathBuf::from("/a/edbstress001.edb"));
        assert_eq!(l[1].db_file, PathBuf::from("/b/edbstress002.edb"));
        assert_eq!(l[2].db_file, PathBuf::from("/a/edbstress003.edb"));
        assert_eq!(l[2].log_dir, PathBuf::from("/l/edbstress003"));
    }
}
