//! A real Slurm cluster on this machine, for the Slurm recipe's test: munged with a
//! throwaway key and its own socket, slurmctld and one slurmd per node (n1, n2 …; all
//! on loopback, each node its own port — Debian's slurm-wlm is built with
//! `--enable-multiple-slurmd`, so `slurmd -N NODE` lets one machine pose as several
//! nodes), the configuration, state and spool directories in a temporary directory,
//! and every daemon stopped by its PID when dropped. Clients reach it through
//! `SLURM_CONF`.

use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running Slurm cluster.
pub struct Slurm {
    /// munged, slurmctld, then the slurmds, stopped in reverse order.
    daemons: Vec<(String, Child)>,
    dir: PathBuf,
    /// The configuration every client is given (`SLURM_CONF`).
    pub conf: PathBuf,
    /// The node names, n1 … nN.
    pub nodes: Vec<String>,
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A port free now and below the kernel's ephemeral range: a port the kernel handed
/// out for `:0` can be taken again as the source port of any outgoing connection (the
/// fleet tests' ssh sessions run beside this one) before slurmctld binds it, which
/// failed a run with "Address already in use". Ports below the range are only taken by
/// listeners chosen like this, so each port picked here is also not picked twice.
fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let low = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768)
        .clamp(12000, 65535);
    // Start somewhere that differs from run to run, then walk the ports below the range.
    let span = low - 10000;
    let start = std::process::id() * 7919 % span;
    loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert!(n < span, "no free port between 10000 and {low}");
        let port = 10000 + (start + n) % span;
        if TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
}

fn skip(why: &str) {
    eprintln!("\n!!!!!!!!!!\n!!! SKIPPED: {why} — the Slurm recipe was not run\n!!!!!!!!!!\n");
}

impl Slurm {
    /// Starts munged, slurmctld and `nodes` slurmds under `dir` and waits until every
    /// node is idle; `None` after a loud notice without root or without the packages
    /// (apt-get install slurm-wlm munge).
    pub fn start(dir: &Path, nodes: usize) -> Option<Slurm> {
        let tools = ["munged", "slurmctld", "slurmd", "sbatch", "srun", "sinfo"];
        let missing: Vec<&str> = tools
            .iter()
            .copied()
            .filter(|t| which(t).is_none())
            .collect();
        if !missing.is_empty() {
            skip(&format!(
                "{} not installed (apt-get install slurm-wlm munge)",
                missing.join(", ")
            ));
            return None;
        }
        if !is_root() {
            skip("slurmd must run as root to start jobs, and this test is not root");
            return None;
        }
        // munged wants its socket's directory and every parent searchable by all, and
        // its key readable by its user only.
        fs::create_dir_all(dir.join("munge")).unwrap();
        for d in [dir.parent().unwrap(), dir] {
            fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
        }
        let munge = dir.join("munge");
        fs::set_permissions(&munge, fs::Permissions::from_mode(0o755)).unwrap();
        let mut key = [0u8; 128];
        fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .unwrap();
        fs::write(munge.join("munge.key"), key).unwrap();
        fs::set_permissions(munge.join("munge.key"), fs::Permissions::from_mode(0o600)).unwrap();
        let socket = munge.join("munge.socket");
        let names: Vec<String> = (1..=nodes).map(|i| format!("n{i}")).collect();
        for d in ["state", "log"] {
            fs::create_dir_all(dir.join(d)).unwrap();
        }
        for n in &names {
            fs::create_dir_all(dir.join("spool").join(n)).unwrap();
        }
        let d = dir.display();
        let mut conf = format!(
            "ClusterName=edbstress\nSlurmctldHost=localhost\nSlurmctldPort={ctld}\n\
             SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\n\
             AuthInfo=socket={socket}\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd-%n.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd-%n.log\n\
             PlugStackConfig={d}/plugstack.conf\nMailProg=/bin/true\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n\
             SchedulerType=sched/builtin\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
             ReturnToService=2\nJobCompType=jobcomp/none\nJobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\n",
            ctld = free_port(),
            socket = socket.display(),
        );
        for n in &names {
            conf.push_str(&format!(
                "NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={} CPUs=1 State=UNKNOWN\n",
                free_port()
            ));
        }
        conf.push_str(&format!(
            "PartitionName=edbstress Nodes={} Default=YES MaxTime=INFINITE State=UP\n",
            names.join(",")
        ));
        let conf_path = dir.join("slurm.conf");
        fs::write(&conf_path, conf).unwrap();
        fs::write(dir.join("plugstack.conf"), "").unwrap();

        let mut slurm = Slurm {
            daemons: Vec::new(),
            dir: dir.to_path_buf(),
            conf: conf_path.clone(),
            nodes: names.clone(),
        };
        let mut munged = Command::new(which("munged").unwrap());
        munged
            .arg("--foreground")
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--key-file={}", munge.join("munge.key").display()))
            .arg(format!("--log-file={}", munge.join("munged.log").display()))
            .arg(format!("--pid-file={}", munge.join("munged.pid").display()))
            .arg(format!(
                "--seed-file={}",
                munge.join("munged.seed").display()
            ));
        slurm.spawn("munged", &mut munged, "munged.out");
        slurm.wait_for("munged's socket", || socket.exists());
        let mut ctld = Command::new(which("slurmctld").unwrap());
        ctld.arg("-D").arg("-f").arg(&conf_path);
        slurm.spawn("slurmctld", &mut ctld, "slurmctld.out");
        for n in &names {
            let mut slurmd = Command::new(which("slurmd").unwrap());
            slurmd.arg("-D").arg("-f").arg(&conf_path).arg("-N").arg(n);
            slurm.spawn(
                &format!("slurmd {n}"),
                &mut slurmd,
                &format!("slurmd-{n}.out"),
            );
        }
        let sinfo = which("sinfo").unwrap();
        slurm.wait_for("every node idle", || {
            let out = Command::new(&sinfo)
                .args(["--noheader", "--Node", "--format=%N %t"])
                .env("SLURM_CONF", &conf_path)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            text.lines().filter(|l| l.ends_with(" idle")).count() == nodes
        });
        Some(slurm)
    }

    fn spawn(&mut self, name: &str, command: &mut Command, log: &str) {
        let log = fs::File::create(self.dir.join("log").join(log)).unwrap();
        let child = command
            .env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        self.daemons.push((name.to_string(), child));
    }

    /// Waits up to 30 s for `ready`, failing with the daemons' logs if one exits or
    /// time runs out.
    fn wait_for(&mut self, what: &str, mut ready: impl FnMut() -> bool) {
        let started = Instant::now();
        while !ready() {
            let exited = self
                .daemons
                .iter_mut()
                .find_map(|(name, child)| Some((name.clone(), child.try_wait().ok()??)));
            if let Some((name, status)) = exited {
                panic!("{name} exited ({status}):\n{}", self.logs());
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "Slurm: no {what} after 30 s:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Every daemon's output and log file, for a failure's message.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for dir in [self.dir.join("log"), self.dir.join("munge")] {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(".log") || name.ends_with(".out") {
                    let text = fs::read_to_string(e.path()).unwrap_or_default();
                    all.push_str(&format!("--- {name}\n{text}\n"));
                }
            }
        }
        all
    }

    /// A client command (`sbatch`, `srun` …) for this cluster.
    pub fn client(&self, name: &str) -> Command {
        let mut c = Command::new(which(name).unwrap());
        c.env("SLURM_CONF", &self.conf).stdin(Stdio::null());
        c
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // Stop the daemons we started, by their PIDs, node daemons first.
        for (_, child) in self.daemons.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
