//! The book's configuration page (docs/src/configuration.md) names exactly the `FLOE_*`
//! variables the code knows, each clap setting with its flag.
//!
//! The code's list is read from `floe`'s own command line: every argument of every subcommand
//! that clap reads from a `FLOE_*` variable (the catalog's `Settings`, which the Lambda functions
//! read from their environment alone, `floe serve`'s own arguments, the management CLI's
//! connection). Variables read elsewhere are listed below with the file that reads them, and the
//! test checks that each file still names its variable, so neither list can go stale unseen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::CommandFactory;

/// Variables the product reads without clap, and a file that reads each.
const READ_DIRECTLY: &[(&str, &str)] = &[
    // tracing's env filter of `floe serve`; the functions' static Targets filter.
    ("FLOE_LOG", "cli/src/serve.rs"),
    ("FLOE_LOG", "functions/lambda/src/lib.rs"),
    // The bus floe-events puts change events on.
    ("FLOE_EVENT_BUS", "functions/events/src/main.rs"),
    // The queue the maintenance scheduler puts claimed tables on.
    (
        "FLOE_MAINTENANCE_QUEUE_URL",
        "functions/maintenance/src/main.rs",
    ),
    // The secret of static keys for `floe buckets add --access-key-id` (never a flag).
    ("FLOE_BUCKET_SECRET", "cli/src/manage/commands.rs"),
    // The management CLI's token lookup reads it directly too (it is also a clap setting).
    ("FLOE_DATA_DIR", "cli/src/manage/client.rs"),
];

/// Variables the test suites and scripts read, documented on the same page, and a file that
/// reads each.
const TEST_AND_TOOLING: &[(&str, &str)] = &[
    ("FLOE_CACHE_DIR", "scripts/test"),
    ("FLOE_CACHE_DIR", ".ci/run"),
    ("FLOE_VENV", "scripts/test"),
    ("FLOE_INFRA_VENV", "scripts/test"),
    ("FLOE_MOTO_ENDPOINT", "tests/support/moto.rs"),
    ("FLOE_FAKE_GCS_ENDPOINT", "tests/support/gcs.rs"),
    ("FLOE_TEST_BACKEND", "tests/support/lib.rs"),
    ("FLOE_BIN", "tests/interop/conftest.py"),
    ("FLOE_RUST_CLIENT", "tests/interop/test_iceberg_rust.py"),
    ("FLOE_URI", "tests/rust-client/src/main.rs"),
    ("FLOE_WAREHOUSE", "tests/rust-client/src/main.rs"),
    ("FLOE_NAMESPACE", "tests/rust-client/src/main.rs"),
    ("FLOE_TABLE", "tests/rust-client/src/main.rs"),
    ("FLOE_MODE", "tests/rust-client/src/main.rs"),
    ("FLOE_PARITY_SEQUENCES", "tests/interop/test_parity.py"),
    ("FLOE_SCREENSHOTS", "tests/interop/test_ui.py"),
];

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn page() -> String {
    let path = repository().join("docs/src/configuration.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `FLOE_*` variable clap reads, anywhere in `floe`'s commands, with the long flags that
/// read it.
fn clap_settings() -> BTreeMap<String, BTreeSet<String>> {
    fn walk(command: &clap::Command, found: &mut BTreeMap<String, BTreeSet<String>>) {
        for argument in command.get_arguments() {
            let Some(variable) = argument.get_env().and_then(|v| v.to_str()) else {
                continue;
            };
            if !variable.starts_with("FLOE_") {
                continue;
            }
            let flags = found.entry(variable.to_owned()).or_default();
            if let Some(long) = argument.get_long() {
                flags.insert(long.to_owned());
            }
        }
        for subcommand in command.get_subcommands() {
            walk(subcommand, found);
        }
    }
    let mut found = BTreeMap::new();
    walk(&super::Cli::command(), &mut found);
    found
}

/// The `FLOE_*` names a text mentions (a bare `FLOE_` prefix, as in `FLOE_*`, is none).
fn names_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("FLOE_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = tail[..end].trim_end_matches('_');
        if name.len() > "FLOE".len() {
            names.insert(name.to_owned());
        }
        rest = &tail[end.max(1)..];
    }
    names
}

#[test]
fn every_clap_setting_is_documented_with_its_flag() {
    let page = page();
    let settings = clap_settings();
    // The catalog's settings alone are more than two dozen: a walk that found few has lost its
    // way.
    assert!(
        settings.len() > 30,
        "the command walk found only {settings:?}"
    );
    for (variable, flags) in &settings {
        let row = page
            .lines()
            .find(|line| line.starts_with(&format!("| `{variable}` |")))
            .unwrap_or_else(|| panic!("docs/src/configuration.md has no table row for {variable}"));
        for flag in flags {
            assert!(
                row.contains(&format!("`--{flag}`")),
                "docs/src/configuration.md: the row of {variable} does not name its flag --{flag}: {row}"
            );
        }
    }
}

#[test]
fn every_variable_read_elsewhere_is_documented_and_still_read_there() {
    let documented = names_in(&page());
    for (variable, file) in READ_DIRECTLY.iter().chain(TEST_AND_TOOLING) {
        let path = repository().join(file);
        let source =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            names_in(&source).contains(*variable),
            "{file} no longer reads {variable}: update the list in cli/src/config_docs.rs"
        );
        assert!(
            documented.contains(*variable),
            "docs/src/configuration.md does not document {variable} (read by {file})"
        );
    }
}

#[test]
fn every_documented_variable_is_one_the_code_knows() {
    let known: BTreeSet<String> = clap_settings()
        .into_keys()
        .chain(
            READ_DIRECTLY
                .iter()
                .chain(TEST_AND_TOOLING)
                .map(|(variable, _)| (*variable).to_owned()),
        )
        .collect();
    let unknown: Vec<String> = names_in(&page()).difference(&known).cloned().collect();
    assert!(
        unknown.is_empty(),
        "docs/src/configuration.md documents variables no code reads: {unknown:?}"
    );
}

#[test]
fn names_are_read_whole() {
    assert_eq!(
        names_in("`FLOE_DATA_DIR`, FLOE_* and $FLOE_S3_REGION."),
        BTreeSet::from(["FLOE_DATA_DIR".to_owned(), "FLOE_S3_REGION".to_owned()])
    );
}
