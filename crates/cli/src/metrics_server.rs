//! `run --metrics-listen ADDR`: serves the run's live counters over HTTP in the
//! OpenMetrics text format, for Prometheus (or `curl`) to scrape while the run goes.
//! One thread answers requests from the latest figures the run published; it stops
//! when the run ends.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;

use edbstress_workload::live::LiveCounters;

use crate::common::CommandError;

/// The content type of the OpenMetrics text format, which Prometheus asks for.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A running counters endpoint; dropping it stops it.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl MetricsServer {
    /// Listens on `addr` (HOST:PORT; port 0 picks a free one) and serves `counters` at
    /// `/metrics`.
    pub fn start(addr: &str, counters: Arc<LiveCounters>) -> Result<MetricsServer, CommandError> {
        let fix = "give HOST:PORT of this machine with a free port, e.g. --metrics-listen 127.0.0.1:9464 (0.0.0.0:9464 for every interface)";
        let resolved: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| {
                CommandError::Usage(format!(
                    "--metrics-listen '{addr}' is not an address to listen on ({e}); {fix}"
                ))
            })?
            .collect();
        let Some(first) = resolved.first() else {
            return Err(CommandError::Usage(format!(
                "--metrics-listen '{addr}' resolves to no address; {fix}"
            )));
        };
        let server = tiny_http::Server::http(first).map_err(|e| {
            CommandError::Usage(format!(
                "cannot listen on {first} for --metrics-listen: {e}; {fix}"
            ))
        })?;
        let addr = server.server_addr().to_ip().ok_or_else(|| {
            CommandError::Usage(format!(
                "--metrics-listen {first}: not an IP address; {fix}"
            ))
        })?;
        let server = Arc::new(server);
        let serving = server.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || serve(&serving, &counters))
            .map_err(|e| CommandError::Usage(format!("cannot start the metrics thread: {e}")))?;
        Ok(MetricsServer {
            server,
            thread: Some(thread),
            addr,
        })
    }

    /// The address it listens on (with the port chosen when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(server: &tiny_http::Server, counters: &LiveCounters) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or("");
        let response = match (request.method(), path) {
            (tiny_http::Method::Get, "/metrics") => {
                let header = tiny_http::Header::from_bytes("Content-Type", CONTENT_TYPE)
                    .expect("a constant header is valid");
                tiny_http::Response::from_string(counters.encode_openmetrics()).with_header(header)
            }
            (tiny_http::Method::Get, _) => {
                tiny_http::Response::from_string("edbstress serves its live counters at /metrics\n")
                    .with_status_code(404)
            }
            _ => tiny_http::Response::from_string("only GET /metrics\n").with_status_code(405),
        };
        // A scraper that hung up is no concern of the run.
        let _ = request.respond(response);
    }
}
