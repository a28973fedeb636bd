//! The server's Google identity and HTTP client, shared by GCS object access and GCS credential
//! vending: one source of access tokens (gcp_auth caches them until they near expiry) and one
//! TLS stack (rustls on aws-lc-rs, as everywhere else in Floe).

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use http_body_util::Full;

/// The scope of the server's own tokens: GCS access and, for downscoping, what Google's STS
/// requires of a source token.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// An HTTP client for Google's APIs (or a loopback stand-in).
pub type HttpClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<bytes::Bytes>,
>;

/// TLS with the system's root certificates; plain HTTP too when `allow_http` (emulators and
/// loopback test endpoints only).
pub fn http_client(allow_http: bool) -> Result<HttpClient, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider)
        .map_err(|e| format!("no TLS root certificates: {e}"))?;
    let connector = if allow_http {
        builder.https_or_http().enable_http1().build()
    } else {
        builder.https_only().enable_http1().build()
    };
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector),
    )
}

/// The server's Google credentials, resolved on first use: a deployment that never touches GCS
/// never looks for them (Application Default Credentials may ask a metadata server).
pub struct GoogleCredentials {
    key_file: Option<PathBuf>,
    provider: tokio::sync::OnceCell<Arc<dyn gcp_auth::TokenProvider>>,
}

impl GoogleCredentials {
    /// A service-account key file, else Application Default Credentials
    /// (GOOGLE_APPLICATION_CREDENTIALS, gcloud's user credentials, the metadata server).
    pub fn new(key_file: Option<PathBuf>) -> Self {
        Self {
            key_file,
            provider: tokio::sync::OnceCell::new(),
        }
    }

    async fn provider(&self) -> Result<&Arc<dyn gcp_auth::TokenProvider>, gcp_auth::Error> {
        self.provider
            .get_or_try_init(|| async {
                Ok(match &self.key_file {
                    Some(path) => Arc::new(gcp_auth::CustomServiceAccount::from_file(path)?) as _,
                    None => gcp_auth::provider().await?,
                })
            })
            .await
    }
}

#[async_trait]
impl gcp_auth::TokenProvider for GoogleCredentials {
    async fn token(&self, scopes: &[&str]) -> Result<Arc<gcp_auth::Token>, gcp_auth::Error> {
        self.provider().await?.token(scopes).await
    }

    async fn project_id(&self) -> Result<Arc<str>, gcp_auth::Error> {
        self.provider().await?.project_id().await
    }
}

/// Whether `url` is plain HTTP to a loopback host, or HTTPS: the endpoints Floe sends Google
/// tokens to.
pub fn is_https_or_loopback(url: &url::Url) -> bool {
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return false,
    };
    match url.scheme() {
        "https" => true,
        "http" => loopback,
        _ => false,
    }
}
