//! `run --metrics-listen`: a real run serves its live counters over HTTP; the test
//! scrapes them while the run goes, parses every scrape with a Prometheus text parser
//! (`prometheus-parse`) and, where Python's `prometheus_client` is installed, with its
//! strict OpenMetrics parser, and checks the last scrape against results.json: the
//! counters agree within one sampling interval.

use crate::suite::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prometheus_parse::{Scrape, Value};

use common::{SHORT_RUN, Sentinel, command, results, run_dirs, write_loose_limits};

/// One HTTP GET of `/metrics`: (status line, headers, body), or None when the server
/// is gone (the run ended).
fn scrape(addr: &str) -> Option<(String, String, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: edbstress\r\n\r\n")
        .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    Some((status.to_string(), headers.to_string(), body.to_string()))
}

fn parse(body: &str) -> Scrape {
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("the scrape parses")
}

/// The value of the series `name` with exactly `labels`.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    s.samples
        .iter()
        .find(|x| {
            x.metric == name
                && labels.len() == x.labels.iter().count()
                && labels.iter().all(|(k, v)| x.labels.get(k) == Some(v))
        })
        .and_then(|x| match &x.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(*v),
            _ => None,
        })
}

/// Parses with Python's strict OpenMetrics parser (prometheus_client); returns the
/// family names, or None (with a SKIP line) when it is not installed.
fn python_openmetrics(body: &str) -> Option<Vec<String>> {
    let probe = Command::new("python3")
        .args(["-c", "import prometheus_client.openmetrics.parser"])
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!(
            "SKIP (strict OpenMetrics check): python3 with prometheus_client is not installed \
             (pip install prometheus_client); checked with prometheus-parse only"
        );
        return None;
    }
    let script = "import sys\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families as p\n\
        for f in p(sys.stdin.read()):\n    print(f.name, f.type)\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the OpenMetrics parser rejects the scrape: {}\n{body}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect(),
    )
}

/// Starts `edbstress run` in `dir` with `run_args`, its live counters on a free
/// loopback port: the child, the thread collecting its stderr (the address line first,
/// then the test log; kept for failure messages) and the counters' address.
fn start_run_with_metrics(
    dir: &Path,
    limits: &Path,
    run_args: &[&str],
) -> (Child, JoinHandle<String>, String) {
    let mut child = command(dir)
        .args(["run", "--config", limits.to_str().unwrap()])
        .args(run_args)
        .args(["--mailboxes", "200", "--db-path", "db", "--log-path", "log"])
        .args([
            "--results-dir",
            "results",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start edbstress run");
    let (tx, rx) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("live counters: http://") {
                let _ = tx.send(url.trim_end_matches("/metrics").to_string());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("run prints the address of its live counters");
    (child, reader, addr)
}

/// Scrapes `addr` until the run ends, each scrape answered 200 in OpenMetrics and
/// parsed, and the run passing. Returns the last scrape with measured counters (checked
/// by the strict parser where installed) and the run's log.
fn scrape_until_the_run_ends(
    mut child: Child,
    reader: JoinHandle<String>,
    addr: &str,
) -> (String, String) {
    // Scrape until the run ends (bounded: the run measures 6 s).
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut last_measured: Option<String> = None;
    let mut scrapes = 0;
    let mut content_type = String::new();
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        if let Some((status, headers, body)) = scrape(addr) {
            assert!(status.contains("200"), "{status}");
            assert!(
                body.ends_with("# EOF\n"),
                "OpenMetrics ends with # EOF:\n{body}"
            );
            parse(&body);
            scrapes += 1;
            content_type = headers;
            if body.contains("edbstress_samples_total") {
                last_measured = Some(body);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if child.try_wait().unwrap().is_none() {
        child.kill().unwrap();
    }
    let status = child.wait().unwrap();
    let log = reader.join().unwrap();
    assert!(status.success(), "the run passes with loose limits:\n{log}");
    assert!(
        content_type
            .to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    let body = last_measured.unwrap_or_else(|| {
        panic!("no scrape of {scrapes} during the run had measured counters:\n{log}")
    });
    if let Some(families) = python_openmetrics(&body) {
        for f in [
            "edbstress_io_operations counter",
            "edbstress_io_latency_seconds histogram",
            "edbstress_verdict_so_far gauge",
        ] {
            assert!(families.iter().any(|l| l == f), "{f} in {families:?}");
        }
    }
    (body, log)
}

/// The last scrape against the run's results.json: measured time, phase, verdict,
/// each class's operations and latency histogram, transactions, log generation and
/// cache within one sampling interval.
fn the_live_counters_agree_with_results_json(dir: &Path, body: &str) {
    let s = parse(body);
    let run = &run_dirs(dir)[0];
    let r = results(run);
    let interval = r["parameters"]["sample_interval_seconds"].as_f64().unwrap();
    let measured = r["measured_seconds"].as_f64().unwrap();
    let live_measured = value(&s, "edbstress_measured_seconds", &[]).unwrap();
    assert!(
        live_measured <= measured + 1e-6 && measured - live_measured <= interval,
        "measured {live_measured} s live, {measured} s in results.json"
    );
    assert_eq!(
        value(&s, "edbstress_phase", &[("phase", "measuring")]),
        Some(1.0)
    );
    assert_eq!(value(&s, "edbstress_verdict_so_far", &[]), Some(1.0));

    let inst = &r["instances"][0];
    let name = inst["name"].as_str().unwrap();
    // Counts: at most one sampling interval's worth behind the final figures. One
    // interval's I/O is not exactly the average rate × the interval (log writes come in
    // group-commit bursts, and a loaded machine stretches an interval): allow that
    // interval up to 1.5 times the run's average rate.
    let within_one_interval = |what: &str, live: f64, done: f64, per_sec: f64| {
        let slack = 1.5 * per_sec * interval + 1.0;
        assert!(
            live <= done && done - live <= slack,
            "{what}: {live} live, {done} in results.json (at most {slack:.0} apart)"
        );
    };
    let mut checked = 0;
    for class in ["db_read", "db_write", "log_write"] {
        let c = &inst["io"][class];
        let labels = [("instance", name), ("class", class)];
        let live = value(&s, "edbstress_io_operations_total", &labels)
            .unwrap_or_else(|| panic!("{class} operations in\n{body}"));
        let done = c["count"].as_f64().unwrap();
        assert!(done > 0.0, "{class} did I/O");
        within_one_interval(class, live, done, c["per_sec"].as_f64().unwrap());
        // The histogram counts the same I/Os as the counter.
        let hist = s
            .samples
            .iter()
            .find(|x| {
                x.metric == "edbstress_io_latency_seconds"
                    && x.labels.get("class") == Some(class)
                    && x.labels.get("instance") == Some(name)
            })
            .unwrap_or_else(|| panic!("{class} latency histogram in\n{body}"));
        let Value::Histogram(buckets) = &hist.value else {
            panic!("{class} latency is a histogram")
        };
        let inf = buckets.iter().find(|b| b.less_than.is_infinite()).unwrap();
        assert_eq!(inf.count, live, "{class}: +Inf bucket = operations");
        assert!(buckets.windows(2).all(|w| w[0].count <= w[1].count));
        let sum = value(&s, "edbstress_io_latency_seconds_sum", &labels).unwrap();
        let done_sum = c["histogram"]["sum_ns"].as_f64().unwrap() / 1e9;
        assert!(
            sum > 0.0 && sum <= done_sum + 1e-6,
            "{class}: latency sum {sum} s live, {done_sum} s at the end"
        );
        checked += 1;
    }
    assert_eq!(checked, 3);
    let txn = &inst["transactions"];
    within_one_interval(
        "transactions",
        value(&s, "edbstress_transactions_total", &[("instance", name)]).unwrap(),
        txn["count"].as_f64().unwrap(),
        txn["per_sec"].as_f64().unwrap(),
    );
    let generation = value(&s, "edbstress_log_generation", &[("instance", name)]).unwrap();
    let final_generation = inst["engine"]["log_generation"].as_f64().unwrap();
    assert!(
        generation > 0.0 && generation <= final_generation,
        "log generation {generation} live, {final_generation} at the end"
    );
    let cache = value(&s, "edbstress_cache_max_bytes", &[("instance", name)]).unwrap();
    assert_eq!(
        cache,
        inst["engine"]["cache_max_mb"].as_f64().unwrap() * 1048576.0
    );
}

#[test]
fn a_scrape_during_a_run_parses_and_agrees_with_results_json() {
    let dir = tempfile::tempdir().unwrap();
    let limits = write_loose_limits(dir.path());
    let (child, reader, addr) = start_run_with_metrics(dir.path(), &limits, &SHORT_RUN);
    let (body, _log) = scrape_until_the_run_ends(child, reader, &addr);
    the_live_counters_agree_with_results_json(dir.path(), &body);
}

#[test]
fn an_address_that_cannot_be_listened_on_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    // Occupy a port, then ask for it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for bad in [addr.as_str(), "not-an-address"] {
        let out = common::edbstress(
            &["run", "--quick", "--metrics-listen", bad, "--db-path", "db"],
            dir.path(),
        );
        common::assert_exit(&out, 2, "a metrics address that cannot be used");
        let text = common::text(&out);
        assert!(text.contains("--metrics-listen"), "{text}");
        assert!(text.contains("127.0.0.1:9464"), "names a fix: {text}");
        assert!(!Path::new(&dir.path().join("db")).exists(), "nothing ran");
    }
}

/// A figure of `/proc/PID/status` ("VmRSS" in KiB, "Threads").
fn proc_status(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

/// A scrape's failure described (`None`: answered 200 in OpenMetrics).
fn scrape_ok(addr: &str, what: &str) -> Option<String> {
    match scrape(addr) {
        Some((status, _, body)) if status.contains("200") && body.ends_with("# EOF\n") => None,
        Some((status, _, _)) => Some(format!("a scrape {what} was answered {status}")),
        None => Some(format!("no answer to a scrape {what} within 5 s")),
    }
}

/// Waits until the live counters say the run measures.
fn wait_until_measuring(addr: &str) {
    let measuring = Instant::now() + Duration::from_secs(60);
    while !scrape(addr).is_some_and(|(_, _, body)| {
        value(&parse(&body), "edbstress_phase", &[("phase", "measuring")]) == Some(1.0)
    }) {
        assert!(
            Instant::now() < measuring,
            "the run never started measuring"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A request line that never ends: the server stops reading it and closes the
/// connection long before 64 MiB, and keeps none of it.
fn an_endless_request_line_is_cut(addr: &str, pid: u32, problems: &mut Vec<String>) {
    let rss_before = proc_status(pid, "VmRSS");
    let mut endless = TcpStream::connect(addr).unwrap();
    endless
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let chunk = vec![b'A'; 1 << 20];
    let mut sent = 0usize;
    let ended = loop {
        if sent >= 64 << 20 {
            break None;
        }
        match endless.write_all(&chunk) {
            Ok(()) => sent += chunk.len(),
            Err(e) => break Some(e),
        }
    };
    let rss_grown_kib = proc_status(pid, "VmRSS").saturating_sub(rss_before);
    eprintln!(
        "endless request line: {} MiB accepted, then {ended:?}; resident memory +{} MiB",
        sent >> 20,
        rss_grown_kib >> 10
    );
    if !ended.as_ref().is_some_and(|e| {
        matches!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
        )
    }) {
        problems.push(format!(
            "the server did not close a connection whose request line never ended \
             ({} MiB accepted, then {ended:?})",
            sent >> 20
        ));
    }
    if rss_grown_kib >= 32 << 10 {
        problems.push(format!(
            "an endless request line grew the run by {} MiB",
            rss_grown_kib >> 10
        ));
    }
    drop(endless);
}

/// A client that pipelines requests and never reads its answers: others are still
/// served. Returns its connection (it stays connected to the end of the test).
fn a_pipelining_client_does_not_block_others(addr: &str, problems: &mut Vec<String>) -> TcpStream {
    let mut pipelining = TcpStream::connect(addr).unwrap();
    pipelining.set_nonblocking(true).unwrap();
    let requests = b"GET /metrics HTTP/1.1\r\nHost: edbstress\r\n\r\n".repeat(20_000);
    let mut written = 0;
    let until = Instant::now() + Duration::from_secs(2);
    while written < requests.len() && Instant::now() < until {
        match pipelining.write(&requests[written..]) {
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(_) => break,
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    problems.extend(scrape_ok(
        addr,
        "while a client pipelines requests and never reads",
    ));
    pipelining
}

/// Connections that send nothing: no thread each, and scrapes still answered. Returns
/// them (they stay open to the end of the test).
fn idle_connections_take_no_thread_each(
    addr: &str,
    pid: u32,
    threads_before: u64,
    problems: &mut Vec<String>,
) -> Vec<TcpStream> {
    let idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let threads = proc_status(pid, "Threads");
    eprintln!("threads: {threads_before} before, {threads} with 300 idle connections");
    if threads > threads_before + 2 {
        problems.push(format!(
            "300 idle connections took the run from {threads_before} to {threads} threads"
        ));
    }
    problems.extend(scrape_ok(addr, "with 300 idle connections open"));
    idle
}

/// Waits (until 120 s after `started`) for the run to end by itself; kills it if it
/// does not. Returns its exit status, `None` if it had to be killed.
fn wait_for_the_run_to_end(child: &mut Child, started: Instant) -> Option<ExitStatus> {
    let deadline = started + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if status.is_none() {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    status
}

#[test]
fn the_live_endpoint_bounds_each_client_and_ends_with_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(dir.path());
    let limits = write_loose_limits(dir.path());
    // The short run, measured long enough for the attacks below to happen during it.
    let mut run_args: Vec<&str> = SHORT_RUN.to_vec();
    let at = run_args.iter().position(|a| *a == "--duration").unwrap();
    run_args[at + 1] = "15s";
    let started = Instant::now();
    let (mut child, reader, addr) = start_run_with_metrics(dir.path(), &limits, &run_args);
    let pid = child.id();
    // Every attack is tried; what did not hold is listed at the end.
    let mut problems: Vec<String> = Vec::new();
    assert_eq!(scrape_ok(&addr, "before the attacks"), None);
    // The baseline once the run measures (its threads and cache are all there by then).
    wait_until_measuring(&addr);
    let threads_before = proc_status(pid, "Threads");
    an_endless_request_line_is_cut(&addr, pid, &mut problems);
    let pipelining = a_pipelining_client_does_not_block_others(&addr, &mut problems);
    let idle = idle_connections_take_no_thread_each(&addr, pid, threads_before, &mut problems);
    // The run ends on time although those clients stay connected.
    let status = wait_for_the_run_to_end(&mut child, started);
    let log = reader.join().unwrap();
    drop((pipelining, idle));
    eprintln!(
        "waited {:.1} s for the run to end ({})",
        started.elapsed().as_secs_f64(),
        if status.is_some() {
            "it ended"
        } else {
            "killed"
        }
    );
    let Some(status) = status else {
        problems
            .push("the run was still alive 120 s after it started, held by its scrapers".into());
        panic!("{}\n{log}", problems.join("\n"));
    };
    assert!(problems.is_empty(), "{}\n{log}", problems.join("\n"));
    assert!(status.success(), "the run passes:\n{log}");
    let run = &run_dirs(dir.path())[0];
    assert_eq!(results(run)["overall_result"], "Pass");
    sentinel.assert_untouched();
}
