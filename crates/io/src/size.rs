//! Byte sizes as people write them: `256MiB`, `1.5GiB`, `500MB`, `32K`, `1048576`.
//! Binary units (KiB, MiB, …, and the bare K/M/G/T fio accepts) and decimal units (KB,
//! MB, GB, TB) are both understood; no unit means bytes. [`ByteSize`] is the one parser
//! ([`FromStr`]) and the one formatter: [`Display`](fmt::Display) writes the exact form
//! that parses back ("256MiB", "2GB", "12345"), [`ByteSize::approx`] the rounded form
//! for messages ("1.5 GiB", "512 B"). Serde reads and writes the exact string (and also
//! reads a bare number of bytes), so configuration files keep their schema.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Binary units, largest first.
const BINARY_UNITS: [(&str, u64); 4] = [
    ("TiB", 1 << 40),
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
];

/// Decimal units, largest first.
const DECIMAL_UNITS: [(&str, u64); 4] = [
    ("TB", 1_000_000_000_000),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("KB", 1_000),
];

/// What the parser suggests instead of a value it cannot read.
const FIX: &str = "use a number with an optional unit, e.g. 256MiB, 1GiB, 500MB or 32KiB";

/// A number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

/// Why a string is not a size; the message says what is wrong and what to write
/// instead, without quoting the value (callers such as clap already quote it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ByteSizeError {
    /// A flag stood where the value belongs.
    #[error("a size is missing here ('{0}' is a flag); {FIX}")]
    FlagInstead(String),
    /// A leading minus sign.
    #[error("a size cannot be negative; give e.g. 512MiB")]
    Negative,
    /// No number, or not a number.
    #[error("{FIX}")]
    NotANumber,
    /// A unit the parser does not know.
    #[error("unknown unit '{0}'; {FIX}")]
    UnknownUnit(String),
    /// More bytes than 64 bits hold.
    #[error("too large")]
    TooLarge,
    /// A fraction of a byte ("0.3B").
    #[error("not a whole number of bytes")]
    Fractional,
}

impl ByteSize {
    /// `bytes` bytes.
    pub const fn new(bytes: u64) -> Self {
        Self(bytes)
    }

    /// The number of bytes.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The size rounded to one decimal in the largest binary unit not above it ("1.5
    /// GiB", "512 B"), for messages; it does not parse back exactly.
    pub fn approx(self) -> impl fmt::Display {
        Approx(self.0)
    }
}

impl From<u64> for ByteSize {
    fn from(bytes: u64) -> Self {
        Self(bytes)
    }
}

impl From<ByteSize> for u64 {
    fn from(size: ByteSize) -> Self {
        size.0
    }
}

impl FromStr for ByteSize {
    type Err = ByteSizeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.starts_with("--") {
            return Err(ByteSizeError::FlagInstead(t.to_string()));
        }
        if t.starts_with('-') {
            return Err(ByteSizeError::Negative);
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        if number.is_empty() {
            return Err(ByteSizeError::NotANumber);
        }
        let value: f64 = number.parse().map_err(|_| ByteSizeError::NotANumber)?;
        let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            "t" | "tib" => 1 << 40,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            "tb" => 1_000_000_000_000,
            other => return Err(ByteSizeError::UnknownUnit(other.to_string())),
        };
        // Whole numbers are multiplied exactly: f64 would round sizes above 2^53 bytes.
        if let Ok(whole) = number.parse::<u64>() {
            return whole
                .checked_mul(multiplier)
                .map(Self)
                .ok_or(ByteSizeError::TooLarge);
        }
        let bytes = value * multiplier as f64;
        if !bytes.is_finite() || bytes >= u64::MAX as f64 {
            return Err(ByteSizeError::TooLarge);
        }
        if bytes.fract() != 0.0 {
            return Err(ByteSizeError::Fractional);
        }
        Ok(Self(bytes as u64))
    }
}

/// The exact form, in the unit that gives the smallest number ("256MiB", "2GB",
/// "12345"), so that parsing it gives back the same number of bytes.
impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.0;
        let mut best = (bytes, "");
        // Binary first: on a tie (never, in practice) the binary unit wins.
        for (unit, len) in BINARY_UNITS.iter().chain(DECIMAL_UNITS.iter()) {
            if bytes != 0 && bytes % len == 0 && bytes / len < best.0 {
                best = (bytes / len, unit);
            }
        }
        write!(f, "{}{}", best.0, best.1)
    }
}

/// The rounded form of [`ByteSize::approx`].
struct Approx(u64);

impl fmt::Display for Approx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut v = self.0 as f64;
        let mut u = 0;
        while v >= 1024.0 && u + 1 < UNITS.len() {
            v /= 1024.0;
            u += 1;
        }
        if u == 0 {
            write!(f, "{} B", self.0)
        } else {
            write!(f, "{v:.1} {}", UNITS[u])
        }
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ByteSizeVisitor)
    }
}

/// Reads a size string or a whole number of bytes.
struct ByteSizeVisitor;

impl Visitor<'_> for ByteSizeVisitor {
    type Value = ByteSize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a size such as \"256MiB\" or \"2GB\", or a number of bytes")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
        v.parse()
            .map_err(|e| E::custom(format!("invalid size '{v}': {e}")))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
        Ok(ByteSize(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
        u64::try_from(v)
            .map(ByteSize)
            .map_err(|_| E::custom(format!("invalid size {v}: a size cannot be negative")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<ByteSize, E> {
        Err(E::custom(format!(
            "invalid size {v}: give a whole number of bytes or a string such as \"1.5GiB\""
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<u64, ByteSizeError> {
        s.parse::<ByteSize>().map(ByteSize::get)
    }

    #[test]
    fn sizes_parse_in_binary_and_decimal_units() {
        assert_eq!(parse("256MiB"), Ok(256 << 20));
        assert_eq!(parse("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse("2 GB"), Ok(2_000_000_000));
        assert_eq!(parse("32K"), Ok(32768));
        assert_eq!(parse("4096"), Ok(4096));
        assert_eq!(parse("9007199254740993"), Ok(9_007_199_254_740_993));
        assert_eq!(parse(""), Err(ByteSizeError::NotANumber));
        assert_eq!(
            parse("-1").unwrap_err().to_string(),
            "a size cannot be negative; give e.g. 512MiB"
        );
        assert!(
            parse("--duration")
                .unwrap_err()
                .to_string()
                .contains("flag")
        );
        assert_eq!(parse("99999999999TiB"), Err(ByteSizeError::TooLarge));
        assert!(
            parse("12 parsecs")
                .unwrap_err()
                .to_string()
                .contains("unknown unit 'parsecs'")
        );
        assert_eq!(parse("0.3B"), Err(ByteSizeError::Fractional));
    }

    #[test]
    fn exact_form_parses_back() {
        assert_eq!(ByteSize(256 << 20).to_string(), "256MiB");
        assert_eq!(ByteSize(2_000_000_000).to_string(), "2GB");
        assert_eq!(ByteSize(1_000_000_000_000).to_string(), "1TB");
        assert_eq!(ByteSize(32768).to_string(), "32KiB");
        assert_eq!(ByteSize(12345).to_string(), "12345");
        assert_eq!(ByteSize(0).to_string(), "0");
        for bytes in [0, 1, 1000, 1024, 3 << 29, 1_666_666_666_666, u64::MAX] {
            assert_eq!(parse(&ByteSize(bytes).to_string()), Ok(bytes), "{bytes}");
        }
    }

    #[test]
    fn approximate_form_rounds_to_a_binary_unit() {
        assert_eq!(ByteSize(0).approx().to_string(), "0 B");
        assert_eq!(ByteSize(512).approx().to_string(), "512 B");
        assert_eq!(ByteSize(3 << 29).approx().to_string(), "1.5 GiB");
        assert_eq!(ByteSize(32 << 10).approx().to_string(), "32.0 KiB");
    }

    #[test]
    fn serde_writes_the_exact_string_and_reads_strings_or_numbers() {
        assert_eq!(
            serde_json::to_string(&ByteSize(256 << 20)).unwrap(),
            "\"256MiB\""
        );
        let read = |json: &str| serde_json::from_str::<ByteSize>(json);
        assert_eq!(read("\"1.5GiB\"").unwrap(), ByteSize(3 << 29));
        assert_eq!(read("4096").unwrap(), ByteSize(4096));
        assert!(read("-4").unwrap_err().to_string().contains("negative"));
        assert!(
            read("1.5")
                .unwrap_err()
                .to_string()
                .contains("whole number")
        );
        assert!(
            read("\"5 parsecs\"")
                .unwrap_err()
                .to_string()
                .contains("invalid size '5 parsecs': unknown unit")
        );
    }
}
