//! The settings that bound what operations do: how long keys, events and caches last, how a
//! lost commit is retried, which bucket endpoints are allowed.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// Everything an operation may be limited by, set once per deployment.
#[derive(Debug, Clone)]
pub struct Limits {
    pub commit_retry: CommitRetry,
    /// How long clients may retry a mutation with one `Idempotency-Key`; `None`: off.
    pub idempotency_lifetime: Option<Duration>,
    /// How long change events are kept and readable.
    pub event_retention: Duration,
    /// How long tokens, orgs, memberships, namespaces and bucket configurations are remembered
    /// (0 disables the caches).
    pub auth_cache_ttl: Duration,
    /// Whether bucket endpoints may be plain http and private, loopback or link-local
    /// addresses (FLOE_ALLOW_PRIVATE_ENDPOINTS).
    pub private_endpoints: bool,
    /// Manifest entries one scan-planning answer reads at most: what a plan answers inline and
    /// what each plan task covers.
    pub plan_entries_per_answer: u64,
    /// Memory for parsed manifests kept for scan planning.
    pub plan_cache_bytes: u64,
}

/// Manifest entries one scan-planning answer reads at most, by default: an answer of that many
/// tasks is about 1.25 MB, far under API Gateway's 6 MB, and takes a warm function about 15 ms.
pub const PLAN_ENTRIES_PER_ANSWER: u64 = 5_000;

impl Default for Limits {
    fn default() -> Self {
        Self {
            commit_retry: CommitRetry::default(),
            idempotency_lifetime: Some(super::idempotency::DEFAULT_LIFETIME),
            event_retention: super::changes::DEFAULT_EVENT_RETENTION,
            auth_cache_ttl: crate::cache::DEFAULT_TTL,
            private_endpoints: false,
            plan_entries_per_answer: PLAN_ENTRIES_PER_ANSWER,
            plan_cache_bytes: 128 * 1024 * 1024,
        }
    }
}

/// How a commit that lost the swap is retried: Java's server retries 4 times from 100 ms up to a
/// minute; a function behind a 29-second gateway waits less, so it tries more often instead
/// (8 retries from 25 ms, at most 1 s apart: under 4 s in all). With 4, six writers racing on
/// one table under load occasionally left one writer losing every race.
#[derive(Debug, Clone, Copy)]
pub struct CommitRetry {
    pub retries: usize,
    pub min_delay: Duration,
    pub max_delay: Duration,
}

impl Default for CommitRetry {
    fn default() -> Self {
        Self {
            retries: 8,
            min_delay: Duration::from_millis(25),
            max_delay: Duration::from_secs(1),
        }
    }
}

impl CommitRetry {
    pub(crate) fn delays(&self) -> impl Iterator<Item = Duration> {
        ExponentialBuilder::new()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(2.0)
            .with_jitter()
            .with_max_times(self.retries)
            .build()
    }
}
