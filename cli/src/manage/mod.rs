//! `floe orgs | api-clients | members | teams | namespace | grants | buckets | whoami`: the
//! management
//! API (`/api/v1`) from the command line.
//!
//! Every command is one HTTP request; its outcome is an exit code scripts can branch on (see
//! [`EXIT_CODES`]), the answer a short human rendering or, with `--json`, the API's JSON as it
//! came.

mod client;
mod commands;
mod events;
mod output;
mod purge_wait;
mod session;

use std::process::ExitCode;

use clap::{ArgGroup, Subcommand, ValueEnum};
use serde_json::{Map, Value};

pub use client::Connection;

/// The exit codes, as `--help` shows them: a script tells "no such team" from "not allowed"
/// without parsing messages.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  failure on this machine (an unreadable token file, a data directory in use)
  2  usage error: the command line does not parse or a value is invalid
  3  not authenticated (HTTP 401, or no token found)
  4  forbidden (HTTP 403)
  5  not found (HTTP 404)
  6  conflict, already exists (HTTP 409)
  7  bad request (HTTP 400 and any other 4xx)
  8  server or network error (HTTP 5xx, unreachable server, timeout, unreadable answer)
  9  gone (HTTP 410): change events past their retention";

/// Why a management command failed, with the exit code that says so.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

/// Exit code of a failure on this machine, before any request.
pub const EXIT_LOCAL: u8 = 1;
/// Exit code of a missing or refused token.
pub const EXIT_UNAUTHENTICATED: u8 = 3;
/// Exit code of a token past the events' retention (410).
pub const EXIT_GONE: u8 = 9;
/// Exit code of server, network and protocol failures.
pub const EXIT_SERVER: u8 = 8;
/// Usage errors found after parsing share clap's exit code.
pub const EXIT_USAGE: u8 = 2;

/// The exit code for an HTTP status the API answered with.
pub fn exit_code(status: u16) -> u8 {
    match status {
        401 => EXIT_UNAUTHENTICATED,
        403 => 4,
        404 => 5,
        409 => 6,
        410 => EXIT_GONE,
        400..=499 => 7,
        _ => EXIT_SERVER,
    }
}

/// The management command groups; flattened into `floe`'s own commands.
#[derive(Subcommand)]
pub enum Command {
    /// Create orgs and switch Iceberg on or off (service administrators).
    #[command(after_help = EXIT_CODES)]
    Orgs {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: OrgsCommand,
    },
    /// Create, list and delete an org's api clients (org admins).
    #[command(after_help = EXIT_CODES)]
    ApiClients {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: ApiClientsCommand,
    },
    /// Set or end a principal's org role (org admins).
    #[command(after_help = EXIT_CODES)]
    Members {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: MembersCommand,
    },
    /// Create teams, show them and change their members.
    #[command(after_help = EXIT_CODES)]
    Teams {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: TeamsCommand,
    },
    /// Show and change a namespace's visibility, description and metadata.
    #[command(after_help = EXIT_CODES)]
    Namespace {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: NamespaceCommand,
    },
    /// List a namespace's dropped tables, restore one or purge one now.
    #[command(after_help = EXIT_CODES)]
    Tables {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: TablesCommand,
    },
    /// List, set and remove grants on a namespace and its tables.
    #[command(after_help = EXIT_CODES)]
    Grants {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: GrantsCommand,
    },
    /// Add, list, show and remove an org's bucket configurations, and pick the default (org
    /// admins).
    #[command(after_help = EXIT_CODES)]
    Buckets {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: BucketsCommand,
    },
    /// Follow an org's change events (CloudEvents) as they happen.
    #[command(after_help = EXIT_CODES)]
    Events {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: EventsCommand,
    },
    /// Show the caller: principal, name, email, org roles and teams.
    #[command(after_help = EXIT_CODES)]
    Whoami {
        #[command(flatten)]
        connection: Connection,
    },
}

#[derive(Subcommand)]
pub enum EventsCommand {
    /// Print the org's change events the caller may see, one line each (with --json, one
    /// CloudEvent per line), then follow new ones until interrupted.
    Tail {
        org: String,
        /// Start at the oldest event kept instead of now.
        #[arg(long, conflicts_with = "after")]
        all: bool,
        /// Start after this token (a `next-token`, or the `id` of the last event seen).
        #[arg(long)]
        after: Option<String>,
        /// Milliseconds between looks for new events.
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
        /// Stop once every event so far is printed instead of following.
        #[arg(long)]
        once: bool,
    },
}

#[derive(Subcommand)]
pub enum OrgsCommand {
    /// Create an org (Iceberg enabled).
    Create {
        /// Name of the new org; it is also its warehouse name.
        name: String,
    },
    /// Turn Iceberg on or off for an org.
    #[command(group(ArgGroup::new("switch").required(true).args(["enable", "disable"])))]
    Iceberg {
        org: String,
        /// Serve the Iceberg routes for this org.
        #[arg(long)]
        enable: bool,
        /// Refuse the Iceberg routes for this org (403).
        #[arg(long)]
        disable: bool,
    },
}

#[derive(Subcommand)]
pub enum ApiClientsCommand {
    /// Create an api client; its token is printed once, alone on stdout.
    Create {
        org: String,
        /// Display name.
        #[arg(long)]
        name: String,
        /// Email stamped as snapshot author on its commits.
        #[arg(long)]
        email: Option<String>,
        /// Org role; `none` makes a client that reads only what it is granted.
        #[arg(long, value_enum)]
        role: ClientRole,
    },
    /// List the org's api clients (never their tokens).
    List { org: String },
    /// Delete an api client; its token stops working.
    Delete {
        org: String,
        /// The api client's id (without `api_client:`).
        id: String,
    },
}

#[derive(Subcommand)]
pub enum MembersCommand {
    /// Set a principal's org role; `none` ends its membership.
    Set {
        org: String,
        /// `user:<sub>` or `api_client:<id>`.
        principal: String,
        #[arg(long, value_enum)]
        role: MemberRole,
    },
}

#[derive(Subcommand)]
pub enum TeamsCommand {
    /// Create a team.
    Create { org: String, team: String },
    /// Show a team and its members.
    Show { org: String, team: String },
    /// Add a user or api client to a team.
    Add {
        org: String,
        team: String,
        /// `user:<sub>` or `api_client:<id>`.
        principal: String,
    },
    /// Remove a user or api client from a team.
    Remove {
        org: String,
        team: String,
        /// `user:<sub>` or `api_client:<id>`.
        principal: String,
    },
}

#[derive(Subcommand)]
pub enum TablesCommand {
    /// A namespace's dropped tables, newest first: when each was dropped and when the purge
    /// takes it (write on the namespace).
    Deleted { org: String, namespace: String },
    /// Restore a dropped table with its grants, under its name or --name (write on the
    /// namespace).
    Restore {
        org: String,
        namespace: String,
        /// The dropped table's uuid (`floe tables deleted` lists it).
        table_uuid: String,
        /// Restore under this name instead.
        #[arg(long)]
        name: Option<String>,
    },
    /// Purge a dropped table now: it can no longer be restored, and the purge deletes its
    /// files on its next run (manage on the namespace).
    Purge {
        org: String,
        namespace: String,
        table_uuid: String,
    },
    /// Maintain a table now: expire its snapshots as its policy says and delete the files it
    /// no longer references (manage on the table).
    Maintain {
        org: String,
        namespace: String,
        table: String,
        /// Plan and report only: nothing is committed or deleted.
        #[arg(long)]
        dry_run: bool,
        /// List every file deleted and kept.
        #[arg(long)]
        verbose: bool,
    },
    /// A table's maintenance settings, where each comes from, and its last run; with --set
    /// or --unset, changes them first (table properties, committed as engines commit them:
    /// write on the table).
    Maintenance {
        org: String,
        namespace: String,
        table: String,
        /// `KEY=VALUE` for a maintenance key (`history.expire.*`, `write.metadata.*`,
        /// `gc.enabled`, `floe.maintenance.*`); repeatable.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// A maintenance key to remove (its namespace's value or the default applies).
        #[arg(long = "unset", value_name = "KEY")]
        unset: Vec<String>,
    },
}

#[derive(Subcommand)]
pub enum NamespaceCommand {
    /// List the org's namespaces, or with --deleted the recoverable ones (org admins).
    List {
        org: String,
        /// Soft-deleted namespaces: when each was dropped and when the purge takes it.
        #[arg(long)]
        deleted: bool,
    },
    /// Delete a namespace (org admins): recoverable for seven days unless --immediate, or
    /// removed at once with its data left in place (--retain-data).
    Delete {
        org: String,
        namespace: String,
        /// Purge it now instead of after the recovery period.
        #[arg(long, conflicts_with = "retain_data")]
        immediate: bool,
        /// Free its name and storage prefix at once, deleting no object.
        #[arg(long)]
        retain_data: bool,
        /// With --immediate: wait until the purge has removed it, showing the objects deleted.
        #[arg(long, requires = "immediate")]
        wait: bool,
        /// With --wait: give up after this many seconds (exit code 8).
        #[arg(long, default_value_t = 3600, requires = "wait")]
        timeout_secs: u64,
    },
    /// Restore a soft-deleted namespace with its tables and grants (org admins).
    Restore { org: String, namespace: String },
    /// Set or remove maintenance defaults for the namespace's tables (namespace properties
    /// under the same keys as the tables'; write on the namespace).
    Maintenance {
        org: String,
        namespace: String,
        /// `KEY=VALUE` for a maintenance key; repeatable.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// A maintenance key to remove.
        #[arg(long = "unset", value_name = "KEY")]
        unset: Vec<String>,
    },
    /// Show a namespace's settings.
    Show { org: String, namespace: String },
    /// Change a namespace's settings (visibility needs manage, the rest write).
    #[command(group(ArgGroup::new("change").required(true).multiple(true)
        .args(["visibility", "description", "metadata"])))]
    Set {
        org: String,
        namespace: String,
        /// `public` lets every authenticated caller read it.
        #[arg(long, value_enum)]
        visibility: Option<Visibility>,
        /// Free text, at most 4096 characters; an empty one removes it.
        #[arg(long)]
        description: Option<String>,
        /// A JSON object that replaces the namespace's metadata.
        #[arg(long, value_parser = parse_json_object)]
        metadata: Option<Map<String, Value>>,
    },
}

#[derive(Subcommand)]
pub enum GrantsCommand {
    /// List the grants on a namespace and its tables.
    List { org: String, namespace: String },
    /// Grant an action on the namespace, or on one table with --table; replaces the
    /// principal's grant at that grain.
    Set {
        org: String,
        namespace: String,
        /// `user:<sub>`, `team:<name>` or `api_client:<id>`.
        principal: String,
        #[arg(long, value_enum)]
        action: GrantAction,
        /// Grant on this table only.
        #[arg(long)]
        table: Option<String>,
    },
    /// Remove a principal's grant on the namespace, or on one table with --table.
    Remove {
        org: String,
        namespace: String,
        /// `user:<sub>`, `team:<name>` or `api_client:<id>`.
        principal: String,
        #[arg(long)]
        table: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum BucketsCommand {
    /// Add a bucket configuration; Floe checks it can reach the bucket first. A role gets a
    /// generated external id, printed here: the role's trust policy must name it.
    Add {
        org: String,
        nickname: String,
        /// The bucket's name.
        #[arg(long)]
        bucket: String,
        #[arg(long, value_enum, default_value = "s3")]
        platform: BucketPlatform,
        /// Key prefix inside the bucket under which namespaces are placed.
        #[arg(long)]
        prefix: Option<String>,
        #[arg(long)]
        region: Option<String>,
        /// Endpoint URL of an s3-compatible store.
        #[arg(long)]
        endpoint: Option<String>,
        /// Path-style addressing (most s3-compatible stores).
        #[arg(long)]
        path_style: bool,
        /// ARN of the customer-managed role Floe assumes to reach the bucket.
        #[arg(long, conflicts_with_all = ["anonymous", "access_key_id"])]
        role_arn: Option<String>,
        /// Access key id of static (HMAC) keys; the secret is read from FLOE_BUCKET_SECRET,
        /// never from a flag, so it stays out of the process list and shell history.
        #[arg(long, conflicts_with = "anonymous")]
        access_key_id: Option<String>,
        /// With --access-key-id: hand the static keys to writers of a table, for engines that
        /// cannot remote-sign (not scoped to the table; never to readers).
        #[arg(long, requires = "access_key_id")]
        static_keys_to_writers: bool,
        /// A public bucket read without credentials (never Iceberg storage).
        #[arg(long)]
        anonymous: bool,
        /// GCS: Floe reaches the bucket with its own Google service account and vends tokens
        /// downscoped from it.
        #[arg(long, conflicts_with_all = ["anonymous", "access_key_id", "role_arn"])]
        service_account: bool,
    },
    /// List the org's bucket configurations (never secrets).
    List { org: String },
    /// Show one bucket configuration.
    Show { org: String, nickname: String },
    /// Remove a bucket configuration that nothing uses.
    Remove { org: String, nickname: String },
    /// Pick the configuration namespaces use unless they name another.
    Default { org: String, nickname: String },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum BucketPlatform {
    S3,
    S3Compatible,
    Gcs,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ClientRole {
    Read,
    Write,
    Admin,
    None,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum MemberRole {
    Read,
    Write,
    Admin,
    None,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum GrantAction {
    Read,
    Write,
    Manage,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Visibility {
    /// Only principals with access (PRIVATE).
    Private,
    /// Every authenticated caller may read (AUTHENTICATED_PUBLIC).
    Public,
}

/// The lowercase word the API uses for a role or action.
fn word(value: impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

fn parse_json_object(raw: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(raw) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("expected a JSON object, such as '{\"owner\": \"bi\"}'".into()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// Runs one management command and prints its outcome; the exit code says how it went.
pub async fn run(command: Command) -> ExitCode {
    match commands::run(command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("floe: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_documented_exit_codes() {
        let codes: Vec<u8> = [401, 403, 404, 409, 400, 422, 500, 503]
            .into_iter()
            .map(exit_code)
            .collect();
        assert_eq!(codes, [3, 4, 5, 6, 7, 7, 8, 8]);
    }

    #[test]
    fn metadata_must_be_a_json_object() {
        assert!(parse_json_object(r#"{"owner": "bi"}"#).is_ok());
        assert!(parse_json_object("[1]").is_err());
        assert!(parse_json_object("owner=bi").is_err());
    }

    #[test]
    fn words_are_the_api_spellings() {
        assert_eq!(word(MemberRole::None), "none");
        assert_eq!(word(GrantAction::Manage), "manage");
        assert_eq!(word(ClientRole::Admin), "admin");
    }
}
