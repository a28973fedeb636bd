//! The KMS sealer against moto's KMS: envelope round trip, one key's values refused by another,
//! and the encryption context bound to every data key.

use aws_sdk_kms::primitives::Blob;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use floe::secrets::kms::{ENCRYPTION_CONTEXT, SCHEME};
use floe::secrets::{KmsSealer, LocalKeySealer, Sealed, SecretError, SecretSealer};

use floe_tests::moto;

const SECRET: &[u8] = b"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

async fn sealer(key_id: &str) -> KmsSealer {
    KmsSealer::new(moto::kms().await, key_id)
}

/// Every seal wraps a fresh data key; the row holds no plaintext and opens again.
#[tokio::test]
async fn secrets_round_trip_through_kms_data_keys() {
    let key = moto::create_kms_key().await;
    let sealer = sealer(&key).await;
    let a = sealer.seal(SECRET).await.unwrap();
    let b = sealer.seal(SECRET).await.unwrap();
    assert_eq!(a.scheme, SCHEME);
    assert!(a.data_key.is_some());
    assert_ne!(a.data_key, b.data_key, "a data key per seal");
    assert_ne!(a.ciphertext, b.ciphertext);
    let json = serde_json::to_string(&a).unwrap();
    assert!(
        !json.contains(std::str::from_utf8(SECRET).unwrap()),
        "{json}"
    );
    assert!(!json.contains(&B64.encode(SECRET)), "{json}");
    assert_eq!(sealer.open(&a).await.unwrap(), SECRET);
    assert_eq!(sealer.open(&b).await.unwrap(), SECRET);
    // A fresh sealer (another function instance) opens it as well.
    assert_eq!(self::sealer(&key).await.open(&a).await.unwrap(), SECRET);
}

/// An alias names the key as well as its id does.
#[tokio::test]
async fn secrets_seal_under_an_alias() {
    let key = moto::create_kms_key().await;
    let alias = format!("alias/{}", moto::unique("floe-secrets"));
    moto::kms()
        .await
        .create_alias()
        .alias_name(&alias)
        .target_key_id(&key)
        .send()
        .await
        .unwrap();
    let sealed = sealer(&alias).await.seal(SECRET).await.unwrap();
    assert_eq!(sealer(&key).await.open(&sealed).await.unwrap(), SECRET);
}

/// Decrypt names the sealer's key, so a value sealed under another key does not open, even
/// though the caller may decrypt with both.
#[tokio::test]
async fn secrets_sealed_under_one_key_do_not_open_with_another() {
    let one = sealer(&moto::create_kms_key().await).await;
    let other = sealer(&moto::create_kms_key().await).await;
    let sealed = one.seal(SECRET).await.unwrap();
    let error = other.open(&sealed).await.unwrap_err();
    assert!(
        matches!(
            error,
            SecretError::Kms {
                operation: "Decrypt",
                ..
            }
        ),
        "{error}"
    );
    assert!(!error.to_string().contains("EXAMPLEKEY"), "{error}");
    assert_eq!(one.open(&sealed).await.unwrap(), SECRET);
}

/// The data key was generated under the encryption context (KMS refuses to decrypt it without
/// it or with another), and Decrypt sends it (the sealer opens its values).
#[tokio::test]
async fn secrets_data_keys_carry_the_encryption_context() {
    let key = moto::create_kms_key().await;
    let sealed = sealer(&key).await.seal(SECRET).await.unwrap();
    let wrapped = B64.decode(sealed.data_key.as_deref().unwrap()).unwrap();
    let kms = moto::kms().await;
    let decrypt = |context: Option<(&'static str, &'static str)>| {
        let request = kms
            .decrypt()
            .key_id(&key)
            .ciphertext_blob(Blob::new(wrapped.clone()));
        let request = match context {
            Some((k, v)) => request.encryption_context(k, v),
            None => request,
        };
        request.send()
    };
    assert!(decrypt(None).await.is_err(), "no context");
    assert!(
        decrypt(Some((ENCRYPTION_CONTEXT.0, "something-else")))
            .await
            .is_err(),
        "another context"
    );
    let data_key = decrypt(Some(ENCRYPTION_CONTEXT)).await.unwrap();
    assert_eq!(data_key.plaintext.unwrap().as_ref().len(), 32);
    assert_eq!(sealer(&key).await.open(&sealed).await.unwrap(), SECRET);
}

/// Altered values, values of the local scheme and values without a data key are refused.
#[tokio::test]
async fn secrets_altered_or_foreign_values_are_refused() {
    let sealer = sealer(&moto::create_kms_key().await).await;
    let sealed = sealer.seal(SECRET).await.unwrap();
    let mut ciphertext = B64.decode(&sealed.ciphertext).unwrap();
    ciphertext[0] ^= 1;
    let altered = Sealed {
        ciphertext: B64.encode(ciphertext),
        ..sealed.clone()
    };
    assert!(matches!(
        sealer.open(&altered).await,
        Err(SecretError::Unopenable)
    ));
    let no_data_key = Sealed {
        data_key: None,
        ..sealed
    };
    assert!(matches!(
        sealer.open(&no_data_key).await,
        Err(SecretError::Malformed(_))
    ));
    let local = LocalKeySealer::from_key(&[3u8; 32])
        .unwrap()
        .seal(SECRET)
        .await
        .unwrap();
    assert!(matches!(
        sealer.open(&local).await,
        Err(SecretError::Scheme { .. })
    ));
}
