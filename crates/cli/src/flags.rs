//! Configuration keys and the flags that set them. The workload crate reports a
//! configuration error by key (`duration`, `db_paths`); only the command line knows its
//! flag spellings, so it adds them here when it prints the error.

use edbstress_workload::config::ConfigError;

use crate::common::CommandError;

/// The flag that sets a configuration key, for keys the command line can set too.
pub fn flag_for_key(key: &str) -> Option<String> {
    let flag = match key {
        "db_paths" => "--db-path",
        "log_paths" => "--log-path",
        "io_mode" => "--buffered",
        "verify_after" => "--no-verify",
        "test"
        | "profile"
        | "mailboxes"
        | "iops_per_mailbox"
        | "mailbox_quota"
        | "databases"
        | "database_size"
        | "capacity_pct"
        | "copies"
        | "page_size"
        | "cache_min"
        | "cache_max"
        | "threads"
        | "auto_tune"
        | "duration"
        | "sample_interval"
        | "op_mix"
        | "lazy_commits"
        | "bdm"
        | "bdm_rate"
        | "results_dir"
        | "seed"
        | "backup_path"
        | "logs_to_replay"
        | "compressibility"
        | "backend"
        | "torn_write_protection"
        | "allow_cached_databases" => return Some(format!("--{}", key.replace('_', "-"))),
        _ => return None,
    };
    Some(flag.to_string())
}

/// `message` with the flag after every configuration key it quotes in backticks:
/// "`databases`: 300 is out of range" becomes "`databases` (--databases): 300 is out
/// of range".
pub fn with_flags(message: &str) -> String {
    let parts: Vec<&str> = message.split('`').collect();
    let mut out = String::with_capacity(message.len() + 32);
    for (i, part) in parts.iter().enumerate() {
        out.push_str(part);
        let closed = i + 1 < parts.len();
        if closed {
            out.push('`');
        }
        // Odd parts, when closed, are the words between a pair of backticks.
        if i % 2 == 1 && closed {
            if let Some(flag) = flag_for_key(part) {
                out.push_str(&format!(" ({flag})"));
            }
        }
    }
    out
}

/// A configuration error as the command line prints it: a validation error with the
/// flag beside each key it names (file and parse errors as they are, since a parser's
/// "expected one of `test`, `profile`, …" lists keys of the file, not flags).
pub fn config_error(e: ConfigError) -> CommandError {
    let message = e.to_string();
    CommandError::Usage(match e.key() {
        Some(_) => with_flags(&message),
        None => message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_the_command_line_sets_get_their_flag() {
        assert_eq!(
            with_flags("`databases`: 300 is out of range; use 1 to 256"),
            "`databases` (--databases): 300 is out of range; use 1 to 256"
        );
        assert_eq!(
            with_flags("`auto_tune`: remove `threads` or `auto_tune`"),
            "`auto_tune` (--auto-tune): remove `threads` (--threads) or `auto_tune` (--auto-tune)"
        );
        assert_eq!(
            with_flags("`db_paths`: empty, `thresholds.db_read_avg_ms` and `x"),
            "`db_paths` (--db-path): empty, `thresholds.db_read_avg_ms` and `x"
        );
        assert_eq!(flag_for_key("io_mode").as_deref(), Some("--buffered"));
        assert_eq!(flag_for_key("warmup_timeout"), None);
    }
}
