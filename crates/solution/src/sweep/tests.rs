use std::path::Path;

use super::*;

const GRID: &str = r#"
[sweep]
repeats = 2
order = "shuffled"
seed = 42
[run]
duration = "5s"
db_paths = ["{mnt}/db"]
[vars]
mnt = "/mnt/x"
[[axis]]
name = "compression"
storage = true
values = ["none", "lzo", "zstd"]
[[axis]]
name = "threads"
values = [2, 4]
[commands]
setup = "mount -o compress={compression} /dev/loop9 {mnt}"
"#;

#[test]
fn the_grid_is_every_combination_and_the_shuffle_is_reproducible() {
    let plan = SweepPlan::parse(GRID).unwrap();
    assert_eq!(plan.points.len(), 6);
    assert_eq!(plan.describe(1), "compression=none, threads=4");
    let a = plan_results(&plan, 42);
    let b = plan_results(&plan, 42);
    assert_eq!(a.runs.len(), 12);
    let order = |s: &SweepResults| {
        s.runs
            .iter()
            .map(|r| (r.point, r.repeat))
            .collect::<Vec<_>>()
    };
    assert_eq!(order(&a), order(&b), "one seed, one order");
    let mut sorted = order(&a);
    sorted.sort();
    assert_ne!(order(&a), sorted, "shuffled");
    assert_eq!(sorted.len(), 12);
}

#[test]
fn a_point_gets_its_run_settings_with_names_replaced() {
    let plan = SweepPlan::parse(GRID).unwrap();
    let t = plan.run_table(5, Path::new("/s/points/p06-r2"), 2).unwrap();
    assert_eq!(t["threads"].as_integer(), Some(4));
    assert!(
        !t.contains_key("compression"),
        "a storage axis is no run setting"
    );
    assert_eq!(t["db_paths"][0].as_str(), Some("/mnt/x/db"));
    assert_eq!(t["results_dir"].as_str(), Some("/s/points/p06-r2"));
    let names = plan.names(5, Path::new("/s/points/p06-r2"), 2);
    assert_eq!(names["compression"], "zstd");
    assert_eq!(names["sweep_dir"], "/s");
}

#[test]
fn mistakes_are_named_before_anything_runs() {
    let cases = [
        (
            "[[axis]]\nname = \"thread\"\nvalues = [2]\n",
            "point 1 (thread=2)",
        ),
        (
            "[[axis]]\nname = \"threads\"\nvalues = [0]\n[commands]\nsetup = \"echo {dev}\"\n",
            "{dev} is not a name",
        ),
        (
            "[[axis]]\nname = \"threads\"\nvalues = []\n",
            "has no values",
        ),
        (
            "[run]\nresults_dir = \"x\"\n[[axis]]\nname = \"threads\"\nvalues = [2]\n",
            "set by the sweep itself",
        ),
        (
            "[sweep]\norder = \"random\"\n[[axis]]\nname = \"threads\"\nvalues = [2]\n",
            "as-written",
        ),
        ("[run]\nthreads = 4\n", "no [[axis]]"),
    ];
    for (text, expected) in cases {
        let e = SweepPlan::parse(text).unwrap_err().to_string();
        assert!(e.contains(expected), "{text}\n→ {e}");
    }
}

#[test]
fn the_template_is_a_valid_sweep() {
    let plan = SweepPlan::parse(TEMPLATE).unwrap();
    assert_eq!(plan.points.len(), 6);
    assert!(plan.shuffled);
}

#[test]
fn the_user_guide_example_is_a_valid_sweep() {
    let guide = include_str!("../../../../docs/user-guide.md");
    let from = guide
        .find("A ZFS-style example")
        .expect("the example is in the guide");
    let block = &guide[from..];
    let start = block.find("```toml\n").unwrap() + "```toml\n".len();
    let end = start + block[start..].find("```").unwrap();
    let plan = SweepPlan::parse(&block[start..end]).unwrap();
    assert_eq!(plan.points.len(), 32);
    assert_eq!(plan.x_axis, "db_recordsize");
    let setup = plan.file.commands.setup.as_deref().unwrap();
    let names = plan.names(0, Path::new("/s/points/p01-r1"), 1);
    let script = template::Template::parse(setup)
        .unwrap()
        .render(&names)
        .unwrap();
    assert!(
        script.contains("zfs create -o recordsize=4K -o compression=off"),
        "{script}"
    );
}

#[test]
fn a_sweep_directory_resumes_its_file_or_keeps_unchanged_points_of_a_changed_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let plan = SweepPlan::parse(GRID).unwrap();
    let Opened {
        results: mut s,
        finished: done,
        ..
    } = open_sweep(&plan, &out, &|_| {}).unwrap();
    assert_eq!(done, 0);
    // The first run refused, the file fixed: nothing finished, so the fixed file
    // starts the sweep again in the same directory.
    s.runs[0].status = "failed".into();
    write_sweep(&out, &s).unwrap();
    let fixed = SweepPlan::parse(&GRID.replace("repeats = 2", "repeats = 3")).unwrap();
    let said = std::sync::Mutex::new(Vec::new());
    let opened = open_sweep(&fixed, &out, &|l: &str| {
        said.lock().unwrap().push(l.to_string())
    })
    .unwrap();
    assert!(opened.restarted);
    assert_eq!(opened.finished, 0);
    let restarted = opened.results;
    assert_eq!(restarted.config_text, fixed.text);
    assert!(restarted.runs.iter().all(|r| r.status == "pending"));
    assert!(
        said.lock().unwrap()[0].contains("starting it again there"),
        "{said:?}"
    );
    s.runs[0].status = "done".into();
    s.runs[1].status = "interrupted".into();
    write_sweep(&out, &s).unwrap();
    let Opened {
        results: again,
        finished: done,
        restarted,
    } = open_sweep(&plan, &out, &|_| {}).unwrap();
    assert!(!restarted);
    assert_eq!(done, 1);
    assert_eq!(
        again.runs[1].status, "pending",
        "an unfinished run is run again"
    );
    assert_eq!(again.seed, s.seed);
    // A third repeat: the finished run is kept, the interrupted one's directory is
    // moved aside with the earlier file's sweep.json, never deleted.
    let unfinished = out.join(&s.runs[1].dir);
    std::fs::create_dir_all(&unfinished).unwrap();
    std::fs::write(unfinished.join("run.log"), "earlier").unwrap();
    let more = SweepPlan::parse(&GRID.replace("repeats = 2", "repeats = 3")).unwrap();
    let opened = open_sweep(&more, &out, &|_| {}).unwrap();
    assert_eq!(opened.finished, 1);
    assert_eq!(opened.results.runs.len(), 18);
    let aside = out.join("superseded-1");
    assert_eq!(
        std::fs::read_to_string(aside.join(&s.runs[1].dir).join("run.log")).unwrap(),
        "earlier"
    );
    assert!(aside.join(SWEEP_JSON).is_file());
    assert!(!unfinished.exists());
    // A sweep-wide setting changed: refused, naming it.
    let other = SweepPlan::parse(&GRID.replace("{mnt}/db", "{mnt}/db2")).unwrap();
    let e = open_sweep(&other, &out, &|_| {}).unwrap_err().0;
    assert!(e.contains("different sweep file"), "{e}");
    assert!(e.contains("[run] db_paths"), "{e}");
    assert!(e.contains("Give --output a new directory"), "{e}");
}

const SMALL: &str = r#"
[run]
duration = "5s"
[[axis]]
name = "threads"
values = [2, 4]
"#;

/// `SMALL`'s sweep with every run finished.
fn finished_small() -> SweepResults {
    let mut old = plan_results(&SweepPlan::parse(SMALL).unwrap(), 1);
    for r in &mut old.runs {
        r.status = "done".into();
    }
    old
}

#[test]
fn a_changed_file_keeps_unchanged_points_and_runs_new_ones() {
    let old = finished_small();
    let new = SweepPlan::parse(&SMALL.replace("[2, 4]", "[4, 8]")).unwrap();
    let r = revise::revise(&old, &new, 1, Path::new("/s")).unwrap();
    assert_eq!(r.kept, 1);
    // threads=4 was p02 and is now p01: kept with its directory.
    let first = &r.results.runs[0];
    assert_eq!((first.point, first.status.as_str()), (0, "done"));
    assert_eq!(first.dir, "points/p02-r1");
    // threads=8 is new; its directory is its own.
    let second = &r.results.runs[1];
    assert_eq!((second.point, second.status.as_str()), (1, "pending"));
    assert_eq!(second.dir, "points/p02-r1-2");
    // threads=2 is superseded, not lost.
    assert_eq!(r.superseded.len(), 1);
    assert_eq!(r.superseded[0].dir, "points/p01-r1");
    assert!(
        r.lines
            .iter()
            .any(|l| l.starts_with("kept p01 #1 (threads=4)"))
    );
    assert!(
        r.lines
            .iter()
            .any(|l| l.starts_with("to run p02 #1 (threads=8): a new point"))
    );
}

#[test]
fn a_point_whose_settings_changed_runs_again_saying_what_changed() {
    let old = finished_small();
    // duration, sweep-wide before, becomes an axis: its old value's points are kept.
    let text = SMALL.replace("duration = \"5s\"\n", "").replace(
        "values = [2, 4]\n",
        "values = [2, 4]\n[[axis]]\nname = \"duration\"\nvalues = [\"5s\", \"10s\"]\n",
    );
    let new = SweepPlan::parse(&text).unwrap();
    let r = revise::revise(&old, &new, 1, Path::new("/s")).unwrap();
    assert_eq!((r.kept, r.superseded.len()), (2, 0));
    let status: Vec<&str> = r.results.runs.iter().map(|r| r.status.as_str()).collect();
    assert_eq!(status, ["done", "pending", "done", "pending"]);
    assert!(
        r.lines.iter().any(|l| l
            == "to run p02 #1 (threads=2, duration=10s): its settings differ from the \
                earlier file's point p01 (threads=2): duration: 5s → 10s"),
        "{:?}",
        r.lines
    );
}

#[test]
fn a_changed_sweep_wide_setting_is_refused_naming_it() {
    let old = finished_small();
    let new = SweepPlan::parse(&SMALL.replace("\"5s\"", "\"10s\"")).unwrap();
    let e = revise::revise(&old, &new, 1, Path::new("/s")).unwrap_err();
    assert!(e.0.contains("[run] duration: 5s → 10s"), "{e}");
    assert!(e.0.contains("Give --output a new directory"), "{e}");
    // Adding a repeat keeps every finished run and runs only the new repeats.
    let more = SweepPlan::parse(&format!("[sweep]\nrepeats = 2\n{SMALL}")).unwrap();
    let r = revise::revise(&old, &more, 1, Path::new("/s")).unwrap();
    assert_eq!((r.kept, r.superseded.len()), (2, 0));
    assert_eq!(
        r.results.runs.iter().filter(|r| r.status == "done").count(),
        2
    );
}
