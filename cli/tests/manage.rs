//! The management commands end to end: the built `floe` binary against a real `floe serve`
//! on a free loopback port with a temporary data directory, checking output, `--json` and the
//! documented exit codes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

const FLOE: &str = env!("CARGO_BIN_EXE_floe");
/// The bootstrap admin of org `demo`.
const ADMIN: &str = "ema_cli_test_admin_token_0123456789abcdefghij";

/// A `floe serve` child process; killed when dropped, so a failing test stops it too.
struct Server {
    child: Child,
    /// `http://127.0.0.1:<port>`, the base URL the CLI takes.
    url: String,
}

impl Server {
    fn start(data_dir: &Path) -> Server {
        Server::start_with(data_dir, &[])
    }

    /// A server with extra settings (`FLOE_...` variables).
    fn start_with(data_dir: &Path, env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(FLOE)
            .arg("serve")
            .env_clear()
            .envs(env.iter().copied())
            .env("FLOE_ADDR", "127.0.0.1:0")
            .env("FLOE_DATA_DIR", data_dir)
            .env("FLOE_DEV_ORG", "demo")
            .env("FLOE_DEV_TOKEN", ADMIN)
            .env("FLOE_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("floe serve starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (found, address) = mpsc::channel();
        // Reads the announced address, then drains stderr so the server never blocks on it.
        std::thread::spawn(move || {
            let mut found = Some(found);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("Floe catalog: ")
                    && let Some(found) = found.take()
                {
                    let url = rest.split_whitespace().next().unwrap_or_default();
                    let _ = found.send(url.trim_end_matches("/iceberg").to_owned());
                }
            }
        });
        let url = match address.recv_timeout(Duration::from_secs(60)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                panic!("floe serve did not announce its address");
            }
        };
        Server { child, url }
    }

    /// Runs the CLI against this server from `cwd`, with `token` as FLOE_TOKEN.
    fn floe(&self, cwd: &Path, token: Option<&str>, args: &[&str]) -> Run {
        run(cwd, &[("FLOE_URL", &self.url)], token, args)
    }

    /// Iceberg REST POST (to create namespaces the management API then administers).
    fn iceberg_post(&self, path: &str, body: &Value) -> u16 {
        self.iceberg("POST", path, &body.to_string())
    }

    /// An Iceberg REST request as the admin; its status.
    fn iceberg(&self, method: &str, path: &str, body: &str) -> u16 {
        let host = self.url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(host).unwrap();
        write!(
            stream,
            "{method} /iceberg{path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {ADMIN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer.split(' ').nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Asserts the exit code and returns the run.
    fn expect(self, code: i32) -> Run {
        assert_eq!(self.code, code, "unexpected exit code: {self:#?}");
        self
    }

    fn ok(self) -> Run {
        self.expect(0)
    }

    fn json(self) -> Value {
        let run = self.ok();
        serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("--json printed no JSON ({e}): {run:#?}"))
    }
}

/// Runs `floe` with nothing from the caller's environment but `env` and the token.
fn run(cwd: &Path, env: &[(&str, &str)], token: Option<&str>, args: &[&str]) -> Run {
    let mut command = Command::new(FLOE);
    command.args(args).env_clear().current_dir(cwd);
    for (key, value) in env {
        command.env(key, value);
    }
    if let Some(token) = token {
        command.env("FLOE_TOKEN", token);
    }
    let output = command.output().expect("floe runs");
    Run {
        code: output.status.code().expect("floe exited"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn api_clients_members_teams_and_whoami() {
    let data = tempdir();
    let cwd = tempdir();
    let cwd = cwd.path();
    let s = Server::start(data.path());

    let me = s.floe(cwd, Some(ADMIN), &["whoami", "--json"]).json();
    assert_eq!(me["org_roles"], json!({"demo": "admin"}));
    assert_eq!(me["service_admin"], false);

    // Create an api client: the token alone on stdout, the notice on stderr.
    let created = s
        .floe(
            cwd,
            Some(ADMIN),
            &[
                "api-clients",
                "create",
                "demo",
                "--name",
                "etl",
                "--email",
                "etl@example.com",
                "--role",
                "write",
            ],
        )
        .ok();
    let token = created.stdout.trim().to_owned();
    assert!(token.starts_with("ema_"), "{created:#?}");
    assert_eq!(created.stdout.lines().count(), 1);
    assert!(created.stderr.contains("shown only this once"));
    assert!(!created.stderr.contains(&token));

    // Its token works.
    let me = s.floe(cwd, Some(&token), &["whoami", "--json"]).json();
    assert_eq!(me["name"], "etl");
    assert_eq!(me["email"], "etl@example.com");
    assert_eq!(me["org_roles"], json!({"demo": "write"}));
    let principal = me["principal"].as_str().unwrap().to_owned();
    let id = principal.strip_prefix("api_client:").unwrap().to_owned();
    let human = s.floe(cwd, Some(&token), &["whoami"]).ok();
    assert!(human.stdout.contains(&principal), "{human:#?}");
    assert!(human.stdout.contains("demo  write"), "{human:#?}");

    // Listing shows clients, never tokens.
    let list = s
        .floe(cwd, Some(ADMIN), &["api-clients", "list", "demo", "--json"])
        .json();
    let clients = list["api_clients"].as_array().unwrap();
    let etl = clients.iter().find(|c| c["id"] == id.as_str()).unwrap();
    assert_eq!(etl["name"], "etl");
    assert_eq!(etl["role"], "write");
    assert!(clients.iter().all(|c| c.get("token").is_none()));
    assert!(!list.to_string().contains(&token));
    let human = s
        .floe(cwd, Some(ADMIN), &["api-clients", "list", "demo"])
        .ok();
    assert!(human.stdout.starts_with("ID"), "{human:#?}");
    assert!(human.stdout.contains(&id) && human.stdout.contains("etl@example.com"));
    assert!(!human.stdout.contains(&token));
    // A writer may not administer the org: 403.
    let refused = s
        .floe(cwd, Some(&token), &["api-clients", "list", "demo"])
        .expect(4);
    assert!(refused.stderr.contains("HTTP 403"), "{refused:#?}");

    // Members: change the role, refuse a team (400), end the membership.
    let set = s
        .floe(
            cwd,
            Some(ADMIN),
            &["members", "set", "demo", &principal, "--role", "read"],
        )
        .ok();
    assert!(set.stdout.contains("has role read"), "{set:#?}");
    let me = s.floe(cwd, Some(&token), &["whoami", "--json"]).json();
    assert_eq!(me["org_roles"], json!({"demo": "read"}));
    let bad = s
        .floe(
            cwd,
            Some(ADMIN),
            &["members", "set", "demo", "team:data", "--role", "read"],
        )
        .expect(7);
    assert!(bad.stderr.contains("Teams are not org members"), "{bad:#?}");
    s.floe(
        cwd,
        Some(ADMIN),
        &["members", "set", "demo", &principal, "--role", "none"],
    )
    .ok();
    let me = s.floe(cwd, Some(&token), &["whoami", "--json"]).json();
    assert_eq!(me["org_roles"], json!({}));
    s.floe(cwd, Some(&token), &["teams", "show", "demo", "data"])
        .expect(4);
    s.floe(
        cwd,
        Some(ADMIN),
        &["members", "set", "demo", &principal, "--role", "write"],
    )
    .ok();

    // Teams: create (then 409), add, show, remove, unknown (404).
    let team = s
        .floe(cwd, Some(ADMIN), &["teams", "create", "demo", "data"])
        .ok();
    assert!(team.stdout.contains("Created team 'data'"), "{team:#?}");
    let again = s
        .floe(cwd, Some(ADMIN), &["teams", "create", "demo", "data"])
        .expect(6);
    assert!(
        again.stderr.contains("Team already exists: data"),
        "{again:#?}"
    );
    s.floe(
        cwd,
        Some(ADMIN),
        &["teams", "add", "demo", "data", &principal],
    )
    .ok();
    let shown = s
        .floe(
            cwd,
            Some(ADMIN),
            &["teams", "show", "demo", "data", "--json"],
        )
        .json();
    assert_eq!(shown, json!({"name": "data", "members": [principal]}));
    let human = s
        .floe(cwd, Some(&token), &["teams", "show", "demo", "data"])
        .ok();
    assert!(human.stdout.contains("1 member") && human.stdout.contains(&principal));
    let me = s.floe(cwd, Some(&token), &["whoami", "--json"]).json();
    assert_eq!(me["teams"], json!({"demo": ["data"]}));
    s.floe(
        cwd,
        Some(ADMIN),
        &["teams", "remove", "demo", "data", &principal],
    )
    .ok();
    let shown = s
        .floe(
            cwd,
            Some(ADMIN),
            &["teams", "show", "demo", "data", "--json"],
        )
        .json();
    assert_eq!(shown["members"], json!([]));
    let missing = s
        .floe(cwd, Some(ADMIN), &["teams", "show", "demo", "nosuch"])
        .expect(5);
    assert!(missing.stderr.contains("Team does not exist: nosuch"));

    // Deleting the api client revokes its token: 401.
    let deleted = s
        .floe(cwd, Some(ADMIN), &["api-clients", "delete", "demo", &id])
        .ok();
    assert!(deleted.stdout.contains("Deleted api client"));
    let revoked = s.floe(cwd, Some(&token), &["whoami"]).expect(3);
    assert!(!revoked.stderr.contains(&token) && !revoked.stdout.contains(&token));
    s.floe(cwd, Some(ADMIN), &["api-clients", "delete", "demo", &id])
        .expect(5);
}

#[test]
fn namespace_settings_and_grants() {
    let data = tempdir();
    let cwd = tempdir();
    let cwd = cwd.path();
    let s = Server::start(data.path());
    assert_eq!(
        s.iceberg_post("/v1/demo/namespaces", &json!({"namespace": ["sales"]})),
        200
    );

    let shown = s
        .floe(
            cwd,
            Some(ADMIN),
            &["namespace", "show", "demo", "sales", "--json"],
        )
        .json();
    assert_eq!(shown["name"], "sales");
    assert_eq!(shown["visibility"], "PRIVATE");
    assert_eq!(shown["description"], Value::Null);

    let set = s
        .floe(
            cwd,
            Some(ADMIN),
            &[
                "namespace",
                "set",
                "demo",
                "sales",
                "--visibility",
                "public",
                "--description",
                "Sales data",
                "--metadata",
                r#"{"owner": "bi"}"#,
            ],
        )
        .ok();
    assert!(set.stdout.contains("AUTHENTICATED_PUBLIC"), "{set:#?}");
    assert!(set.stdout.contains("Sales data"));
    let shown = s
        .floe(
            cwd,
            Some(ADMIN),
            &["namespace", "show", "demo", "sales", "--json"],
        )
        .json();
    assert_eq!(shown["visibility"], "AUTHENTICATED_PUBLIC");
    assert_eq!(shown["description"], "Sales data");
    assert_eq!(shown["metadata"], json!({"owner": "bi"}));
    let private = s
        .floe(
            cwd,
            Some(ADMIN),
            &[
                "namespace",
                "set",
                "demo",
                "sales",
                "--visibility",
                "private",
                "--json",
            ],
        )
        .json();
    assert_eq!(private["visibility"], "PRIVATE");
    assert_eq!(private["description"], "Sales data");
    let long = "x".repeat(4097);
    s.floe(
        cwd,
        Some(ADMIN),
        &["namespace", "set", "demo", "sales", "--description", &long],
    )
    .expect(7);
    s.floe(cwd, Some(ADMIN), &["namespace", "show", "demo", "nosuch"])
        .expect(5);

    // Grants at namespace and table grain.
    s.floe(cwd, Some(ADMIN), &["teams", "create", "demo", "analysts"])
        .ok();
    let granted = s
        .floe(
            cwd,
            Some(ADMIN),
            &[
                "grants",
                "set",
                "demo",
                "sales",
                "user:alice",
                "--action",
                "write",
            ],
        )
        .ok();
    assert!(
        granted.stdout.contains("Granted write on namespace sales"),
        "{granted:#?}"
    );
    s.floe(
        cwd,
        Some(ADMIN),
        &[
            "grants",
            "set",
            "demo",
            "sales",
            "team:analysts",
            "--action",
            "read",
            "--table",
            "orders",
        ],
    )
    .ok();
    let ghost = s
        .floe(
            cwd,
            Some(ADMIN),
            &[
                "grants",
                "set",
                "demo",
                "sales",
                "team:ghosts",
                "--action",
                "read",
            ],
        )
        .expect(7);
    assert!(ghost.stderr.contains("Team does not exist: ghosts"));
    let mut grants = s
        .floe(
            cwd,
            Some(ADMIN),
            &["grants", "list", "demo", "sales", "--json"],
        )
        .json()["grants"]
        .as_array()
        .unwrap()
        .clone();
    grants.sort_by_key(|g| g["principal"].to_string());
    assert_eq!(
        grants,
        [
            json!({"principal": "team:analysts", "action": "read", "table": "orders"}),
            json!({"principal": "user:alice", "action": "write", "table": null}),
        ]
    );
    let human = s
        .floe(cwd, Some(ADMIN), &["grants", "list", "demo", "sales"])
        .ok();
    assert!(human.stdout.starts_with("PRINCIPAL"), "{human:#?}");
    assert!(
        human.stdout.contains("user:alice     write   *"),
        "{human:#?}"
    );
    assert!(human.stdout.contains("team:analysts  read    orders"));

    // A reader may not see grants: 403.
    let reader = s
        .floe(
            cwd,
            Some(ADMIN),
            &[
                "api-clients",
                "create",
                "demo",
                "--name",
                "viewer",
                "--role",
                "read",
            ],
        )
        .ok()
        .stdout;
    s.floe(
        cwd,
        Some(reader.trim()),
        &["grants", "list", "demo", "sales"],
    )
    .expect(4);

    s.floe(
        cwd,
        Some(ADMIN),
        &["grants", "remove", "demo", "sales", "user:alice"],
    )
    .ok();
    let left = s
        .floe(
            cwd,
            Some(ADMIN),
            &["grants", "list", "demo", "sales", "--json"],
        )
        .json();
    assert_eq!(
        left["grants"],
        json!([{"principal": "team:analysts", "action": "read", "table": "orders"}])
    );
    let removed = s
        .floe(
            cwd,
            Some(ADMIN),
            &[
                "grants",
                "remove",
                "demo",
                "sales",
                "team:analysts",
                "--table",
                "orders",
            ],
        )
        .ok();
    assert!(
        removed.stdout.contains("table sales.orders"),
        "{removed:#?}"
    );
    let none = s
        .floe(cwd, Some(ADMIN), &["grants", "list", "demo", "sales"])
        .ok();
    assert_eq!(none.stdout.trim(), "No grants.");
    s.floe(cwd, Some(ADMIN), &["grants", "list", "demo", "nosuch"])
        .expect(5);
}

#[test]
fn a_service_administrator_from_a_fresh_data_dir_creates_orgs() {
    let data = tempdir();
    let cwd = tempdir();
    let cwd = cwd.path();
    let data_dir = data.path().to_str().unwrap();
    let created = run(
        cwd,
        &[("FLOE_DATA_DIR", data_dir)],
        None,
        &["admin", "create-token", "--service-admin", "--name", "ops"],
    )
    .ok();
    let operator = created.stdout.trim().to_owned();
    assert!(operator.starts_with("ema_"), "{created:#?}");
    assert!(created.stderr.contains("service administrator"));

    let s = Server::start(data.path());
    // The data directory is in use now: a failure on this machine.
    run(
        cwd,
        &[("FLOE_DATA_DIR", data_dir)],
        None,
        &["admin", "create-token", "--service-admin"],
    )
    .expect(1);

    let me = s.floe(cwd, Some(&operator), &["whoami", "--json"]).json();
    assert_eq!(me["service_admin"], true);
    assert_eq!(me["name"], "ops");
    let org = s
        .floe(cwd, Some(&operator), &["orgs", "create", "analytics"])
        .ok();
    assert_eq!(org.stdout.trim(), "org 'analytics': Iceberg enabled");
    s.floe(
        cwd,
        Some(&operator),
        &["orgs", "create", "analytics", "--json"],
    )
    .expect(6);
    s.floe(cwd, Some(&operator), &["orgs", "create", "bad/name"])
        .expect(7);
    // Org admins are not service administrators: 403.
    s.floe(cwd, Some(ADMIN), &["orgs", "create", "mine"])
        .expect(4);
    let off = s
        .floe(
            cwd,
            Some(&operator),
            &["orgs", "iceberg", "analytics", "--disable", "--json"],
        )
        .json();
    assert_eq!(off, json!({"name": "analytics", "iceberg_enabled": false}));
    s.floe(
        cwd,
        Some(&operator),
        &["orgs", "iceberg", "nosuch", "--enable"],
    )
    .expect(5);
    // The dev org was still bootstrapped by `floe serve`.
    let me = s.floe(cwd, Some(ADMIN), &["whoami", "--json"]).json();
    assert_eq!(me["org_roles"], json!({"demo": "admin"}));
    // Service administrators administer every org.
    let client = s
        .floe(
            cwd,
            Some(&operator),
            &[
                "api-clients",
                "create",
                "analytics",
                "--name",
                "loader",
                "--role",
                "admin",
                "--json",
            ],
        )
        .json();
    assert_eq!(client["role"], "admin");
    assert!(client["token"].as_str().unwrap().starts_with("ema_"));
}

#[test]
fn tokens_urls_and_exit_codes_for_the_connection() {
    let data = tempdir();
    let cwd = tempdir();
    let cwd = cwd.path();
    let s = Server::start(data.path());

    // No token anywhere: refused before any request.
    let none = s.floe(cwd, None, &["whoami"]).expect(3);
    assert!(none.stderr.contains("no token"), "{none:#?}");
    // The dev-token file `floe serve` writes is the fallback...
    std::fs::create_dir_all(cwd.join(".floe")).unwrap();
    std::fs::write(cwd.join(".floe/dev-token"), format!("{ADMIN}\n")).unwrap();
    let me = s.floe(cwd, None, &["whoami", "--json"]).json();
    assert_eq!(me["org_roles"], json!({"demo": "admin"}));
    // ...FLOE_DATA_DIR names another data directory...
    let elsewhere = tempdir();
    let other = run(
        cwd,
        &[
            ("FLOE_URL", &s.url),
            ("FLOE_DATA_DIR", elsewhere.path().to_str().unwrap()),
        ],
        None,
        &["whoami"],
    )
    .expect(3);
    assert!(other.stderr.contains("no token"));
    // ...and --token wins over both; a wrong one is 401, never echoed.
    let wrong = "ema_not_a_token_of_this_catalog_000000000000";
    let refused = s.floe(cwd, None, &["whoami", "--token", wrong]).expect(3);
    assert!(refused.stderr.contains("HTTP 401"), "{refused:#?}");
    assert!(!refused.stderr.contains(wrong));

    // The catalog URI engines use names the same server.
    let iceberg = format!("{}/iceberg", s.url);
    s.floe(cwd, Some(ADMIN), &["whoami", "--url", &iceberg])
        .ok();
    // Nothing listens: a network error.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let down = s
        .floe(cwd, Some(ADMIN), &["whoami", "--url", &closed])
        .expect(8);
    assert!(down.stderr.contains("cannot reach"), "{down:#?}");
    // Plain http off loopback and malformed values are usage errors.
    s.floe(
        cwd,
        Some(ADMIN),
        &["whoami", "--url", "http://catalog.example.com"],
    )
    .expect(2);
    s.floe(
        cwd,
        Some(ADMIN),
        &[
            "namespace",
            "set",
            "demo",
            "sales",
            "--metadata",
            "not json",
        ],
    )
    .expect(2);
    s.floe(cwd, Some(ADMIN), &["members", "set", "demo", "user:a"])
        .expect(2);

    // --help documents the exit codes.
    let help = s.floe(cwd, None, &["grants", "--help"]).ok();
    assert!(help.stdout.contains("Exit codes:") && help.stdout.contains("5  not found"));
}

#[test]
fn bucket_configurations() {
    let data = tempdir();
    let cwd = tempdir();
    let cwd = cwd.path();
    let s = Server::start(data.path());
    let add = |args: &[&str]| {
        let mut all = vec!["buckets", "add", "demo"];
        all.extend_from_slice(args);
        s.floe(cwd, Some(ADMIN), &all)
    };
    let added = add(&[
        "open-data",
        "--bucket",
        "open-data",
        "--prefix",
        "public",
        "--anonymous",
        "--json",
    ])
    .json();
    assert_eq!(added["auth"], json!({"type": "anonymous"}));
    assert_eq!(added["prefix"], "public");
    add(&["open-data", "--bucket", "open-data", "--anonymous"]).expect(6);
    // A role-backed bucket this server cannot reach is refused, naming why.
    let refused = add(&[
        "lake",
        "--bucket",
        "my-lake",
        "--role-arn",
        "arn:aws:iam::123456789012:role/lake",
    ])
    .expect(7);
    assert!(refused.stderr.contains("not reachable"), "{refused:#?}");
    add(&["lake", "--bucket", "my-lake"]).expect(2);
    // Static keys: the secret comes from FLOE_BUCKET_SECRET only, and is checked like a role.
    let keys = ["buckets", "add", "demo", "keys", "--bucket", "my-lake"];
    let keys = [&keys[..], &["--access-key-id", "AKIAFLOECLI"]].concat();
    let unset = s.floe(cwd, Some(ADMIN), &keys).expect(2);
    assert!(unset.stderr.contains("FLOE_BUCKET_SECRET"), "{unset:#?}");
    let secret = "cli-secret-never-shown";
    let env = [("FLOE_URL", s.url.as_str()), ("FLOE_BUCKET_SECRET", secret)];
    let refused = run(cwd, &env, Some(ADMIN), &keys).expect(7);
    assert!(refused.stderr.contains("not reachable"), "{refused:#?}");
    assert!(!refused.stderr.contains(secret), "{refused:#?}");

    let listed = s.floe(cwd, Some(ADMIN), &["buckets", "list", "demo"]).ok();
    assert!(listed.stdout.starts_with("NICKNAME"), "{listed:#?}");
    assert!(listed.stdout.contains("open-data"));
    assert!(listed.stdout.contains("default"));
    let shown = s
        .floe(cwd, Some(ADMIN), &["buckets", "show", "demo", "open-data"])
        .ok();
    assert!(shown.stdout.contains("anonymous"), "{shown:#?}");
    // Anonymous storage never backs Iceberg tables, so it cannot be the default.
    s.floe(
        cwd,
        Some(ADMIN),
        &["buckets", "default", "demo", "open-data"],
    )
    .expect(7);
    s.floe(cwd, Some(ADMIN), &["buckets", "default", "demo", "default"])
        .ok();
    s.floe(cwd, Some(ADMIN), &["buckets", "remove", "demo", "default"])
        .expect(6);
    s.floe(
        cwd,
        Some(ADMIN),
        &["buckets", "remove", "demo", "open-data"],
    )
    .ok();
    s.floe(cwd, Some(ADMIN), &["buckets", "show", "demo", "open-data"])
        .expect(5);
}

/// Objects under a namespace's `file://` location.
fn files_under(location: &str) -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new(location.trim_start_matches("file://")), &mut out);
    out
}

#[test]
fn dropped_tables_are_listed_restored_and_purged() {
    let data = tempdir();
    let cwd = tempdir();
    let cwd = cwd.path();
    let s = Server::start_with(data.path(), &[("FLOE_PURGE_INTERVAL_SECS", "0")]);
    assert_eq!(
        s.iceberg_post("/v1/demo/namespaces", &json!({"namespace": ["sales"]})),
        200
    );
    let table = json!({"name": "orders", "schema": {"type": "struct", "fields": [
        {"id": 1, "name": "id", "type": "long", "required": true}]}});
    assert_eq!(
        s.iceberg_post("/v1/demo/namespaces/sales/tables", &table),
        200
    );
    assert_eq!(
        s.iceberg("DELETE", "/v1/demo/namespaces/sales/tables/orders", ""),
        204
    );

    let listed = s
        .floe(cwd, Some(ADMIN), &["tables", "deleted", "demo", "sales"])
        .ok();
    assert!(listed.stdout.starts_with("NAME"), "{listed:#?}");
    assert!(listed.stdout.contains("orders") && listed.stdout.contains("deleted"));
    let listed = s
        .floe(
            cwd,
            Some(ADMIN),
            &["tables", "deleted", "demo", "sales", "--json"],
        )
        .json();
    let uuid = listed["tables"][0]["table-uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let restored = s
        .floe(
            cwd,
            Some(ADMIN),
            &[
                "tables",
                "restore",
                "demo",
                "sales",
                &uuid,
                "--name",
                "orders_v1",
            ],
        )
        .ok();
    assert!(
        restored.stdout.contains("Restored table sales.orders_v1"),
        "{restored:#?}"
    );
    // Nothing recoverable has that uuid any more: exit code 5, as for every 404.
    s.floe(
        cwd,
        Some(ADMIN),
        &["tables", "restore", "demo", "sales", &uuid],
    )
    .expect(5);
    assert_eq!(
        s.iceberg("DELETE", "/v1/demo/namespaces/sales/tables/orders_v1", ""),
        204
    );
    let purge = s
        .floe(
            cwd,
            Some(ADMIN),
            &["tables", "purge", "demo", "sales", &uuid],
        )
        .ok();
    assert!(
        purge.stdout.contains("can no longer be restored"),
        "{purge:#?}"
    );
    drop(s);

    let env = [
        ("FLOE_DATA_DIR", data.path().to_str().unwrap()),
        ("FLOE_DEV_ORG", "demo"),
    ];
    let purged = run(cwd, &env, None, &["admin", "purge"]).ok();
    let report: Value = serde_json::from_str(&purged.stdout).unwrap();
    assert_eq!(
        report["tables"]["purged"],
        json!([format!("demo/sales/orders_v1@{uuid}")]),
        "{purged:#?}"
    );
}

#[test]
fn namespace_lifecycle_and_purges() {
    let data = tempdir();
    let cwd = tempdir();
    let cwd = cwd.path();
    let namespace_location = |s: &Server, name: &str| {
        s.floe(
            cwd,
            Some(ADMIN),
            &["namespace", "show", "demo", name, "--json"],
        )
        .json()["location"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // No purge beside this server: `floe admin purge` does it once the server is stopped.
    let s = Server::start_with(data.path(), &[("FLOE_PURGE_INTERVAL_SECS", "0")]);
    for name in ["sales", "staging", "scratch"] {
        assert_eq!(
            s.iceberg_post("/v1/demo/namespaces", &json!({"namespace": [name]})),
            200
        );
    }
    let sales = namespace_location(&s, "sales");
    let scratch = namespace_location(&s, "scratch");
    let deleted = s
        .floe(cwd, Some(ADMIN), &["namespace", "delete", "demo", "sales"])
        .ok();
    assert!(
        deleted.stdout.contains("floe namespace restore demo sales"),
        "{deleted:#?}"
    );
    let listed = s
        .floe(
            cwd,
            Some(ADMIN),
            &["namespace", "list", "demo", "--deleted"],
        )
        .ok();
    assert!(listed.stdout.starts_with("NAME"), "{listed:#?}");
    assert!(listed.stdout.contains("sales") && listed.stdout.contains("deleted"));
    assert!(!listed.stdout.contains("staging"));
    let restored = s
        .floe(
            cwd,
            Some(ADMIN),
            &["namespace", "restore", "demo", "sales", "--json"],
        )
        .json();
    assert_eq!(restored["state"], "live");
    s.floe(cwd, Some(ADMIN), &["namespace", "restore", "demo", "sales"])
        .expect(6);
    // Data kept: the name is free at once, the files stay.
    s.floe(
        cwd,
        Some(ADMIN),
        &["namespace", "delete", "demo", "scratch", "--retain-data"],
    )
    .ok();
    assert!(!files_under(&scratch).is_empty());
    assert_eq!(
        s.iceberg_post("/v1/demo/namespaces", &json!({"namespace": ["scratch"]})),
        200
    );
    // Purged now, but nothing purges beside this server.
    s.floe(
        cwd,
        Some(ADMIN),
        &["namespace", "delete", "demo", "sales", "--immediate"],
    )
    .ok();
    let listed = s
        .floe(
            cwd,
            Some(ADMIN),
            &["namespace", "list", "demo", "--deleted", "--json"],
        )
        .json();
    assert_eq!(listed["namespaces"][0]["immediate"], true, "{listed}");
    s.floe(
        cwd,
        Some(ADMIN),
        &["namespace", "delete", "demo", "sales", "--wait"],
    )
    .expect(2);
    drop(s);

    let env = [
        ("FLOE_DATA_DIR", data.path().to_str().unwrap()),
        ("FLOE_DEV_ORG", "demo"),
    ];
    let purged = run(cwd, &env, None, &["admin", "purge"]).ok();
    let report: Value = serde_json::from_str(&purged.stdout).unwrap();
    assert_eq!(
        report["namespaces"]["purged"],
        json!(["demo/sales"]),
        "{purged:#?}"
    );
    assert!(files_under(&sales).is_empty());
    assert!(!files_under(&scratch).is_empty());

    // With the purge beside the server, --wait follows an immediate delete to its end.
    let s = Server::start(data.path());
    let listed = s
        .floe(
            cwd,
            Some(ADMIN),
            &["namespace", "list", "demo", "--deleted", "--json"],
        )
        .json();
    assert_eq!(listed["namespaces"], json!([]));
    let staging = namespace_location(&s, "staging");
    let waited = s
        .floe(
            cwd,
            Some(ADMIN),
            &[
                "namespace",
                "delete",
                "demo",
                "staging",
                "--immediate",
                "--wait",
            ],
        )
        .ok();
    // Not a terminal: plain lines, the last one saying it is done.
    assert!(
        waited
            .stderr
            .trim_end()
            .ends_with("Purged namespace staging."),
        "{waited:#?}"
    );
    assert!(!waited.stderr.contains('\r'));
    assert!(files_under(&staging).is_empty());
    assert_eq!(
        s.iceberg_post("/v1/demo/namespaces", &json!({"namespace": ["staging"]})),
        200
    );
}

/// Creates a bucket on the S3 service at `endpoint` (moto accepts unsigned requests).
fn create_s3_bucket(endpoint: &str, name: &str) {
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(host).unwrap();
    write!(
        stream,
        "PUT /{name} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// Bucket configurations that Floe can reach, end to end: `floe serve` talking to S3 (moto),
/// a role-backed bucket (with its generated external id) and one with static keys (whose
/// secret the CLI takes from FLOE_BUCKET_SECRET and never prints), the org's default moved to
/// it and a namespace created there, removal refused while in use. Runs where the test script
/// provides moto (FLOE_MOTO_ENDPOINT).
#[test]
fn reachable_bucket_configurations_on_s3() {
    let Ok(moto) = std::env::var("FLOE_MOTO_ENDPOINT") else {
        eprintln!("FLOE_MOTO_ENDPOINT is not set: skipped (scripts/test sets it)");
        return;
    };
    let bucket = format!("cli-{}", std::process::id());
    create_s3_bucket(&moto, &bucket);
    let data = tempdir();
    let cwd = tempdir();
    let cwd = cwd.path();
    let s = Server::start_with(
        data.path(),
        &[
            ("FLOE_S3_ENDPOINT", &moto),
            ("AWS_ENDPOINT_URL", &moto),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            (
                "FLOE_VENDING_ROLE_ARN",
                "arn:aws:iam::123456789012:role/floe-vending",
            ),
        ],
    );
    let added = s
        .floe(
            cwd,
            Some(ADMIN),
            &[
                "buckets",
                "add",
                "demo",
                "lake",
                "--bucket",
                &bucket,
                "--prefix",
                "iceberg",
                "--role-arn",
                "arn:aws:iam::123456789012:role/floe-access-lake",
                "--json",
            ],
        )
        .json();
    let external_id = added["auth"]["external_id"].as_str().unwrap().to_owned();
    assert!(external_id.starts_with("floe-"), "{added}");
    let shown = s
        .floe(cwd, Some(ADMIN), &["buckets", "show", "demo", "lake"])
        .ok();
    assert!(shown.stdout.contains(&external_id), "{shown:#?}");

    let secret = "cli-secret-kept-sealed";
    let env = [("FLOE_URL", s.url.as_str()), ("FLOE_BUCKET_SECRET", secret)];
    let keys = [
        "buckets",
        "add",
        "demo",
        "keys",
        "--bucket",
        &bucket,
        "--access-key-id",
        "AKIAFLOECLI",
        "--static-keys-to-writers",
    ];
    let added = run(cwd, &env, Some(ADMIN), &keys).ok();
    assert!(added.stdout.contains("AKIAFLOECLI"), "{added:#?}");
    let listed = s
        .floe(cwd, Some(ADMIN), &["buckets", "list", "demo", "--json"])
        .ok();
    assert!(listed.stdout.contains("keys") && !listed.stdout.contains(secret));
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    let keyed = listed["buckets"]
        .as_array()
        .and_then(|all| all.iter().find(|b| b["nickname"] == "keys"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(keyed["static_keys_to_writers"], true, "{keyed}");

    s.floe(cwd, Some(ADMIN), &["buckets", "default", "demo", "lake"])
        .ok();
    assert_eq!(
        s.iceberg_post("/v1/demo/namespaces", &json!({"namespace": ["on_lake"]})),
        200
    );
    let location = s
        .floe(
            cwd,
            Some(ADMIN),
            &["namespace", "show", "demo", "on_lake", "--json"],
        )
        .json()["location"]
        .clone();
    assert!(
        location
            .as_str()
            .unwrap()
            .starts_with(&format!("s3://{bucket}/iceberg/")),
        "{location}"
    );
    // In use: the default, and a namespace's bucket.
    s.floe(cwd, Some(ADMIN), &["buckets", "remove", "demo", "lake"])
        .expect(6);
    let stored = std::fs::read(data.path().join("catalog").join("catalog.redb")).unwrap();
    assert!(
        stored.windows(11).any(|w| w == b"AKIAFLOECLI"),
        "the store is read"
    );
    assert!(
        !stored.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the secret is in the store in plain text"
    );
    s.floe(cwd, Some(ADMIN), &["buckets", "remove", "demo", "keys"])
        .ok();
}

#[test]
fn change_events_in_the_data_dir_and_through_events_tail() {
    let data = tempdir();
    let cwd = tempdir();
    let cwd = cwd.path();
    let s = Server::start(data.path());
    assert_eq!(
        s.iceberg_post("/v1/demo/namespaces", &json!({"namespace": ["tailed"]})),
        200
    );

    // Everything so far, as CloudEvents, one per line.
    let all = s
        .floe(
            cwd,
            Some(ADMIN),
            &["events", "tail", "demo", "--all", "--once", "--json"],
        )
        .ok();
    let events: Vec<Value> = all
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 1, "{all:#?}");
    assert_eq!(events[0]["type"], "io.floe.namespace.created");
    assert_eq!(events[0]["data"]["sequence"], 1);

    // Following from now: only what happens next, as lines.
    let mut tail = Command::new(FLOE)
        .args(["events", "tail", "demo", "--interval-ms", "100"])
        .env_clear()
        .env("FLOE_URL", &s.url)
        .env("FLOE_TOKEN", ADMIN)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = tail.stdout.take().unwrap();
    let stderr = tail.stderr.take().unwrap();
    let (line_tx, line_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = line_tx.send(line);
        }
    });
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("Following the events of demo") {
                let _ = ready_tx.send(());
            }
        }
    });
    // The tail has taken its position once it says so: the next event is the first it shows.
    ready_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("events tail says when it follows");
    assert_eq!(
        s.iceberg_post("/v1/demo/namespaces", &json!({"namespace": ["followed"]})),
        200
    );
    let line = line_rx.recv_timeout(Duration::from_secs(20));
    let _ = tail.kill();
    let _ = tail.wait();
    let line = line.expect("events tail prints the new event");
    assert!(line.starts_with("#2 "), "{line}");
    assert!(line.contains("namespace.created followed"), "{line}");

    // floe serve appended both to events.ndjson in the data directory.
    let file = data.path().join("events.ndjson");
    let mut lines = Vec::new();
    for _ in 0..100 {
        lines = std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect();
        if lines.len() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let sequences: Vec<u64> = lines
        .iter()
        .map(|e| e["data"]["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, [1, 2]);
}

#[test]
fn tables_are_maintained_on_request_and_by_the_admin_pass() {
    let data = tempdir();
    let cwd = tempdir();
    let cwd = cwd.path();
    let s = Server::start_with(
        data.path(),
        &[
            ("FLOE_PURGE_INTERVAL_SECS", "0"),
            ("FLOE_MAINTENANCE_INTERVAL_SECS", "0"),
        ],
    );
    assert_eq!(
        s.iceberg_post("/v1/demo/namespaces", &json!({"namespace": ["ops"]})),
        200
    );
    let table = json!({"name": "runs", "schema": {"type": "struct", "fields": [
        {"id": 1, "name": "id", "type": "long", "required": true}]}});
    assert_eq!(
        s.iceberg_post("/v1/demo/namespaces/ops/tables", &table),
        200
    );
    let table_setting = ["tables", "maintenance", "demo", "ops", "runs", "--set"];
    let namespace_setting = ["namespace", "maintenance", "demo", "ops", "--set"];
    // Set; then not a maintenance key, refused before anything is sent (exit code 2); then a
    // bad value, the server's 400 (exit code 7).
    for (prefix, settings, code) in [
        (
            &table_setting[..],
            &[
                "write.metadata.previous-versions-max=1",
                "--set",
                "write.metadata.delete-after-commit.enabled=true",
            ][..],
            0,
        ),
        (
            &namespace_setting[..],
            &["history.expire.min-snapshots-to-keep=3"][..],
            0,
        ),
        (&table_setting[..], &["owner=me"][..], 2),
        (&table_setting[..], &["gc.enabled=maybe"][..], 7),
    ] {
        let args: Vec<&str> = prefix.iter().chain(settings).copied().collect();
        s.floe(cwd, Some(ADMIN), &args).expect(code);
    }
    for n in 0..3 {
        let update = json!({"requirements": [], "updates": [
            {"action": "set-properties", "updates": {"n": n.to_string()}}]});
        assert_eq!(
            s.iceberg_post("/v1/demo/namespaces/ops/tables/runs", &update),
            200
        );
    }

    let settings = s
        .floe(
            cwd,
            Some(ADMIN),
            &["tables", "maintenance", "demo", "ops", "runs"],
        )
        .ok();
    assert!(settings.stdout.starts_with("KEY"), "{settings:#?}");
    assert!(
        settings
            .stdout
            .contains("write.metadata.delete-after-commit.enabled  true"),
        "{settings:#?}"
    );
    let planned = s
        .floe(
            cwd,
            Some(ADMIN),
            &[
                "tables",
                "maintain",
                "demo",
                "ops",
                "runs",
                "--dry-run",
                "--verbose",
            ],
        )
        .ok();
    assert!(planned.stdout.contains("old-metadata 3"), "{planned:#?}");
    assert!(planned.stdout.contains("VERDICT"), "{planned:#?}");
    let done = s
        .floe(
            cwd,
            Some(ADMIN),
            &["tables", "maintain", "demo", "ops", "runs", "--json"],
        )
        .json();
    assert_eq!(done["files-deleted"], 3, "{done}");
    assert_eq!(done["dry-run"], false);
    drop(s);

    // The admin pass: the table was maintained today, so nothing is due.
    let env = [
        ("FLOE_DATA_DIR", data.path().to_str().unwrap()),
        ("FLOE_DEV_ORG", "demo"),
    ];
    let pass = run(cwd, &env, None, &["admin", "maintain", "--dry-run"]).ok();
    let report: Value = serde_json::from_str(&pass.stdout).unwrap();
    assert_eq!(report["dry-run"], true, "{pass:#?}");
    assert_eq!(report["tables"], json!([]), "{pass:#?}");
}
