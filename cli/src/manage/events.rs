//! `floe events tail`: an org's change events in a terminal, following new ones.
//!
//! It pages through `GET /api/v1/orgs/{org}/events` with the answer's `next-token`, and waits
//! `--interval-ms` whenever a page comes back empty. A token that fell past the retention (410)
//! is reported on stderr and the tail starts again at the oldest event kept: some events were
//! lost to it, and it says so rather than stopping.

use std::time::Duration;

use http::Method;
use serde_json::Value;

use super::session::{Session, parse};
use super::{EXIT_GONE, EventsCommand, Failure};

const PAGE: &str = "1000";

pub(super) async fn run(s: &Session, command: EventsCommand) -> Result<(), Failure> {
    let EventsCommand::Tail {
        org,
        all,
        after,
        interval_ms,
        once,
    } = command;
    let mut token = match (all, after) {
        (true, _) => None,
        (false, Some(after)) => Some(after),
        // From now: skip what is there without printing it.
        (false, None) => Some(skip_to_now(s, &org).await?),
    };
    if !once {
        // On stderr, so that stdout holds events only; it also tells a script that the tail has
        // taken its position and sees everything from here on.
        eprintln!(
            "Following the events of {org} after {}; Ctrl-C stops",
            token.as_deref().unwrap_or("none (from the oldest kept)")
        );
    }
    loop {
        let page = match fetch(s, &org, token.as_deref()).await {
            Ok(page) => page,
            Err(failure) if failure.code == EXIT_GONE => {
                eprintln!(
                    "warning: events after {} are past the retention and were lost; starting again at the oldest kept",
                    token.as_deref().unwrap_or("the start")
                );
                token = None;
                continue;
            }
            Err(failure) => return Err(failure),
        };
        let events = page["events"].as_array().cloned().unwrap_or_default();
        for event in &events {
            if s.json {
                println!("{event}");
            } else {
                println!("{}", line(event));
            }
        }
        let next = page["next-token"].as_str().map(str::to_owned);
        let moved = next != token;
        token = next;
        if events.is_empty() && !moved {
            if once {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(interval_ms.max(50))).await;
        }
    }
}

async fn fetch(s: &Session, org: &str, after: Option<&str>) -> Result<Value, Failure> {
    let mut query = vec![("limit", PAGE)];
    if let Some(after) = after {
        query.push(("after", after));
    }
    let answer = s
        .call(Method::GET, &["orgs", org, "events"], &query, None)
        .await?;
    parse(&answer)
}

/// The token after the newest event there is now.
async fn skip_to_now(s: &Session, org: &str) -> Result<String, Failure> {
    let mut token: Option<String> = None;
    loop {
        let page = fetch(s, org, token.as_deref()).await?;
        let next = page["next-token"].as_str().map(str::to_owned);
        if next == token {
            return Ok(next.unwrap_or_else(|| "0".into()));
        }
        token = next;
    }
}

/// One event as a line: sequence, time, what, where, who.
fn line(event: &Value) -> String {
    let data = &event["data"];
    let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
    let kind = text(&event["type"]);
    let what = kind.strip_prefix("io.floe.").unwrap_or(&kind).to_owned();
    let mut where_ = text(&data["namespace"]);
    if let Some(table) = data["table"].as_str() {
        where_ = format!("{where_}.{table}");
    }
    let mut details = Vec::new();
    if let Some(count) = data["added-snapshot-count"].as_u64() {
        details.push(format!("+{count} snapshot(s)"));
    }
    if let Some(to) = data["renamed-to"].as_object() {
        details.push(format!(
            "-> {}.{}",
            to.get("namespace").and_then(Value::as_str).unwrap_or(""),
            to.get("table").and_then(Value::as_str).unwrap_or("")
        ));
    }
    if let Some(grant) = data["grant"].as_object() {
        let action = grant
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or("revoked");
        details.push(format!(
            "{} {action}",
            grant.get("principal").and_then(Value::as_str).unwrap_or("")
        ));
    }
    if let Some(visibility) = data["visibility"].as_str() {
        details.push(visibility.to_owned());
    }
    let by = data["principal"]["email"]
        .as_str()
        .or(data["principal"]["name"].as_str())
        .unwrap_or("");
    format!(
        "#{} {} {what} {where_}{}{} by {by}",
        data["sequence"],
        text(&event["time"]),
        if details.is_empty() { "" } else { " " },
        details.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_line_says_what_where_and_who() {
        let event = json!({"type": "io.floe.table.committed", "time": "2026-11-30T12:00:00.000Z",
            "data": {"sequence": 7, "namespace": "sales", "table": "orders",
                     "added-snapshot-count": 2, "principal": {"id": "user:a", "name": "Ann", "email": "ann@x.io"}}});
        assert_eq!(
            line(&event),
            "#7 2026-11-30T12:00:00.000Z table.committed sales.orders +2 snapshot(s) by ann@x.io"
        );
    }
}
