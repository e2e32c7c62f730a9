//! Configuration keys and the flags that set them. The workload crate reports a
//! configuration error by key (`duration`, `db_paths`); only the command line knows its
//! flag spellings, so it adds them here when it prints the error.

use edbstress_workload::config::ConfigError;

use crate::common::CommandError;

pub use edbstress_workload::config::flag_for_key;

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
            "`db_paths` (--db-path): empty, `thresholds.db_read_avg_ms` (--threshold \
             db_read_avg_ms=MS) and `x"
        );
        assert_eq!(flag_for_key("io_mode").as_deref(), Some("--buffered"));
        assert_eq!(
            with_flags("`thresholds.db_read_avg_ms`: 0 is not above 0"),
            "`thresholds.db_read_avg_ms` (--threshold db_read_avg_ms=MS): 0 is not above 0"
        );
    }

    #[test]
    fn every_key_validation_can_name_has_a_flag() {
        use edbstress_workload::config::keys;
        // `ConfigError::Invalid` holds a `SettingKey`, and `keys::ALL` is every one there
        // is: so every key an error can name prints with its flag.
        for key in keys::ALL {
            assert!(
                flag_for_key(key.name()).is_some(),
                "`{key}` has no flag to name in its errors"
            );
        }
        assert!(keys::ALL.len() >= 40, "{}", keys::ALL.len());
    }
}
