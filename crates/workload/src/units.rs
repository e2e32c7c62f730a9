//! Sizes and durations as people write them: `256MiB`, `32KiB` page sizes; `90s`,
//! `15m`, `2h`. Byte sizes are [`ByteSize`] (the I/O layer's one parser and formatter);
//! this module adapts it to the error strings of clap's value parsers and adds page
//! sizes, durations and counts. The command line and the configuration file share these
//! parsers, so a value means the same in both.

use std::time::Duration;

use edbstress_format::PageSize;
use edbstress_io::{ByteSize, ByteSizeError};

/// How a page size is fixed.
const PAGE_SIZES: &str = "use 4KiB, 8KiB, 16KiB or 32KiB";
/// How a duration is written.
const DURATIONS: &str = "write e.g. 90s, 15m, 2h or 1h 30m";
/// How an operation mix is written.
const OP_MIX: &str = "write four percentages insert/delete/replace/read, e.g. 40/20/5/35";
/// The threshold names `--threshold` takes.
const THRESHOLD_NAMES: &str = "db_read_avg_ms, db_read_max_ms, log_write_avg_ms, \
                               log_write_max_ms, page_fault_stalls_per_sec, db_read_p99_ms \
                               or log_write_p99_ms";

/// A value written on the command line or in a configuration file that its setting
/// cannot take. The message says what is wrong and what to give instead; where clap
/// already quotes the value and names the flag, it does not repeat them.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValueError {
    /// A size, with the value quoted.
    #[error("invalid size '{value}': {why}")]
    Size {
        /// The text given.
        value: String,
        /// What is wrong with it.
        why: ByteSizeError,
    },
    /// A size for a flag (clap quotes the value).
    #[error(transparent)]
    SizeValue(#[from] ByteSizeError),
    /// A page size starting with a minus sign.
    #[error("invalid page size '{0}': a page size cannot be negative; {PAGE_SIZES}")]
    NegativePageSize(String),
    /// A page size that is not a size.
    #[error("invalid size '{value}': {why}; for a page size {PAGE_SIZES}")]
    PageSizeNotASize {
        /// The text given.
        value: String,
        /// What is wrong with it.
        why: ByteSizeError,
    },
    /// A size that is not a page size edbstress supports.
    #[error("unsupported page size '{0}': {PAGE_SIZES}")]
    UnsupportedPageSize(String),
    /// A duration starting with a minus sign.
    #[error("invalid duration '{0}': a duration cannot be negative; {DURATIONS}")]
    NegativeDuration(String),
    /// Text that is not a duration.
    #[error("invalid duration '{value}': {why}; {DURATIONS}")]
    Duration {
        /// The text given.
        value: String,
        /// What the duration parser said.
        why: humantime::DurationError,
    },
    /// A flag where a number belongs.
    #[error("a value is missing here ('{text}' is a flag); give {range}")]
    MissingValue {
        /// The flag found instead.
        text: String,
        /// The numbers the setting takes.
        range: String,
    },
    /// A negative count.
    #[error("{what} cannot be negative; give {range}")]
    NegativeCount {
        /// The kind of value ("a count").
        what: &'static str,
        /// The numbers the setting takes.
        range: String,
    },
    /// Text that is not a whole number.
    #[error("'{text}' is not a whole number; give {range}")]
    NotAWholeNumber {
        /// The text given.
        text: String,
        /// The numbers the setting takes.
        range: String,
    },
    /// A whole number outside the setting's range.
    #[error("{value} is out of range; give {range}")]
    OutOfRange {
        /// The number given.
        value: u64,
        /// The numbers the setting takes.
        range: String,
    },
    /// A whole number the setting's type cannot hold.
    #[error("{value} is too large; give {range}")]
    TooLarge {
        /// The number given.
        value: u64,
        /// The numbers the setting takes.
        range: String,
    },
    /// Text that is not a decimal number.
    #[error("{0}; give a number, e.g. 0.12")]
    NotANumber(std::num::ParseFloatError),
    /// An operation mix that is not four numbers separated by slashes.
    #[error("invalid operation mix '{0}': {OP_MIX}")]
    OpMixShape(String),
    /// An operation mix with a part that is not a whole percentage.
    #[error("invalid operation mix '{value}': '{part}' is not a whole percentage; {OP_MIX}")]
    OpMixPercentage {
        /// The mix given.
        value: String,
        /// The part that is wrong.
        part: String,
    },
    /// A test name edbstress does not know.
    #[error("unknown test '{0}': use performance, stress, database-backup or soft-recovery")]
    UnknownTest(String),
    /// A profile name edbstress does not know.
    #[error(
        "unknown profile '{0}': use exchange2007, exchange2010, exchange2013, exchange2016 \
         or exchange2019"
    )]
    UnknownProfile(String),
    /// A switch that is neither on nor off.
    #[error("invalid switch '{0}': use on or off")]
    InvalidSwitch(String),
    /// A compressibility the engine does not accept (its message).
    #[error("{0}")]
    Compressibility(String),
    /// An I/O backend edbstress does not know.
    #[error("unknown backend '{0}': use auto, io_uring or threads")]
    UnknownBackend(String),
    /// A pacing edbstress does not know.
    #[error(
        "unknown pacing '{0}': use jetstress (closed loop at the thread count) or open-loop (at the target rate)"
    )]
    UnknownPacing(String),
    /// `--threshold` text without `=`.
    #[error("'{0}' is not NAME=MS; e.g. db_read_avg_ms=20 ({THRESHOLD_NAMES})")]
    ThresholdShape(String),
    /// A threshold whose limit is not a number.
    #[error("'{value}' is not a number; give the limit in ms, e.g. {name}=20")]
    ThresholdNotANumber {
        /// The threshold named.
        name: String,
        /// The limit given.
        value: String,
    },
    /// A threshold name edbstress does not know.
    #[error("unknown threshold '{0}': use {THRESHOLD_NAMES}")]
    UnknownThreshold(String),
    /// A setting only a configuration file sets, given as a flag.
    #[error("`{0}` has no flag")]
    NoFlag(&'static str),
    /// A flag without its value.
    #[error("a value is missing")]
    NoValue,
    /// A key that is no run setting.
    #[error("`{0}` is not a run setting")]
    NotARunSetting(String),
}

/// Parses a size with an optional unit; the error quotes the value. [`ByteSize`] is
/// the parser; this adds the quote for messages that do not already carry the value.
pub fn parse_size(s: &str) -> Result<u64, ValueError> {
    s.parse::<ByteSize>()
        .map(ByteSize::get)
        .map_err(|why| ValueError::Size {
            value: s.to_string(),
            why,
        })
}

/// Parses a size for a command-line flag: clap's message already quotes the value and
/// names the flag, so the error says only what is wrong (and the fix).
pub fn parse_size_value(s: &str) -> Result<u64, ValueError> {
    Ok(s.parse::<ByteSize>()?.get())
}

/// Parses a mailbox quota as Exchange and the ESRP documents count one: KB, MB, GB and
/// TB are binary (a "2 GB" quota is 2048 MB of 1,048,576 bytes), as are KiB, MiB, GiB
/// and TiB; no unit means bytes. The error says only what is wrong, as
/// [`parse_size_value`]'s.
pub fn parse_quota_value(s: &str) -> Result<u64, ValueError> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    for (decimal, binary) in [("kb", "KiB"), ("mb", "MiB"), ("gb", "GiB"), ("tb", "TiB")] {
        if let Some(number) = lower.strip_suffix(decimal) {
            return parse_size_value(&format!("{}{binary}", &t[..number.len()]));
        }
    }
    parse_size_value(t)
}

/// Writes a mailbox quota as the ESRP documents show one ("2048 MB": MB of 1,048,576
/// bytes), with the report's formatter; [`parse_quota_value`] reads it back.
pub fn format_quota(bytes: u64) -> String {
    edbstress_report::text::quota(bytes)
}

/// Parses a page size: 4KiB, 8KiB, 16KiB or 32KiB (also 8K, 32KB, 8192).
pub fn parse_page_size(s: &str) -> Result<PageSize, ValueError> {
    if s.trim().starts_with('-') && !s.trim().starts_with("--") {
        return Err(ValueError::NegativePageSize(s.to_string()));
    }
    let mut bytes = s
        .parse::<ByteSize>()
        .map_err(|why| ValueError::PageSizeNotASize {
            value: s.to_string(),
            why,
        })?
        .get();
    // "8KB" means 8 KiB for page sizes: nobody has 8000-byte pages.
    if bytes % 1000 == 0 && bytes % 1024 != 0 {
        bytes = bytes / 1000 * 1024;
    }
    PageSize::from_bytes(bytes as usize)
        .ok_or_else(|| ValueError::UnsupportedPageSize(s.to_string()))
}

/// Characters of one line of user input an error message quotes at most.
pub const EXCERPT_CHARS: usize = 200;
/// Lines of a parser's message kept at most.
const EXCERPT_LINES: usize = 12;

/// `message` with every line cut to [`EXCERPT_CHARS`] characters (an ellipsis marks
/// the cut) and at most a dozen lines: parsers quote the offending input, and a
/// 10 MB value must not come back as 10 MB of error.
pub fn bounded(message: &str) -> String {
    let mut out = String::new();
    for (i, line) in message.lines().enumerate() {
        if i == EXCERPT_LINES {
            out.push_str("…\n");
            break;
        }
        match line.char_indices().nth(EXCERPT_CHARS) {
            Some((cut, _)) => {
                out.push_str(&line[..cut]);
                out.push('…');
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    if !message.ends_with('\n') {
        out.pop();
    }
    out
}

/// Writes a page size as "32KiB".
pub fn format_page_size(page_size: PageSize) -> String {
    ByteSize(page_size.bytes() as u64).to_string()
}

/// Parses a duration: "90s", "15m", "2h", "1h 30m", "500ms"; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, ValueError> {
    let t = s.trim();
    if t.starts_with('-') && !t.starts_with("--") {
        return Err(ValueError::NegativeDuration(s.to_string()));
    }
    if let Ok(seconds) = t.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(t).map_err(|why| ValueError::Duration {
        value: s.to_string(),
        why,
    })
}

/// Writes a duration as "2h", "1m 30s", "500ms"; [`parse_duration`] reads it back.
pub fn format_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// A parser for a whole-number flag of type `T` from `min` to `max` (`None`: as large
/// as `T` holds; `what` names the kind of value, e.g. "a count"): negative numbers,
/// fractions, words and values out of range each get a message saying what to give
/// instead.
pub fn count<T>(
    what: &'static str,
    min: u64,
    max: Option<u64>,
) -> impl Fn(&str) -> Result<T, ValueError> + Clone + Send + Sync + 'static
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |s: &str| {
        let range = match (min, max) {
            (0, None) => "a whole number (0 or more)".to_string(),
            (min, None) => format!("a whole number of at least {min}"),
            (min, Some(max)) => format!("a whole number from {min} to {max}"),
        };
        let t = s.trim();
        if t.starts_with("--") {
            return Err(ValueError::MissingValue {
                text: t.to_string(),
                range,
            });
        }
        if t.starts_with('-') {
            return Err(ValueError::NegativeCount { what, range });
        }
        let Ok(value) = t.parse::<u64>() else {
            return Err(ValueError::NotAWholeNumber {
                text: t.to_string(),
                range,
            });
        };
        if value < min || max.is_some_and(|max| value > max) {
            return Err(ValueError::OutOfRange { value, range });
        }
        T::try_from(value).map_err(|_| ValueError::TooLarge { value, range })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_count_mb_as_exchange_does_and_read_back() {
        assert_eq!(parse_quota_value("2GB"), Ok(2 << 30));
        assert_eq!(parse_quota_value("2048MB"), Ok(2 << 30));
        assert_eq!(parse_quota_value("2048 mb"), Ok(2 << 30));
        assert_eq!(parse_quota_value("2GiB"), Ok(2 << 30));
        assert_eq!(parse_quota_value("1.5GB"), Ok(1536 << 20));
        assert_eq!(parse_quota_value("1000"), Ok(1000));
        assert!(parse_quota_value("-1GB").is_err());
        for bytes in [2u64 << 30, 100 << 20, 1536 << 10, 1000] {
            assert_eq!(parse_quota_value(&format_quota(bytes)), Ok(bytes));
        }
        assert_eq!(format_quota(2 << 30), "2048 MB");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("2 GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("32K"), Ok(32768));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("9007199254740993"), Ok(9_007_199_254_740_993));
        assert!(parse_size("").is_err());
        assert!(
            parse_size("-5MiB")
                .unwrap_err()
                .to_string()
                .contains("'-5MiB': a size cannot be negative; give e.g. 512MiB")
        );
        assert_eq!(
            parse_size_value("-1").unwrap_err().to_string(),
            "a size cannot be negative; give e.g. 512MiB"
        );
        assert!(
            parse_size_value("--duration")
                .unwrap_err()
                .to_string()
                .contains("flag")
        );
        assert!(
            parse_page_size("-8KiB")
                .unwrap_err()
                .to_string()
                .contains("negative")
        );
        assert!(
            parse_duration("-5s")
                .unwrap_err()
                .to_string()
                .contains("negative")
        );
        assert!(
            parse_size("99999999999TiB")
                .unwrap_err()
                .to_string()
                .contains("too large")
        );
        assert!(
            parse_size("12 parsecs")
                .unwrap_err()
                .to_string()
                .contains("unknown unit")
        );
        assert!(parse_size("0.3B").is_err());
    }

    #[test]
    fn page_sizes() {
        assert_eq!(parse_page_size("32KiB"), Ok(PageSize::K32));
        assert_eq!(parse_page_size("8KB"), Ok(PageSize::K8));
        assert_eq!(parse_page_size("8192"), Ok(PageSize::K8));
        assert!(
            parse_page_size("64KiB")
                .unwrap_err()
                .to_string()
                .contains("4KiB, 8KiB")
        );
        for p in PageSize::ALL {
            assert_eq!(parse_page_size(&format_page_size(p)), Ok(p));
        }
    }

    #[test]
    fn sizes_read_back_what_they_write() {
        for bytes in [0, 1, 1000, 1024, 3 << 29, 1_666_666_666_666, u64::MAX] {
            assert_eq!(
                parse_size(&ByteSize(bytes).to_string()),
                Ok(bytes),
                "{bytes}"
            );
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .to_string()
                .contains("90s, 15m")
        );
        for d in [
            Duration::from_secs(86400),
            Duration::from_millis(1500),
            Duration::from_secs(45),
        ] {
            assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
    }
}
