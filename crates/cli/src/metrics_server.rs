//! `run --metrics-listen ADDR`: serves the run's live counters over HTTP in the
//! OpenMetrics text format, for Prometheus (or `curl`) to scrape while the run goes.
//!
//! The endpoint is reachable by anyone who can reach the port, so no client can cost
//! the run more than a bounded share: one thread serves every client through
//! non-blocking sockets, one request per connection (answered with
//! `Connection: close`), at most [`MAX_REQUEST_BYTES`] of request head, at most
//! [`MAX_CLIENTS`] connections (the oldest is dropped for a new one) and
//! [`CLIENT_TIME`] per connection. Nothing in it blocks, so stopping it takes at most
//! one [`IDLE_TICK`] and never waits for a client: the process ends with the run.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use edbstress_workload::live::LiveCounters;

use crate::common::CommandError;

/// The content type of the OpenMetrics text format, which Prometheus asks for.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The longest request head (request line and headers) read; longer is answered 431.
const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// Connections served at once; a new one beyond this replaces the oldest.
const MAX_CLIENTS: usize = 32;
/// The time one connection may take, from accept to its last byte.
const CLIENT_TIME: Duration = Duration::from_secs(5);
/// How often the serving thread looks for a new connection when it has none.
const IDLE_TICK: Duration = Duration::from_millis(50);
/// How often it looks at its connections when nothing moved on them.
const BUSY_TICK: Duration = Duration::from_millis(5);

/// A running counters endpoint; dropping it stops it.
pub struct MetricsServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl MetricsServer {
    /// Listens on `addr` (HOST:PORT; port 0 picks a free one) and serves `counters` at
    /// `/metrics`.
    pub fn start(addr: &str, counters: Arc<LiveCounters>) -> Result<MetricsServer, CommandError> {
        let fix = "give HOST:PORT of this machine with a free port, e.g. --metrics-listen 127.0.0.1:9464 (0.0.0.0:9464 for every interface)";
        let usage = |what: String| CommandError::Usage(format!("{what}; {fix}"));
        let resolved: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| {
                usage(format!(
                    "--metrics-listen '{addr}' is not an address to listen on ({e})"
                ))
            })?
            .collect();
        let Some(first) = resolved.first() else {
            return Err(usage(format!(
                "--metrics-listen '{addr}' resolves to no address"
            )));
        };
        let listener = TcpListener::bind(first)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| {
                usage(format!(
                    "cannot listen on {first} for --metrics-listen: {e}"
                ))
            })?;
        let addr = listener
            .local_addr()
            .map_err(|e| usage(format!("--metrics-listen {first}: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || serve(&listener, &counters, &stopping))
            .map_err(|e| CommandError::Usage(format!("cannot start the metrics thread: {e}")))?;
        Ok(MetricsServer {
            stop,
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
        self.stop.store(true, Ordering::SeqCst);
        // The thread never blocks for longer than a tick, whatever its clients do.
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: &TcpListener, counters: &LiveCounters, stop: &AtomicBool) {
    let mut clients: Vec<Client> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let mut moved = accept(listener, &mut clients, counters);
        for client in &mut clients {
            moved |= client.progress(counters);
        }
        clients.retain(|c| c.phase != Phase::Closed && c.since.elapsed() < CLIENT_TIME);
        // Every socket is non-blocking: look again soon while clients are there.
        if !moved {
            std::thread::sleep(if clients.is_empty() {
                IDLE_TICK
            } else {
                BUSY_TICK
            });
        }
    }
}

/// Takes every pending connection, dropping the oldest clients beyond the limit.
fn accept(listener: &TcpListener, clients: &mut Vec<Client>, counters: &LiveCounters) -> bool {
    let mut any = false;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                any = true;
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                if clients.len() >= MAX_CLIENTS {
                    clients.remove(0);
                }
                let mut client = Client {
                    stream,
                    since: Instant::now(),
                    head: Vec::new(),
                    reply: Vec::new(),
                    sent: 0,
                    phase: Phase::Reading,
                };
                // A request usually arrives with the connection.
                client.progress(counters);
                clients.push(client);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // WouldBlock: none left; anything else (e.g. out of descriptors) is retried
            // at the next tick.
            Err(_) => return any,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Reading the request head.
    Reading,
    /// Sending the reply.
    Writing,
    /// Reply sent: reading what else the client sends until it closes, so closing
    /// does not reset the connection before the reply is read.
    Draining,
    Closed,
}

struct Client {
    stream: TcpStream,
    since: Instant,
    head: Vec<u8>,
    reply: Vec<u8>,
    sent: usize,
    phase: Phase,
}

impl Client {
    /// Does what can be done without blocking; whether anything moved.
    fn progress(&mut self, counters: &LiveCounters) -> bool {
        let (phase, head, sent) = (self.phase, self.head.len(), self.sent);
        if self.phase == Phase::Reading {
            self.read_head(counters);
        }
        if self.phase == Phase::Writing {
            self.write_reply();
        }
        if self.phase == Phase::Draining {
            self.drain();
        }
        (phase, head, sent) != (self.phase, self.head.len(), self.sent)
    }

    fn read_head(&mut self, counters: &LiveCounters) {
        let mut buf = [0u8; 4096];
        let room = MAX_REQUEST_BYTES - self.head.len();
        match self.stream.read(&mut buf[..room.min(4096)]) {
            Ok(0) => self.phase = Phase::Closed,
            Ok(n) => {
                self.head.extend_from_slice(&buf[..n]);
                if let Some(reply) = answer(&self.head, counters) {
                    self.reply = reply;
                    self.phase = Phase::Writing;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(_) => self.phase = Phase::Closed,
        }
    }

    fn write_reply(&mut self) {
        match self.stream.write(&self.reply[self.sent..]) {
            Ok(n) => {
                self.sent += n;
                if self.sent == self.reply.len() {
                    let _ = self.stream.shutdown(Shutdown::Write);
                    self.phase = Phase::Draining;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(_) => self.phase = Phase::Closed,
        }
    }

    fn drain(&mut self) {
        let mut buf = [0u8; 4096];
        match self.stream.read(&mut buf) {
            Ok(0) => self.phase = Phase::Closed,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(_) => self.phase = Phase::Closed,
        }
    }
}

/// The reply to a request head, or None while it is incomplete (and short enough).
fn answer(head: &[u8], counters: &LiveCounters) -> Option<Vec<u8>> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let (status, content_type, body) = match request.parse(head) {
        Ok(httparse::Status::Partial) if head.len() < MAX_REQUEST_BYTES => return None,
        Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => (
            "431 Request Header Fields Too Large",
            "text/plain",
            format!("a request head is at most {MAX_REQUEST_BYTES} bytes\n"),
        ),
        Err(_) => ("400 Bad Request", "text/plain", "not HTTP\n".into()),
        Ok(httparse::Status::Complete(_)) => {
            let path = request.path.unwrap_or("");
            let path = path.split('?').next().unwrap_or("");
            match (request.method, path) {
                (Some("GET"), "/metrics") => {
                    ("200 OK", CONTENT_TYPE, counters.encode_openmetrics())
                }
                (Some("GET"), _) => (
                    "404 Not Found",
                    "text/plain",
                    "edbstress serves its live counters at /metrics\n".into(),
                ),
                _ => (
                    "405 Method Not Allowed",
                    "text/plain",
                    "only GET /metrics\n".into(),
                ),
            }
        }
    };
    let mut reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    reply.extend_from_slice(body.as_bytes());
    Some(reply)
}
