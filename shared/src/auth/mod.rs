//! Authentication: a bearer token becomes a `Principal`.
//!
//! Api-client tokens (`ema_` followed by random characters) are stored only as their SHA-256,
//! so a copy of the store never yields a usable token. Any other bearer token is an OIDC
//! user's JWT when an issuer is configured (`oidc`, with the issuer's keys from `jwks`), and
//! refused otherwise.

pub mod jwks;
pub mod oidc;
#[cfg(test)]
pub(crate) mod test_keys;

use rand::Rng;
use sha2::{Digest, Sha256};

use crate::error::CatalogError;
use crate::model::Principal;
use crate::store::MetaStore;
use crate::store::rows::{self, TokenRow, keys};

/// Prefix of api-client tokens.
pub const TOKEN_PREFIX: &str = "ema_";

/// A new random api-client token.
pub fn generate_token() -> String {
    format!("{TOKEN_PREFIX}{}", random_alphanumeric(40))
}

/// `len` random letters and digits: unguessable ids and secrets that survive any transport.
pub fn random_alphanumeric(len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..len)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Whether a bearer token is an api-client token (looked up in the store) rather than a JWT.
pub fn is_api_client_token(token: &str) -> bool {
    token.starts_with(TOKEN_PREFIX)
}

/// The stored form of a token.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Extracts the token of an `Authorization: Bearer <token>` header value.
pub fn bearer(header: Option<&str>) -> Result<&str, CatalogError> {
    let value = header.ok_or_else(|| {
        CatalogError::Unauthenticated("Missing Authorization header: send 'Bearer <token>'".into())
    })?;
    let (scheme, token) = value.trim().split_once(' ').ok_or_else(|| {
        CatalogError::Unauthenticated(
            "Malformed Authorization header: expected 'Bearer <token>'".into(),
        )
    })?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(CatalogError::Unauthenticated(
            "Malformed Authorization header: expected 'Bearer <token>'".into(),
        ));
    }
    Ok(token.trim())
}

/// Resolves a token, given as its stored hash, to its principal.
pub async fn authenticate_hash(
    store: &dyn MetaStore,
    hash: &str,
) -> Result<Principal, CatalogError> {
    let found = rows::get::<TokenRow>(store, &keys::token(hash)).await?;
    found
        .map(|v| v.row.principal)
        .ok_or_else(|| CatalogError::Unauthenticated("Invalid or expired token".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_prefixed_random_and_hash_stably() {
        let a = generate_token();
        let b = generate_token();
        assert!(a.starts_with("ema_") && a.len() == 44);
        assert_ne!(a, b);
        assert_eq!(hash_token(&a), hash_token(&a));
        assert_ne!(hash_token(&a), hash_token(&b));
        assert_eq!(hash_token(&a).len(), 64);
    }

    #[test]
    fn bearer_header_parsing() {
        assert_eq!(bearer(Some("Bearer abc")).unwrap(), "abc");
        assert_eq!(bearer(Some("bearer  abc ")).unwrap(), "abc");
        assert!(bearer(None).is_err());
        assert!(bearer(Some("Basic abc")).is_err());
        assert!(bearer(Some("Bearer")).is_err());
        assert!(bearer(Some("Bearer   ")).is_err());
    }
}
