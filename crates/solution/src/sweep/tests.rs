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
fn a_sweep_directory_resumes_only_with_its_own_file() {
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
    let other = SweepPlan::parse(&GRID.replace("repeats = 2", "repeats = 3")).unwrap();
    let e = open_sweep(&other, &out, &|_| {}).unwrap_err().0;
    assert!(e.contains("different sweep file"), "{e}");
    assert!(e.contains("Give --output a new directory"), "{e}");
}
