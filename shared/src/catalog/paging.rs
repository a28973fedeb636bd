//! Opt-in pagination: without `pageSize` everything comes in one page.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::error::CatalogError;

/// A list request's paging parameters, as parsed from the query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// The last item of the previous page, decoded from `pageToken`.
    pub after: Option<String>,
    /// `pageSize`, when the client asked for pages.
    pub size: Option<usize>,
}

/// Hard cap of one page, so a huge `pageSize` cannot ask for unbounded work.
pub const MAX_PAGE_SIZE: usize = 1000;

impl PageRequest {
    /// Parses `pageToken` and `pageSize`. An empty token is the first page.
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
        let after = match token {
            None | Some("") => None,
            Some(raw) => Some(decode_token(raw)?),
        };
        Ok(Self { after, size })
    }
}

/// An opaque page token for the last returned name.
pub fn encode_token(last: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("v1:{last}"))
}

fn decode_token(raw: &str) -> Result<String, CatalogError> {
    let invalid = || CatalogError::BadRequest("Invalid pageToken".into());
    let bytes = URL_SAFE_NO_PAD.decode(raw).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    text.strip_prefix("v1:")
        .map(str::to_owned)
        .ok_or_else(invalid)
}

/// Cuts a sorted listing into the requested page and its `next-page-token` field:
/// absent when the client did not page, `null` on the last page.
pub fn paginate<T>(
    mut items: Vec<T>,
    page: &PageRequest,
    name_of: impl Fn(&T) -> &str,
) -> (Vec<T>, Option<Option<String>>) {
    match page.size {
        None => (items, None),
        Some(size) if items.len() > size => {
            items.truncate(size);
            let token = items.last().map(|last| encode_token(name_of(last)));
            (items, Some(token))
        }
        Some(_) => (items, Some(None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_garbage_is_rejected() {
        let page = PageRequest::parse(Some(&encode_token("abc")), Some("2")).unwrap();
        assert_eq!(
            page,
            PageRequest {
                after: Some("abc".into()),
                size: Some(2)
            }
        );
        assert_eq!(
            PageRequest::parse(Some(""), None).unwrap(),
            PageRequest::default()
        );
        assert!(PageRequest::parse(Some("!!"), None).is_err());
        assert!(PageRequest::parse(None, Some("0")).is_err());
        assert!(PageRequest::parse(None, Some("x")).is_err());
    }

    #[test]
    fn pages_carry_tokens_only_when_asked() {
        let names = vec!["a", "b", "c"];
        let (all, token) = paginate(names.clone(), &PageRequest::default(), |s| s);
        assert_eq!((all.len(), token), (3, None));
        let (two, token) = paginate(
            names.clone(),
            &PageRequest {
                after: None,
                size: Some(2),
            },
            |s| s,
        );
        assert_eq!(two, vec!["a", "b"]);
        assert_eq!(token, Some(Some(encode_token("b"))));
        let (three, token) = paginate(
            names,
            &PageRequest {
                after: None,
                size: Some(3),
            },
            |s| s,
        );
        assert_eq!((three.len(), token), (3, Some(None)));
    }
}
