//! Session policies that scope vended credentials to one table location and one access level.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::AccessLevel;
use crate::objects::s3::parse_s3_url;

/// STS rejects packed session policies above this size.
pub const MAX_SESSION_POLICY_CHARS: usize = 2048;

/// The session policy for `location` (an `s3://bucket/key` table location): objects under the
/// table's own key prefix only, never the namespace prefix or the bucket.
pub fn session_policy(location: &str, access: AccessLevel) -> Option<String> {
    let (bucket, key) = parse_s3_url(location)?;
    let key = key.trim_end_matches('/');
    let objects = format!("arn:aws:s3:::{bucket}/{key}/*");
    let bucket_arn = format!("arn:aws:s3:::{bucket}");
    let object_actions: Value = match access {
        AccessLevel::Read => json!(["s3:GetObject", "s3:GetObjectVersion"]),
        AccessLevel::ReadWrite => json!([
            "s3:GetObject",
            "s3:GetObjectVersion",
            "s3:PutObject",
            "s3:DeleteObject",
            "s3:AbortMultipartUpload",
            "s3:ListMultipartUploadParts"
        ]),
    };
    let policy = json!({
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": object_actions, "Resource": objects},
            {
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": bucket_arn,
                "Condition": {"StringLike": {"s3:prefix": [key, format!("{key}/*")]}}
            },
            {"Effect": "Allow", "Action": "s3:GetBucketLocation", "Resource": bucket_arn}
        ]
    });
    Some(policy.to_string())
}

/// A role session name within STS's limits (2-64 of `[\w+=,.@-]`) that names the principal and,
/// through a digest, the table location.
pub fn session_name(principal_id: &str, location: &str) -> String {
    let principal: String = principal_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "+=,.@-_".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(36)
        .collect();
    let digest = hex::encode(Sha256::digest(location.as_bytes()));
    format!("floe-{principal}-{}", &digest[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_get_read_only_access_to_the_table_prefix() {
        let policy: Value = serde_json::from_str(
            &session_policy("s3://wh/ns-abc/events", AccessLevel::Read).unwrap(),
        )
        .unwrap();
        let statements = policy["Statement"].as_array().unwrap();
        assert_eq!(statements[0]["Resource"], "arn:aws:s3:::wh/ns-abc/events/*");
        assert_eq!(
            statements[0]["Action"],
            json!(["s3:GetObject", "s3:GetObjectVersion"])
        );
        assert_eq!(
            statements[1]["Condition"]["StringLike"]["s3:prefix"],
            json!(["ns-abc/events", "ns-abc/events/*"])
        );
    }

    #[test]
    fn writers_can_put_and_delete_but_only_under_the_table() {
        let text = session_policy("s3://wh/ns-abc/events/", AccessLevel::ReadWrite).unwrap();
        assert!(text.contains("s3:PutObject") && text.contains("s3:DeleteObject"));
        assert!(text.contains("arn:aws:s3:::wh/ns-abc/events/*"));
        assert!(!text.contains("arn:aws:s3:::wh/*"));
    }

    #[test]
    fn policies_stay_under_the_sts_limit_for_the_longest_names() {
        let location = format!(
            "s3://{}/{}-abcdefghijkl/{}",
            "b".repeat(63),
            "n".repeat(48),
            "t".repeat(255)
        );
        for access in [AccessLevel::Read, AccessLevel::ReadWrite] {
            assert!(session_policy(&location, access).unwrap().len() <= MAX_SESSION_POLICY_CHARS);
        }
    }

    #[test]
    fn session_names_fit_sts_rules() {
        let name = session_name(
            "api-client:0199 long principal id with spaces and more and more",
            "s3://b/k",
        );
        assert!(name.len() <= 64 && name.len() >= 2, "{name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+=,.@-_".contains(c)),
            "{name}"
        );
        assert_ne!(
            session_name("p", "s3://b/one"),
            session_name("p", "s3://b/two")
        );
    }
}
