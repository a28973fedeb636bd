//! Envelope encryption under an AWS KMS key: the sealer of deployments on DynamoDB. Every seal
//! asks KMS for a fresh AES-256 data key, encrypts locally with it and stores the data key only
//! as KMS encrypted it; opening asks KMS to decrypt the data key. The key that protects the
//! secrets thus never sits in the table that stores them, and every use is in CloudTrail.

use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use super::{KEY_LEN, Sealed, SecretError, SecretSealer};

/// Scheme of values sealed with a KMS data key.
pub const SCHEME: &str = "floe-kms-aes-256-gcm-v1";

/// Encryption context of every data key: KMS refuses to decrypt a data key without it, so a
/// data key cannot be replayed through another application's Decrypt permission with a
/// different context, and key policies can require it (`kms:EncryptionContext:purpose`).
pub const ENCRYPTION_CONTEXT: (&str, &str) = ("purpose", "floe-bucket-secret");

/// Seals with data keys from one KMS key.
#[derive(Debug, Clone)]
pub struct KmsSealer {
    client: aws_sdk_kms::Client,
    key_id: String,
}

impl KmsSealer {
    /// `key_id` is a key id, key ARN, alias name (`alias/...`) or alias ARN. Decrypt names it
    /// too, so a data key sealed under any other KMS key is refused.
    pub fn new(client: aws_sdk_kms::Client, key_id: impl Into<String>) -> Self {
        Self {
            client,
            key_id: key_id.into(),
        }
    }

    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The KMS actions a use of the sealer calls (`floe::iam`): sealing asks for a data key,
    /// opening decrypts one. Both are made with [`ENCRYPTION_CONTEXT`], which the deployment's
    /// policies require.
    pub fn aws_actions(secret_use: super::SecretUse) -> [&'static str; 1] {
        match secret_use {
            super::SecretUse::Seal => ["kms:GenerateDataKey"],
            super::SecretUse::Open => ["kms:Decrypt"],
        }
    }
}

/// The KMS error, as code and message: the SDK's errors never hold request payloads.
fn kms_error<E>(operation: &'static str, error: aws_sdk_kms::error::SdkError<E>) -> SecretError
where
    E: aws_sdk_kms::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    SecretError::Kms {
        operation,
        message: aws_sdk_kms::error::DisplayErrorContext(&error).to_string(),
    }
}

#[async_trait::async_trait]
impl SecretSealer for KmsSealer {
    async fn seal(&self, plaintext: &[u8]) -> Result<Sealed, SecretError> {
        let (k, v) = ENCRYPTION_CONTEXT;
        let out = self
            .client
            .generate_data_key()
            .key_id(&self.key_id)
            .key_spec(DataKeySpec::Aes256)
            .encryption_context(k, v)
            .send()
            .await
            .map_err(|e| kms_error("GenerateDataKey", e))?;
        let wrapped = out
            .ciphertext_blob
            .ok_or(SecretError::Malformed("KMS returned no encrypted data key"))?;
        let mut data_key = out
            .plaintext
            .ok_or(SecretError::Malformed("KMS returned no data key"))?
            .into_inner();
        let key = if data_key.len() == KEY_LEN {
            super::aead_key(&data_key)
        } else {
            Err(SecretError::Malformed(
                "KMS returned a data key of the wrong size",
            ))
        };
        data_key.fill(0);
        let (nonce, ciphertext) = super::seal_with(&key?, SCHEME, plaintext)?;
        Ok(Sealed {
            scheme: SCHEME.into(),
            data_key: Some(B64.encode(wrapped.as_ref())),
            nonce,
            ciphertext,
        })
    }

    async fn open(&self, sealed: &Sealed) -> Result<Vec<u8>, SecretError> {
        super::check_scheme(sealed, SCHEME)?;
        let wrapped = sealed
            .data_key
            .as_deref()
            .ok_or(SecretError::Malformed("no data key"))?;
        let wrapped = B64
            .decode(wrapped)
            .map_err(|_| SecretError::Malformed("data key is not base64"))?;
        let (k, v) = ENCRYPTION_CONTEXT;
        let out = self
            .client
            .decrypt()
            .key_id(&self.key_id)
            .ciphertext_blob(Blob::new(wrapped))
            .encryption_context(k, v)
            .send()
            .await
            .map_err(|e| kms_error("Decrypt", e))?;
        let mut data_key = out
            .plaintext
            .ok_or(SecretError::Malformed("KMS returned no data key"))?
            .into_inner();
        let key = if data_key.len() == KEY_LEN {
            super::aead_key(&data_key)
        } else {
            Err(SecretError::Unopenable)
        };
        data_key.fill(0);
        super::open_with(&key?, SCHEME, &sealed.nonce, &sealed.ciphertext)
    }
}
