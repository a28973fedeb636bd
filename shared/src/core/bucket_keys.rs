//! A bucket configuration's static keys at rest: sealed in its row, opened in memory only.

use crate::error::{CatalogError, Result};
use crate::model::{BucketAuth, BucketRow};
use crate::secrets;

/// A bucket row as stored: static keys' secret sealed with `sealer`, never in plain text (a
/// 400 naming the setting when the deployment cannot seal).
pub async fn sealed(
    sealer: Option<&dyn secrets::SecretSealer>,
    mut row: BucketRow,
) -> Result<BucketRow> {
    if let BucketAuth::Hmac {
        access_key_id,
        secret_access_key,
    } = row.auth
    {
        let sealer =
            secrets::required(sealer).map_err(|e| CatalogError::BadRequest(e.to_string()))?;
        let sealed = sealer
            .seal(secret_access_key.as_bytes())
            .await
            .map_err(|e| CatalogError::Internal(format!("Cannot seal the secret: {e}")))?;
        row.auth = BucketAuth::SealedHmac {
            access_key_id,
            sealed_secret: serde_json::to_value(&sealed).map_err(|e| {
                CatalogError::Internal(format!("Cannot store the sealed secret: {e}"))
            })?,
        };
    }
    Ok(row)
}

/// A stored row ready for use: a sealed secret opened, in memory only.
pub async fn opened(
    sealer: Option<&dyn secrets::SecretSealer>,
    mut row: BucketRow,
) -> Result<BucketRow> {
    if let BucketAuth::SealedHmac {
        access_key_id,
        sealed_secret,
    } = row.auth
    {
        let broken = |why: String| {
            tracing::error!(nickname = %row.nickname, why, "cannot open a bucket's sealed secret");
            CatalogError::Internal(format!(
                "The secret of bucket configuration '{}' cannot be opened",
                row.nickname
            ))
        };
        let sealer = secrets::required(sealer).map_err(|e| broken(e.to_string()))?;
        let sealed: secrets::Sealed =
            serde_json::from_value(sealed_secret).map_err(|e| broken(e.to_string()))?;
        let secret = sealer
            .open(&sealed)
            .await
            .map_err(|e| broken(e.to_string()))?;
        row.auth = BucketAuth::Hmac {
            access_key_id,
            secret_access_key: String::from_utf8(secret).map_err(|e| broken(e.to_string()))?,
        };
    }
    Ok(row)
}
