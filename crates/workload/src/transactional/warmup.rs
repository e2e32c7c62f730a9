//! Warm-up ("attaining prerequisites") progress: how full each instance's cache is,
//! how fast it fills and when it should reach the 90 % the measured phase waits for,
//! for the live line and test.log; and, when the warm-up times out, why.

use std::time::{Duration, Instant};

/// The cache fill the measured phase waits for, percent of the maximum.
pub const TARGET_FILL_PCT: f64 = 90.0;

/// Cache fill of one instance: (frames in use, maximum frames).
pub type Fill = (u64, u64);

/// Frames that make [`TARGET_FILL_PCT`] of a cache of `max` frames.
fn target_frames(max: u64) -> u64 {
    (max as f64 * TARGET_FILL_PCT / 100.0).ceil() as u64
}

/// Why the warm-up cannot reach [`TARGET_FILL_PCT`], before it starts: an instance whose
/// database has fewer pages than that share of its cache (`database_pages[i]` for
/// `fills[i]`) fits in the cache entirely, so waiting for the fill would only end at the
/// timeout. None when every cache can fill.
pub fn cannot_fill(fills: &[Fill], database_pages: &[u64], page_bytes: u64) -> Option<String> {
    let mib = |pages: u64| (pages * page_bytes) as f64 / (1u64 << 20) as f64;
    let short: Vec<String> = fills
        .iter()
        .zip(database_pages)
        .enumerate()
        .filter(|&(_, (&(_, max), &pages))| pages < target_frames(max))
        .map(|(i, (&(_, max), &pages))| {
            format!(
                "Instance{:04}'s database has {pages} pages ({:.1} MiB), fewer than the {} that fill {TARGET_FILL_PCT:.0} % of its {:.1} MiB cache",
                i + 1,
                mib(pages),
                target_frames(max),
                mib(max)
            )
        })
        .collect();
    (!short.is_empty()).then(|| {
        format!(
            "{}: the whole database fits in the cache, which can never fill; measuring without waiting (to test the storage rather than the cache, give databases several times the cache: a larger database_size or a smaller cache_max)",
            short.join("; ")
        )
    })
}

/// Tracks the fill of the warm-up from its start.
pub struct WarmupProgress {
    started: Instant,
    start_pct: f64,
    next_log: Instant,
    log_every: Duration,
    page_bytes: u64,
}

fn pct((frames, max): Fill) -> f64 {
    (100.0 * frames as f64 / max.max(1) as f64).min(100.0)
}

/// The smallest fill over the instances, percent (the one the phase waits for).
pub fn smallest_pct(fills: &[Fill]) -> f64 {
    fills.iter().map(|&f| pct(f)).fold(100.0, f64::min)
}

impl WarmupProgress {
    /// Starts tracking at `now` with `fills`; a line is due every `log_every`.
    pub fn new(now: Instant, fills: &[Fill], log_every: Duration, page_bytes: u64) -> Self {
        WarmupProgress {
            started: now,
            start_pct: smallest_pct(fills),
            next_log: now + log_every,
            log_every,
            page_bytes,
        }
    }

    /// Fill rate since the start, percentage points per second.
    pub fn rate_pct_per_sec(&self, now: Instant, fills: &[Fill]) -> f64 {
        let secs = now.duration_since(self.started).as_secs_f64();
        if secs <= 0.0 {
            return 0.0;
        }
        ((smallest_pct(fills) - self.start_pct) / secs).max(0.0)
    }

    /// Time until the smallest fill reaches [`TARGET_FILL_PCT`] at the rate so far;
    /// None when it does not grow.
    pub fn estimate(&self, now: Instant, fills: &[Fill]) -> Option<Duration> {
        let rate = self.rate_pct_per_sec(now, fills);
        let left = (TARGET_FILL_PCT - smallest_pct(fills)).max(0.0);
        (rate > 1e-6).then(|| Duration::from_secs_f64((left / rate).min(1e7)))
    }

    /// The progress line for test.log when one is due at `now`: every instance's fill,
    /// the rate and the estimate.
    pub fn line_if_due(&mut self, now: Instant, fills: &[Fill]) -> Option<String> {
        if now < self.next_log {
            return None;
        }
        self.next_log = now + self.log_every;
        Some(self.line(now, fills))
    }

    /// The progress line at `now`.
    pub fn line(&self, now: Instant, fills: &[Fill]) -> String {
        let mib = |frames: u64| (frames * self.page_bytes) as f64 / (1u64 << 20) as f64;
        let per_instance: Vec<String> = fills
            .iter()
            .enumerate()
            .map(|(i, &(frames, max))| {
                format!(
                    "Instance{:04} {:.0} % ({:.1} of {:.1} MiB)",
                    i + 1,
                    pct((frames, max)),
                    mib(frames),
                    mib(max)
                )
            })
            .collect();
        let rate = self.rate_pct_per_sec(now, fills);
        let eta = match self.estimate(now, fills) {
            Some(d) => format!("about {} to {TARGET_FILL_PCT:.0} %", whole_seconds(d)),
            None => "not growing".to_string(),
        };
        format!(
            "Warm-up {}: database cache {}; filling at {:.2} %/s, {eta}.",
            whole_seconds(now.duration_since(self.started)),
            per_instance.join(", "),
            rate
        )
    }

    /// Why a warm-up that timed out did not reach [`TARGET_FILL_PCT`]: the cache stopped
    /// growing, or it grows too slowly for the timeout (with the time it would need). A
    /// database too small to fill its cache is named before the warm-up
    /// ([`cannot_fill`]).
    pub fn timeout_reason(&self, now: Instant, fills: &[Fill], timeout: Duration) -> String {
        match self.estimate(now, fills) {
            None => "the cache stopped growing: the transactions read no new pages (is the database much smaller than it seems, or the load stalled?)".to_string(),
            Some(left) => format!(
                "it fills at {:.2} %/s and would need about {} more; raise warmup_timeout above {} or lower cache_max",
                self.rate_pct_per_sec(now, fills),
                whole_seconds(left),
                whole_seconds(timeout)
            ),
        }
    }
}

/// "1m 5s", to the second.
fn whole_seconds(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_every_instance_rate_and_estimate() {
        let t0 = Instant::now();
        let mut w = WarmupProgress::new(t0, &[(0, 100), (0, 100)], Duration::from_secs(5), 32768);
        let fills = [(30, 100), (50, 100)];
        assert!(w.line_if_due(t0 + Duration::from_secs(1), &fills).is_none());
        let line = w.line_if_due(t0 + Duration::from_secs(10), &fills).unwrap();
        // 30 points in 10 s: 3 %/s, 60 points left: 20 s.
        assert!(
            line.contains("Instance0001 30 % (0.9 of 3.1 MiB)"),
            "{line}"
        );
        assert!(line.contains("Instance0002 50 %"), "{line}");
        assert!(line.contains("3.00 %/s"), "{line}");
        assert!(line.contains("about 20s to 90 %"), "{line}");
    }

    #[test]
    fn a_database_smaller_than_the_fill_is_named_before_waiting() {
        // 4 MiB caches of 32 KiB pages (128 frames): 116 frames make 90 %.
        let fills = [(64, 128), (64, 128)];
        assert_eq!(cannot_fill(&fills, &[1024, 116], 32768), None);
        let why = cannot_fill(&fills, &[1024, 115], 32768).expect("the second cannot fill");
        assert!(
            why.starts_with("Instance0002's database has 115 pages (3.6 MiB), fewer than the 116 that fill 90 % of its 4.0 MiB cache"),
            "{why}"
        );
        assert!(!why.contains("Instance0001"), "{why}");
        assert!(why.contains("measuring without waiting"), "{why}");
    }

    #[test]
    fn a_timeout_says_why() {
        let t0 = Instant::now();
        let w = WarmupProgress::new(t0, &[(0, 1000)], Duration::from_secs(5), 32768);
        let later = t0 + Duration::from_secs(100);
        let why = w.timeout_reason(later, &[(500, 1000)], Duration::from_secs(100));
        assert!(why.contains("would need about 1m 20s more"), "{why}");
        let stuck = WarmupProgress::new(t0, &[(500, 1000)], Duration::from_secs(5), 32768);
        let why = stuck.timeout_reason(later, &[(500, 1000)], Duration::from_secs(100));
        assert!(why.contains("stopped growing"), "{why}");
    }
}
