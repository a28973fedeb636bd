//! The session cookie and the request checks around it: reading `floe_session`, writing it
//! HttpOnly and SameSite=Strict (Secure unless the request is plain http to a loopback
//! address, where a browser would drop a Secure cookie), and refusing cross-site form posts.

use axum::extract::FromRequestParts;
use http::HeaderMap;
use http::request::Parts;

use super::BASE_PATH;
use super::UiState;
use super::error::UiError;
use crate::model::Principal;

/// Name of the session cookie.
pub const COOKIE: &str = "floe_session";

/// The signed-in principal of a request.
pub struct SignedIn {
    pub principal: Principal,
}

impl FromRequestParts<UiState> for SignedIn {
    type Rejection = UiError;

    async fn from_request_parts(parts: &mut Parts, state: &UiState) -> Result<Self, UiError> {
        let Some(id) = session_id(&parts.headers) else {
            return Err(UiError::SignIn);
        };
        let principal = state
            .catalog
            .sessions
            .session_principal(&id)
            .await
            .map_err(|e| match e {
                crate::error::CatalogError::Unauthenticated(_) => UiError::SignIn,
                other => UiError::Catalog(other),
            })?;
        Ok(SignedIn { principal })
    }
}

/// The session id of the request's `Cookie` headers, if any.
pub fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// Whether the request reached us as plain http on a loopback host (`floe serve` on a
/// developer's machine): the one case where the cookie goes without `Secure`. Anything behind
/// a proxy that says https, or on any other host, gets `Secure`.
pub fn plain_loopback(headers: &HeaderMap) -> bool {
    let forwarded_https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| !v.trim().eq_ignore_ascii_case("http"));
    if forwarded_https {
        return false;
    }
    let Some(host) = headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let host = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

/// The `Set-Cookie` value that stores a new session for `max_age_secs`.
pub fn set_cookie(id: &str, max_age_secs: u64, headers: &HeaderMap) -> String {
    format!(
        "{COOKIE}={id}; Path={BASE_PATH}; Max-Age={max_age_secs}; HttpOnly; SameSite=Strict{}",
        secure(headers)
    )
}

/// The `Set-Cookie` value that removes the session cookie.
pub fn clear_cookie(headers: &HeaderMap) -> String {
    format!(
        "{COOKIE}=; Path={BASE_PATH}; Max-Age=0; HttpOnly; SameSite=Strict{}",
        secure(headers)
    )
}

fn secure(headers: &HeaderMap) -> &'static str {
    if plain_loopback(headers) {
        ""
    } else {
        "; Secure"
    }
}

/// Refuses form posts another site made the browser send (sign-in CSRF, which SameSite alone
/// does not stop since there is no cookie yet): a `Sec-Fetch-Site` other than same-origin or
/// none, or an `Origin` whose host is not the request's.
pub fn check_same_origin(headers: &HeaderMap) -> Result<(), UiError> {
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    if site
        .as_deref()
        .is_some_and(|s| s != "same-origin" && s != "none")
    {
        return Err(UiError::CrossOrigin);
    }
    if let Some(origin) = headers.get(http::header::ORIGIN) {
        let host = headers
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let origin_host = origin
            .to_str()
            .ok()
            .and_then(|o| url::Url::parse(o).ok())
            .and_then(|u| {
                let name = u.host_str()?.to_owned();
                Some(match u.port() {
                    Some(port) => format!("{name}:{port}"),
                    None => name,
                })
            });
        if origin_host.as_deref() != Some(host) {
            return Err(UiError::CrossOrigin);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn reads_the_session_among_other_cookies() {
        let h = headers(&[("cookie", "a=1; floe_session=abc ; b=2")]);
        assert_eq!(session_id(&h).as_deref(), Some("abc"));
        assert_eq!(session_id(&headers(&[("cookie", "floe_sessionx=1")])), None);
    }

    #[test]
    fn secure_everywhere_but_plain_loopback() {
        let local = headers(&[("host", "127.0.0.1:8181")]);
        assert!(!set_cookie("x", 1, &local).contains("Secure"));
        assert!(set_cookie("x", 1, &local).contains("HttpOnly; SameSite=Strict"));
        for h in [
            headers(&[("host", "catalog.example.com")]),
            headers(&[("host", "localhost:1"), ("x-forwarded-proto", "https")]),
            headers(&[("host", "127.0.0.1.example.com")]),
            HeaderMap::new(),
        ] {
            assert!(set_cookie("x", 1, &h).ends_with("; Secure"), "{h:?}");
        }
    }

    #[test]
    fn cross_site_posts_are_refused() {
        let ok = headers(&[("host", "h:1"), ("origin", "http://h:1")]);
        assert!(check_same_origin(&ok).is_ok());
        assert!(check_same_origin(&headers(&[("host", "h:1")])).is_ok());
        for bad in [
            headers(&[("host", "h:1"), ("origin", "http://evil:1")]),
            headers(&[("host", "h:1"), ("origin", "null")]),
            headers(&[("host", "h:1"), ("sec-fetch-site", "cross-site")]),
        ] {
            assert!(check_same_origin(&bad).is_err(), "{bad:?}");
        }
    }
}
