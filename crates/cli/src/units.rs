//! Sizes on the command line: `256MiB`, `1.5GiB`, `4KB`, `32K`, `1048576`.
//! Binary units (KiB, MiB, …, and the bare K/M/G/T fio accepts) and decimal units
//! (KB, MB, GB, TB) are both understood; no unit means bytes.

use edbstress_format::PageSize;

/// Parses a size with an optional unit.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let fix = "use a number with an optional unit, e.g. 256MiB, 1GiB, 500MB or 32KiB";
    if number.is_empty() {
        return Err(format!("invalid size '{s}': {fix}"));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid size '{s}': {fix}"))?;
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
        other => return Err(format!("invalid size '{s}': unknown unit '{other}'; {fix}")),
    };
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("invalid size '{s}': too large"));
    }
    if bytes.fract() != 0.0 {
        return Err(format!("invalid size '{s}': not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Parses a page size: 4KiB, 8KiB, 16KiB or 32KiB (also 8K, 32KB, 8192).
pub fn parse_page_size(s: &str) -> Result<PageSize, String> {
    let fix = "use 4KiB, 8KiB, 16KiB or 32KiB";
    let mut bytes = parse_size(s).map_err(|e| format!("{e}; for a page size {fix}"))?;
    // "8KB" means 8 KiB for page sizes: nobody has 8000-byte pages.
    if bytes % 1000 == 0 && bytes % 1024 != 0 {
        bytes = bytes / 1000 * 1024;
    }
    PageSize::from_bytes(bytes as usize)
        .ok_or_else(|| format!("unsupported page size '{s}': {fix}"))
}

pub use edbstress_engine::prepare::human_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("2 GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("32K"), Ok(32768));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("").is_err());
        assert!(parse_size("-5MiB").is_err());
        assert!(
            parse_size("12 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_size("0.3B").is_err());
    }

    #[test]
    fn page_sizes() {
        assert_eq!(parse_page_size("32KiB"), Ok(PageSize::K32));
        assert_eq!(parse_page_size("8KB"), Ok(PageSize::K8));
        assert_eq!(parse_page_size("8192"), Ok(PageSize::K8));
        assert!(parse_page_size("64KiB").unwrap_err().contains("4KiB, 8KiB"));
    }

    #[test]
    fn human() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }
}
