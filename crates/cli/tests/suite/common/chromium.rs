//! Headless Chromium for what a person sees: find it (or skip loudly when
//! `EDBSTRESS_SKIP_CHROMIUM=1`), take a screenshot, dump the rendered DOM, read PNG
//! pixels.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The Chromium binary: `EDBSTRESS_CHROMIUM`, else the first of the usual names on PATH.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("EDBSTRESS_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        for d in std::env::split_paths(&path) {
            if d.join(name).is_file() {
                return Some(d.join(name));
            }
        }
    }
    None
}

/// Chromium, or `None` after a loud skip notice when `EDBSTRESS_SKIP_CHROMIUM=1`;
/// panics with how to install it otherwise.
pub fn chromium_or_skip(what: &str) -> Option<PathBuf> {
    if let Some(c) = find_chromium() {
        return Some(c);
    }
    let msg = format!(
        "chromium is not installed: {what} could not be rendered to check it. Install it \
         (apt-get install chromium) or set EDBSTRESS_SKIP_CHROMIUM=1 to skip."
    );
    if std::env::var("EDBSTRESS_SKIP_CHROMIUM").as_deref() == Ok("1") {
        eprintln!("\n!!!!!!!!!!\n!!! SKIPPED: {msg}\n!!!!!!!!!!\n");
        return None;
    }
    panic!("{msg}");
}

fn headless(chromium: &Path, profile: &Path) -> Command {
    let mut c = Command::new(chromium);
    c.args([
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--hide-scrollbars",
        "--no-first-run",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// Waits for `child`, killing it after two minutes.
fn wait(mut child: std::process::Child, what: &str) {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {what} within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Renders `html` at `width` × `height` into `png` (a profile directory is made
/// beside it).
pub fn screenshot(chromium: &Path, html: &Path, png: &Path, width: u32, height: u32) {
    let child = headless(chromium, &png.with_extension("profile"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    wait(child, "the screenshot");
    assert!(png.is_file(), "chromium wrote no screenshot");
}

/// The DOM of `html` after Chromium rendered it.
pub fn dump_dom(chromium: &Path, html: &Path, profile: &Path) -> String {
    let out = headless(chromium, profile)
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .stderr(Stdio::null())
        .output()
        .expect("start chromium");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// RGB pixels of a PNG, with its width and height.
pub fn decode_png(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let mut decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bytes = &buf[..info.buffer_size()];
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    let pixels = bytes
        .chunks_exact(channels)
        .map(|p| {
            if channels < 3 {
                [p[0], p[0], p[0]]
            } else {
                [p[0], p[1], p[2]]
            }
        })
        .collect();
    (info.width, info.height, pixels)
}

/// Whether two colours are within `tolerance` per channel.
pub fn near(p: [u8; 3], c: [u8; 3], tolerance: i32) -> bool {
    p.iter()
        .zip(c)
        .all(|(a, b)| (i32::from(*a) - i32::from(b)).abs() <= tolerance)
}
