//! Least privilege: the AWS actions each deployed function's code can call.
//!
//! Each function (an endpoint group of the route table, the management API, the web view, or the
//! scheduled purge) declares here
//! how it uses the ports: which store operations, which object operations, whether it vends
//! credentials. Each AWS adapter declares, next to the code that makes the calls, which actions
//! each of those uses needs (`DynamoStore::aws_actions`, `S3ObjectStore::aws_actions`,
//! `S3Stores::ROLE_ACTIONS`, `StsVendor::AWS_ACTIONS`). A function's actions are their product.
//!
//! The mapping lives in one place because IAM that drifts from the code fails only on AWS, as a
//! 500 on the first request that needs a missing action (a function that reaches its bucket
//! through a role without `sts:AssumeRole`, say). Two tests keep it honest: tests/http/iam.rs
//! drives every group's requests (and a purge run) through recording adapters and checks that
//! each function uses exactly what it declares here; tests/interop/test_deployment.py checks
//! that template.yaml grants each function exactly the actions `floe iam` prints from here.

use std::collections::BTreeSet;

pub use crate::objects::ObjectUse;
use crate::objects::s3::{S3ObjectStore, S3Stores};
use crate::routes::Group;
use crate::secrets::KmsSealer;
pub use crate::secrets::SecretUse;
pub use crate::store::StoreUse;
use crate::store::dynamodb::DynamoStore;
use crate::vending::policy::{BUCKET_ACTIONS, READ_ACTIONS, WRITE_ACTIONS};
use crate::vending::sts::StsVendor;

/// Something a function's code does that needs AWS permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    Store(StoreUse),
    /// Object access, on any bucket configuration of an org. A bucket configuration may name a
    /// role (the deployment's default bucket names the vending role), which is then assumed to
    /// reach the bucket: object access always brings the role actions along.
    Objects(ObjectUse),
    /// Vending table-scoped credentials.
    Vend,
    /// Sealing or opening the secret of a bucket configuration (KMS on AWS).
    Secrets(SecretUse),
    /// Putting change events on the event bus (EventBridge).
    PublishEvents,
    /// Sending what the stream could not deliver to the dead-letter queue (SQS; done by
    /// Lambda's event source mapping with the function's role).
    DeadLetters,
    /// Putting claimed tables on the maintenance queue (SQS `SendMessageBatch`).
    QueueDueTables,
}

/// A deployed function: one per endpoint group, the management API, the web view, and the
/// scheduled purge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Function {
    Config,
    Namespaces,
    Tables,
    Commits,
    Credentials,
    /// Remote signing: signs engines' storage requests with a bucket's static keys.
    Signing,
    /// Server-side scan planning: reads tables' metadata and manifests, vends on request.
    Planning,
    Purge,
    /// The scheduled maintenance scheduler: keeps the due index, claims due tables and puts
    /// them on the maintenance queue.
    Maintenance,
    /// The maintenance worker: expiry, storage reclamation and compaction of the tables the
    /// maintenance queue hands it.
    Worker,
    /// The management API under `/api/v1` (`http::management::MANAGEMENT_ROUTES`).
    Management,
    /// The read-only web view under `/ui` (`ui::GATEWAY_ROUTES`).
    Ui,
    /// The change-event publisher: the catalog table's stream onto the event bus.
    Events,
}

use Capability::{DeadLetters, Objects, PublishEvents, QueueDueTables, Secrets, Store, Vend};

impl Function {
    pub const ALL: [Function; 13] = [
        Function::Config,
        Function::Namespaces,
        Function::Tables,
        Function::Commits,
        Function::Credentials,
        Function::Signing,
        Function::Planning,
        Function::Purge,
        Function::Maintenance,
        Function::Worker,
        Function::Management,
        Function::Ui,
        Function::Events,
    ];

    /// Whether the function runs the catalog (and its ports); the events function only
    /// forwards what the store's stream hands it.
    pub fn runs_the_catalog(self) -> bool {
        self != Function::Events
    }

    /// The function that serves an endpoint group.
    pub fn serving(group: Group) -> Function {
        match group {
            Group::Config => Function::Config,
            Group::Namespaces => Function::Namespaces,
            Group::Tables => Function::Tables,
            Group::Commits => Function::Commits,
            Group::Credentials => Function::Credentials,
            Group::Signing => Function::Signing,
            Group::Planning => Function::Planning,
        }
    }

    /// The name of the function (its binary is `floe-<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Function::Config => "config",
            Function::Namespaces => "namespaces",
            Function::Tables => "tables",
            Function::Commits => "commits",
            Function::Credentials => "credentials",
            Function::Signing => "signing",
            Function::Planning => "planning",
            Function::Purge => "purge",
            Function::Maintenance => "maintenance",
            Function::Worker => "worker",
            Function::Management => "management",
            Function::Ui => "ui",
            Function::Events => "events",
        }
    }

    /// What the function's code does. Every request authenticates (a token read) and resolves
    /// its org and the caller's access in it (org, membership and service-administrator reads,
    /// queries of the caller's teams and grants and of the org's public namespaces):
    /// `Store(Get)` and `Store(Query)` everywhere. Every function that uses a bucket
    /// configuration opens its sealed secret when it has static keys (`Secrets(Open)`); only
    /// adding one seals (`Secrets(Seal)`, management).
    pub fn uses(self) -> &'static [Capability] {
        match self {
            // getConfig: resolving the caller's access only.
            Function::Config => &[Store(StoreUse::Get), Store(StoreUse::Query)],
            // List: a query. Create: the name claim read, prefix reservation (an emptiness
            // listing, the marker put), the claims and row put, removal of an unclaimed marker;
            // re-creating over a soft-deleted namespace lists its prefix. Drop and properties:
            // a conditional put of the row; a drop also deletes the namespace's entry in the
            // org's public index. The bootstrap (this function only) puts and reads back the
            // org, bucket, member and token rows.
            Function::Namespaces => &[
                Store(StoreUse::Get),
                Store(StoreUse::Query),
                Store(StoreUse::Put),
                Store(StoreUse::Delete),
                Objects(ObjectUse::Put),
                Objects(ObjectUse::List),
                Objects(ObjectUse::Delete),
                Secrets(SecretUse::Open),
            ],
            // List tables and views: queries. Create: a client-chosen directory is checked
            // against the directory claims (a get) and older tables (a query); the metadata v0
            // put; the row, namespace count and directory or override claim put. A table on
            // its own bucket reserves a prefix (listing, marker put) and removes the marker
            // when the table is not created. Load: the metadata get. Drop and rename: a row
            // delete with a put. Load and create vend credentials on request.
            // A name given to a table or view holds the other kind's key absent (a check).
            Function::Tables => &[
                Store(StoreUse::Get),
                Store(StoreUse::Query),
                Store(StoreUse::Put),
                Store(StoreUse::Delete),
                Store(StoreUse::Check),
                Objects(ObjectUse::Get),
                Objects(ObjectUse::Put),
                Objects(ObjectUse::List),
                Objects(ObjectUse::Delete),
                Vend,
                Secrets(SecretUse::Open),
            ],
            // The current metadata get, the new metadata file put, the pointer swap put. The
            // create commit of a staged table places and inserts it as createTable does (a
            // client-chosen directory: a get and a query). A commit never deletes a file.
            // A transaction holds its unchanged tables to the rows it read (a condition check).
            Function::Commits => &[
                Store(StoreUse::Get),
                Store(StoreUse::Query),
                Store(StoreUse::Put),
                Store(StoreUse::Check),
                Objects(ObjectUse::Get),
                Objects(ObjectUse::Put),
                Secrets(SecretUse::Open),
            ],
            // Row reads and the access queries, then a vend.
            Function::Credentials => &[
                Store(StoreUse::Get),
                Store(StoreUse::Query),
                Vend,
                Secrets(SecretUse::Open),
            ],
            // Row reads and the access queries, then the bucket's sealed secret opened to sign:
            // no storage request of its own, nothing vended, nothing written.
            Function::Signing => &[
                Store(StoreUse::Get),
                Store(StoreUse::Query),
                Secrets(SecretUse::Open),
            ],
            // Row reads and the access queries, the table's current metadata file, its manifest
            // lists and manifests (gets); a vend when the plan's caller asks for credentials.
            // Nothing is written.
            Function::Planning => &[
                Store(StoreUse::Get),
                Store(StoreUse::Query),
                Objects(ObjectUse::Get),
                Vend,
                Secrets(SecretUse::Open),
            ],
            // The index query for expired namespaces, row reads, the fence (and failure
            // records) on the namespace row, listing and deleting the namespace's objects, the
            // query of its directory claims, then deleting claims and row.
            Function::Purge => &[
                Store(StoreUse::Get),
                Store(StoreUse::Query),
                Store(StoreUse::QueryIndex),
                Store(StoreUse::Put),
                Store(StoreUse::Delete),
                Objects(ObjectUse::List),
                Objects(ObjectUse::Delete),
                Secrets(SecretUse::Open),
            ],
            // The sweep: the index of orgs, queries of their namespaces, tables and maintenance
            // state rows, the state rows and the sweep's cursor put. The claim: the due index
            // queried, each state row read and put. Then the claimed tables on the queue.
            Function::Maintenance => &[
                Store(StoreUse::Get),
                Store(StoreUse::Query),
                Store(StoreUse::QueryIndex),
                Store(StoreUse::Put),
                QueueDueTables,
            ],
            // Each claimed table: its state row (the lease and the record, puts), org,
            // namespace and table rows and metadata file (gets); the compaction's inputs read,
            // its outputs and manifests put, its commit (the new metadata file put, the pointer
            // swap put), what a lost race leaves removed; the expiry commit; the listing of the
            // table's directory and the deletion of what it no longer reaches (manifest lists
            // and manifests read first), under the fence on its row (puts).
            Function::Worker => &[
                Store(StoreUse::Get),
                Store(StoreUse::Put),
                Objects(ObjectUse::Get),
                Objects(ObjectUse::Put),
                Objects(ObjectUse::List),
                Objects(ObjectUse::Delete),
                Secrets(SecretUse::Open),
            ],
            // Rows only: orgs (a conditional put), api clients (member, membership, token and
            // listing rows put; deleted together), members and team members (both sides put or
            // deleted), teams, grants (both sides put or deleted), namespace settings (a
            // conditional put; visibility also puts or deletes the org's public index entry and
            // reads the bucket configurations and queries the namespace's tables). Listings of
            // api clients, team members, grants and the caller's orgs and teams are queries.
            // It never vends, and a public namespace is checked against bucket configurations,
            // not buckets; adding a bucket configuration lists one key under its root with its
            // credentials (the reachability check) and seals its static keys' secret; making a
            // bucket the default opens it (the check that it can back Iceberg storage).
            // Restoring a dropped table puts its row back holding the name's view row absent
            // (a condition check) and its dropped row deleted, in one write. Maintaining a
            // table on request (`.../maintain`) does what the maintenance function does to it:
            // metadata and manifests read, the expiry's metadata file put, the directory listed
            // and what it no longer reaches deleted.
            Function::Management => &[
                Store(StoreUse::Get),
                Store(StoreUse::Query),
                Store(StoreUse::Put),
                Store(StoreUse::Delete),
                Store(StoreUse::Check),
                Objects(ObjectUse::Get),
                Objects(ObjectUse::Put),
                Objects(ObjectUse::List),
                Objects(ObjectUse::Delete),
                Secrets(SecretUse::Seal),
                Secrets(SecretUse::Open),
            ],
            // Reads as the management API and loadTable do: the org context, namespace and
            // table listings (queries), the table's row and namespace (gets), its current
            // metadata file (an object get, through the bucket's role or sealed keys). Sign-in
            // puts a session row and sign-out deletes it; nothing else is written, nothing is
            // vended.
            Function::Ui => &[
                Store(StoreUse::Get),
                Store(StoreUse::Query),
                Store(StoreUse::Put),
                Store(StoreUse::Delete),
                Objects(ObjectUse::Get),
                Secrets(SecretUse::Open),
            ],
            // The stream hands it the new rows (reading the stream is the event source
            // mapping's, with the managed policy SAM attaches); it numbers the waiting events
            // of each org it sees some of: the org's counter read and moved, the waiting items
            // queried and deleted, the numbered events put, each entity's previous event
            // checked.
            Function::Events => &[
                Store(StoreUse::Get),
                Store(StoreUse::Query),
                Store(StoreUse::Put),
                Store(StoreUse::Delete),
                Store(StoreUse::Check),
                PublishEvents,
                DeadLetters,
            ],
        }
    }

    /// The AWS actions the function's code can call: what its role must grant, and no more.
    pub fn aws_actions(self) -> BTreeSet<&'static str> {
        let mut actions = BTreeSet::new();
        for capability in self.uses() {
            match *capability {
                Store(store_use) => actions.extend(DynamoStore::aws_actions(store_use)),
                Objects(object_use) => {
                    actions.extend(S3ObjectStore::aws_actions(object_use));
                    actions.extend(S3Stores::ROLE_ACTIONS);
                }
                Vend => actions.extend(StsVendor::AWS_ACTIONS),
                Secrets(secret_use) => actions.extend(KmsSealer::aws_actions(secret_use)),
                PublishEvents => {
                    actions.insert("events:PutEvents");
                }
                DeadLetters | QueueDueTables => {
                    actions.insert("sqs:SendMessage");
                }
            }
        }
        actions
    }
}

/// What the vending role must grant: everything a session policy can allow (vended credentials
/// are the role narrowed to one table), which covers what functions do to objects through it.
pub fn vending_role_actions() -> BTreeSet<&'static str> {
    let mut actions: BTreeSet<&'static str> = [READ_ACTIONS, WRITE_ACTIONS, BUCKET_ACTIONS]
        .concat()
        .into_iter()
        .collect();
    for object_use in ObjectUse::ALL {
        actions.extend(S3ObjectStore::aws_actions(object_use));
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_has_its_function_under_the_same_name() {
        for group in Group::ALL {
            assert_eq!(Function::serving(group).name(), group.name());
        }
    }

    #[test]
    fn functions_that_reach_a_bucket_may_assume_its_role() {
        for function in [
            Function::Namespaces,
            Function::Tables,
            Function::Commits,
            Function::Purge,
            Function::Worker,
            Function::Management,
            Function::Ui,
        ] {
            assert!(
                function.aws_actions().contains("sts:AssumeRole"),
                "{function:?}"
            );
        }
        let actions = Function::Config.aws_actions();
        assert!(
            !actions
                .iter()
                .any(|a| a.starts_with("s3:") || a.starts_with("sts:")),
            "config: {actions:?}"
        );
    }

    #[test]
    fn the_vending_role_grants_what_sessions_and_functions_use_through_it() {
        let role = vending_role_actions();
        for function in Function::ALL {
            for action in function.aws_actions() {
                if action.starts_with("s3:") {
                    assert!(role.contains(action), "{function:?}: {action}");
                }
            }
        }
        assert!(!role.iter().any(|a| !a.starts_with("s3:")));
    }
}
