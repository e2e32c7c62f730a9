//! A real OpenSSH server on loopback addresses, for the fleet tests: a throwaway host
//! key and client key in a temporary directory, `sshd -D` listening on each address
//! given (127.0.0.2, 127.0.0.3 … stand for separate hosts), a client configuration
//! that reaches them with that key, and the server stopped by its PID when dropped.
//! sshd listens on at most 16 addresses: more are served by further sshd processes on
//! the same port, one per 16 addresses.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running sshd.
pub struct Sshd {
    child: Child,
    /// The servers of the addresses past the first 16.
    more: Vec<Child>,
    /// The client configuration (`ssh -F`) reaching every address with the test key.
    pub client_config: PathBuf,
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

impl Sshd {
    /// Starts sshd on `addresses` under `dir`; `None` after a loud notice when sshd,
    /// ssh or ssh-keygen is missing (install openssh-server and openssh-client).
    pub fn start(dir: &Path, addresses: &[&str]) -> Option<Sshd> {
        Self::start_with(dir, addresses, "")
    }

    /// [`Sshd::start`] with `extra` appended to the server configuration (`Match`
    /// blocks: a host that behaves differently).
    pub fn start_with(dir: &Path, addresses: &[&str], extra: &str) -> Option<Sshd> {
        let (Some(sshd), Some(keygen), Some(_)) =
            (which("sshd"), which("ssh-keygen"), which("ssh"))
        else {
            eprintln!(
                "\n!!!!!!!!!!\n!!! SKIPPED: OpenSSH (sshd, ssh, ssh-keygen) is not installed; \
                 apt-get install openssh-server openssh-client to run the fleet tests\n!!!!!!!!!!\n"
            );
            return None;
        };
        std::fs::create_dir_all(dir).unwrap();
        for key in ["host_key", "id"] {
            let status = Command::new(&keygen)
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(key))
                .status()
                .unwrap();
            assert!(status.success(), "ssh-keygen failed");
        }
        std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys")).unwrap();
        // sshd run as root wants its privilege-separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let user = std::env::var("USER")
            .ok()
            .or_else(|| {
                let out = Command::new("id").arg("-un").output().ok()?;
                Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
            })
            .unwrap_or_else(|| "root".into());
        // The port is free on 127.0.0.1 when chosen; another test (or another checkout's
        // tests) may take it on a host address before sshd binds it: then sshd says so
        // and another port is tried.
        for _ in 0..10 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            if let Some(sshd) = Self::listen(&sshd, dir, addresses, extra, &user, port) {
                return Some(sshd);
            }
        }
        panic!("sshd could not listen on {addresses:?}: every port tried was taken");
    }

    /// Starts sshd on `port` of `addresses`; `None` when one of them was taken.
    fn listen(
        sshd: &Path,
        dir: &Path,
        addresses: &[&str],
        extra: &str,
        user: &str,
        port: u16,
    ) -> Option<Sshd> {
        assert!(!addresses.is_empty(), "an sshd listens on some address");
        let client_config = dir.join("ssh_config");
        std::fs::write(
            &client_config,
            format!(
                "Host *\n  Port {port}\n  User {user}\n  IdentityFile {d}/id\n  IdentitiesOnly yes\n  \
                 StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  \
                 BatchMode yes\n",
                d = dir.display()
            ),
        )
        .unwrap();
        // sshd's limit of listening sockets (MAX_LISTEN_SOCKS): one server per 16.
        let mut children = Vec::new();
        let mut logs = Vec::new();
        for (i, chunk) in addresses.chunks(16).enumerate() {
            let name = |stem: &str, ext: &str| {
                if i == 0 {
                    format!("{stem}.{ext}")
                } else {
                    format!("{stem}{i}.{ext}")
                }
            };
            let mut server = String::new();
            for a in chunk {
                server.push_str(&format!("ListenAddress {a}:{port}\n"));
            }
            server.push_str(&format!(
                "HostKey {d}/host_key\nPidFile {d}/{pid}\nAuthorizedKeysFile {d}/authorized_keys\n\
                 StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 UsePAM no\nPermitRootLogin yes\nLogLevel ERROR\nMaxStartups 100\nMaxSessions 100\n",
                d = dir.display(),
                pid = name("sshd", "pid"),
            ));
            server.push_str(extra);
            let config = dir.join(name("sshd_config", "conf"));
            std::fs::write(&config, server).unwrap();
            let log = dir.join(name("sshd", "log"));
            let child = Command::new(sshd)
                .args(["-D", "-e", "-f"])
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
                .spawn()
                .expect("start sshd");
            children.push((child, dir.join(name("sshd", "pid"))));
            logs.push(log);
        }
        let bind_failed = || {
            logs.iter().any(|log| {
                std::fs::read_to_string(log)
                    .unwrap_or_default()
                    .contains("Bind to port")
            })
        };
        // sshd writes its PID file once it has bound what it could: only then does its
        // log say whether an address was taken (by someone else's server, which would
        // answer the connections below).
        let started = Instant::now();
        for (child, pid_file) in &mut children {
            let ours = child.id().to_string();
            while std::fs::read_to_string(&*pid_file).map_or(true, |p| p.trim() != ours) {
                if let Ok(Some(status)) = child.try_wait() {
                    if bind_failed() {
                        break;
                    }
                    panic!(
                        "sshd exited ({status}): {}",
                        logs.iter()
                            .map(|l| std::fs::read_to_string(l).unwrap_or_default())
                            .collect::<String>()
                    );
                }
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "sshd wrote no PID file"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let mut children = children.into_iter().map(|(c, _)| c);
        let sshd = Sshd {
            child: children.next().unwrap(),
            more: children.collect(),
            client_config,
        };
        if bind_failed() {
            // Dropping stops every server started for this port.
            return None;
        }
        for a in addresses {
            let addr: SocketAddr = format!("{a}:{port}").parse().unwrap();
            while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "sshd does not listen on {addr}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Some(sshd)
    }

    /// The listening server's PID (to freeze it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Runs `command` on `address` through the client configuration.
    pub fn ssh(&self, address: &str, command: &str) -> std::process::Output {
        Command::new("ssh")
            .arg("-F")
            .arg(&self.client_config)
            .arg(address)
            .arg(command)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // Stop the servers we started, by their PIDs.
        for child in std::iter::once(&mut self.child).chain(&mut self.more) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
