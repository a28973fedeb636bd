//! Outbound HTTP connections (JWKS key sets, event webhooks) on the TLS stack the AWS SDK
//! already builds: rustls with aws-lc-rs.

use std::sync::Arc;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;

/// A connector for `https` URLs (the system's root certificates) or, with `https` false, for
/// plain `http` URLs only.
pub fn connector(https: bool) -> Result<HttpsConnector<HttpConnector>, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    Ok(if https {
        builder
            .with_provider_and_native_roots(provider)
            .map_err(|e| format!("no TLS root certificates: {e}"))?
            .https_only()
            .enable_http1()
            .build()
    } else {
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        builder
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .build()
    })
}
