//! Text shared by the renderers: escaping, number, size and time formats, and the
//! failed criteria in plain words.

use crate::model::{Criterion, Pacing, RunResults};

/// Escapes text for HTML and XML (element content and quoted attributes). Control
/// characters other than tab and newline are dropped: XML 1.0 forbids them and a path
/// or description could carry one.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The pacing that ran, in words, with the thread count (results written before the
/// setting existed name it from `open_loop`).
pub fn pacing_text(r: &RunResults) -> String {
    let p = &r.parameters;
    let pacing = p.pacing.unwrap_or(if p.open_loop {
        Pacing::OpenLoop
    } else {
        Pacing::Jetstress
    });
    match (pacing, r.target_transactional_iops) {
        (Pacing::Jetstress, None) => format!(
            "closed loop at {} threads (throughput run): each starts its next transaction when the last ends",
            p.threads
        ),
        (pacing, _) => pacing.describe(p.threads, r.autotune.is_some()),
    }
}

/// The headroom line: achieved against target, as the ESRP documents read them.
pub fn headroom_text(r: &RunResults) -> String {
    match (r.headroom_pct, r.target_transactional_iops) {
        (Some(h), Some(t)) => {
            let open = r.parameters.pacing == Some(Pacing::OpenLoop)
                || (r.parameters.pacing.is_none() && r.parameters.open_loop);
            format!(
                "{h:+.1} % ({} achieved against {} targeted at {} threads){}",
                fixed3(r.achieved_transactional_iops),
                fixed3(t),
                r.parameters.threads,
                if open {
                    "; open loop offers the target plus its margin, so this is not the storage's headroom (Jetstress pacing measures that)"
                } else {
                    ""
                }
            )
        }
        _ => "none (no target)".to_string(),
    }
}

/// Whether a criterion rises with the load: a latency or the page-fault-stall rate,
/// what auto-tuning's steps judge with a margin.
pub fn rises_with_load(c: &Criterion) -> bool {
    c.key.ends_with("_latency") || c.key == "page_fault_stalls"
}

/// A length of time as a tuning window is named: "30 s", "3 min", "1.5 h".
fn window(seconds: f64) -> String {
    if seconds >= 5400.0 {
        format!("{} h", quantity(seconds / 3600.0, ""))
    } else if seconds >= 90.0 {
        format!("{} min", quantity((seconds / 6.0).round() / 10.0, ""))
    } else {
        format!("{seconds:.0} s")
    }
}

/// When an auto-tuned run's measured phase failed a criterion that rises with the load
/// at a count its tuning steps passed: that the count came from shorter windows than
/// the measured phase, and what to re-run with. None otherwise.
pub fn tuning_window_note(r: &RunResults) -> Option<String> {
    let t = r.autotune.as_ref()?;
    let failed = load_failures(r);
    let tuned = t
        .steps
        .iter()
        .filter(|s| s.threads == t.chosen_threads && s.passed)
        .map(|s| s.seconds)
        .fold(0.0_f64, f64::max);
    if failed.is_empty() || r.aborted || tuned <= 0.0 {
        return None;
    }
    let lower = t
        .steps
        .iter()
        .filter(|s| s.passed && s.threads < t.chosen_threads)
        .map(|s| s.threads)
        .max()
        .or((t.chosen_threads > 1).then_some(t.chosen_threads / 2));
    let rerun = match lower {
        Some(n) => format!(
            "re-run with fewer threads (e.g. `--threads {n}`, a lower count that passed its step) or a stricter `--auto-tune-margin`"
        ),
        None => "re-run with a stricter `--auto-tune-margin`".to_string(),
    };
    Some(format!(
        "The {} threads were auto-tuned on windows of at most {}, where they met every limit; over the {} measured phase they did not ({}). The count came from shorter tuning windows than the test: {rerun}.",
        t.chosen_threads,
        window(tuned),
        window(r.measured_seconds),
        failed.join("; ")
    ))
}

/// The criteria of `r` that rise with the load and failed, each as "name on scope
/// measured"; empty for a run stopped early.
fn load_failures(r: &RunResults) -> Vec<String> {
    if r.aborted {
        return Vec::new();
    }
    r.failed_criteria
        .iter()
        .filter(|c| rises_with_load(c))
        .map(|c| format!("{} on {} {}", c.name, c.scope, c.measured_text()))
        .collect()
}

/// When a Performance run at the `threads` another run's auto-tuning chose (an ESRP
/// campaign's Stress step) failed a criterion that rises with the load: that the
/// count came from tuning windows shorter than this run, and what to re-run with.
pub fn inherited_count_note(r: &RunResults, threads: u32) -> Option<String> {
    let failed = load_failures(r);
    (!failed.is_empty()).then(|| {
        format!(
            "{} ran at the {threads} threads the Stress step's auto-tuning chose on windows shorter than this step, and did not meet {}: re-run the campaign with fewer threads (`--threads` in the run options) or a stricter `--auto-tune-margin`",
            r.test_type.label(),
            failed.join("; ")
        )
    })
}

/// Three decimals, Jetstress's precision for rates and latencies.
pub fn fixed3(v: f64) -> String {
    format!("{v:.3}")
}

/// Bytes in binary megabytes as Jetstress writes them ("256.0 MB", "2.0 GB";
/// 1 MB = 1,048,576 bytes).
pub fn mb(bytes: u64) -> String {
    const MIB: f64 = 1_048_576.0;
    let v = bytes as f64 / MIB;
    if v >= 10_240.0 * 1024.0 {
        format!("{:.2} TiB", v / 1024.0 / 1024.0)
    } else if v >= 10_240.0 {
        format!("{:.1} GiB", v / 1024.0)
    } else {
        format!("{v:.1} MiB")
    }
}

/// A mailbox quota as Exchange and the ESRP documents show one: whole MB of 1,048,576
/// bytes ("2048 MB"); a quota of no whole MB in KiB or bytes. The quota parser of the
/// configuration reads every form back. The one formatter of quotas: the run's help,
/// `config show`, the reports and the solution document all use it.
pub fn quota(bytes: u64) -> String {
    if bytes != 0 && bytes % (1 << 20) == 0 {
        quota_mb(bytes >> 20)
    } else if bytes != 0 && bytes % (1 << 10) == 0 {
        format!("{} KiB", bytes >> 10)
    } else {
        bytes.to_string()
    }
}

/// A quota recorded in whole MB (results.json's `mailbox_quota_mb`): "2048 MB".
pub fn quota_mb(mb: u64) -> String {
    format!("{mb} MB")
}

/// A request size: "4 KiB", "32 KiB", "256 KiB", "1.5 MiB", "612 B".
pub fn request_size(bytes: f64) -> String {
    if bytes < 1024.0 {
        format!("{bytes:.0} B")
    } else if bytes < 1024.0 * 1024.0 {
        let k = bytes / 1024.0;
        if (k - k.round()).abs() < 0.05 {
            format!("{k:.0} KiB")
        } else {
            format!("{k:.1} KiB")
        }
    } else {
        format!("{:.1} MiB", bytes / 1024.0 / 1024.0)
    }
}

/// An RFC 3339 time as "2026-11-21 14:05:09 +01:00"; other text unchanged, empty as "—".
pub fn timestamp(rfc3339: &str) -> String {
    if rfc3339.is_empty() {
        return "—".into();
    }
    match chrono::DateTime::parse_from_rfc3339(rfc3339) {
        Ok(t) => t.format("%Y-%m-%d %H:%M:%S %:z").to_string(),
        Err(_) => rfc3339.to_string(),
    }
}

/// `rfc3339` moved by `seconds` (negative: earlier), in the same offset.
pub fn shift_timestamp(rfc3339: &str, seconds: f64) -> Option<String> {
    let t = chrono::DateTime::parse_from_rfc3339(rfc3339).ok()?;
    let d = chrono::Duration::milliseconds((seconds * 1000.0).round() as i64);
    // Fractional seconds only when there are any, so whole-second stamps stay so.
    Some((t + d).to_rfc3339_opts(chrono::SecondsFormat::AutoSi, false))
}

/// Seconds as Jetstress's elapsed time, "03:46:20".
pub fn hms(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// "1 database", "2 databases": `n` and `noun` in the singular or plural (`noun` + s).
pub fn count_of(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Like [`hms`], with hundredths of a second ("00:00:02.47"): a short backup or
/// recovery would otherwise show "00:00:00".
pub fn hms_precise(seconds: f64) -> String {
    let centis = (seconds.max(0.0) * 100.0).round() as u64;
    let s = centis / 100;
    format!(
        "{:02}:{:02}:{:02}.{:02}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        centis % 100
    )
}

/// A measured or limit value with its unit, compactly: "23.4 ms", "1,200 IOPS", "3 pages".
pub fn quantity(v: f64, unit: &str) -> String {
    let n = if v.fract() == 0.0 && v.abs() < 1e15 {
        group_thousands(v as i64)
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    };
    match unit {
        "" => n,
        "per sec" => format!("{n}/s"),
        u => format!("{n} {u}"),
    }
}

/// 1234567 → "1,234,567".
pub fn group_thousands(v: i64) -> String {
    let digits = v.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0 { format!("-{out}") } else { out }
}

/// Change of `value` against `base` in percent; None when the base is 0 (no change
/// can be expressed; equal zeros are a 0 % change).
pub fn pct_change(base: f64, value: f64) -> Option<f64> {
    if base == 0.0 {
        (value == 0.0).then_some(0.0)
    } else {
        Some((value - base) / base.abs() * 100.0)
    }
}

/// "+12.5 %", "-3.0 %", "0.0 %", "n/a".
pub fn pct_text(change: Option<f64>) -> String {
    match change {
        Some(c) if c.abs() < 0.05 => "0.0 %".into(),
        Some(c) => format!("{c:+.1} %"),
        None => "n/a".into(),
    }
}

/// What a failed (or passed) criterion means, in a sentence a manager can read:
/// "Database reads on Instance0001 took 23.4 ms on average; the limit is 20 ms."
pub fn plain_words(c: &Criterion, r: &RunResults) -> String {
    let m = |v: f64| quantity(v, &c.unit);
    let on = if c.scope == "Total" {
        String::new()
    } else {
        format!(" on {}", c.scope)
    };
    let (measured, limit) = (m(c.measured), m(c.threshold));
    let count = c.measured.round() as i64;
    if c.not_measured {
        let note = c.note.as_ref().map_or(String::new(), |n| format!(" ({n})"));
        return format!(
            "{}{on} was not measured{note}, so it cannot pass; the limit is {} {limit}.",
            c.name,
            c.comparison.symbol()
        );
    }
    match c.key.as_str() {
        "run_aborted" => format!(
            "The test was stopped before its end: {}.",
            c.note.as_deref().unwrap_or("no reason recorded")
        ),
        "db_read_avg_latency" => {
            format!("Database reads{on} took {measured} on average; the limit is {limit}.")
        }
        "db_read_max_latency" => format!(
            "In the worst sampling interval, database reads{on} averaged {measured}; the limit is {limit}."
        ),
        "db_read_p99_latency" => format!(
            "1 database read in 100{on} took longer than {measured}; the limit for that 99th percentile is {limit}."
        ),
        "log_write_avg_latency" => {
            format!("Log writes{on} took {measured} on average; the limit is {limit}.")
        }
        "log_write_max_latency" => format!(
            "In the worst sampling interval, log writes{on} averaged {measured}; the limit is {limit}."
        ),
        "log_write_p99_latency" => format!(
            "1 log write in 100{on} took longer than {measured}; the limit for that 99th percentile is {limit}."
        ),
        "volume_db_read_avg_latency"
        | "volume_db_read_max_latency"
        | "volume_log_write_avg_latency"
        | "volume_log_write_max_latency" => {
            let what = if c.key.contains("read") {
                "reads (Avg. Disk sec/Read of a database volume)"
            } else {
                "writes (Avg. Disk sec/Write of a log volume)"
            };
            let shared = r
                .volumes
                .iter()
                .any(|v| v.shared && c.scope == format!("Volume {}", v.device));
            let also = if shared {
                " Other programs also used this volume during the test; its figures include their I/O."
            } else {
                ""
            };
            if c.key.ends_with("avg_latency") {
                format!("Disk {what}{on} took {measured} on average; the limit is {limit}.{also}")
            } else {
                format!(
                    "In the worst sampling interval, disk {what}{on} averaged {measured}; the limit is {limit}.{also}"
                )
            }
        }
        "page_fault_stalls" => format!(
            "Transactions{on} waited for a free database cache page {} times per second (Database Page Fault Stalls/sec); the limit is {}.",
            quantity(c.measured, ""),
            quantity(c.threshold, "")
        ),
        "transactional_iops" => {
            let p = &r.parameters;
            let why = match (p.mailboxes, p.iops_per_mailbox) {
                (Some(n), Some(per)) => format!(
                    " ({} mailboxes × {} IOPS per mailbox)",
                    group_thousands(n as i64),
                    quantity(per, "")
                ),
                _ => String::new(),
            };
            let what = if r.achieved_iops_basis.is_some() {
                "I/O on the database volumes (Disk Transfers/sec, as Jetstress 2007 counted)"
            } else {
                "transactional I/O"
            };
            format!("The storage delivered {measured} of {what}; the target is {limit}{why}.")
        }
        "io_errors" => format!("{count} I/O request(s) failed; there must be none."),
        "transaction_errors" => format!("{count} transaction(s) failed; there must be none."),
        "bdm_checksum_errors" => format!(
            "Background database maintenance found {count} database page(s) failing their checksum during the run; there must be none."
        ),
        "shutdown_errors" => {
            format!("{count} instance(s) could not be shut down cleanly; there must be none.")
        }
        "database_checksum_errors" => format!(
            "The checksum verification after the run found {count} damaged database page(s); there must be none."
        ),
        "log_checksum_errors" => format!(
            "The checksum verification after the run found {count} damaged log segment(s); there must be none."
        ),
        "backup_checksum_errors" => format!(
            "The backup read {count} database page(s) failing their checksum; there must be none."
        ),
        "recovery_failures" => format!(
            "{count} instance(s) did not recover cleanly from their logs; there must be none."
        ),
        "sampling_stalls" => match r
            .sampling_stalls
            .iter()
            .max_by(|a, b| a.seconds.total_cmp(&b.seconds))
        {
            Some(stall) => format!(
                "{} ({} stalled interval(s); an interval may last at most {}).",
                stall.describe(),
                r.sampling_stalls.len(),
                quantity(c.threshold, "s")
            ),
            None => format!(
                "The longest sampling interval lasted {}; an interval may last at most {}: the process or the storage stopped responding.",
                quantity(c.measured, "s"),
                quantity(c.threshold, "s")
            ),
        },
        _ => format!("{}.", c.describe()),
    }
}

/// The note a report shows above everything when the results file it was made from
/// disagreed with itself; None when it did not.
pub fn inconsistency_note(r: &RunResults) -> Option<String> {
    if r.inconsistencies.is_empty() {
        return None;
    }
    Some(format!(
        "This results.json is inconsistent ({}); the verdict shown is derived from its criteria.",
        r.inconsistencies.join("; ")
    ))
}

/// A path as HTML that breaks only after a separator, never inside a name: escaped,
/// with a line-break opportunity after each `/`. The cell's CSS forbids breaks
/// elsewhere.
pub fn path_html(path: &str) -> String {
    escape(path).replace('/', "/<wbr>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_drops_control_characters() {
        assert_eq!(
            escape("<script>alert('x')</script>&\"\u{1}"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
    }

    #[test]
    fn formats() {
        assert_eq!(mb(256 << 20), "256.0 MiB");
        assert_eq!(mb(20 << 30), "20.0 GiB");
        assert_eq!(request_size(32768.0), "32 KiB");
        assert_eq!(request_size(4633.09), "4.5 KiB");
        assert_eq!(hms(13580.0), "03:46:20");
        assert_eq!(group_thousands(3_553_834_303_488), "3,553,834,303,488");
        assert_eq!(quantity(23.4, "ms"), "23.4 ms");
        assert_eq!(quantity(1200.0, "IOPS"), "1,200 IOPS");
        assert_eq!(quantity(812.54321, "IOPS"), "812.5 IOPS");
        assert_eq!(pct_text(pct_change(200.0, 250.0)), "+25.0 %");
        assert_eq!(pct_text(pct_change(0.0, 1.0)), "n/a");
        assert_eq!(pct_text(pct_change(0.0, 0.0)), "0.0 %");
        assert_eq!(
            timestamp("2026-11-21T14:05:09+01:00"),
            "2026-11-21 14:05:09 +01:00"
        );
        assert_eq!(
            shift_timestamp("2026-11-21T14:05:09+01:00", -9.0).unwrap(),
            "2026-11-21T14:05:00+01:00"
        );
        assert_eq!(
            shift_timestamp("2026-11-21T14:05:09.990+01:00", -1.003).unwrap(),
            "2026-11-21T14:05:08.987+01:00"
        );
    }
}
