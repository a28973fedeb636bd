//! Each management command as its request and what it prints. With `--json` the answer's
//! bytes are printed as they came; otherwise the rendering of `output`, or a confirmation for
//! the empty (204) answers.

use http::Method;
use serde_json::{Value, json};

use super::session::{Session, parse, print_raw};
use super::{
    ApiClientsCommand, BucketsCommand, Command, EXIT_SERVER, Failure, GrantsCommand, MemberRole,
    MembersCommand, NamespaceCommand, OrgsCommand, TablesCommand, TeamsCommand, Visibility, output,
    word,
};

pub async fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Orgs {
            connection,
            command,
        } => orgs(&Session::open(&connection)?, command).await,
        Command::ApiClients {
            connection,
            command,
        } => api_clients(&Session::open(&connection)?, command).await,
        Command::Members {
            connection,
            command,
        } => members(&Session::open(&connection)?, command).await,
        Command::Teams {
            connection,
            command,
        } => teams(&Session::open(&connection)?, command).await,
        Command::Namespace {
            connection,
            command,
        } => namespace(&Session::open(&connection)?, command).await,
        Command::Tables {
            connection,
            command,
        } => tables(&Session::open(&connection)?, command).await,
        Command::Grants {
            connection,
            command,
        } => grants(&Session::open(&connection)?, command).await,
        Command::Buckets {
            connection,
            command,
        } => buckets(&Session::open(&connection)?, command).await,
        Command::Events {
            connection,
            command,
        } => super::events::run(&Session::open(&connection)?, command).await,
        Command::Whoami { connection } => {
            let s = Session::open(&connection)?;
            let answer = s.call(Method::GET, &["me"], &[], None).await?;
            s.show(&answer, output::me)
        }
    }
}

async fn orgs(s: &Session, command: OrgsCommand) -> Result<(), Failure> {
    let answer = match command {
        OrgsCommand::Create { name } => {
            s.call(Method::POST, &["orgs"], &[], Some(json!({"name": name})))
                .await?
        }
        OrgsCommand::Iceberg { org, enable, .. } => {
            s.call(
                Method::PATCH,
                &["orgs", &org],
                &[],
                Some(json!({"iceberg_enabled": enable})),
            )
            .await?
        }
    };
    s.show(&answer, output::org)
}

async fn api_clients(s: &Session, command: ApiClientsCommand) -> Result<(), Failure> {
    match command {
        ApiClientsCommand::Create {
            org,
            name,
            email,
            role,
        } => {
            let mut body = json!({"name": name, "role": word(role)});
            if let Some(email) = email {
                body["email"] = json!(email);
            }
            let answer = s
                .call(
                    Method::POST,
                    &["orgs", &org, "api-clients"],
                    &[],
                    Some(body),
                )
                .await?;
            if s.json {
                print_raw(&answer);
                return Ok(());
            }
            let client = parse(&answer)?;
            let token = client
                .get("token")
                .and_then(Value::as_str)
                .ok_or_else(|| Failure::new(EXIT_SERVER, "the server's answer holds no token"))?;
            eprintln!("{}", output::api_client_created(&client, &org));
            println!("{token}");
            Ok(())
        }
        ApiClientsCommand::List { org } => {
            let answer = s
                .call(Method::GET, &["orgs", &org, "api-clients"], &[], None)
                .await?;
            s.show(&answer, output::api_clients)
        }
        ApiClientsCommand::Delete { org, id } => {
            s.call(
                Method::DELETE,
                &["orgs", &org, "api-clients", &id],
                &[],
                None,
            )
            .await?;
            s.done(format!("Deleted api client {id} from org '{org}'."));
            Ok(())
        }
    }
}

async fn members(s: &Session, command: MembersCommand) -> Result<(), Failure> {
    let MembersCommand::Set {
        org,
        principal,
        role,
    } = command;
    s.call(
        Method::PUT,
        &["orgs", &org, "members", &principal],
        &[],
        Some(json!({"role": word(role)})),
    )
    .await?;
    s.done(match role {
        MemberRole::None => format!("{principal} is no longer a member of org '{org}'."),
        role => format!("{principal} has role {} in org '{org}'.", word(role)),
    });
    Ok(())
}

async fn teams(s: &Session, command: TeamsCommand) -> Result<(), Failure> {
    match command {
        TeamsCommand::Create { org, team } => {
            let answer = s
                .call(
                    Method::POST,
                    &["orgs", &org, "teams"],
                    &[],
                    Some(json!({"name": team})),
                )
                .await?;
            s.show(&answer, |_| {
                format!("Created team '{team}' in org '{org}'.")
            })
        }
        TeamsCommand::Show { org, team } => {
            let answer = s
                .call(Method::GET, &["orgs", &org, "teams", &team], &[], None)
                .await?;
            s.show(&answer, output::team)
        }
        TeamsCommand::Add {
            org,
            team,
            principal,
        } => {
            s.call(
                Method::PUT,
                &["orgs", &org, "teams", &team, "members", &principal],
                &[],
                None,
            )
            .await?;
            s.done(format!(
                "Added {principal} to team '{team}' of org '{org}'."
            ));
            Ok(())
        }
        TeamsCommand::Remove {
            org,
            team,
            principal,
        } => {
            s.call(
                Method::DELETE,
                &["orgs", &org, "teams", &team, "members", &principal],
                &[],
                None,
            )
            .await?;
            s.done(format!(
                "Removed {principal} from team '{team}' of org '{org}'."
            ));
            Ok(())
        }
    }
}

async fn tables(s: &Session, command: TablesCommand) -> Result<(), Failure> {
    match command {
        TablesCommand::Deleted { org, namespace } => {
            let answer = s
                .call(
                    Method::GET,
                    &["orgs", &org, "namespaces", &namespace, "deleted-tables"],
                    &[],
                    None,
                )
                .await?;
            s.show(&answer, output::dropped_tables)
        }
        TablesCommand::Restore {
            org,
            namespace,
            table_uuid,
            name,
        } => {
            let body = name.map(|name| json!({ "name": name }));
            let answer = s
                .call(
                    Method::POST,
                    &[
                        "orgs",
                        &org,
                        "namespaces",
                        &namespace,
                        "deleted-tables",
                        &table_uuid,
                        "restore",
                    ],
                    &[],
                    body,
                )
                .await?;
            let restored = super::session::parse(&answer)?;
            s.done(format!(
                "Restored table {namespace}.{} ({table_uuid}).",
                restored["name"].as_str().unwrap_or_default()
            ));
            if s.json {
                super::session::print_raw(&answer);
            }
            Ok(())
        }
        TablesCommand::Purge {
            org,
            namespace,
            table_uuid,
        } => {
            s.call(
                Method::DELETE,
                &[
                    "orgs",
                    &org,
                    "namespaces",
                    &namespace,
                    "deleted-tables",
                    &table_uuid,
                ],
                &[],
                None,
            )
            .await?;
            s.done(format!(
                "Dropped table {table_uuid} of {namespace} can no longer be restored; the purge deletes it on its next run."
            ));
            Ok(())
        }
        TablesCommand::Maintain {
            org,
            namespace,
            table,
            dry_run,
            verbose,
        } => {
            let query = set_flags(&[("dry_run", dry_run), ("verbose", verbose)]);
            let answer = s
                .call(
                    Method::POST,
                    &[
                        "orgs",
                        &org,
                        "namespaces",
                        &namespace,
                        "tables",
                        &table,
                        "maintain",
                    ],
                    &query,
                    None,
                )
                .await?;
            s.show(&answer, output::maintenance_report)
        }
        TablesCommand::Maintenance {
            org,
            namespace,
            table,
            set,
            unset,
        } => {
            let (updates, removals) = maintenance_changes(&set, &unset)?;
            if !updates.is_empty() || !removals.is_empty() {
                let mut changes = Vec::new();
                if !updates.is_empty() {
                    changes.push(json!({"action": "set-properties", "updates": updates}));
                }
                if !removals.is_empty() {
                    changes.push(json!({"action": "remove-properties", "removals": removals}));
                }
                s.call_iceberg(
                    Method::POST,
                    &[&org, "namespaces", &namespace, "tables", &table],
                    Some(json!({"requirements": [], "updates": changes})),
                )
                .await?;
            }
            let answer = s
                .call(
                    Method::GET,
                    &[
                        "orgs",
                        &org,
                        "namespaces",
                        &namespace,
                        "tables",
                        &table,
                        "maintenance",
                    ],
                    &[],
                    None,
                )
                .await?;
            s.show(&answer, output::maintenance_settings)
        }
    }
}

/// The properties `--set KEY=VALUE` and `--unset KEY` change, refused before anything is sent
/// when a key is no maintenance key (the server checks the values).
fn maintenance_changes(
    set: &[String],
    unset: &[String],
) -> Result<(serde_json::Map<String, Value>, Vec<String>), Failure> {
    use floe::catalog::maintenance_policy::KEYS;
    let known = |key: &str| {
        if KEYS.contains(&key) {
            Ok(())
        } else {
            Err(Failure::new(
                super::EXIT_USAGE,
                format!(
                    "'{key}' is no maintenance key; the keys are {}",
                    KEYS.join(", ")
                ),
            ))
        }
    };
    let mut updates = serde_json::Map::new();
    for pair in set {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(Failure::new(
                super::EXIT_USAGE,
                format!("--set takes KEY=VALUE, not '{pair}'"),
            ));
        };
        known(key)?;
        updates.insert(key.to_owned(), Value::String(value.to_owned()));
    }
    for key in unset {
        known(key)?;
    }
    Ok((updates, unset.to_vec()))
}

async fn namespace(s: &Session, command: NamespaceCommand) -> Result<(), Failure> {
    let answer = match command {
        NamespaceCommand::Maintenance {
            org,
            namespace,
            set,
            unset,
        } => {
            let (updates, removals) = maintenance_changes(&set, &unset)?;
            let answer = s
                .call_iceberg(
                    Method::POST,
                    &[&org, "namespaces", &namespace, "properties"],
                    Some(json!({"updates": updates, "removals": removals})),
                )
                .await?;
            s.done(format!(
                "Maintenance defaults of namespace {namespace} changed."
            ));
            if s.json {
                super::session::print_raw(&answer);
            }
            return Ok(());
        }
        NamespaceCommand::List { org, deleted } => {
            let query: &[(&str, &str)] = if deleted { &[("deleted", "true")] } else { &[] };
            let answer = s
                .call(Method::GET, &["orgs", &org, "namespaces"], query, None)
                .await?;
            return s.show(&answer, output::namespaces);
        }
        NamespaceCommand::Delete {
            org,
            namespace,
            immediate,
            retain_data,
            wait,
            timeout_secs,
        } => {
            let query = set_flags(&[("immediate", immediate), ("retain_data", retain_data)]);
            s.call(
                Method::DELETE,
                &["orgs", &org, "namespaces", &namespace],
                &query,
                None,
            )
            .await?;
            s.done(match (immediate, retain_data) {
                (_, true) => format!(
                    "Removed namespace {namespace}; its name is free and its data stays in place."
                ),
                (true, _) => format!("Deleted namespace {namespace}; the purge takes it now."),
                _ => format!(
                    "Deleted namespace {namespace}; `floe namespace restore {org} {namespace}` brings it back for seven days."
                ),
            });
            if wait {
                super::purge_wait::wait_for_purge(
                    s,
                    &org,
                    &namespace,
                    std::time::Duration::from_secs(timeout_secs),
                )
                .await?;
            }
            return Ok(());
        }
        NamespaceCommand::Restore { org, namespace } => {
            let answer = s
                .call(
                    Method::POST,
                    &["orgs", &org, "namespaces", &namespace, "restore"],
                    &[],
                    None,
                )
                .await?;
            return s.show(&answer, output::namespace_status);
        }
        NamespaceCommand::Show { org, namespace } => {
            s.call(
                Method::GET,
                &["orgs", &org, "namespaces", &namespace],
                &[],
                None,
            )
            .await?
        }
        NamespaceCommand::Set {
            org,
            namespace,
            visibility,
            description,
            metadata,
        } => {
            let mut patch = serde_json::Map::new();
            if let Some(visibility) = visibility {
                let api = match visibility {
                    Visibility::Private => "PRIVATE",
                    Visibility::Public => "AUTHENTICATED_PUBLIC",
                };
                patch.insert("visibility".into(), json!(api));
            }
            if let Some(description) = description {
                patch.insert("description".into(), json!(description));
            }
            if let Some(metadata) = metadata {
                patch.insert("metadata".into(), Value::Object(metadata));
            }
            s.call(
                Method::PATCH,
                &["orgs", &org, "namespaces", &namespace],
                &[],
                Some(Value::Object(patch)),
            )
            .await?
        }
    };
    s.show(&answer, output::namespace)
}

async fn grants(s: &Session, command: GrantsCommand) -> Result<(), Failure> {
    match command {
        GrantsCommand::List { org, namespace } => {
            let answer = s
                .call(
                    Method::GET,
                    &["orgs", &org, "namespaces", &namespace, "grants"],
                    &[],
                    None,
                )
                .await?;
            s.show(&answer, output::grants)
        }
        GrantsCommand::Set {
            org,
            namespace,
            principal,
            action,
            table,
        } => {
            s.call(
                Method::PUT,
                &["orgs", &org, "namespaces", &namespace, "grants"],
                &[],
                Some(json!({"principal": principal, "action": word(action), "table": table})),
            )
            .await?;
            s.done(format!(
                "Granted {} on {} to {principal}.",
                word(action),
                grain(&namespace, table.as_deref())
            ));
            Ok(())
        }
        GrantsCommand::Remove {
            org,
            namespace,
            principal,
            table,
        } => {
            let mut query = vec![("principal", principal.as_str())];
            if let Some(table) = &table {
                query.push(("table", table.as_str()));
            }
            s.call(
                Method::DELETE,
                &["orgs", &org, "namespaces", &namespace, "grants"],
                &query,
                None,
            )
            .await?;
            s.done(format!(
                "Removed the grant of {principal} on {}.",
                grain(&namespace, table.as_deref())
            ));
            Ok(())
        }
    }
}

fn grain(namespace: &str, table: Option<&str>) -> String {
    match table {
        Some(table) => format!("table {namespace}.{table}"),
        None => format!("namespace {namespace}"),
    }
}

/// Where `floe buckets add --access-key-id` reads the secret of static keys.
const BUCKET_SECRET_VARIABLE: &str = "FLOE_BUCKET_SECRET";

async fn buckets(s: &Session, command: BucketsCommand) -> Result<(), Failure> {
    match command {
        BucketsCommand::Add {
            org,
            nickname,
            bucket,
            platform,
            prefix,
            region,
            endpoint,
            path_style,
            role_arn,
            access_key_id,
            static_keys_to_writers,
            anonymous,
            service_account,
        } => {
            let auth = match (role_arn, access_key_id, anonymous || service_account) {
                (None, None, true) if service_account => json!({"type": "service_account"}),
                (Some(role_arn), None, false) => {
                    json!({"type": "customer_managed_role", "role_arn": role_arn})
                }
                (None, Some(access_key_id), false) => {
                    let secret = std::env::var(BUCKET_SECRET_VARIABLE)
                        .ok()
                        .filter(|s| !s.is_empty())
                        .ok_or_else(|| {
                            Failure::new(
                                2,
                                format!(
                                    "set {BUCKET_SECRET_VARIABLE} to the secret access key of {access_key_id}"
                                ),
                            )
                        })?;
                    json!({"type": "hmac", "access_key_id": access_key_id,
                        "secret_access_key": secret})
                }
                (None, None, true) => json!({"type": "anonymous"}),
                _ => {
                    return Err(Failure::new(
                        2,
                        "name how Floe reaches the bucket: --role-arn ARN, --access-key-id ID \
                         (secret in FLOE_BUCKET_SECRET), --service-account (gcs) or --anonymous",
                    ));
                }
            };
            let body = json!({
                "nickname": nickname, "platform": word(platform), "bucket": bucket,
                "prefix": prefix, "region": region, "endpoint": endpoint,
                "path_style": path_style, "auth": auth,
                "static_keys_to_writers": static_keys_to_writers,
            });
            let answer = s
                .call(Method::POST, &["orgs", &org, "buckets"], &[], Some(body))
                .await?;
            s.show(&answer, output::bucket)
        }
        BucketsCommand::List { org } => {
            let answer = s
                .call(Method::GET, &["orgs", &org, "buckets"], &[], None)
                .await?;
            s.show(&answer, output::buckets)
        }
        BucketsCommand::Show { org, nickname } => {
            let answer = s
                .call(
                    Method::GET,
                    &["orgs", &org, "buckets", &nickname],
                    &[],
                    None,
                )
                .await?;
            s.show(&answer, output::bucket)
        }
        BucketsCommand::Remove { org, nickname } => {
            s.call(
                Method::DELETE,
                &["orgs", &org, "buckets", &nickname],
                &[],
                None,
            )
            .await?;
            s.done(format!(
                "Removed bucket configuration {nickname} from {org}."
            ));
            Ok(())
        }
        BucketsCommand::Default { org, nickname } => {
            s.call(
                Method::PUT,
                &["orgs", &org, "default-bucket"],
                &[],
                Some(json!({"nickname": nickname})),
            )
            .await?;
            s.done(format!("{org} now places new namespaces on {nickname}."));
            Ok(())
        }
    }
}

/// The query of a route's boolean flags: `name=true` for each one set, nothing for the others.
fn set_flags(flags: &[(&'static str, bool)]) -> Vec<(&'static str, &'static str)> {
    flags
        .iter()
        .filter(|(_, set)| *set)
        .map(|(name, _)| (*name, "true"))
        .collect()
}
