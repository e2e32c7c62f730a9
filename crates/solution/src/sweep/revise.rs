//! A sweep directory whose sweep file changed after some runs finished: the runs of
//! points whose settings are unchanged are kept, new or changed points run, and the
//! old file's other runs are moved aside (never deleted) — unless a sweep-wide setting
//! changed, which would make the kept runs incomparable with the new ones.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use edbstress_report::sweep::{PointRun, SWEEP_JSON, SweepResults, write_sweep};

use super::file::{SweepPlan, value_text};
use super::{SweepError, plan_results};

/// The point directory every point is resolved with when comparing settings: the
/// directory names a point's runs get are no setting of the run.
const PLACEHOLDER_DIR: &str = "/sweep/points/point";

/// What a changed sweep file does to the sweep already in a directory.
#[derive(Debug)]
pub(crate) struct Revision {
    /// The new sweep: kept runs done, the rest pending.
    pub results: SweepResults,
    /// How many runs were kept.
    pub kept: usize,
    /// The old file's runs not kept, whose directories are moved aside.
    pub superseded: Vec<PointRun>,
    /// What was kept, what runs again and why, one line each.
    pub lines: Vec<String>,
}

/// A point's resolved settings: its run settings and its storage axes' values.
fn settings(plan: &SweepPlan, point: usize) -> Option<(toml::Table, Vec<(String, String)>)> {
    let table = plan.run_table(point, Path::new(PLACEHOLDER_DIR), 1).ok()?;
    let storage = plan
        .file
        .axes
        .iter()
        .zip(&plan.points[point])
        .zip(&plan.values)
        .filter(|((a, _), _)| a.storage)
        .map(|((a, &i), v)| (a.name.clone(), v[i].clone()))
        .collect();
    Some((table, storage))
}

/// The first sweep-wide setting that differs between the files, as "what: old → new".
fn sweep_wide_change(old: &SweepPlan, new: &SweepPlan) -> Option<String> {
    let shown = |v: Option<&toml::Value>| v.map_or_else(|| "(not set)".into(), value_text);
    let run_axes: BTreeSet<&str> = old
        .file
        .axes
        .iter()
        .chain(&new.file.axes)
        .filter(|a| !a.storage)
        .map(|a| a.name.as_str())
        .collect();
    let keys: BTreeSet<&String> = old.file.run.keys().chain(new.file.run.keys()).collect();
    for key in keys.into_iter().filter(|k| !run_axes.contains(k.as_str())) {
        let (a, b) = (old.file.run.get(key), new.file.run.get(key));
        if a != b {
            return Some(format!("[run] {key}: {} → {}", shown(a), shown(b)));
        }
    }
    let vars: BTreeSet<&String> = old.file.vars.keys().chain(new.file.vars.keys()).collect();
    for key in vars {
        let (a, b) = (old.file.vars.get(key), new.file.vars.get(key));
        if a != b {
            let s = |v: Option<&String>| v.cloned().unwrap_or_else(|| "(not set)".into());
            return Some(format!("[vars] {key}: {} → {}", s(a), s(b)));
        }
    }
    let (oc, nc) = (&old.file.commands, &new.file.commands);
    for (what, a, b) in [
        ("setup", &oc.setup, &nc.setup),
        ("teardown", &oc.teardown, &nc.teardown),
        ("measure", &oc.measure, &nc.measure),
        ("measure_name", &oc.measure_name, &nc.measure_name),
    ] {
        if a != b {
            let s = |v: &Option<String>| v.clone().unwrap_or_else(|| "(not set)".into());
            return Some(format!("[commands] {what}: {} → {}", s(a), s(b)));
        }
    }
    if old.fresh != new.fresh {
        let s = |fresh: bool| if fresh { "fresh" } else { "keep" };
        return Some(format!(
            "[sweep] databases: {} → {}",
            s(old.fresh),
            s(new.fresh)
        ));
    }
    None
}

/// Plans the sweep of `new` in a directory holding `old` (made from another file with
/// runs finished): kept, re-run, or refused naming the sweep-wide setting that changed.
pub(crate) fn revise(
    old: &SweepResults,
    new: &SweepPlan,
    seed: u64,
    out: &Path,
) -> Result<Revision, SweepError> {
    let done = old.runs.iter().filter(|r| r.status == "done").count();
    let old_plan = SweepPlan::parse(&old.config_text).map_err(|e| {
        SweepError(format!(
            "{} holds a sweep made from a different sweep file ({done} run(s) finished) whose \
             file no longer reads ({e}): give --output a new directory to run this file",
            out.display()
        ))
    })?;
    if let Some(change) = sweep_wide_change(&old_plan, new) {
        return Err(SweepError(format!(
            "{} holds a sweep made from a different sweep file, with {done} run(s) finished \
             under it, and a sweep-wide setting changed ({change}): runs under the new \
             setting would not be comparable with them. Give --output a new directory to run \
             this file, or restore that setting (the old file's text is sweep.json's \
             config_text) to keep the finished runs and run only new or changed points",
            out.display()
        )));
    }
    let old_settings: Vec<_> = (0..old_plan.points.len())
        .map(|q| settings(&old_plan, q))
        .collect();
    let mut results = plan_results(new, seed);
    let mut kept_old: BTreeSet<usize> = BTreeSet::new();
    let mut lines = Vec::new();
    let mut in_use: BTreeSet<String> = BTreeSet::new();
    // The old point each new point matches, by resolved settings.
    let matches: Vec<Option<usize>> = (0..new.points.len())
        .map(|p| {
            let mine = settings(new, p);
            mine.as_ref()
                .and_then(|m| old_settings.iter().position(|o| o.as_ref() == Some(m)))
        })
        .collect();
    for run in results.runs.iter_mut() {
        let Some(q) = matches[run.point] else {
            continue;
        };
        // An old run is kept once, even when two new points resolve alike.
        let Some(i) = old.runs.iter().enumerate().position(|(j, o)| {
            o.point == q && o.repeat == run.repeat && o.status == "done" && !kept_old.contains(&j)
        }) else {
            continue;
        };
        let o = &old.runs[i];
        kept_old.insert(i);
        in_use.insert(o.dir.clone());
        *run = PointRun {
            point: run.point,
            ..o.clone()
        };
        lines.push(format!(
            "kept {} #{} ({}): its settings are unchanged (was {} #{}, {})",
            results.points[run.point].id,
            run.repeat,
            new.describe(run.point),
            old.points[q].id,
            o.repeat,
            o.dir
        ));
    }
    for run in results.runs.iter_mut().filter(|r| r.status != "done") {
        let id = &results.points[run.point].id;
        let why = match matches[run.point] {
            Some(_) => "its settings are unchanged but this repeat had not finished".to_string(),
            None => changed_from(&old_plan, new, run.point),
        };
        lines.push(format!(
            "to run {id} #{} ({}): {why}",
            run.repeat,
            new.describe(run.point)
        ));
        let mut dir = run.dir.clone();
        let mut n = 2;
        while in_use.contains(&dir) {
            dir = format!("{}-{n}", run.dir);
            n += 1;
        }
        in_use.insert(dir.clone());
        run.dir = dir;
    }
    let superseded: Vec<PointRun> = old
        .runs
        .iter()
        .enumerate()
        .filter(|(i, _)| !kept_old.contains(i))
        .map(|(_, r)| r.clone())
        .collect();
    Ok(Revision {
        results,
        kept: kept_old.len(),
        superseded,
        lines,
    })
}

/// Why a new point matches no old one: how its settings differ from the first old
/// point with the same values on the axes both files have, or that there is none.
fn changed_from(old: &SweepPlan, new: &SweepPlan, point: usize) -> String {
    let value = |plan: &SweepPlan, p: usize, name: &str| {
        let a = plan.file.axes.iter().position(|a| a.name == name)?;
        Some(plan.values[a][plan.points[p][a]].clone())
    };
    let same_axes = |q: usize| {
        old.file
            .axes
            .iter()
            .all(|a| value(new, point, &a.name).is_none_or(|v| Some(v) == value(old, q, &a.name)))
    };
    let Some(q) = (0..old.points.len()).find(|&q| same_axes(q)) else {
        return "a new point (no point of the earlier file had these settings)".into();
    };
    let (Some((a, sa)), Some((b, sb))) = (settings(old, q), settings(new, point)) else {
        return "its settings changed".into();
    };
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            let s = |v: Option<&toml::Value>| v.map_or_else(|| "(not set)".into(), value_text);
            format!("{k}: {} → {}", s(a.get(k)), s(b.get(k)))
        })
        .collect();
    if sa != sb {
        diffs.push(format!(
            "storage: {} → {}",
            describe_storage(&sa),
            describe_storage(&sb)
        ));
    }
    format!(
        "its settings differ from the earlier file's point {} ({}): {}",
        format_args!("p{:02}", q + 1),
        old.describe(q),
        diffs.join(", ")
    )
}

fn describe_storage(values: &[(String, String)]) -> String {
    if values.is_empty() {
        return "(none)".into();
    }
    values
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Moves the superseded runs' directories (with their set-aside attempts) and the old
/// sweep.json into `superseded-N/` of the sweep directory; returns its name.
pub(crate) fn set_aside_superseded(
    out: &Path,
    old: &SweepResults,
    superseded: &[PointRun],
) -> Result<String, SweepError> {
    let err = |what: &Path, e: std::io::Error| {
        SweepError(format!("cannot move {} aside: {e}", what.display()))
    };
    let name = (1..1000)
        .map(|n| format!("superseded-{n}"))
        .find(|n| !out.join(n).exists())
        .ok_or_else(|| SweepError(format!("{} holds 999 superseded sweeps", out.display())))?;
    let aside = out.join(&name);
    std::fs::create_dir_all(aside.join("points")).map_err(|e| err(&aside, e))?;
    write_sweep(&aside, old).map_err(|e| {
        SweepError(format!(
            "cannot write {}: {e}",
            aside.join(SWEEP_JSON).display()
        ))
    })?;
    for run in superseded {
        let from = out.join(&run.dir);
        let Some(file_name) = from.file_name().map(|f| f.to_string_lossy().into_owned()) else {
            continue;
        };
        let Some(parent) = from.parent() else {
            continue;
        };
        let attempts = std::fs::read_dir(parent)
            .map_err(|e| err(parent, e))?
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| *n == file_name || n.starts_with(&format!("{file_name}.attempt-")));
        let attempts: Vec<String> = attempts.collect();
        for n in attempts {
            let src = parent.join(&n);
            let dst: PathBuf = aside.join("points").join(&n);
            std::fs::rename(&src, &dst).map_err(|e| err(&src, e))?;
        }
    }
    Ok(name)
}
