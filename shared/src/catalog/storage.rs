//! Where namespaces and tables live in their buckets.
//!
//! Prefixes are always server-generated and claimed through the store's collision guard; a new
//! prefix must also be empty in storage before anything is written into it.

use bytes::Bytes;
use rand::Rng;
use serde::Serialize;

use crate::error::{CatalogError, Result};
pub use crate::objects::is_within;
use crate::objects::{ObjectError, ObjectStore, join};

/// Name of the marker file written at the root of every namespace prefix.
pub const MARKER_FILE: &str = ".arraylake-warehouse.json";

/// A fresh prefix: a readable stem from `name` plus random characters.
pub fn generate_prefix(name: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let stem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(48)
        .collect();
    let mut rng = rand::rng();
    let suffix: String = (0..12)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{stem}-{suffix}")
}

/// Normalizes a client-given location: no trailing `/`.
pub fn normalize_location(location: &str) -> String {
    location.trim_end_matches('/').to_owned()
}

/// Whether nothing at all is stored under `root`.
pub async fn is_empty(objects: &dyn ObjectStore, root: &str) -> Result<bool> {
    Ok(objects
        .list(&format!("{}/", root.trim_end_matches('/')), 1)
        .await?
        .is_empty())
}

/// Whether `root` holds nothing but its marker file.
pub async fn holds_only_marker(objects: &dyn ObjectStore, root: &str) -> Result<bool> {
    let marker = join(root, MARKER_FILE);
    let found = objects
        .list(&format!("{}/", root.trim_end_matches('/')), 2)
        .await?;
    Ok(found.iter().all(|loc| *loc == marker))
}

#[derive(Serialize)]
struct Marker<'a> {
    format: &'static str,
    org: &'a str,
    owner_kind: &'a str,
    owner: &'a str,
    owner_id: &'a str,
    created_ms: u64,
}

/// Who a marker says owns a prefix.
pub struct MarkerOwner<'a> {
    pub org: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub id: &'a str,
    pub created_ms: u64,
}

/// Writes the marker into an empty prefix. `Ok(false)` when a marker already exists (the prefix
/// is taken by someone else).
pub async fn write_marker(
    objects: &dyn ObjectStore,
    root: &str,
    owner: &MarkerOwner<'_>,
) -> Result<bool> {
    let body = serde_json::to_vec_pretty(&Marker {
        format: "floe-warehouse-marker/1",
        org: owner.org,
        owner_kind: owner.kind,
        owner: owner.name,
        owner_id: owner.id,
        created_ms: owner.created_ms,
    })
    .expect("marker serializes");
    match objects
        .put_if_absent(&join(root, MARKER_FILE), Bytes::from(body))
        .await
    {
        Ok(()) => Ok(true),
        Err(ObjectError::AlreadyExists(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Removes a marker this request wrote, after the claim that needed it failed.
pub async fn remove_marker(objects: &dyn ObjectStore, root: &str) {
    if let Err(e) = objects.delete(&[join(root, MARKER_FILE)]).await {
        tracing::warn!(error = %e, root, "could not remove an unclaimed marker");
    }
}

/// Claims a brand-new prefix in storage: generates candidates until one is empty and its marker
/// lands. The caller then claims it in the store and calls `remove_marker` if that fails.
pub async fn reserve_prefix(
    objects: &dyn ObjectStore,
    bucket_root: &str,
    stem: &str,
    owner: &MarkerOwner<'_>,
) -> Result<(String, String)> {
    for _ in 0..8 {
        let prefix = generate_prefix(stem);
        let root = join(bucket_root, &prefix);
        if !is_empty(objects, &root).await? {
            continue;
        }
        if write_marker(objects, &root, owner).await? {
            return Ok((prefix, root));
        }
    }
    Err(CatalogError::AlreadyExists(
        "Could not find a free, empty storage prefix; retry the request".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_fresh_and_safe() {
        let a = generate_prefix("My Tables/../x");
        let b = generate_prefix("My Tables/../x");
        assert_ne!(a, b);
        assert!(a.starts_with("my-tables----x-"), "{a}");
        assert!(!a.contains('/') && !a.contains('.'));
    }

    #[test]
    fn within_is_segment_wise() {
        assert!(is_within("s3://b/p/t", "s3://b/p"));
        assert!(is_within("s3://b/p/", "s3://b/p"));
        assert!(!is_within("s3://b/p2/t", "s3://b/p"));
        assert!(!is_within("s3://b/p/../q", "s3://b/p"));
        assert!(!is_within("s3://other/p/t", "s3://b/p"));
    }
}
