//! Long mode (`EDBSTRESS_LONG=1`; skipped loudly otherwise): twenty three-host fleets,
//! in each a random host's run killed (SIGKILL), frozen (SIGSTOP) or cut off (the
//! fleet's ssh session to it frozen: nothing more comes from that host) at a random
//! moment. Every fleet must end
//! within its deadline, name the lost host, and count exactly its own runs, each once
//! (checked by run id against the hosts' own directories of that fleet).

use super::deadlines::{Frozen, fleet_dirs, remote_pid, signal};
use super::*;
use std::collections::BTreeSet;

const FLEETS: usize = 20;
const LEAD_S: u64 = 12;
const DURATION_S: u64 = 16;
const GRACE_S: u64 = 15;

/// xorshift64*: enough randomness to pick faults, its seed printed to replay a loop.
struct Draw(u64);
impl Draw {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// The fleet's ssh session running host `address`'s run (a child of the fleet whose
/// command line names the address and the run).
fn ssh_session(fleet: u32, address: &str) -> i32 {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let parent = stat
                .rfind(')')
                .and_then(|i| stat[i + 2..].split_whitespace().nth(1)?.parse::<u32>().ok());
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            parent == Some(fleet) && cmdline.contains(address) && cmdline.contains(" run ")
        })
        .unwrap_or_else(|| panic!("no ssh session of the fleet to {address}"))
}

#[test]
fn fleets_losing_a_random_host_at_a_random_moment_end_in_time_and_count_their_own_runs() {
    if std::env::var_os("EDBSTRESS_LONG").is_none() {
        eprintln!(
            "\n!!!!!!!!!!\n!!! SKIPPED: the fleet fault loop (20 fleets, about 15 minutes) runs \
             only with EDBSTRESS_LONG=1\n!!!!!!!!!!\n"
        );
        return;
    }
    let site = Site::new();
    let root = &site.root;
    let Some(sshd) = site.sshd(&ADDRESSES) else {
        return;
    };
    let seed = std::env::var("EDBSTRESS_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("fault loop seed {seed} (EDBSTRESS_FAULT_SEED replays it)");
    let mut draw = Draw(seed);
    let mut all_runs = BTreeSet::new();
    let deadline = Duration::from_secs(LEAD_S + DURATION_S + GRACE_S);
    for k in 0..FLEETS {
        let victim = draw.next(3) as usize;
        let fault = ["kill", "freeze", "cut"][draw.next(3) as usize];
        // While the run prepares or measures: a run that ended whole is counted, rightly,
        // and would not test the loss.
        let at_ms = 2000 + draw.next((LEAD_S + DURATION_S - 18) * 1000);
        let output = format!("fleet{k:02}");
        // Each fleet its own databases (a killed run leaves its database to recover), one
        // results directory per host for all (the fleets' directories side by side).
        let specs: Vec<String> = (0..3)
            .map(|i| {
                let h = root.join(format!("host{}", i + 1));
                format!(
                    "{},name=host{},db-path={},log-path={},results-dir={}",
                    ADDRESSES[i],
                    i + 1,
                    h.join(&output).join("db").display(),
                    h.join(&output).join("logs").display(),
                    h.join("results").display()
                )
            })
            .collect();
        let mut args = fleet_cmd(
            root,
            &sshd,
            &output,
            &format!("{LEAD_S}s"),
            &specs,
            &["--grace", &format!("{GRACE_S}s")],
        );
        let at = args.iter().position(|a| a == "6s").unwrap();
        args[at] = format!("{DURATION_S}s");
        let before = fleet_dirs(root, victim);
        let started = Instant::now();
        let mut fleet = command(root)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = remote_pid(root, victim, &before, &mut fleet);
        let after_start = started.elapsed();
        std::thread::sleep(Duration::from_millis(at_ms));
        let session = ssh_session(fleet.id(), ADDRESSES[victim]);
        let frozen = match fault {
            "kill" => {
                signal("KILL", pid);
                None
            }
            "freeze" => {
                signal("STOP", pid);
                Some(Frozen(pid))
            }
            _ => {
                signal("STOP", session);
                Some(Frozen(session))
            }
        };
        // Checks and copies on top of the deadline: a minute is ample.
        let (out, elapsed) = wait_within(fleet, started, deadline + Duration::from_secs(60));
        drop(frozen);
        let said = text(&out);
        let host = format!("host{}", victim + 1);
        let agg = aggregate_of(&root.join(&output));
        let why = why_missing(&agg, &host);
        let id = fleet_id_of(&out);
        let counted = counted_runs(root, &agg);
        let counted_ids: BTreeSet<String> =
            counted.iter().map(|r| r.run_id.clone().unwrap()).collect();
        // The other hosts' runs of this fleet, from their own directories.
        let mut theirs = BTreeSet::new();
        for i in (0..3).filter(|&i| i != victim) {
            let dir = root.join(format!("host{}/results/{id}", i + 1));
            for d in fs::read_dir(&dir).unwrap().flatten() {
                if let Ok(b) = fs::read(d.path().join("results.json")) {
                    theirs.insert(read_results(&b).unwrap().run_id.unwrap());
                }
            }
        }
        eprintln!(
            "fleet {k:2}: {host} {fault:6} at {:5.1} s after its start: ended after {:5.1} s \
             (deadline {} s + checks and copies); {host}: {why}; counted {} runs",
            (after_start + Duration::from_millis(at_ms)).as_secs_f64(),
            elapsed.as_secs_f64(),
            deadline.as_secs(),
            counted.len()
        );
        assert_exit(&out, 1, &format!("fleet {k}"));
        assert!(!why.is_empty(), "fleet {k}: {host} was not named: {said}");
        assert_eq!(counted.len(), 2, "fleet {k}: {said}");
        assert_eq!(counted_ids, theirs, "fleet {k}: {said}");
        for r in &counted {
            assert_eq!(r.fleet_id.as_deref(), Some(id.as_str()), "fleet {k}");
            assert!(
                all_runs.insert(r.run_id.clone().unwrap()),
                "a run counted twice"
            );
        }
    }
    drop(sshd);
    site.sentinel.assert_untouched();
}
