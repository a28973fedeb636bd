//! Sealing secrets at rest: a secret that a catalog row must keep (the secret access key of a
//! bucket configuration with static HMAC keys) is stored as a [`Sealed`] value, never as
//! plaintext, so a copy of the store (a backup, a table export, a read-only principal of the
//! DynamoDB table) does not give the secret away.
//!
//! The port is [`SecretSealer`]; its adapters are [`local::LocalKeySealer`] (AES-256-GCM under a
//! key file in the data directory, for `floe serve`) and [`kms::KmsSealer`] (envelope encryption
//! under an AWS KMS key). `deployment` picks one from the settings.

pub mod kms;
pub mod local;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};

pub use kms::KmsSealer;
pub use local::LocalKeySealer;

/// Length of an AES-256 key, local or a KMS data key.
pub const KEY_LEN: usize = 32;

/// A secret as stored in a catalog row: never the plaintext. Binary fields are standard base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// How the value was sealed ([`local::SCHEME`] or [`kms::SCHEME`]); also the AEAD's
    /// associated data, so a value cannot be passed off as sealed by another scheme.
    pub scheme: String,
    /// The data key as KMS encrypted it (envelope schemes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_key: Option<String>,
    /// The 96-bit AES-GCM nonce, fresh for every seal.
    pub nonce: String,
    /// The ciphertext followed by the 128-bit authentication tag.
    pub ciphertext: String,
}

/// Why a secret could not be sealed or opened. No variant ever carries a plaintext or a key.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("secret key file {path}: {source}")]
    KeyFileIo {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("secret key file {path} holds {len} bytes, not {KEY_LEN}; restore the right file")]
    KeyFileSize { path: std::path::PathBuf, len: u64 },
    #[error(
        "secret key file {path} is accessible to group or others (mode {mode:03o}); \
         it must be 0600 (chmod 600)"
    )]
    KeyFilePermissions { path: std::path::PathBuf, mode: u32 },
    #[error("secret key file {path} is not a regular file")]
    KeyFileKind { path: std::path::PathBuf },
    #[error("the secret was sealed with scheme '{found}', this sealer opens '{expected}'")]
    Scheme {
        expected: &'static str,
        found: String,
    },
    #[error("malformed sealed secret: {0}")]
    Malformed(&'static str),
    #[error("the sealed secret does not open: wrong key, or it was altered")]
    Unopenable,
    #[error("KMS {operation} failed: {message}")]
    Kms {
        operation: &'static str,
        message: String,
    },
    #[error("no key to seal secrets with: set FLOE_SECRETS_KMS_KEY to a KMS key id, ARN or alias")]
    Unconfigured,
    #[error("the cipher or the random number generator failed")]
    Crypto,
}

/// Seals and opens secrets kept in catalog rows.
/// One use of the sealer of secrets kept in rows (`secrets::SecretSealer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecretUse {
    /// Sealing a secret (adding a bucket configuration with static keys).
    Seal,
    /// Opening one (using such a bucket configuration).
    Open,
}

#[async_trait::async_trait]
pub trait SecretSealer: Send + Sync + 'static {
    async fn seal(&self, plaintext: &[u8]) -> Result<Sealed, SecretError>;
    async fn open(&self, sealed: &Sealed) -> Result<Vec<u8>, SecretError>;
}

/// The sealer, or the error that says how to configure one: for callers that must seal.
pub fn required(sealer: Option<&dyn SecretSealer>) -> Result<&dyn SecretSealer, SecretError> {
    sealer.ok_or(SecretError::Unconfigured)
}

/// An AES-256-GCM key from raw bytes.
fn aead_key(bytes: &[u8]) -> Result<LessSafeKey, SecretError> {
    UnboundKey::new(&AES_256_GCM, bytes)
        .map(LessSafeKey::new)
        .map_err(|_| SecretError::Crypto)
}

/// Encrypts under `key` with a fresh random nonce and `aad` as associated data; returns the
/// base64 nonce and ciphertext (with tag).
fn seal_with(
    key: &LessSafeKey,
    aad: &str,
    plaintext: &[u8],
) -> Result<(String, String), SecretError> {
    let mut nonce = [0u8; NONCE_LEN];
    aws_lc_rs::rand::fill(&mut nonce).map_err(|_| SecretError::Crypto)?;
    let mut data = plaintext.to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(aad.as_bytes()),
        &mut data,
    )
    .map_err(|_| SecretError::Crypto)?;
    Ok((B64.encode(nonce), B64.encode(data)))
}

/// Decrypts what [`seal_with`] produced; any change to key, nonce, ciphertext or `aad` fails.
fn open_with(
    key: &LessSafeKey,
    aad: &str,
    nonce: &str,
    ciphertext: &str,
) -> Result<Vec<u8>, SecretError> {
    let nonce = B64
        .decode(nonce)
        .map_err(|_| SecretError::Malformed("nonce is not base64"))?;
    let nonce = Nonce::try_assume_unique_for_key(&nonce)
        .map_err(|_| SecretError::Malformed("nonce is not 96 bits"))?;
    let mut data = B64
        .decode(ciphertext)
        .map_err(|_| SecretError::Malformed("ciphertext is not base64"))?;
    let len = key
        .open_in_place(nonce, Aad::from(aad.as_bytes()), &mut data)
        .map_err(|_| SecretError::Unopenable)?
        .len();
    data.truncate(len);
    Ok(data)
}

/// Refuses a value sealed by another scheme before trying to open it.
fn check_scheme(sealed: &Sealed, expected: &'static str) -> Result<(), SecretError> {
    if sealed.scheme == expected {
        Ok(())
    } else {
        Err(SecretError::Scheme {
            expected,
            found: sealed.scheme.chars().take(64).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scheme is the associated data: the same key, nonce and ciphertext under another
    /// scheme name do not open.
    #[test]
    fn associated_data_is_bound() {
        let key = aead_key(&[7u8; KEY_LEN]).unwrap();
        let (nonce, ciphertext) = seal_with(&key, "scheme-a", b"secret").unwrap();
        assert_eq!(
            open_with(&key, "scheme-a", &nonce, &ciphertext).unwrap(),
            b"secret"
        );
        assert!(matches!(
            open_with(&key, "scheme-b", &nonce, &ciphertext),
            Err(SecretError::Unopenable)
        ));
    }

    #[test]
    fn malformed_fields_are_refused() {
        let key = aead_key(&[7u8; KEY_LEN]).unwrap();
        let (nonce, ciphertext) = seal_with(&key, "s", b"secret").unwrap();
        for (n, c) in [
            ("not base64!", ciphertext.as_str()),
            (&B64.encode([0u8; 8]), ciphertext.as_str()),
            (nonce.as_str(), "not base64!"),
        ] {
            assert!(matches!(
                open_with(&key, "s", n, c),
                Err(SecretError::Malformed(_))
            ));
        }
        // Shorter than a tag.
        assert!(matches!(
            open_with(&key, "s", &nonce, &B64.encode([1u8; 4])),
            Err(SecretError::Unopenable)
        ));
    }
}
