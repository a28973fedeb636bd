//! Human renderings of the management API's answers: aligned tables and `key  value` lines.
//! They read the JSON loosely (a missing field prints empty) so a newer server's extra fields
//! never break an older `floe`; `--json` is the exact form for scripts.

use serde_json::Value;

/// A field as text: strings as they are, null or missing as empty, anything else as JSON.
fn text(value: &Value, key: &str) -> String {
    match value.get(key) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn items<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Left-aligned columns, two spaces apart, with an upper-case header row.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  "));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = vec![line(headers.to_vec())];
    out.extend(
        rows.iter()
            .map(|row| line(row.iter().map(String::as_str).collect())),
    );
    out.join("\n")
}

/// `key  value` lines with the keys aligned.
fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| format!("{k:<width$}  {v}").trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `POST /orgs`, `PATCH /orgs/{org}`.
pub fn org(org: &Value) -> String {
    let iceberg = match org.get("iceberg_enabled").and_then(Value::as_bool) {
        Some(true) => "enabled",
        Some(false) => "disabled",
        None => "unknown",
    };
    format!("org '{}': Iceberg {iceberg}", text(org, "name"))
}

/// What `api-clients create` says on stderr; the token itself goes alone to stdout.
pub fn api_client_created(client: &Value, org: &str) -> String {
    format!(
        "Created api client {} ('{}', role {}) in org '{org}', principal {}.\n\
         Its token follows on stdout. It is shown only this once: store it now.",
        text(client, "id"),
        text(client, "name"),
        text(client, "role"),
        text(client, "principal"),
    )
}

/// `GET /orgs/{org}/api-clients`.
pub fn api_clients(answer: &Value) -> String {
    let rows: Vec<Vec<String>> = items(answer, "api_clients")
        .iter()
        .map(|c| {
            vec![
                text(c, "id"),
                text(c, "name"),
                text(c, "email"),
                text(c, "role"),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "No api clients.".into();
    }
    table(&["ID", "NAME", "EMAIL", "ROLE"], &rows)
}

/// `GET /orgs/{org}/teams/{team}`.
pub fn team(team: &Value) -> String {
    let members = items(team, "members");
    let mut out = format!(
        "team '{}': {} member{}",
        text(team, "name"),
        members.len(),
        if members.len() == 1 { "" } else { "s" }
    );
    for member in members {
        out.push_str("\n  ");
        out.push_str(member.as_str().unwrap_or_default());
    }
    out
}

/// `GET` and `PATCH /orgs/{org}/namespaces/{namespace}`.
pub fn namespace(ns: &Value) -> String {
    let metadata = ns
        .get("metadata")
        .filter(|m| m.as_object().is_some_and(|m| !m.is_empty()))
        .map(Value::to_string)
        .unwrap_or_default();
    fields(&[
        ("name", text(ns, "name")),
        ("visibility", text(ns, "visibility")),
        ("bucket", text(ns, "bucket")),
        ("location", text(ns, "location")),
        ("description", text(ns, "description")),
        ("metadata", metadata),
    ])
}

/// `GET /orgs/{org}/namespaces/{namespace}/grants`; namespace-grain grants show `*` as table.
pub fn grants(answer: &Value) -> String {
    let rows: Vec<Vec<String>> = items(answer, "grants")
        .iter()
        .map(|g| {
            let table = match text(g, "table") {
                t if t.is_empty() => "*".to_owned(),
                t => t,
            };
            vec![text(g, "principal"), text(g, "action"), table]
        })
        .collect();
    if rows.is_empty() {
        return "No grants.".into();
    }
    table(&["PRINCIPAL", "ACTION", "TABLE"], &rows)
}

/// `GET /me`.
pub fn me(me: &Value) -> String {
    let service_admin = if me.get("service_admin").and_then(Value::as_bool) == Some(true) {
        "yes"
    } else {
        "no"
    };
    let mut out = fields(&[
        ("principal", text(me, "principal")),
        ("name", text(me, "name")),
        ("email", text(me, "email")),
        ("service admin", service_admin.to_owned()),
    ]);
    let roles = me.get("org_roles").and_then(Value::as_object);
    let rows: Vec<Vec<String>> = roles
        .into_iter()
        .flatten()
        .map(|(org, role)| {
            let teams = me
                .get("teams")
                .and_then(|t| t.get(org))
                .and_then(Value::as_array)
                .map(|teams| {
                    teams
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            vec![
                org.clone(),
                role.as_str().unwrap_or_default().to_owned(),
                teams,
            ]
        })
        .collect();
    out.push_str("\n\n");
    if rows.is_empty() {
        out.push_str("No org memberships.");
    } else {
        out.push_str(&table(&["ORG", "ROLE", "TEAMS"], &rows));
    }
    out
}

/// One bucket configuration: where it is, how Floe reaches it, and the external id a role's
/// trust policy must name.
pub fn bucket(bucket: &Value) -> String {
    let auth = bucket.get("auth").cloned().unwrap_or(Value::Null);
    let mut pairs = vec![
        ("nickname", text(bucket, "nickname")),
        ("platform", text(bucket, "platform")),
        ("bucket", text(bucket, "bucket")),
        ("prefix", text(bucket, "prefix")),
        ("region", text(bucket, "region")),
        ("endpoint", text(bucket, "endpoint")),
        ("default", text(bucket, "default")),
        ("auth", text(&auth, "type")),
    ];
    for key in ["role_arn", "external_id", "access_key_id"] {
        if auth.get(key).is_some() {
            pairs.push((key, text(&auth, key)));
        }
    }
    fields(&pairs)
}

/// The org's bucket configurations, one per line.
pub fn buckets(answer: &Value) -> String {
    let rows: Vec<Vec<String>> = items(answer, "buckets")
        .iter()
        .map(|b| {
            let auth = b.get("auth").cloned().unwrap_or(Value::Null);
            vec![
                text(b, "nickname"),
                text(b, "platform"),
                format!("{}/{}", text(b, "bucket"), text(b, "prefix"))
                    .trim_end_matches('/')
                    .to_owned(),
                text(&auth, "type"),
                if b.get("default") == Some(&Value::Bool(true)) {
                    "yes".into()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    table(&["NICKNAME", "PLATFORM", "WHERE", "AUTH", "DEFAULT"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_columns() {
        let rendered = table(
            &["PRINCIPAL", "ACTION", "TABLE"],
            &[
                vec!["user:alice".into(), "write".into(), "*".into()],
                vec!["team:data".into(), "read".into(), "orders".into()],
            ],
        );
        assert_eq!(
            rendered,
            "PRINCIPAL   ACTION  TABLE\nuser:alice  write   *\nteam:data   read    orders"
        );
    }

    #[test]
    fn grants_show_namespace_grain_as_a_star() {
        let answer =
            json!({"grants": [{"principal": "user:a", "action": "manage", "table": null}]});
        assert!(grants(&answer).ends_with("user:a     manage  *"));
        assert_eq!(grants(&json!({"grants": []})), "No grants.");
    }

    #[test]
    fn whoami_lists_roles_with_teams() {
        let rendered = me(&json!({
            "principal": "api_client:1", "name": "etl", "email": null, "service_admin": false,
            "org_roles": {"demo": "write"}, "teams": {"demo": ["data", "ops"]}
        }));
        assert!(rendered.contains("principal      api_client:1"));
        assert!(rendered.contains("service admin  no"));
        assert!(rendered.ends_with("ORG   ROLE   TEAMS\ndemo  write  data,ops"));
    }
}

/// A time in epoch milliseconds as UTC `YYYY-MM-DD HH:MM:SS`, empty when absent.
fn time(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_i64)
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

/// The org's namespaces with their lifecycle state, one per line.
pub fn namespaces(answer: &Value) -> String {
    let rows: Vec<Vec<String>> = items(answer, "namespaces")
        .iter()
        .map(|ns| {
            vec![
                text(ns, "name"),
                text(ns, "state"),
                text(ns, "bucket"),
                time(ns, "deleted_ms"),
                time(ns, "purge_at_ms"),
            ]
        })
        .collect();
    table(
        &["NAME", "STATE", "BUCKET", "DELETED (UTC)", "PURGE (UTC)"],
        &rows,
    )
}

/// A namespace's dropped tables.
pub fn dropped_tables(answer: &Value) -> String {
    let rows: Vec<Vec<String>> = items(answer, "tables")
        .iter()
        .map(|t| {
            vec![
                text(t, "name"),
                text(t, "table-uuid"),
                text(t, "state"),
                text(t, "dropped-at"),
                text(t, "purge-at"),
                if t["purges-files"] == Value::Bool(false) {
                    "kept".into()
                } else {
                    "deleted".into()
                },
            ]
        })
        .collect();
    table(
        &["NAME", "TABLE UUID", "STATE", "DROPPED", "PURGE", "FILES"],
        &rows,
    )
}

/// One namespace's lifecycle state.
pub fn namespace_status(ns: &Value) -> String {
    fields(&[
        ("name", text(ns, "name")),
        ("state", text(ns, "state")),
        ("bucket", text(ns, "bucket")),
        ("location", text(ns, "location")),
        ("visibility", text(ns, "visibility")),
    ])
}

#[cfg(test)]
mod time_tests {
    use super::*;

    #[test]
    fn epoch_milliseconds_print_as_utc() {
        let at = |ms: u64| time(&serde_json::json!({ "t": ms }), "t");
        assert_eq!(at(0), "1970-01-01 00:00:00");
        assert_eq!(at(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(at(1_796_083_199_000), "2026-11-30 23:59:59");
        assert_eq!(time(&serde_json::json!({}), "t"), "");
    }
}

/// `reason count` pairs of a report's map, as `a 3, b 1`.
fn counts(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(reason, n)| format!("{reason} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// One table's maintenance run, then (verbose) every file with its verdict.
pub fn maintenance_report(report: &Value) -> String {
    let mut out = fields(&[
        ("dry run", text(report, "dry-run")),
        ("snapshots expired", text(report, "snapshots-expired")),
        ("refs removed", {
            let refs: Vec<String> = items(report, "refs-removed")
                .iter()
                .filter_map(|r| r.as_str().map(str::to_owned))
                .collect();
            refs.join(", ")
        }),
        ("files deleted", text(report, "files-deleted")),
        ("bytes deleted", text(report, "bytes-deleted")),
        ("deleted by reason", counts(report, "deleted-by-reason")),
        ("files kept", text(report, "files-kept")),
        ("kept by reason", counts(report, "kept-by-reason")),
        ("skipped", text(report, "skipped")),
        ("error", text(report, "error")),
    ]);
    let mut rows: Vec<Vec<String>> = items(report, "deleted-files")
        .iter()
        .map(|f| vec!["delete".into(), text(f, "reason"), text(f, "location")])
        .collect();
    rows.extend(
        items(report, "kept-files")
            .iter()
            .map(|f| vec!["keep".into(), text(f, "reason"), text(f, "location")]),
    );
    if !rows.is_empty() {
        out.push_str("\n\n");
        out.push_str(&table(&["VERDICT", "REASON", "LOCATION"], &rows));
    }
    out
}

/// A table's maintenance settings: each key, its value in force and where it comes from.
pub fn maintenance_settings(answer: &Value) -> String {
    let rows: Vec<Vec<String>> = items(answer, "settings")
        .iter()
        .map(|s| {
            let value = text(s, "value");
            vec![
                text(s, "key"),
                if value.is_empty() {
                    "(default)".into()
                } else {
                    value
                },
                text(s, "source"),
            ]
        })
        .collect();
    let mut out = table(&["KEY", "VALUE", "SOURCE"], &rows);
    if let Some(last) = answer.get("last-run") {
        out.push_str("\n\n");
        out.push_str(&fields(&[
            ("last run (ms)", text(last, "last-run-ms")),
            ("failures", text(last, "failures")),
            ("last error", text(last, "last-error")),
        ]));
    }
    out
}
