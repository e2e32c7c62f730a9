//! The hosts of a fleet: where to reach each, what to call it, and its own paths and
//! share of the mailboxes.

use std::path::PathBuf;

/// What is wrong with the hosts as given (their specs, names or mailboxes).
#[derive(Debug, thiserror::Error)]
pub enum HostSpecError {
    /// A `--host` without a destination.
    #[error(
        "'{spec}' names no host: give --host DEST[,name=N,db-path=P,log-path=P,mailboxes=N,results-dir=P]"
    )]
    NoDest {
        /// The spec.
        spec: String,
    },
    /// A part of a spec that is not `key=value`.
    #[error(
        "'{part}' in --host {spec} is not key=value (keys: name, db-path, log-path, mailboxes, results-dir)"
    )]
    NotKeyValue {
        /// The part.
        part: String,
        /// The spec.
        spec: String,
    },
    /// `mailboxes=` that is not a whole number.
    #[error("mailboxes={value} in --host {spec} is not a whole number")]
    Mailboxes {
        /// The value.
        value: String,
        /// The spec.
        spec: String,
    },
    /// A key no host setting has.
    #[error(
        "unknown key '{key}' in --host {spec} (keys: name, db-path, log-path, mailboxes, results-dir)"
    )]
    UnknownKey {
        /// The key.
        key: String,
        /// The spec.
        spec: String,
    },
    /// A name that is not one plain path component.
    #[error(
        "host name {name:?} (of --host {dest}) {problem}: give it name=… with letters, digits, \
         '.', '-' or '_' (e.g. --host 10.0.0.5,name=mbx1)"
    )]
    BadName {
        /// The name.
        name: String,
        /// The host's destination.
        dest: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// One host given twice.
    #[error(
        "host {0} is given twice; each host runs once (name=… tells apart two hosts reached \
         through one address)"
    )]
    Twice(String),
    /// Two names told apart only by case.
    #[error(
        "host names {0:?} and {1:?} differ only by case: they would share a directory on some \
         file systems; give them distinct names"
    )]
    CaseOnly(String, String),
    /// Mailboxes given for some hosts, and no total.
    #[error(
        "some hosts have mailboxes=… and others none: give every host its mailboxes, or \
         --mailboxes for the fleet's total"
    )]
    SomeMailboxes,
    /// The hosts' own mailboxes exceed the total.
    #[error("the hosts' own mailboxes add up to {given}, more than --mailboxes {total}")]
    OverTotal {
        /// Their sum.
        given: u64,
        /// The total.
        total: u64,
    },
    /// Every host has its mailboxes and they miss the total.
    #[error("every host has its mailboxes, adding up to {given}, not --mailboxes {total}")]
    NotTotal {
        /// Their sum.
        given: u64,
        /// The total.
        total: u64,
    },
}

/// One host of a fleet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetHost {
    /// How ssh reaches it (`host`, `user@host`, an alias of the ssh config).
    pub dest: String,
    /// Its name in the results (default: `dest` without a user part).
    pub name: String,
    /// Its database paths (default: the run options').
    pub db_paths: Vec<PathBuf>,
    /// Its log paths (default: the run options').
    pub log_paths: Vec<PathBuf>,
    /// Its mailboxes (default: an equal share of the fleet's).
    pub mailboxes: Option<u64>,
    /// Where its run directories are made on the host (default
    /// `edbstress-results/fleet` under the ssh login directory).
    pub results_dir: Option<PathBuf>,
}

impl FleetHost {
    /// Parses `DEST[,key=value…]` with keys `name`, `db-path`, `log-path` (each may
    /// repeat), `mailboxes` and `results-dir`.
    pub fn parse(spec: &str) -> Result<FleetHost, HostSpecError> {
        let mut parts = spec.split(',');
        let dest = parts.next().unwrap_or("").trim();
        if dest.is_empty() || dest.starts_with('-') {
            return Err(HostSpecError::NoDest { spec: spec.into() });
        }
        let mut host = FleetHost {
            dest: dest.to_string(),
            name: dest.rsplit('@').next().unwrap_or(dest).to_string(),
            db_paths: Vec::new(),
            log_paths: Vec::new(),
            mailboxes: None,
            results_dir: None,
        };
        for part in parts {
            let Some((key, value)) = part.split_once('=') else {
                return Err(HostSpecError::NotKeyValue {
                    part: part.into(),
                    spec: spec.into(),
                });
            };
            match key.trim() {
                "name" => host.name = value.to_string(),
                "db-path" => host.db_paths.push(PathBuf::from(value)),
                "log-path" => host.log_paths.push(PathBuf::from(value)),
                "results-dir" => host.results_dir = Some(PathBuf::from(value)),
                "mailboxes" => {
                    host.mailboxes = Some(value.parse().map_err(|_| HostSpecError::Mailboxes {
                        value: value.into(),
                        spec: spec.into(),
                    })?)
                }
                other => {
                    return Err(HostSpecError::UnknownKey {
                        key: other.into(),
                        spec: spec.into(),
                    });
                }
            }
        }
        Ok(host)
    }
}

/// Checks the hosts' names once, before anything starts: each names the host's directory
/// under the fleet's `hosts/` (and its runs' host name), so each must be one plain path
/// component (no `/`, not `.` or `..`, no control characters) and the names must differ,
/// also when told apart only by case (some file systems ignore it).
pub fn validate_names(hosts: &[FleetHost]) -> Result<(), HostSpecError> {
    let mut seen: Vec<(String, &str)> = Vec::new();
    for h in hosts {
        let n = h.name.as_str();
        let problem = if n.is_empty() {
            Some("is empty")
        } else if n.contains('/') {
            Some("contains '/' (a host's name is one directory name)")
        } else if n == "." || n == ".." {
            Some("is '.' or '..'")
        } else if n.chars().any(char::is_control) {
            Some("contains a control character")
        } else if n.len() > 64 {
            Some("is longer than 64 bytes")
        } else if n.starts_with('-') {
            Some("starts with '-'")
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(HostSpecError::BadName {
                name: n.into(),
                dest: h.dest.clone(),
                problem,
            });
        }
        let key = n.to_lowercase();
        if let Some((_, other)) = seen.iter().find(|(k, _)| *k == key) {
            return Err(if *other == n {
                HostSpecError::Twice(n.into())
            } else {
                HostSpecError::CaseOnly(other.to_string(), n.into())
            });
        }
        seen.push((key, n));
    }
    Ok(())
}

/// Each host's mailboxes: its own when given, else an equal share of what the given
/// ones leave of `total` (the first hosts take the remainder). `None` everywhere for a
/// throughput run (no total and none given).
pub fn split_mailboxes(
    hosts: &[FleetHost],
    total: Option<u64>,
) -> Result<Vec<Option<u64>>, HostSpecError> {
    let given: u64 = hosts.iter().filter_map(|h| h.mailboxes).sum();
    let open = hosts.iter().filter(|h| h.mailboxes.is_none()).count() as u64;
    let Some(total) = total else {
        if open > 0 && open < hosts.len() as u64 {
            return Err(HostSpecError::SomeMailboxes);
        }
        return Ok(hosts.iter().map(|h| h.mailboxes).collect());
    };
    if given > total {
        return Err(HostSpecError::OverTotal { given, total });
    }
    let rest = total - given;
    if open == 0 && rest > 0 {
        return Err(HostSpecError::NotTotal { given, total });
    }
    let share = rest.checked_div(open).unwrap_or(0);
    let extra = rest.checked_rem(open).unwrap_or(0);
    let mut k = 0;
    Ok(hosts
        .iter()
        .map(|h| {
            Some(h.mailboxes.unwrap_or_else(|| {
                k += 1;
                share + u64::from(k <= extra)
            }))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_mailboxes_split() {
        let h =
            FleetHost::parse("root@10.1.1.5,name=mbx1,db-path=/mnt/a,db-path=/mnt/b,mailboxes=7")
                .unwrap();
        assert_eq!(h.dest, "root@10.1.1.5");
        assert_eq!(h.name, "mbx1");
        assert_eq!(h.db_paths.len(), 2);
        assert_eq!(FleetHost::parse("user@db2").unwrap().name, "db2");
        assert!(FleetHost::parse("db1,colour=blue").is_err());
        assert!(FleetHost::parse("").is_err());

        let hosts: Vec<FleetHost> = ["a", "b,mailboxes=100", "c"]
            .iter()
            .map(|s| FleetHost::parse(s).unwrap())
            .collect();
        assert_eq!(
            split_mailboxes(&hosts, Some(1001)).unwrap(),
            [Some(451), Some(100), Some(450)]
        );
        assert!(split_mailboxes(&hosts, Some(50)).is_err());
        assert!(split_mailboxes(&hosts, None).is_err());
    }

    #[test]
    fn names_are_one_distinct_path_component() {
        let names = |specs: &[&str]| {
            let hosts: Vec<FleetHost> =
                specs.iter().map(|s| FleetHost::parse(s).unwrap()).collect();
            validate_names(&hosts)
        };
        assert!(names(&["a,name=mbx1", "b,name=mbx2"]).is_ok());
        for bad in [
            &["a,name=mbx1", "b,name=mbx1/"][..],
            &["a,name=dup", "b,name=dup/."],
            &["a,name=/abs/path"],
            &["a,name=.."],
            &["a,name=."],
            &["a,name=x", "b,name=X"],
            &["a,name=x", "b,name=x"],
        ] {
            assert!(names(bad).is_err(), "{bad:?}");
        }
    }
}
