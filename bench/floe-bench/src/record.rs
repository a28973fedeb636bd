//! Results as records: every line a run reports is kept (as well as printed), and `--record`
//! writes them with what makes a figure comparable (the date, the revision measured, the host
//! and the command that reproduces it) as one JSON file. Records are history; the book's
//! benchmarks page shows the current ones.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The lines this run has reported so far.
static REPORT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Prints one line of the run's report and keeps it for the record.
macro_rules! report {
    () => {
        $crate::record::line(String::new())
    };
    ($($arg:tt)*) => {
        $crate::record::line(format!($($arg)*))
    };
}
pub(crate) use report;

/// Prints `line` and keeps it.
pub fn line(line: String) {
    println!("{line}");
    REPORT.lock().expect("report lock").push(line);
}

/// Writes the record of this run into `dir` (created if missing) and answers its path:
/// `<date>-<command>-<revision>.json`. Its fields are the ones the book's benchmarks page and
/// `scripts/check-links` rely on: `date`, `revision`, `host`, `build`, `command`, `what` and
/// `figures` (the lines the run reported).
pub fn write(dir: &Path, command: &str, what: &str) -> Result<PathBuf, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?;
    let date = floe::events::rfc3339(now.as_millis() as u64);
    let revision = revision();
    let record = serde_json::json!({
        "date": date,
        "revision": revision,
        "host": host(),
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "what": what,
        "figures": *REPORT.lock().expect("report lock"),
    });
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let short: String = revision.chars().take(12).collect();
    let path = dir.join(format!("{}-{command}-{short}.json", &date[..10]));
    let text = serde_json::to_string_pretty(&record).map_err(|e| e.to_string())?;
    std::fs::write(&path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// The revision measured: `FLOE_REVISION`, else the checkout's commit (with `-dirty` when it
/// has changes), else `unknown`.
fn revision() -> String {
    if let Ok(given) = std::env::var("FLOE_REVISION") {
        return given;
    }
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(commit) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(changes) if !changes.is_empty() => format!("{commit}-dirty"),
            _ => commit,
        },
        None => "unknown".into(),
    }
}

/// The machine the figures come from.
fn host() -> serde_json::Value {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let memory_kib: u64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_default();
    serde_json::json!({
        "name": read("/proc/sys/kernel/hostname").trim(),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu": cpu,
        "memory-gib": memory_kib / (1024 * 1024),
    })
}
