//! Sizes and counts on the command line: `256MiB`, `1.5GiB`, `4KB`, `32K`, `1048576`;
//! `4`, `1000`. Sizes are parsed by `edbstress_io::ByteSize` (through the workload
//! crate's flag adapter) so that flags and configuration files read sizes alike.
//!
//! Flags taking these accept values starting with a hyphen (`allow_hyphen_values`), so
//! that `--cache-max -5MiB` reaches the parser and is refused as negative instead of
//! being taken for an unknown flag.

pub use edbstress_workload::units::{count, parse_page_size};
// Size flags: clap's message already quotes the value and names the flag ("invalid
// value '-5MiB' for '--cache-max <SIZE>': …"), so the parser says only what is wrong.
pub use edbstress_workload::units::parse_size_value as parse_size;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_counts_say_what_is_wrong() {
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(
            parse_size("-5MiB").unwrap_err().to_string(),
            "a size cannot be negative; give e.g. 512MiB"
        );
        let databases = count::<u32>("a count", 1, Some(999));
        assert_eq!(databases("12"), Ok(12));
        assert_eq!(
            databases("-1").unwrap_err().to_string(),
            "a count cannot be negative; give a whole number from 1 to 999"
        );
        assert!(
            databases("0")
                .unwrap_err()
                .to_string()
                .contains("out of range")
        );
        assert!(
            databases("2.5")
                .unwrap_err()
                .to_string()
                .contains("not a whole number")
        );
        assert!(
            databases("--yes")
                .unwrap_err()
                .to_string()
                .contains("is a flag")
        );
        let seed = count::<u64>("a seed", 0, None);
        assert_eq!(seed("18446744073709551615"), Ok(u64::MAX));
        assert!(
            seed("-3")
                .unwrap_err()
                .to_string()
                .starts_with("a seed cannot be negative")
        );
        let narrow = count::<u16>("a count", 0, None);
        assert!(
            narrow("70000")
                .unwrap_err()
                .to_string()
                .contains("too large")
        );
    }
}
