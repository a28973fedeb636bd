//! Every URL the web view writes: its own pages (names percent-encoded as path segments) and
//! lineage links to repos, built only from the configured http(s) pattern, never from a value
//! a client stored.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::BASE_PATH;
use super::UiConfigError;

/// Everything but RFC 3986's unreserved characters is encoded: a name can never add a path
/// segment, a query or a fragment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn segment(name: &str) -> String {
    utf8_percent_encode(name, SEGMENT).to_string()
}

pub fn org(org: &str) -> String {
    format!("{BASE_PATH}/orgs/{}", segment(org))
}

pub fn namespace(org_name: &str, namespace: &str) -> String {
    format!("{}/namespaces/{}", org(org_name), segment(namespace))
}

pub fn table(org_name: &str, ns: &str, table: &str) -> String {
    format!("{}/tables/{}", namespace(org_name, ns), segment(table))
}

/// A page of a table's snapshot history.
pub fn table_page(org_name: &str, ns: &str, table_name: &str, page: usize) -> String {
    format!("{}?page={page}", table(org_name, ns, table_name))
}

/// The URL pattern of repo pages (`FLOE_UI_REPO_URL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoUrl {
    pattern: String,
}

impl RepoUrl {
    /// Accepts only http(s) patterns naming `{repo}` with a fixed host, so a link can only lead
    /// to a repo page of the configured site: the authority must be written out, placeholders
    /// only after it (`https:///{repo}` would otherwise parse with the repo as its host, since
    /// URL parsers skip extra slashes).
    pub fn parse(pattern: &str) -> Result<Self, UiConfigError> {
        let pattern = pattern.trim();
        let lower = pattern.to_ascii_lowercase();
        let scheme_ok = lower.starts_with("https://") || lower.starts_with("http://");
        let authority = pattern
            .split_once("://")
            .map(|(_, rest)| rest.split(['/', '\\', '?', '#']).next().unwrap_or_default())
            .unwrap_or_default();
        let authority_ok = !authority.is_empty() && !authority.contains(['{', '}']);
        let host_ok = url::Url::parse(&pattern.replace("{org}", "o").replace("{repo}", "r"))
            .is_ok_and(|u| u.host_str().is_some_and(|h| !h.is_empty()));
        if !scheme_ok || !authority_ok || !host_ok || !pattern.contains("{repo}") {
            return Err(UiConfigError::RepoUrl(pattern.to_owned()));
        }
        Ok(Self {
            pattern: pattern.to_owned(),
        })
    }

    /// The link of a `arraylake.source.repo` value, `org/repo`; `None` when the value is not
    /// of that form (it is then shown as text).
    pub fn link(&self, value: &str) -> Option<String> {
        let (org, repo) = value.split_once('/')?;
        let valid = |s: &str| !s.is_empty() && !s.contains('/') && s.trim() == s;
        if !valid(org) || !valid(repo) {
            return None;
        }
        Some(
            self.pattern
                .replace("{org}", &segment(org))
                .replace("{repo}", &segment(repo)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_one_segment() {
        assert_eq!(org("a/b?c#d"), "/ui/orgs/a%2Fb%3Fc%23d");
        assert_eq!(
            table_page("o", "n s", "t<", 2),
            "/ui/orgs/o/namespaces/n%20s/tables/t%3C?page=2"
        );
    }

    #[test]
    fn repo_links_only_from_http_patterns() {
        for bad in [
            "javascript:alert(1)//{repo}",
            "ftp://x/{repo}",
            "https://x/",
            "https:///{repo}",
            "https://{repo}/x",
            "https://x@{repo}/",
            "https:/\\{repo}",
            "data:text/html,{repo}",
        ] {
            assert!(RepoUrl::parse(bad).is_err(), "{bad}");
        }
        let url = RepoUrl::parse("https://app.example.com/{org}/{repo}").unwrap();
        assert_eq!(
            url.link("earthmover/era5").as_deref(),
            Some("https://app.example.com/earthmover/era5")
        );
        assert_eq!(
            url.link("a\"b/c d").as_deref(),
            Some("https://app.example.com/a%22b/c%20d")
        );
        for text in ["norepo", "/r", "o/", "o/r/x", "javascript:x/y z"] {
            if text == "javascript:x/y z" {
                // Still a link into the configured site, never a javascript: URL.
                assert!(
                    url.link(text)
                        .unwrap()
                        .starts_with("https://app.example.com/")
                );
            } else {
                assert_eq!(url.link(text), None, "{text}");
            }
        }
    }
}
