//! The Kubernetes recipe's files, checked as far as this machine can (there is no
//! cluster here): `packaging/k8s/*.yaml` parse as YAML and hold an Indexed Job with one
//! pod per node, a volume of a named StorageClass in the intended volume mode, the host
//! name from the pod's index and a start time; the container's command line, with the
//! ConfigMap's settings, is one the real binary accepts (`edbstress config show`). The
//! image of `packaging/Containerfile` is built only where podman or buildah, a Debian base
//! image and a built package are at hand; elsewhere that test says so and skips.

use crate::suite::common::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

fn packaging() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging")
}

fn load(name: &str) -> Vec<Yaml> {
    let path = packaging().join("k8s").join(name);
    let text = fs::read_to_string(&path).unwrap();
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn of_kind<'a>(docs: &'a [Yaml], kind: &str) -> &'a Yaml {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("no {kind} among {docs:?}"))
}

fn strings(list: &Yaml) -> Vec<String> {
    list.as_vec()
        .unwrap_or_else(|| panic!("not a list: {list:?}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The named entry of a list of `{name: …}` maps.
fn named<'a>(list: &'a Yaml, name: &str) -> &'a Yaml {
    list.as_vec()
        .unwrap()
        .iter()
        .find(|v| v["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no {name} in {list:?}"))
}

/// Checks one Job and returns its container's arguments as pod 2 would get them.
fn check_job(job: &Yaml, volume_mode: &str) -> Vec<String> {
    assert_eq!(job["apiVersion"].as_str(), Some("batch/v1"));
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let completions = spec["completions"].as_i64().unwrap();
    assert!(completions >= 1);
    assert_eq!(
        spec["parallelism"].as_i64(),
        Some(completions),
        "all at once"
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
    // One pod per node: required anti-affinity on the host name, matching the pods'
    // own labels.
    let anti =
        &pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(anti["topologyKey"].as_str(), Some("kubernetes.io/hostname"));
    let labels = &spec["template"]["metadata"]["labels"];
    let selector = anti["labelSelector"]["matchLabels"].as_hash().unwrap();
    assert!(!selector.is_empty());
    for (k, v) in selector {
        assert_eq!(
            &labels[k.as_str().unwrap()],
            v,
            "the selector matches the pods"
        );
    }
    // The volume under test: each pod's own claim of a named StorageClass.
    let claim = &named(&pod["volumes"], "db")["ephemeral"]["volumeClaimTemplate"]["spec"];
    assert!(!claim["storageClassName"].as_str().unwrap().is_empty());
    assert_eq!(claim["volumeMode"].as_str(), Some(volume_mode));
    let container = &pod["containers"][0];
    let attached = match volume_mode {
        "Filesystem" => named(&container["volumeMounts"], "db")["mountPath"].as_str(),
        _ => named(&container["volumeDevices"], "db")["devicePath"].as_str(),
    };
    assert!(attached.is_some(), "the db volume is not attached");
    assert!(!named(&container["volumeMounts"], "results")["mountPath"].is_badvalue());
    // The index comes from the Job controller's annotation.
    let index = &named(&container["env"], "INDEX")["valueFrom"]["fieldRef"]["fieldPath"];
    assert_eq!(
        index.as_str(),
        Some("metadata.annotations['batch.kubernetes.io/job-completion-index']")
    );
    // Kubernetes expands $(INDEX) in args from the container's environment.
    strings(&container["args"])
        .iter()
        .map(|a| a.replace("$(INDEX)", "2"))
        .collect()
}

/// Checks pod 2's `edbstress run` arguments with the real binary: the flags only `run`
/// has are checked here, the rest (and the ConfigMap's file) by `config show`.
fn check_command_line(args: &[String], site_toml: &str, dir: &Path) -> String {
    assert_eq!(args[0], "run", "{args:?}");
    let config = dir.join("site.toml");
    fs::write(&config, site_toml).unwrap();
    let mut shown: Vec<String> = vec!["config".into(), "show".into()];
    let mut rest = args[1..].iter();
    let (mut start_at, mut host_name) = (None, None);
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--start-at" => start_at = rest.next().cloned(),
            "--host-name" => host_name = rest.next().cloned(),
            "/etc/edbstress/site.toml" => shown.push(config.display().to_string()),
            _ => shown.push(a.clone()),
        }
    }
    let start_at = start_at.expect("a common start time (--start-at)");
    assert!(
        chrono::DateTime::parse_from_rfc3339(&start_at).is_ok(),
        "{start_at}"
    );
    assert_eq!(host_name.as_deref(), Some("mbx-2"));
    let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
    let out = edbstress(&shown, dir);
    assert_exit(&out, 0, "config show with the pod's arguments");
    stdout(&out)
}

#[test]
fn the_kubernetes_jobs_parse_and_their_command_line_is_one_edbstress_accepts() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    let docs = load("edbstress-job.yaml");
    let site = of_kind(&docs, "ConfigMap")["data"]["site.toml"]
        .as_str()
        .unwrap()
        .to_string();
    let results = of_kind(&docs, "PersistentVolumeClaim");
    assert_eq!(
        strings(&results["spec"]["accessModes"]),
        ["ReadWriteMany"],
        "every pod writes its run to the results claim"
    );

    let args = check_job(of_kind(&docs, "Job"), "Filesystem");
    let toml = check_command_line(&args, &site, tmp.path());
    for line in [
        "results_dir = \"/results/mbx-2\"",
        "mailboxes = 500",
        "\"/mnt/db/db\"",
        "\"/mnt/db/logs\"",
    ] {
        assert!(toml.contains(line), "config show lacks {line}:\n{toml}");
    }

    let block = load("edbstress-job-block.yaml");
    let job = of_kind(&block, "Job");
    let block_args = check_job(job, "Block");
    assert_eq!(block_args, args, "both Jobs run the same command line");
    // The block variant formats its device and mounts it where the settings point.
    let command = strings(&job["spec"]["template"]["spec"]["containers"][0]["command"]);
    let script = &command[2];
    assert!(
        script.contains("mount /dev/edbstress-db /mnt/db")
            && script.contains("exec edbstress \"$@\""),
        "{script}"
    );
    sentinel.assert_untouched();
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The package to put in the image: `EDBSTRESS_DEB`, else the newest under
/// target/debian (packaging/build-deb.sh writes it there).
fn built_package() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("EDBSTRESS_DEB") {
        return Some(PathBuf::from(p));
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debian");
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .max_by_key(|p| fs::metadata(p).and_then(|m| m.modified()).ok())
}

const BASE_IMAGE: &str = "docker.io/library/debian:bookworm-slim";

#[test]
fn the_container_image_builds_from_the_debian_package_and_runs_edbstress() {
    let skip = |why: &str| {
        eprintln!(
            "\n!!!!!!!!!!\n!!! SKIPPED: {why} — the image of packaging/Containerfile was not built\n!!!!!!!!!!\n"
        )
    };
    let Some(podman) = which("podman") else {
        skip("podman is not installed (apt-get install podman)");
        return;
    };
    let present = Command::new(&podman)
        .args(["image", "exists", BASE_IMAGE])
        .status()
        .is_ok_and(|s| s.success());
    if !present {
        skip(&format!(
            "the base image {BASE_IMAGE} is not in podman's local storage (podman pull it)"
        ));
        return;
    }
    let Some(deb) = built_package() else {
        skip("no Debian package (run packaging/build-deb.sh, or set EDBSTRESS_DEB)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let context = tmp.path().join("context");
    fs::create_dir(&context).unwrap();
    fs::copy(&deb, context.join("edbstress.deb")).unwrap();
    let tag = format!("localhost/edbstress-test:{}", std::process::id());
    let out = Command::new(&podman)
        .args(["build", "--pull=never", "-f"])
        .arg(packaging().join("Containerfile"))
        .args(["--build-arg", "DEB=edbstress.deb", "-t", &tag])
        .arg(&context)
        .output()
        .unwrap();
    assert!(out.status.success(), "podman build: {}", text(&out));
    let run = Command::new(&podman)
        .args(["run", "--rm", "--network=none", &tag, "config", "show"])
        .args(["--mailboxes", "500", "--results-dir", "/results/mbx-2"])
        .output()
        .unwrap();
    // The image is ours: remove it whatever the run said.
    let _ = Command::new(&podman).args(["rmi", "-f", &tag]).status();
    assert!(run.status.success(), "podman run: {}", text(&run));
    assert!(stdout(&run).contains("results_dir = \"/results/mbx-2\""));
}
