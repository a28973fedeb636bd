//! `floe namespace delete --immediate --wait`: follows the purge of one namespace through the
//! management API's list of recoverable namespaces until the namespace is gone, showing the
//! objects deleted so far: one updating line on a terminal, a plain line per change otherwise.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use http::Method;
use serde_json::Value;

use super::session::Session;
use super::{EXIT_SERVER, Failure};

/// How often the namespace's state is read.
const POLL: Duration = Duration::from_millis(500);

pub async fn wait_for_purge(
    s: &Session,
    org: &str,
    namespace: &str,
    timeout: Duration,
) -> Result<(), Failure> {
    let terminal = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut shown: Option<String> = None;
    loop {
        let answer = s
            .call(
                Method::GET,
                &["orgs", org, "namespaces"],
                &[("deleted", "true")],
                None,
            )
            .await?;
        let listed: Value = serde_json::from_slice(&answer)
            .map_err(|e| Failure::new(EXIT_SERVER, format!("unexpected answer: {e}")))?;
        let entry = listed["namespaces"]
            .as_array()
            .and_then(|all| all.iter().find(|ns| ns["name"] == namespace))
            .cloned();
        let Some(entry) = entry else {
            if terminal && shown.is_some() {
                eprintln!();
            }
            eprintln!("Purged namespace {namespace}.");
            return Ok(());
        };
        let line = progress_line(namespace, &entry);
        if shown.as_deref() != Some(line.as_str()) {
            if terminal {
                eprint!("\r\x1b[2K{line}");
                let _ = std::io::stderr().flush();
            } else {
                eprintln!("{line}");
            }
            shown = Some(line);
        }
        if started.elapsed() >= timeout {
            if terminal {
                eprintln!();
            }
            return Err(Failure::new(
                EXIT_SERVER,
                format!(
                    "namespace {namespace} is not purged after {} s; it stays queued",
                    timeout.as_secs()
                ),
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// What the purge has done so far, as one line.
fn progress_line(namespace: &str, entry: &Value) -> String {
    let deleted = entry["objects_deleted"].as_u64().unwrap_or(0);
    let mut line = match entry["state"].as_str() {
        Some("purging") => format!("Purging {namespace}: {deleted} objects deleted"),
        _ => format!("Waiting for the purge of {namespace}"),
    };
    if let Some(error) = entry["purge_last_error"].as_str() {
        let attempts = entry["purge_attempts"].as_u64().unwrap_or(0);
        line.push_str(&format!(
            " (attempt {attempts} failed: {error}; retried later)"
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_line_names_the_state_and_the_count() {
        let waiting = json!({"name": "s", "state": "deleted"});
        assert_eq!(progress_line("s", &waiting), "Waiting for the purge of s");
        let purging = json!({"name": "s", "state": "purging", "objects_deleted": 1200});
        assert_eq!(
            progress_line("s", &purging),
            "Purging s: 1200 objects deleted"
        );
        let failed =
            json!({"state": "deleted", "purge_attempts": 2, "purge_last_error": "storage: x"});
        assert!(
            progress_line("s", &failed).ends_with("(attempt 2 failed: storage: x; retried later)")
        );
    }
}
