//! Page payload bytes (engine.md §8): unique per page, with a controllable
//! compressibility, generated fast enough not to slow database creation down.
//!
//! Content is a mix of 64-byte runs: random bytes (incompressible) and copies from a
//! small fixed text pattern (which any LZ compressor turns into short back-references).
//! The share of random runs sets the ratio. Every generator is seeded from the database
//! signature and the page number, so no two pages carry the same bytes and arrays that
//! deduplicate cannot shrink the test.

use std::fmt;
use std::str::FromStr;

use edbstress_format::Pgno;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

/// Length of the runs content is assembled from; long enough for LZ matches to pay.
const RUN_LEN: usize = 64;

/// Text the compressible runs are copied from. Its repetition inside every 4 KiB
/// block is what compressors find.
const PATTERN: &[u8] =
    b"Subject: Re: quarterly storage review - please find the minutes attached. \
From: operations@example.org To: storage-team@example.org Received: from mx01 by mbx04 \
with ESMTP; Content-Type: text/plain; charset=utf-8 Thanks, the messaging team. ";

/// How compressible generated page content is, as the target ratio of original to
/// compressed size with a fast LZ compressor (lz4). 1.0 means incompressible.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Compressibility {
    ratio: f64,
}

impl Compressibility {
    /// A realistic mailbox-content default (mail compresses about 1.5–2 : 1).
    pub const MAIL: Compressibility = Compressibility { ratio: 1.7 };
    /// Random bytes only.
    pub const INCOMPRESSIBLE: Compressibility = Compressibility { ratio: 1.0 };

    /// A target ratio between 1.0 and 5.0.
    pub fn from_ratio(ratio: f64) -> Result<Compressibility, String> {
        if !(1.0..=5.0).contains(&ratio) {
            return Err(format!(
                "compressibility ratio {ratio} is out of range: use a value from 1.0 (incompressible) to 5.0"
            ));
        }
        Ok(Compressibility { ratio })
    }

    /// The target ratio.
    pub fn ratio(self) -> f64 {
        self.ratio
    }

    /// The ratio in thousandths, as stored in the database header.
    pub fn permille(self) -> u32 {
        (self.ratio * 1000.0).round() as u32
    }

    /// Inverse of [`Compressibility::permille`].
    pub fn from_permille(permille: u32) -> Result<Compressibility, String> {
        Compressibility::from_ratio(f64::from(permille) / 1000.0)
    }

    /// Share of runs that must be random (as a threshold on a `u32` draw) to reach the
    /// ratio. Measured against lz4 on 4 KiB blocks (the test below): a pattern run
    /// compresses to about 0.17 of its length, a random run costs about 1.06 of it
    /// (literal framing between matches).
    fn random_threshold(self) -> u32 {
        const PATTERN_RUN_COST: f64 = 0.1745;
        const RANDOM_RUN_COST: f64 = 1.065;
        if self.ratio <= 1.0 {
            return u32::MAX;
        }
        let share = ((1.0 / self.ratio - PATTERN_RUN_COST) / (RANDOM_RUN_COST - PATTERN_RUN_COST))
            .clamp(0.0, 1.0);
        (share * f64::from(u32::MAX)) as u32
    }
}

impl Default for Compressibility {
    fn default() -> Self {
        Compressibility::MAIL
    }
}

impl fmt::Display for Compressibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ratio <= 1.0 {
            write!(f, "incompressible")
        } else {
            write!(f, "{:.2}:1", self.ratio)
        }
    }
}

impl FromStr for Compressibility {
    type Err = String;

    /// Accepts `incompressible`, `mail`, a ratio such as `1.7` or `2:1`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "incompressible" | "none" | "random" => return Ok(Compressibility::INCOMPRESSIBLE),
            "mail" | "default" => return Ok(Compressibility::MAIL),
            _ => {}
        }
        let number = t.strip_suffix(":1").unwrap_or(&t);
        let ratio: f64 = number.parse().map_err(|_| {
            format!("invalid compressibility '{s}': use 'incompressible', 'mail' or a ratio such as 1.7 or 2:1")
        })?;
        Compressibility::from_ratio(ratio)
    }
}

/// Generates payload bytes for one page.
pub struct ContentGenerator {
    rng: SmallRng,
    random_threshold: u32,
}

impl ContentGenerator {
    /// A generator for page `pgno` of the database with signature `signature`.
    pub fn for_page(signature: u64, pgno: Pgno, compressibility: Compressibility) -> Self {
        // Distinct, well-mixed seeds per page: splitmix of signature and page number.
        let seed = splitmix64(signature ^ (u64::from(pgno.get()) << 20) ^ 0x5eed_c0de);
        ContentGenerator {
            rng: SmallRng::seed_from_u64(seed),
            random_threshold: compressibility.random_threshold(),
        }
    }

    /// A generator for an arbitrary stream (log payloads, test data).
    pub fn for_stream(seed: u64, compressibility: Compressibility) -> Self {
        ContentGenerator {
            rng: SmallRng::seed_from_u64(splitmix64(seed)),
            random_threshold: compressibility.random_threshold(),
        }
    }

    /// Fills `out` with content.
    pub fn fill(&mut self, out: &mut [u8]) {
        for run in out.chunks_mut(RUN_LEN) {
            if self.rng.random::<u32>() <= self.random_threshold {
                self.rng.fill_bytes(run);
            } else {
                let start = self.rng.random_range(0..PATTERN.len() - RUN_LEN);
                run.copy_from_slice(&PATTERN[start..start + run.len()]);
            }
        }
    }

    /// A uniformly distributed value in `range`, from the same stream.
    pub fn range(&mut self, range: std::ops::Range<u64>) -> u64 {
        self.rng.random_range(range)
    }
}

/// A 64-bit mixing function (splitmix64 finaliser): turns counters and ids into
/// independent-looking seeds and draws without keeping generator state.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lz4_ratio(c: Compressibility) -> f64 {
        // Compress 4 KiB blocks independently, as arrays and filesystems do.
        let mut total_in = 0usize;
        let mut total_out = 0usize;
        for pgno in 1..64u32 {
            let mut page = vec![0u8; 32 * 1024];
            ContentGenerator::for_page(42, Pgno::new(pgno), c).fill(&mut page);
            for block in page.chunks(4096) {
                total_in += block.len();
                total_out += lz4_flex::block::compress(block).len().min(block.len());
            }
        }
        total_in as f64 / total_out as f64
    }

    #[test]
    fn compressibility_hits_target_ratio() {
        for target in [1.2, 1.5, 1.7, 2.0, 3.0, 4.5] {
            let c = Compressibility::from_ratio(target).unwrap();
            let got = lz4_ratio(c);
            assert!(
                (got - target).abs() / target < 0.15,
                "target {target}: lz4 ratio {got:.2}"
            );
        }
        let random = lz4_ratio(Compressibility::INCOMPRESSIBLE);
        assert!(
            random < 1.02,
            "incompressible content compressed {random:.3}:1"
        );
    }

    #[test]
    fn pages_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for sig in [1u64, 2] {
            for pgno in 1..500u32 {
                let mut page = vec![0u8; 8192];
                ContentGenerator::for_page(
                    sig,
                    Pgno::new(pgno),
                    Compressibility::from_ratio(4.5).unwrap(),
                )
                .fill(&mut page);
                // Every 4 KiB block must be unique, not just every page: dedupe works on blocks.
                for block in page.chunks(4096) {
                    assert!(
                        seen.insert(block.to_vec()),
                        "duplicate block sig {sig} pgno {pgno}"
                    );
                }
            }
        }
    }

    #[test]
    fn parses_compressibility() {
        assert_eq!(
            "incompressible".parse::<Compressibility>().unwrap().ratio(),
            1.0
        );
        assert_eq!("2:1".parse::<Compressibility>().unwrap().ratio(), 2.0);
        assert_eq!(
            "1.7".parse::<Compressibility>().unwrap(),
            Compressibility::MAIL
        );
        assert!("0.5".parse::<Compressibility>().is_err());
        assert!("lots".parse::<Compressibility>().is_err());
    }
}
