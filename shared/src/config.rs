//! Settings of a Floe deployment, from flags or environment variables. The same definition
//! serves `floe serve`, the admin commands and every Lambda function.

use std::path::PathBuf;

/// Which `MetaStore` adapter holds the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// redb file under the data directory (local default).
    Embedded,
    /// A DynamoDB table (production).
    Dynamodb,
}

/// Vended credentials are never handed out with less than 55 minutes left: the reference
/// promises engines one hour, and some (iceberg-rust) never refresh. Sessions last an hour, so a
/// cached credential serves for five minutes.
pub const DEFAULT_CREDENTIALS_MIN_REMAINING_SECS: u64 = 55 * 60;

#[derive(Debug, Clone, clap::Args)]
pub struct Settings {
    /// Directory of the embedded store, the local warehouse and the dev token file.
    #[arg(long, env = "FLOE_DATA_DIR", default_value = ".floe")]
    pub data_dir: PathBuf,
    /// Org (warehouse) bootstrapped on first start.
    #[arg(long, env = "FLOE_DEV_ORG", default_value = "demo")]
    pub dev_org: String,
    /// Admin token to register; when unset, one is generated on first start.
    #[arg(long, env = "FLOE_DEV_TOKEN", hide_env_values = true)]
    pub dev_token: Option<String>,
    /// Provision the dev org, its default bucket and the admin token at start (idempotent).
    #[arg(long, env = "FLOE_BOOTSTRAP", default_value_t = true, action = clap::ArgAction::Set)]
    pub bootstrap: bool,
    /// Catalog store: embedded or dynamodb.
    #[arg(long, env = "FLOE_STORE", value_enum, default_value = "embedded")]
    pub store: StoreKind,
    /// DynamoDB table of the catalog (with FLOE_STORE=dynamodb).
    #[arg(long, env = "FLOE_DYNAMODB_TABLE", default_value = "floe-catalog")]
    pub dynamodb_table: String,
    /// Default bucket of the dev org, as s3://bucket/prefix; default: `<data dir>/warehouse`.
    #[arg(long, env = "FLOE_DEV_BUCKET")]
    pub dev_bucket: Option<String>,
    /// S3 endpoint for S3-compatible services (also sent to engines).
    #[arg(long, env = "FLOE_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// S3 region (also sent to engines).
    #[arg(long, env = "FLOE_S3_REGION")]
    pub s3_region: Option<String>,
    /// Path-style S3 addressing; default: on when an endpoint is set.
    #[arg(long, env = "FLOE_S3_PATH_STYLE")]
    pub s3_path_style: Option<bool>,
    /// Role assumed to vend table-scoped credentials for the dev bucket.
    #[arg(long, env = "FLOE_VENDING_ROLE_ARN")]
    pub vending_role_arn: Option<String>,
    /// Static HMAC key id of the dev bucket: the catalog keeps the keys and engines reach the
    /// bucket through remote signing.
    #[arg(long, env = "FLOE_S3_ACCESS_KEY_ID")]
    pub s3_access_key_id: Option<String>,
    /// Static HMAC secret of the dev bucket.
    #[arg(long, env = "FLOE_S3_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub s3_secret_access_key: Option<String>,
    /// Hand the dev bucket's static keys to principals with write access on a table (for
    /// engines that cannot remote-sign; the keys are not scoped to the table).
    #[arg(long, env = "FLOE_S3_STATIC_KEYS_TO_WRITERS", default_value_t = false, action = clap::ArgAction::Set)]
    pub s3_static_keys_to_writers: bool,
    /// Allow bucket endpoints that are plain http, or loopback, private, link-local or cloud
    /// metadata addresses (S3-compatible stores on a private network, tests). Off: a bucket
    /// configuration's endpoint must be an https URL of a public host. FLOE_S3_ENDPOINT is the
    /// operator's own and is not checked.
    #[arg(long, env = "FLOE_ALLOW_PRIVATE_ENDPOINTS", default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_private_endpoints: bool,
    /// Cached vended credentials are only reused with at least this many seconds left.
    #[arg(
        long,
        env = "FLOE_CREDENTIALS_MIN_REMAINING_SECS",
        default_value_t = DEFAULT_CREDENTIALS_MIN_REMAINING_SECS
    )]
    pub credentials_min_remaining_secs: u64,
    /// Seconds that tokens, orgs and memberships are remembered (0: read them on every request).
    #[arg(long, env = "FLOE_AUTH_CACHE_SECS", default_value_t = 10)]
    pub auth_cache_secs: u64,
    /// How long clients may retry a mutation with one Idempotency-Key (ISO-8601, e.g. PT30M;
    /// `off` turns keys off). Advertised in /v1/config.
    #[arg(long, env = "FLOE_IDEMPOTENCY_KEY_LIFETIME", default_value = "PT30M", value_parser = parse_lifetime)]
    pub idempotency_key_lifetime: Lifetime,
    /// How long change events are kept and readable (ISO-8601, e.g. P7D); a reader's token
    /// past it is 410 Gone.
    #[arg(long, env = "FLOE_EVENT_RETENTION", default_value = "P7D", value_parser = parse_retention)]
    pub event_retention: std::time::Duration,
    /// Manifest entries one scan-planning answer reads at most: the inline part of a plan and
    /// each plan task. Smaller answers, more plan tasks.
    #[arg(long, env = "FLOE_PLAN_ENTRIES_PER_ANSWER", default_value_t = crate::core::limits::PLAN_ENTRIES_PER_ANSWER, value_parser = clap::value_parser!(u64).range(1..))]
    pub plan_entries_per_answer: u64,
    /// Memory for parsed manifests kept for scan planning, in MiB: a table's manifests that fit
    /// are planned from memory; others are read again for each plan.
    #[arg(long, env = "FLOE_PLAN_CACHE_MB", default_value_t = 128)]
    pub plan_cache_mb: u64,
    /// Key that signs page tokens; instances behind one endpoint must share it.
    #[arg(long, env = "FLOE_PAGE_TOKEN_SECRET", hide_env_values = true)]
    pub page_token_secret: Option<String>,
    /// OIDC issuer whose JWTs authenticate users, exactly as their `iss` claim reads; OIDC is
    /// off when unset.
    #[arg(long, env = "FLOE_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// Audience (`aud`) the users' JWTs must carry; required with an issuer.
    #[arg(long, env = "FLOE_OIDC_AUDIENCE")]
    pub oidc_audience: Option<String>,
    /// The issuer's signing keys (JWKS): an https:// URL (http:// only on loopback) or a file
    /// path; required with an issuer.
    #[arg(long, env = "FLOE_OIDC_JWKS")]
    pub oidc_jwks: Option<String>,
    /// KMS key (id, ARN, alias name or alias ARN) that seals secrets kept in catalog rows, such
    /// as bucket HMAC keys. Without it the embedded store seals with `<data dir>/secret.key`
    /// and a DynamoDB store cannot seal: its key must stay out of the table.
    #[arg(long, env = "FLOE_SECRETS_KMS_KEY")]
    pub secrets_kms_key: Option<String>,
    /// Google service-account key file with which the catalog reaches GCS buckets and from
    /// which it vends downscoped tokens; default: Application Default Credentials.
    #[arg(long, env = "FLOE_GCS_CREDENTIALS")]
    pub gcs_credentials: Option<PathBuf>,
    /// A GCS emulator's URL, for tests: the catalog's storage requests go there unsigned and
    /// engines are sent there (`gcs.service.host`).
    #[arg(long, env = "FLOE_GCS_EMULATOR")]
    pub gcs_emulator: Option<String>,
    /// Google's token exchange endpoint, where vended GCS tokens are downscoped.
    #[arg(
        long,
        env = "FLOE_GCS_TOKEN_EXCHANGE_ENDPOINT",
        default_value = crate::vending::gcs::DEFAULT_STS_ENDPOINT
    )]
    pub gcs_token_exchange_endpoint: String,
    /// Web view: where a snapshot's `arraylake.source.repo` (`org/repo`) links to, an http(s)
    /// URL with `{org}` and `{repo}` placeholders (e.g. `https://app.example.com/{org}/{repo}`);
    /// unset, the repo is shown as text.
    #[arg(long, env = "FLOE_UI_REPO_URL")]
    pub ui_repo_url: Option<String>,
}

impl Settings {
    /// Whether this deployment talks to AWS (or an AWS emulator) at all.
    pub fn uses_aws(&self) -> bool {
        self.store == StoreKind::Dynamodb
            || self
                .dev_bucket
                .as_deref()
                .is_some_and(|b| !b.starts_with("gs://"))
            || self.vending_role_arn.is_some()
            || self.secrets_kms_key.is_some()
    }

    pub fn path_style(&self) -> bool {
        self.s3_path_style.unwrap_or(self.s3_endpoint.is_some())
    }

    /// Settings from the environment alone (Lambda functions).
    pub fn from_env() -> Result<Self, clap::Error> {
        #[derive(clap::Parser)]
        struct FromEnv {
            #[command(flatten)]
            settings: Settings,
        }
        <FromEnv as clap::Parser>::try_parse_from(["floe"]).map(|f| f.settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Settings {
        #[derive(clap::Parser)]
        struct Args {
            #[command(flatten)]
            settings: Settings,
        }
        <Args as clap::Parser>::try_parse_from(["floe"])
            .unwrap()
            .settings
    }

    /// OIDC is off unless configured.
    #[test]
    fn private_endpoints_are_refused_by_default() {
        assert!(!defaults().allow_private_endpoints);
    }

    #[test]
    fn oidc_is_off_by_default() {
        let settings = defaults();
        assert_eq!(settings.oidc_issuer, None);
        assert_eq!(settings.oidc_audience, None);
        assert_eq!(settings.oidc_jwks, None);
    }

    /// The reference promises engines an hour of lifetime and iceberg-rust never refreshes:
    /// cached credentials must not be handed out with much less than that.
    #[test]
    fn vended_credentials_keep_at_least_55_minutes_by_default() {
        assert_eq!(defaults().credentials_min_remaining_secs, 55 * 60);
    }
}

/// An optional duration setting (`off` for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime(pub Option<std::time::Duration>);

fn parse_retention(text: &str) -> Result<std::time::Duration, String> {
    crate::catalog::parse_iso_duration(text)
        .filter(|d| d.as_secs() > 0)
        .ok_or_else(|| format!("'{text}' is not an ISO-8601 duration such as P7D"))
}

fn parse_lifetime(text: &str) -> Result<Lifetime, String> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(Lifetime(None));
    }
    crate::catalog::parse_iso_duration(text)
        .filter(|d| !d.is_zero())
        .map(|d| Lifetime(Some(d)))
        .ok_or_else(|| format!("'{text}' is not an ISO-8601 duration such as PT30M, or off"))
}
