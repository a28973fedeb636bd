//! Opt-in pagination: without `pageSize` everything comes in one page.
//!
//! Page tokens are opaque and signed with a server key over the listing they belong to, so a
//! forged or foreign token is a 400, never a different listing.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha2::Sha256;

use crate::error::CatalogError;

/// A list request's paging parameters, as parsed from the query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// `pageToken` as sent; empty or absent is the first page.
    pub token: Option<String>,
    /// `pageSize`, when the client asked for pages.
    pub size: Option<usize>,
}

/// Hard cap of one page, so a huge `pageSize` cannot ask for unbounded work.
pub const MAX_PAGE_SIZE: usize = 1000;

impl PageRequest {
    /// Parses `pageToken` and `pageSize`.
    pub fn parse(token: Option<&str>, size: Option<&str>) -> Result<Self, CatalogError> {
        let size = match size {
            None => None,
            Some(raw) => match raw.parse::<usize>() {
                Ok(n) if n >= 1 => Some(n.min(MAX_PAGE_SIZE)),
                _ => {
                    return Err(CatalogError::BadRequest(format!(
                        "Invalid pageSize '{}': must be an integer of at least 1",
                        raw.escape_debug()
                    )));
                }
            },
        };
        Ok(Self {
            token: token.filter(|t| !t.is_empty()).map(str::to_owned),
            size,
        })
    }

    /// How many items to read: one more than a page, to know whether another follows.
    pub fn read_limit(&self) -> usize {
        self.size.map_or(usize::MAX, |s| s + 1)
    }
}

/// Signs and checks page tokens.
pub struct PageTokens {
    key: Vec<u8>,
}

type Signer = Hmac<Sha256>;
const SIGNATURE_BYTES: usize = 16;

impl PageTokens {
    pub fn new(key: &[u8]) -> Self {
        Self { key: key.to_vec() }
    }

    /// A key known to this process only: fine for one server, not for several instances.
    pub fn random() -> Self {
        let mut key = vec![0u8; 32];
        rand::rng().fill_bytes(&mut key);
        Self { key }
    }

    fn signature(&self, scope: &str, last: &str) -> Vec<u8> {
        let mut mac =
            <Signer as KeyInit>::new_from_slice(&self.key).expect("HMAC takes any key size");
        mac.update(scope.as_bytes());
        mac.update(&[0]);
        mac.update(last.as_bytes());
        mac.finalize().into_bytes()[..SIGNATURE_BYTES].to_vec()
    }

    /// `payload` signed for `scope`: opaque to clients, and only this catalog (or one sharing
    /// its key) can make one another scope accepts.
    pub fn sign(&self, scope: &str, payload: &str) -> String {
        self.encode(scope, payload)
    }

    /// The payload of a token [`Self::sign`] made for `scope`; `None` for any other string.
    pub fn verify(&self, scope: &str, token: &str) -> Option<String> {
        self.decode(scope, token).ok()
    }

    /// A token that resumes `scope`'s listing after `last`.
    pub fn encode(&self, scope: &str, last: &str) -> String {
        let mut raw = self.signature(scope, last);
        raw.extend_from_slice(last.as_bytes());
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// The item a token resumes after, if it was issued for this scope by this catalog.
    pub fn decode(&self, scope: &str, token: &str) -> Result<String, CatalogError> {
        let invalid = || CatalogError::BadRequest("Invalid pageToken".into());
        let raw = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
        if raw.len() < SIGNATURE_BYTES {
            return Err(invalid());
        }
        let (signature, last) = raw.split_at(SIGNATURE_BYTES);
        let last = std::str::from_utf8(last).map_err(|_| invalid())?;
        let mut mac =
            <Signer as KeyInit>::new_from_slice(&self.key).expect("HMAC takes any key size");
        mac.update(scope.as_bytes());
        mac.update(&[0]);
        mac.update(last.as_bytes());
        mac.verify_truncated_left(signature)
            .map_err(|_| invalid())?;
        Ok(last.to_owned())
    }

    /// Where a listing resumes: the decoded token, if any.
    pub fn resume(&self, scope: &str, page: &PageRequest) -> Result<Option<String>, CatalogError> {
        page.token
            .as_deref()
            .map(|t| self.decode(scope, t))
            .transpose()
    }

    /// Cuts a sorted listing into the requested page and its `next-page-token` field: absent
    /// when the client did not page, `null` on the last page.
    pub fn paginate<T>(
        &self,
        scope: &str,
        mut items: Vec<T>,
        page: &PageRequest,
        name_of: impl Fn(&T) -> &str,
    ) -> (Vec<T>, Option<Option<String>>) {
        match page.size {
            None => (items, None),
            Some(size) if items.len() > size => {
                items.truncate(size);
                let token = items.last().map(|last| self.encode(scope, name_of(last)));
                (items, Some(token))
            }
            Some(_) => (items, Some(None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_only_in_their_scope_and_under_their_key() {
        let tokens = PageTokens::new(b"key");
        let token = tokens.encode("tables:ns1", "abc");
        assert_eq!(tokens.decode("tables:ns1", &token).unwrap(), "abc");
        assert!(tokens.decode("tables:ns2", &token).is_err());
        assert!(
            PageTokens::new(b"other")
                .decode("tables:ns1", &token)
                .is_err()
        );
        assert!(tokens.decode("tables:ns1", "!!").is_err());
        assert!(tokens.decode("tables:ns1", "").is_err());
        let mut forged = URL_SAFE_NO_PAD.decode(&token).unwrap();
        *forged.last_mut().unwrap() = b'z';
        assert!(
            tokens
                .decode("tables:ns1", &URL_SAFE_NO_PAD.encode(forged))
                .is_err()
        );
    }

    #[test]
    fn page_parameters() {
        assert_eq!(
            PageRequest::parse(Some(""), None).unwrap(),
            PageRequest::default()
        );
        assert!(PageRequest::parse(None, Some("0")).is_err());
        assert!(PageRequest::parse(None, Some("x")).is_err());
        assert_eq!(
            PageRequest::parse(None, Some("5000")).unwrap().size,
            Some(MAX_PAGE_SIZE)
        );
    }

    #[test]
    fn pages_carry_tokens_only_when_asked() {
        let tokens = PageTokens::new(b"k");
        let names = vec!["a", "b", "c"];
        let (all, token) = tokens.paginate("s", names.clone(), &PageRequest::default(), |s| s);
        assert_eq!((all.len(), token), (3, None));
        let two = PageRequest {
            token: None,
            size: Some(2),
        };
        let (page, token) = tokens.paginate("s", names.clone(), &two, |s| s);
        assert_eq!(page, vec!["a", "b"]);
        assert_eq!(tokens.decode("s", &token.unwrap().unwrap()).unwrap(), "b");
        let three = PageRequest {
            token: None,
            size: Some(3),
        };
        let (page, token) = tokens.paginate("s", names, &three, |s| s);
        assert_eq!((page.len(), token), (3, Some(None)));
    }
}
