//! One management request over HTTP(S): the base URL and token from flags, environment or the
//! dev-token file, the ErrorModel turned into a [`Failure`] with its exit code.
//!
//! The token goes only into the Authorization header: no message, log or error names it.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use url::{Host, Url};

use super::{EXIT_LOCAL, EXIT_SERVER, EXIT_UNAUTHENTICATED, EXIT_USAGE, Failure, exit_code};

/// Where the management API and the Iceberg routes live below the base URL.
const API: &[&str] = &["api", "v1"];
const ICEBERG: &[&str] = &["iceberg", "v1"];

/// Lambda answers within API Gateway's 29 s; a minute covers that and a slow network.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Answers are small JSON documents; a bound keeps a wrong URL from filling memory.
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// Where the server is, who the caller is, and how answers are printed.
#[derive(Args)]
pub struct Connection {
    /// Base URL of the Floe server; /api/v1/... is appended (a trailing /iceberg is dropped).
    /// http:// only on a loopback address.
    #[arg(
        long,
        env = "FLOE_URL",
        default_value = "http://127.0.0.1:8181",
        value_parser = parse_base_url,
        global = true
    )]
    url: Url,
    /// Bearer token; default: FLOE_TOKEN, else the dev-token file `floe serve` writes
    /// ($FLOE_DATA_DIR/dev-token, by default .floe/dev-token).
    #[arg(long, env = "FLOE_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// Print the API's JSON answer exactly as received (nothing for empty answers).
    #[arg(long, global = true)]
    pub json: bool,
}

type Http = HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client bound to one server and token.
pub struct Client {
    http: Http,
    base: Url,
    token: String,
}

impl Connection {
    /// The client for these settings; fails before any request without a usable token.
    pub fn client(&self) -> Result<Client, Failure> {
        let token = resolve_token(self.token.as_deref())?;
        if http::HeaderValue::from_str(&format!("Bearer {token}")).is_err() {
            return Err(Failure::new(
                EXIT_USAGE,
                "the token holds characters an HTTP header cannot carry",
            ));
        }
        Ok(Client {
            http: http_client(&self.url)?,
            base: self.url.clone(),
            token,
        })
    }
}

impl Client {
    /// Sends one request to `/api/v1/<segments...>` and returns the body of a 2xx answer;
    /// any other answer becomes a failure carrying the ErrorModel's message.
    pub async fn call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<Value>,
    ) -> Result<Bytes, Failure> {
        self.send(method, self.endpoint(API, segments, query), body)
            .await
    }

    /// [`Self::call`] on the Iceberg REST routes (`/iceberg/v1/<segments...>`): what the
    /// commands that set table and namespace properties use, as engines do.
    pub async fn call_iceberg(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<Value>,
    ) -> Result<Bytes, Failure> {
        self.send(method, self.endpoint(ICEBERG, segments, &[]), body)
            .await
    }

    async fn send(&self, method: Method, url: Url, body: Option<Value>) -> Result<Bytes, Failure> {
        let mut request = Request::builder()
            .method(method)
            .uri(url.as_str())
            .header(
                http::header::AUTHORIZATION,
                format!("Bearer {}", self.token),
            )
            .header(http::header::ACCEPT, "application/json")
            .header(
                http::header::USER_AGENT,
                concat!("floe/", env!("CARGO_PKG_VERSION")),
            );
        let body = match body {
            Some(json) => {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
                Bytes::from(json.to_string())
            }
            None => Bytes::new(),
        };
        let request = request
            .body(Full::new(body))
            .map_err(|e| Failure::new(EXIT_USAGE, format!("cannot build the request: {e}")))?;
        let exchange = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|e| self.unreachable(&e))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| Failure::new(EXIT_SERVER, format!("cannot read the answer: {e}")))?
                .to_bytes();
            Ok::<_, Failure>((status, body))
        };
        let (status, body) = tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| {
                Failure::new(
                    EXIT_SERVER,
                    format!(
                        "no answer from {} within {} s",
                        self.base,
                        TIMEOUT.as_secs()
                    ),
                )
            })??;
        if status.is_success() {
            Ok(body)
        } else {
            Err(refusal(status, &body))
        }
    }

    fn endpoint(&self, root: &[&str], segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("http(s) URLs have a path")
            .pop_if_empty()
            .extend(root)
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    fn unreachable(&self, error: &dyn std::error::Error) -> Failure {
        let mut message = format!("cannot reach {}: {error}", self.base);
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        Failure::new(EXIT_SERVER, message)
    }
}

/// A non-2xx answer: the ErrorModel's message, its status and type, and the matching exit code.
fn refusal(status: StatusCode, body: &[u8]) -> Failure {
    let error = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").cloned());
    let message = error
        .as_ref()
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str);
    let kind = error
        .as_ref()
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str);
    let text = match (message, kind) {
        (Some(message), Some(kind)) => format!("{message} (HTTP {}, {kind})", status.as_u16()),
        (Some(message), None) => format!("{message} (HTTP {})", status.as_u16()),
        _ => {
            let raw = String::from_utf8_lossy(body);
            let raw: String = raw.trim().chars().take(200).collect();
            format!("HTTP {status}: {raw}")
        }
    };
    Failure::new(exit_code(status.as_u16()), text)
}

/// The token: the flag or FLOE_TOKEN, else the dev-token file of the local data directory.
fn resolve_token(given: Option<&str>) -> Result<String, Failure> {
    if let Some(token) = given.map(str::trim).filter(|t| !t.is_empty()) {
        return Ok(token.to_owned());
    }
    let dir = std::env::var_os("FLOE_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".floe"));
    let path = dir.join("dev-token");
    match std::fs::read_to_string(&path) {
        Ok(content) if !content.trim().is_empty() => Ok(content.trim().to_owned()),
        Ok(_) => Err(no_token(&path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(no_token(&path)),
        Err(e) => Err(Failure::new(
            EXIT_LOCAL,
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

fn no_token(path: &std::path::Path) -> Failure {
    Failure::new(
        EXIT_UNAUTHENTICATED,
        format!(
            "no token: pass --token, set FLOE_TOKEN, or run where `floe serve` wrote {}",
            path.display()
        ),
    )
}

/// Checks a base URL: http(s), no credentials, query or fragment, and plain http only on
/// loopback, where the token cannot be read off the network.
fn parse_base_url(raw: &str) -> Result<Url, String> {
    let mut url = Url::parse(raw).map_err(|e| format!("not a URL: {e}"))?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(&url) => {}
        "http" => {
            return Err(
                "http:// would send the token in clear text: use https://, or http:// on a loopback address (127.0.0.1, ::1, localhost)"
                    .into(),
            );
        }
        _ => return Err("use an http:// or https:// URL".into()),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a base URL carries no credentials: use --token or FLOE_TOKEN".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("a base URL has no query or fragment".into());
    }
    // The catalog URI engines use (…/iceberg) names the same server.
    let mut kept: Vec<String> = url
        .path_segments()
        .map(|s| s.filter(|s| !s.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default();
    if kept.last().is_some_and(|s| s == "iceberg") {
        kept.pop();
    }
    url.path_segments_mut()
        .map_err(|()| "not a base URL".to_owned())?
        .clear()
        .extend(&kept);
    Ok(url)
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// HTTPS with the system's root certificates for https:// URLs; plain HTTP otherwise (only
/// loopback URLs get this far).
fn http_client(url: &Url) -> Result<Http, Failure> {
    let connector = floe::outbound::connector(url.scheme() == "https")
        .map_err(|e| Failure::new(EXIT_LOCAL, e))?;
    Ok(HyperClient::builder(TokioExecutor::new()).build(connector))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_on_loopback() {
        for ok in [
            "http://127.0.0.1:8181",
            "http://localhost:8181/",
            "http://[::1]:8181",
            "https://floe.example.com",
        ] {
            assert!(parse_base_url(ok).is_ok(), "{ok}");
        }
        for refused in [
            "http://floe.example.com",
            "http://10.0.0.5:8181",
            "ftp://127.0.0.1",
            "https://user:pw@floe.example.com",
            "https://floe.example.com/?a=b",
            "not a url",
        ] {
            assert!(parse_base_url(refused).is_err(), "{refused}");
        }
    }

    fn client(base: &str) -> Client {
        let base = parse_base_url(base).unwrap();
        Client {
            http: http_client(&base).unwrap(),
            base,
            token: "ema_x".into(),
        }
    }

    #[test]
    fn paths_are_appended_and_encoded() {
        let c = client("http://127.0.0.1:8181/iceberg/");
        assert_eq!(
            c.endpoint(API, &["orgs", "demo", "members", "user:a/b c"], &[])
                .as_str(),
            "http://127.0.0.1:8181/api/v1/orgs/demo/members/user:a%2Fb%20c"
        );
        assert_eq!(
            c.endpoint(ICEBERG, &["demo", "namespaces", "ns", "properties"], &[])
                .as_str(),
            "http://127.0.0.1:8181/iceberg/v1/demo/namespaces/ns/properties"
        );
        let c = client("https://gw.example.com/prod");
        assert_eq!(
            c.endpoint(
                API,
                &["orgs", "demo", "namespaces", "ns", "grants"],
                &[("principal", "team:x&y"), ("table", "t")]
            )
            .as_str(),
            "https://gw.example.com/prod/api/v1/orgs/demo/namespaces/ns/grants?principal=team%3Ax%26y&table=t"
        );
    }

    #[test]
    fn refusals_carry_the_error_model_message_and_exit_code() {
        let body = br#"{"error": {"message": "Team does not exist: x", "type": "NoSuchTeamException", "code": 404}}"#;
        let failure = refusal(StatusCode::NOT_FOUND, body);
        assert_eq!(failure.code, 5);
        assert_eq!(
            failure.message,
            "Team does not exist: x (HTTP 404, NoSuchTeamException)"
        );
        let failure = refusal(StatusCode::BAD_GATEWAY, b"upstream down");
        assert_eq!(failure.code, 8);
        assert!(failure.message.contains("upstream down"));
    }
}
