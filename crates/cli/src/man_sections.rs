//! What the manual pages add to what clap knows: a synopsis that shows each option's
//! value, and the EXIT STATUS and EXAMPLES sections of every command (a subcommand's
//! page, such as `edbstress-esrp-run`, shows its command's).

use clap::{Arg, ArgAction, Command};
use clap_mangen::roff::{self, Roff, bold, italic, roman};

/// Exit codes and examples of one command's page.
struct PageText {
    /// (code, meaning).
    exit: &'static [(&'static str, &'static str)],
    /// (what it does, the command line).
    examples: &'static [(&'static str, &'static str)],
}

const USAGE: (&str, &str) = (
    "2",
    "a usage, configuration or environment error; the message names the problem and the fix",
);
const DONE: (&str, &str) = ("0", "done");
const INTERRUPTED: (&str, &str) = (
    "130",
    "stopped with Ctrl-C (what finished is kept; run the same command again to resume)",
);
const OFFLINE: &[(&str, &str)] = &[
    ("0", "clean: no integrity problem"),
    (
        "1",
        "an integrity problem was found (damaged pages or logs, a lost flush, a truncated database)",
    ),
    USAGE,
];

/// The text of the page of the command `path` names ("edbstress", "edbstress-run"); a
/// subcommand's page shows its command's.
fn page_text(path: &str) -> PageText {
    let command = path.split('-').nth(1).unwrap_or("");
    match command {
        "" => TOP_PAGE,
        "run" => RUN_PAGE,
        "prepare" => PREPARE_PAGE,
        "checksum" => CHECKSUM_PAGE,
        "recover" => RECOVER_PAGE,
        "check" => CHECK_PAGE,
        "clean" => CLEAN_PAGE,
        "config" => CONFIG_PAGE,
        "report" => REPORT_PAGE,
        "compare" => COMPARE_PAGE,
        "aggregate" => AGGREGATE_PAGE,
        "fleet" => FLEET_PAGE,
        "esrp" => ESRP_PAGE,
        "sweep" => SWEEP_PAGE,
        "probe" => PROBE_PAGE,
        "completions" => COMPLETIONS_PAGE,
        "man" => MAN_PAGE,
        _ => OTHER_PAGE,
    }
}

/// Exit codes and examples of the top-level page.
const TOP_PAGE: PageText = PageText {
    exit: &[
        ("0", "the test passed, or the data is clean"),
        ("1", "the test failed, or damaged data was found"),
        USAGE,
        (
            "130",
            "stopped with Ctrl-C (results written, marked aborted)",
        ),
    ],
    examples: &[
        (
            "a one-minute Performance test in ./edbstress-data",
            "edbstress run --quick",
        ),
        (
            "5,000 mailboxes at 0.12 IOPS each, 6 databases with 2 copies",
            "edbstress run --mailboxes 5000 --iops-per-mailbox 0.12 --mailbox-quota 2048MB --databases 6 --copies 2 --db-path /mnt/db1 --log-path /mnt/log1",
        ),
        (
            "verify every page and log segment offline",
            "edbstress checksum --db-path /mnt/db1 --log-path /mnt/log1",
        ),
    ],
};

/// Exit codes and examples of `edbstress run`.
const RUN_PAGE: PageText = PageText {
    exit: &[
        ("0", "the test passed"),
        (
            "1",
            "the test failed (every failed criterion is printed), or a database is damaged",
        ),
        USAGE,
        (
            "130",
            "stopped with Ctrl-C: the databases were shut down cleanly and the results written, marked aborted",
        ),
    ],
    examples: &[
        (
            "a one-minute Performance test, to see the tool work",
            "edbstress run --quick",
        ),
        (
            "validate storage for 5,000 mailboxes at 0.12 IOPS each for 2 hours",
            "edbstress run --mailboxes 5000 --iops-per-mailbox 0.12 --mailbox-quota 2048MB --databases 6 --copies 2 --db-path /mnt/db1 --db-path /mnt/db2 --log-path /mnt/log1",
        ),
        (
            "a 24-hour Stress test from a configuration file",
            "edbstress run --test stress --config site.toml",
        ),
        (
            "the most sessions the storage carries within the latency limits",
            "edbstress run --auto-tune --databases 4 --database-size 100GiB --db-path /mnt/db1 --log-path /mnt/log1",
        ),
        (
            "a progress line every 5 minutes in a job without a terminal",
            "EDBSTRESS_PROGRESS_INTERVAL=5m nohup edbstress run --config site.toml 2>run.err &",
        ),
    ],
};

/// Exit codes and examples of `edbstress prepare`.
const PREPARE_PAGE: PageText = PageText {
    exit: OFFLINE,
    examples: &[(
        "create 6 databases of 200 GiB before the tests",
        "edbstress prepare --databases 6 --database-size 200GiB --db-path /mnt/db1 --log-path /mnt/log1",
    )],
};

/// Exit codes and examples of `edbstress checksum`.
const CHECKSUM_PAGE: PageText = PageText {
    exit: OFFLINE,
    examples: &[
        (
            "verify every page and log segment (like eseutil /k)",
            "edbstress checksum --db-path /mnt/db1 --log-path /mnt/log1",
        ),
        (
            "correct single-bit errors in one database",
            "edbstress checksum /mnt/db1/edbstress001.edb --repair",
        ),
    ],
};

/// Exit codes and examples of `edbstress recover`.
const RECOVER_PAGE: PageText = PageText {
    exit: OFFLINE,
    examples: &[(
        "replay the logs of databases not shut down cleanly",
        "edbstress recover --db-path /mnt/db1 --log-path /mnt/log1",
    )],
};

/// Exit codes and examples of `edbstress check`.
const CHECK_PAGE: PageText = PageText {
    exit: OFFLINE,
    examples: &[(
        "check key order, links and long values of every B+tree",
        "edbstress check --db-path /mnt/db1 --log-path /mnt/log1",
    )],
};

/// Exit codes and examples of `edbstress clean`.
const CLEAN_PAGE: PageText = PageText {
    exit: &[
        (
            "0",
            "removed (or, with --dry-run, listed) what edbstress made",
        ),
        USAGE,
    ],
    examples: &[
        (
            "list what would be removed",
            "edbstress clean --db-path /mnt/db1 --log-path /mnt/log1 --results-dir edbstress-results --dry-run",
        ),
        (
            "remove it without asking",
            "edbstress clean --db-path /mnt/db1 --log-path /mnt/log1 --results-dir edbstress-results --yes",
        ),
    ],
};

/// Exit codes and examples of `edbstress config`.
const CONFIG_PAGE: PageText = PageText {
    exit: &[DONE, USAGE],
    examples: &[
        (
            "write a commented configuration file",
            "edbstress config init site.toml",
        ),
        (
            "show the configuration a run would use",
            "edbstress config show --config site.toml --duration 30m",
        ),
    ],
};

/// Exit codes and examples of `edbstress report`.
const REPORT_PAGE: PageText = PageText {
    exit: &[("0", "written"), USAGE],
    examples: &[
        (
            "render report.html again (after an upgrade)",
            "edbstress report edbstress-results/Performance_2026_11_21_14_05_09",
        ),
        (
            "the Markdown summary on standard output",
            "edbstress report edbstress-results/Performance_2026_11_21_14_05_09 --format md --output -",
        ),
    ],
};

/// Exit codes and examples of `edbstress compare`.
const COMPARE_PAGE: PageText = PageText {
    exit: &[
        ("0", "compared; with limits, every run is within them"),
        (
            "1",
            "with limits: a run is worse than the first beyond them, or failed where the first passed",
        ),
        USAGE,
    ],
    examples: &[
        (
            "two runs side by side, with an HTML page of overlaid charts",
            "edbstress compare RUN_BEFORE RUN_AFTER --html comparison.html",
        ),
        (
            "a CI gate after a firmware change",
            "edbstress compare RUN_BEFORE RUN_AFTER --max-iops-drop 5 --max-p99-rise 20 --max-p99-rise log_write=10",
        ),
        (
            "every finished run of a sweep",
            "edbstress compare btrfs-sweep",
        ),
    ],
};

/// Exit codes and examples of `edbstress aggregate`.
const AGGREGATE_PAGE: PageText = PageText {
    exit: &[
        ("0", "the aggregated test passed"),
        (
            "1",
            "it failed (a host's run failed, or they do not belong together)",
        ),
        USAGE,
    ],
    examples: &[(
        "one result from three hosts' runs",
        "edbstress aggregate db1/Performance_2026_11_25_13_55_02 db2/Performance_2026_11_25_13_55_03 db3/Performance_2026_11_25_13_55_02 --output solution-perf",
    )],
};

/// Exit codes and examples of `edbstress fleet`.
const FLEET_PAGE: PageText = PageText {
    exit: &[
        ("0", "fleet run: the aggregated test passed"),
        (
            "1",
            "fleet run: it failed; prepare, checksum and clean: the highest exit code of the hosts",
        ),
        USAGE,
        ("130", "stopped with Ctrl-C"),
    ],
    examples: &[
        (
            "one test on three hosts at once, the mailboxes split between them",
            "edbstress fleet run --host mbx1 --host mbx2 --host mbx3 --mailboxes 15000 -- --config site.toml",
        ),
        (
            "verify every host's databases",
            "edbstress fleet checksum --host mbx1 --host mbx2 -- --db-path /mnt/db1 --log-path /mnt/log1",
        ),
    ],
};

/// Exit codes and examples of `edbstress esrp`.
const ESRP_PAGE: PageText = PageText {
    exit: &[
        (
            "0",
            "esrp run: every step passed; esrp document: the campaign meets the ESRP test rules",
        ),
        ("1", "a step failed, or the document lists findings"),
        USAGE,
        INTERRUPTED,
    ],
    examples: &[
        (
            "write a commented solution file",
            "edbstress esrp init solution.toml",
        ),
        (
            "a short rehearsal of the campaign",
            "edbstress esrp run --config solution.toml --rehearsal --campaign rehearsal",
        ),
        (
            "the solution document",
            "edbstress esrp document campaign --solution solution.toml --output doc",
        ),
    ],
};

/// Exit codes and examples of `edbstress sweep`.
const SWEEP_PAGE: PageText = PageText {
    exit: &[
        ("0", "every point ran (or init wrote the file)"),
        USAGE,
        INTERRUPTED,
    ],
    examples: &[
        (
            "write a commented sweep file",
            "edbstress sweep init sweep.toml",
        ),
        (
            "run it",
            "edbstress sweep --config sweep.toml --output btrfs-sweep",
        ),
    ],
};

/// Exit codes and examples of `edbstress probe`.
const PROBE_PAGE: PageText = PageText {
    exit: &[("0", "measured"), USAGE],
    examples: &[
        (
            "random, sequential and log I/O under a path",
            "edbstress probe --path /mnt/db1",
        ),
        (
            "one pattern, as JSON",
            "edbstress probe --path /mnt/db1 --pattern randread --block-size 32KiB --queue-depth 32 --duration 30s --json",
        ),
    ],
};

/// Exit codes and examples of `edbstress completions`.
const COMPLETIONS_PAGE: PageText = PageText {
    exit: &[DONE, USAGE],
    examples: &[(
        "install the bash completion for your user",
        "edbstress completions bash > ~/.local/share/bash-completion/completions/edbstress",
    )],
};

/// Exit codes and examples of `edbstress man`.
const MAN_PAGE: PageText = PageText {
    exit: &[DONE, USAGE],
    examples: &[(
        "write every page for man(1)",
        "edbstress man --output ~/.local/share/man/man1",
    )],
};

/// Exit codes and examples of any other command.
const OTHER_PAGE: PageText = PageText {
    exit: &[DONE, USAGE],
    examples: &[],
};

/// The synopsis of `command` with each option's value: `edbstress run [--test TEST]
/// [--db-path DIR]...`.
pub fn synopsis(command: &Command) -> Roff {
    let name = command.get_bin_name().unwrap_or_else(|| command.get_name());
    let mut line = vec![bold(name)];
    for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
        line.push(roman(" "));
        line.extend(synopsis_option(arg));
    }
    if command.has_subcommands() {
        line.push(roman(" "));
        line.push(italic("COMMAND"));
    }
    let mut roff = Roff::new();
    roff.control("SH", ["SYNOPSIS"]).text(line);
    roff
}

/// One option or positional: `[--test TEST]`, `[--db-path DIR]...`, `RUN_DIR...`.
fn synopsis_option(arg: &Arg) -> Vec<roff::Inline> {
    let required = arg.is_required_set();
    let mut out = Vec::new();
    if !required {
        out.push(roman("["));
    }
    let flag = match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(l)) => Some(format!("-{s}|--{l}")),
        (Some(s), None) => Some(format!("-{s}")),
        (None, Some(l)) => Some(format!("--{l}")),
        (None, None) => None,
    };
    let takes_value = !matches!(
        arg.get_action(),
        ArgAction::SetTrue
            | ArgAction::SetFalse
            | ArgAction::Count
            | ArgAction::Help
            | ArgAction::Version
    );
    let value = arg
        .get_value_names()
        .map(|v| v.join(" "))
        .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
    match flag {
        Some(f) => {
            out.push(bold(f));
            if takes_value {
                out.push(roman(" "));
                out.push(italic(value));
            }
        }
        None => out.push(italic(value)),
    }
    if !required {
        out.push(roman("]"));
    }
    let repeats = matches!(arg.get_action(), ArgAction::Append | ArgAction::Count)
        || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
    if repeats {
        out.push(roman("..."));
    }
    out
}

/// The EXIT STATUS and EXAMPLES sections of the page `path` names.
pub fn exit_status_and_examples(path: &str) -> Roff {
    let text = page_text(path);
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in text.exit {
        roff.control("TP", [])
            .text([bold(*code)])
            .text([roman(*meaning)]);
    }
    if !text.examples.is_empty() {
        roff.control("SH", ["EXAMPLES"]);
        for (what, line) in text.examples {
            roff.control("TP", [])
                .text([roman(format!("{what}:"))])
                .control("EX", [])
                .text([roman(*line)])
                .control("EE", []);
        }
    }
    roff
}

/// `roff` as lines to splice into a page that already has the preamble.
pub fn body(roff: &Roff) -> String {
    let text = roff.render();
    // The page's own preamble defines the apostrophe string these lines use.
    text.lines()
        .skip_while(|l| l.starts_with(".ie ") || l.starts_with(".el "))
        .map(|l| format!("{l}\n"))
        .collect()
}
