//! Reading an S3 request URI as S3 reads it: which bucket, which object key, which query, and
//! whether it goes to the table's own endpoint at all.

use url::Url;

use super::Refusal;

/// Where a table's bucket is reached: what engines are told (`s3.endpoint`, `s3.region`).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub bucket: String,
    /// An S3-compatible endpoint (`http(s)://host[:port]`); `None` for AWS's own.
    pub endpoint: Option<String>,
    pub region: Option<String>,
}

/// A request as S3 will serve it.
#[derive(Debug, Clone, PartialEq)]
pub struct S3Request {
    /// The object key (decoded), or `None` for a request on the bucket itself.
    pub key: Option<String>,
    /// Query parameters, decoded, in order.
    pub query: Vec<(String, String)>,
}

impl S3Request {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn has(&self, name: &str) -> bool {
        self.param(name).is_some()
    }
}

/// Reads `uri` for `target`: path-style (`host/bucket/key`) or virtual-hosted
/// (`bucket.host/key`) on the bucket's endpoint, nothing else.
pub fn parse(uri: &str, target: &Target) -> Result<S3Request, Refusal> {
    let url = Url::parse(uri).map_err(|_| Refusal::new("the request URI is not a valid URL"))?;
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err(Refusal::new(
            "the request URI carries credentials or a fragment",
        ));
    }
    let host = url
        .host_str()
        .ok_or_else(|| Refusal::new("the request URI has no host"))?
        .to_ascii_lowercase();
    let port = url.port_or_known_default();
    let virtual_hosted = match &target.endpoint {
        Some(endpoint) => {
            let endpoint = Url::parse(endpoint)
                .map_err(|_| Refusal::new("the bucket's endpoint is not a valid URL"))?;
            let endpoint_host = endpoint.host_str().unwrap_or_default().to_ascii_lowercase();
            if url.scheme() != endpoint.scheme() || port != endpoint.port_or_known_default() {
                return Err(Refusal::new(
                    "the request does not go to the table's bucket",
                ));
            }
            if host == endpoint_host {
                false
            } else if host == format!("{}.{endpoint_host}", target.bucket) {
                true
            } else {
                return Err(Refusal::new(
                    "the request does not go to the table's bucket",
                ));
            }
        }
        None => {
            if url.scheme() != "https" || port != Some(443) {
                return Err(Refusal::new("requests to AWS S3 must use https"));
            }
            aws_host(&host, &target.bucket, target.region.as_deref())
                .ok_or_else(|| Refusal::new("the request does not go to the table's bucket"))?
        }
    };
    let raw_path = url.path();
    let object_path = if virtual_hosted {
        raw_path.strip_prefix('/').unwrap_or(raw_path)
    } else {
        let rest = raw_path
            .strip_prefix('/')
            .and_then(|p| p.strip_prefix(target.bucket.as_str()))
            .ok_or_else(|| Refusal::new("the request does not go to the table's bucket"))?;
        match rest {
            "" => "",
            rest => rest
                .strip_prefix('/')
                .ok_or_else(|| Refusal::new("the request does not go to the table's bucket"))?,
        }
    };
    let key = if object_path.is_empty() {
        None
    } else {
        Some(
            percent_encoding::percent_decode_str(object_path)
                .decode_utf8()
                .map_err(|_| Refusal::new("the object key is not valid UTF-8"))?
                .into_owned(),
        )
    };
    let query = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    Ok(S3Request { key, query })
}

/// Whether `host` is AWS S3 for `bucket` (in `region` when the configuration names one):
/// `Some(true)` virtual-hosted, `Some(false)` path-style, `None` not this bucket's S3.
fn aws_host(host: &str, bucket: &str, region: Option<&str>) -> Option<bool> {
    let (virtual_hosted, service) = match host.strip_prefix(&format!("{bucket}.")) {
        Some(rest) => (true, rest),
        None => (false, host),
    };
    let service = service.strip_suffix(".amazonaws.com")?;
    let named_region = match service {
        "s3" => None,
        other => Some(
            other
                .strip_prefix("s3.dualstack.")
                .or_else(|| other.strip_prefix("s3."))?,
        ),
    };
    match (named_region, region) {
        (Some(named), Some(region)) if named != region => None,
        _ => Some(virtual_hosted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compatible() -> Target {
        Target {
            bucket: "lake".into(),
            endpoint: Some("http://127.0.0.1:9000".into()),
            region: Some("us-east-1".into()),
        }
    }

    fn aws() -> Target {
        Target {
            bucket: "lake".into(),
            endpoint: None,
            region: Some("eu-west-1".into()),
        }
    }

    #[test]
    fn path_style_and_virtual_hosted_keys_are_decoded() {
        let path = parse(
            "http://127.0.0.1:9000/lake/wh/t%20x/a.parquet?x-id=GetObject",
            &compatible(),
        )
        .unwrap();
        assert_eq!(path.key.as_deref(), Some("wh/t x/a.parquet"));
        assert_eq!(path.param("x-id"), Some("GetObject"));
        let named = Target {
            endpoint: Some("http://minio.internal:9000".into()),
            ..compatible()
        };
        let hosted = parse("http://lake.minio.internal:9000/wh/a", &named).unwrap();
        assert_eq!(hosted.key.as_deref(), Some("wh/a"));
        let bucket = parse(
            "http://127.0.0.1:9000/lake?list-type=2&prefix=wh%2Ft%2F",
            &compatible(),
        )
        .unwrap();
        assert_eq!(bucket.key, None);
        assert_eq!(bucket.param("prefix"), Some("wh/t/"));
        assert_eq!(
            parse("https://lake.s3.eu-west-1.amazonaws.com/k", &aws())
                .unwrap()
                .key
                .as_deref(),
            Some("k")
        );
        assert_eq!(
            parse("https://s3.amazonaws.com/lake/k", &aws())
                .unwrap()
                .key
                .as_deref(),
            Some("k")
        );
    }

    #[test]
    fn other_hosts_buckets_and_schemes_are_refused() {
        for uri in [
            "http://127.0.0.1:9001/lake/k",
            "https://127.0.0.1:9000/lake/k",
            "http://evil.example/lake/k",
            "http://127.0.0.1:9000/lakeside/k",
            "http://127.0.0.1:9000/other/k",
            "http://other.127.0.0.1:9000/k",
            "http://user:pw@127.0.0.1:9000/lake/k",
            "not a url",
        ] {
            assert!(parse(uri, &compatible()).is_err(), "{uri}");
        }
        for uri in [
            "http://lake.s3.eu-west-1.amazonaws.com/k",
            "https://lake.s3.us-east-1.amazonaws.com/k",
            "https://other.s3.eu-west-1.amazonaws.com/k",
            "https://lake.s3.eu-west-1.amazonaws.com.evil.example/k",
            "https://s3.eu-west-1.amazonaws.com/other/k",
        ] {
            assert!(parse(uri, &aws()).is_err(), "{uri}");
        }
    }
}
