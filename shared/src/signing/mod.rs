//! Remote signing: the catalog keeps a bucket's static keys and signs each storage request an
//! engine sends it, after checking that the request touches only the table's own directory at
//! the caller's access level.
//!
//! Static keys reach the whole bucket and never expire, so handing them out would make every
//! reader of one table a writer of every table. Signing keeps them on the server; a signature
//! covers one method, host, path and query (and for batch deletes, the body), so what the
//! engine sends is what was checked.

pub mod policy;
pub mod s3;
pub mod sigv4;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use policy::Access;
pub use s3::{S3Request, Target};

/// Why a request is not signed: said to the caller (it names nothing outside its own request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

impl Refusal {
    pub fn new(why: &str) -> Self {
        Refusal(why.to_owned())
    }
}

/// The spec's `RemoteSignRequest`.
#[derive(Debug, Clone, Deserialize)]
pub struct RemoteSignRequest {
    pub region: String,
    pub uri: String,
    pub method: String,
    pub headers: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub provider: Option<String>,
}

/// The spec's `RemoteSignResult`: the URI to send the request to and every header it must carry
/// (those the engine sent that are kept, and the signature's).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RemoteSignResult {
    pub uri: String,
    pub headers: BTreeMap<String, Vec<String>>,
}

/// Config keys that turn signing on in each engine, for a table whose sign route is
/// `endpoint` (relative to the catalog's base URI, which both clients default to).
pub fn client_config(endpoint: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        // Java's S3FileIO.
        ("s3.remote-signing-enabled".to_owned(), "true".to_owned()),
        // PyIceberg's fsspec FileIO.
        ("s3.signer".to_owned(), "S3V4RestSigner".to_owned()),
        ("s3.signer.endpoint".to_owned(), endpoint.to_owned()),
        // The spec's (deprecated, still read) names of the same endpoint.
        ("signer.endpoint".to_owned(), endpoint.to_owned()),
    ])
}

/// The sign route of a table, relative to the catalog's base URI.
pub fn endpoint(prefix: &str, namespace: &str, table: &str) -> String {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    let segment = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
    format!(
        "v1/{}/namespaces/{}/tables/{}/sign",
        segment(prefix),
        segment(namespace),
        segment(table)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_encode_every_segment() {
        assert_eq!(
            endpoint("demo", "sales", "orders"),
            "v1/demo/namespaces/sales/tables/orders/sign"
        );
        assert_eq!(
            endpoint("demo", "a b", "t/../x"),
            "v1/demo/namespaces/a%20b/tables/t%2F%2E%2E%2Fx/sign"
        );
    }

    #[test]
    fn requests_parse_as_pyiceberg_sends_them() {
        let request: RemoteSignRequest = serde_json::from_value(serde_json::json!({
            "method": "GET", "region": "us-east-1", "uri": "http://127.0.0.1:9000/b/k",
            "headers": {"User-Agent": ["Botocore/1.0"]}
        }))
        .unwrap();
        assert_eq!(request.method, "GET");
        assert!(request.body.is_none() && request.properties.is_empty());
    }
}
