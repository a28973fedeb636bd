//! Session policies that scope vended credentials to one table location and one access level.

use serde_json::json;
use sha2::{Digest, Sha256};

use super::AccessLevel;
use crate::model::parse_s3_url;

/// STS rejects packed session policies above this size.
pub const MAX_SESSION_POLICY_CHARS: usize = 2048;

/// Object actions of read-only credentials.
pub const READ_ACTIONS: &[&str] = &["s3:GetObject", "s3:GetObjectVersion"];

/// Object actions read-write credentials add.
pub const WRITE_ACTIONS: &[&str] = &[
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
];

/// Bucket actions of every credential: listing the table's directory, locating the bucket.
/// With the object actions, everything a session policy can allow (and so what the role it
/// narrows must grant).
pub const BUCKET_ACTIONS: &[&str] = &["s3:ListBucket", "s3:GetBucketLocation"];

/// What writers may never do to a table's metadata files: those are the catalog's alone, and a
/// commit's safety rests on a metadata file, once written, never changing.
pub const METADATA_DENIED_ACTIONS: &[&str] = &["s3:PutObject", "s3:DeleteObject"];

/// The partition of an ARN (`aws`, `aws-cn`, `aws-us-gov`, ...): a session policy's resource
/// ARNs must be in the partition of the role it narrows.
pub fn arn_partition(arn: &str) -> Option<&str> {
    let mut parts = arn.split(':');
    if parts.next() != Some("arn") {
        return None;
    }
    let partition = parts.next()?;
    let valid = !partition.is_empty()
        && partition
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    valid.then_some(partition)
}

/// `text` with the characters that are special in IAM policy strings (`*` and `?` are wildcards
/// in resource ARNs and `StringLike` values, `$` starts a policy variable) written as the policy
/// variables that stand for them literally.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '*' => escaped.push_str("${*}"),
            '?' => escaped.push_str("${?}"),
            '$' => escaped.push_str("${$}"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// The session policy for `location` (an `s3://bucket/key` table location) in ARN partition
/// `partition`: objects under the table's own directory only, never the namespace prefix, a
/// sibling directory or the bucket. Writers may not put or delete metadata files
/// (`*.metadata.json`): only the catalog writes those.
pub fn session_policy(partition: &str, location: &str, access: AccessLevel) -> Option<String> {
    let (bucket, key) = parse_s3_url(location)?;
    let dir = escape(key.trim_end_matches('/'));
    let bucket_arn = format!("arn:{partition}:s3:::{}", escape(bucket));
    let objects = format!("{bucket_arn}/{dir}/*");
    let object_actions: Vec<&str> = match access {
        AccessLevel::Read => READ_ACTIONS.to_vec(),
        AccessLevel::ReadWrite => [READ_ACTIONS, WRITE_ACTIONS].concat(),
    };
    let mut statements =
        vec![json!({"Effect": "Allow", "Action": object_actions, "Resource": objects})];
    if access == AccessLevel::ReadWrite {
        // In IAM `*` matches across `/`, so this covers metadata files at any depth. Denying them
        // bucket-wide rather than under `<dir>/` only has the same effect (nothing outside
        // `<dir>/` is allowed) and keeps the longest table locations under the size limit.
        statements.push(json!({
            "Effect": "Deny",
            "Action": METADATA_DENIED_ACTIONS,
            "Resource": format!("{bucket_arn}/*.metadata.json")
        }));
    }
    statements.push(json!({
        "Effect": "Allow",
        "Action": "s3:ListBucket",
        "Resource": bucket_arn,
        // `<dir>` alone would also list siblings such as `<dir>-old/`.
        "Condition": {"StringLike": {"s3:prefix": [format!("{dir}/"), format!("{dir}/*")]}}
    }));
    statements
        .push(json!({"Effect": "Allow", "Action": "s3:GetBucketLocation", "Resource": bucket_arn}));
    let policy = json!({"Version": "2012-10-17", "Statement": statements});
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
    use serde_json::Value;

    fn policy(location: &str, access: AccessLevel) -> Value {
        serde_json::from_str(&session_policy("aws", location, access).unwrap()).unwrap()
    }

    fn statements<'a>(policy: &'a Value, effect: &str, action: &str) -> Vec<&'a Value> {
        policy["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| {
                s["Effect"] == effect
                    && (s["Action"] == action
                        || s["Action"]
                            .as_array()
                            .is_some_and(|a| a.contains(&json!(action))))
            })
            .collect()
    }

    /// IAM's matching of a resource ARN or `StringLike` value: `*` any run of characters (`/`
    /// included), `?` any one character, `${*}`, `${?}` and `${$}` the literal character.
    fn iam_matches(pattern: &str, text: &str) -> bool {
        enum Token {
            Any,
            One,
            Literal(char),
        }
        let mut tokens = Vec::new();
        let mut rest = pattern;
        while let Some(c) = rest.chars().next() {
            let literal = ["${*}", "${?}", "${$}"]
                .iter()
                .find(|e| rest.starts_with(**e));
            if let Some(e) = literal {
                tokens.push(Token::Literal(e.chars().nth(2).unwrap()));
                rest = &rest[4..];
                continue;
            }
            tokens.push(match c {
                '*' => Token::Any,
                '?' => Token::One,
                c => Token::Literal(c),
            });
            rest = &rest[c.len_utf8()..];
        }
        fn go(tokens: &[Token], text: &[char]) -> bool {
            match tokens.split_first() {
                None => text.is_empty(),
                Some((Token::Any, more)) => (0..=text.len()).any(|i| go(more, &text[i..])),
                Some((Token::One, more)) => !text.is_empty() && go(more, &text[1..]),
                Some((Token::Literal(c), more)) => text.first() == Some(c) && go(more, &text[1..]),
            }
        }
        go(&tokens, &text.chars().collect::<Vec<_>>())
    }

    fn any_matches(patterns: &Value, text: &str) -> bool {
        match patterns {
            Value::String(p) => iam_matches(p, text),
            Value::Array(ps) => ps.iter().any(|p| any_matches(p, text)),
            _ => false,
        }
    }

    #[test]
    fn readers_get_read_only_access_to_the_table_directory() {
        let policy = policy("s3://wh/ns-abc/events", AccessLevel::Read);
        let objects = statements(&policy, "Allow", "s3:GetObject");
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0]["Resource"], "arn:aws:s3:::wh/ns-abc/events/*");
        assert_eq!(objects[0]["Action"], json!(READ_ACTIONS));
        assert!(statements(&policy, "Allow", "s3:PutObject").is_empty());
        // Nothing to deny to a reader.
        assert!(
            !policy.to_string().contains("Deny"),
            "readers' policies carry no deny: {policy}"
        );
    }

    #[test]
    fn writers_can_put_and_delete_but_only_under_the_table() {
        let policy = policy("s3://wh/ns-abc/events/", AccessLevel::ReadWrite);
        let objects = statements(&policy, "Allow", "s3:PutObject");
        assert_eq!(objects.len(), 1);
        assert_eq!(
            objects[0]["Action"],
            json!([READ_ACTIONS, WRITE_ACTIONS].concat())
        );
        assert_eq!(objects[0]["Resource"], "arn:aws:s3:::wh/ns-abc/events/*");
        // Every other allowed resource is the bucket itself, for bucket-level actions.
        for statement in policy["Statement"].as_array().unwrap() {
            if statement["Effect"] == "Allow" && statement != objects[0] {
                assert_eq!(statement["Resource"], "arn:aws:s3:::wh", "{statement}");
            }
        }
    }

    #[test]
    fn allowed_actions_are_the_declared_ones() {
        let policy = policy("s3://wh/ns-abc/events", AccessLevel::ReadWrite);
        let mut allowed: Vec<&str> = policy["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["Effect"] == "Allow")
            .flat_map(|s| match &s["Action"] {
                Value::Array(actions) => actions.iter().map(|a| a.as_str().unwrap()).collect(),
                action => vec![action.as_str().unwrap()],
            })
            .collect();
        allowed.sort();
        let mut declared = [READ_ACTIONS, WRITE_ACTIONS, BUCKET_ACTIONS].concat();
        declared.sort();
        assert_eq!(allowed, declared);
    }

    #[test]
    fn writers_may_not_put_or_delete_metadata_files() {
        let policy = policy("s3://wh/ns-abc/events", AccessLevel::ReadWrite);
        let deny: Vec<&Value> = policy["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["Effect"] == "Deny")
            .collect();
        assert_eq!(deny.len(), 1, "{policy}");
        assert_eq!(
            deny[0]["Action"],
            json!(["s3:PutObject", "s3:DeleteObject"])
        );
        let resource = &deny[0]["Resource"];
        assert_eq!(*resource, "arn:aws:s3:::wh/*.metadata.json");
        // `*` crosses `/`: metadata files at any depth, and nothing else.
        for denied in [
            "arn:aws:s3:::wh/ns-abc/events/metadata/00001-x.metadata.json",
            "arn:aws:s3:::wh/ns-abc/events/v1.metadata.json",
            "arn:aws:s3:::wh/ns-abc/events/a/b/c/00002-y.metadata.json",
        ] {
            assert!(any_matches(resource, denied), "{denied}");
        }
        for allowed in [
            "arn:aws:s3:::wh/ns-abc/events/data/00000-0-x.parquet",
            "arn:aws:s3:::wh/ns-abc/events/metadata/snap-1-x.avro",
            "arn:aws:s3:::wh/ns-abc/events/metadata/x-m0.avro",
        ] {
            assert!(!any_matches(resource, allowed), "{allowed}");
            let objects = &statements(&policy, "Allow", "s3:PutObject")[0]["Resource"];
            assert!(any_matches(objects, allowed), "{allowed}");
        }
    }

    #[test]
    fn listing_is_limited_to_the_table_directory_not_its_siblings() {
        for access in [AccessLevel::Read, AccessLevel::ReadWrite] {
            let policy = policy("s3://wh/ns-abc/events", access);
            let list = statements(&policy, "Allow", "s3:ListBucket");
            assert_eq!(list.len(), 1);
            assert_eq!(list[0]["Resource"], "arn:aws:s3:::wh");
            let prefixes = &list[0]["Condition"]["StringLike"]["s3:prefix"];
            assert_eq!(*prefixes, json!(["ns-abc/events/", "ns-abc/events/*"]));
            for listed in ["ns-abc/events/", "ns-abc/events/metadata/"] {
                assert!(any_matches(prefixes, listed), "{listed}");
            }
            for sibling in [
                "ns-abc/events",
                "ns-abc/events-old/",
                "ns-abc/eventsx",
                "ns-abc/",
            ] {
                assert!(!any_matches(prefixes, sibling), "{sibling}");
            }
        }
    }

    #[test]
    fn iam_special_characters_are_escaped() {
        assert_eq!(escape("plain/key-1.json"), "plain/key-1.json");
        assert_eq!(escape("a*b?c$d"), "a${*}b${?}c${$}d");
        assert_eq!(escape("${x}"), "${$}{x}");
    }

    #[test]
    fn iam_special_characters_reach_the_policy_escaped() {
        let text =
            session_policy("aws", "s3://wh/ns-abc/we*ird?$name", AccessLevel::ReadWrite).unwrap();
        assert!(
            text.contains("\"arn:aws:s3:::wh/ns-abc/we${*}ird${?}${$}name/*\""),
            "{text}"
        );
        assert!(text.contains("\"ns-abc/we${*}ird${?}${$}name/\""), "{text}");
        assert!(
            text.contains("\"ns-abc/we${*}ird${?}${$}name/*\""),
            "{text}"
        );
        assert!(!text.contains("we*ird"), "{text}");
        // The table's own files match; a table the wildcards would have let in does not.
        let policy: Value = serde_json::from_str(&text).unwrap();
        let objects = &statements(&policy, "Allow", "s3:PutObject")[0]["Resource"];
        assert!(any_matches(
            objects,
            "arn:aws:s3:::wh/ns-abc/we*ird?$name/data/f.parquet"
        ));
        assert!(!any_matches(
            objects,
            "arn:aws:s3:::wh/ns-abc/weXYZirdQ$name/data/f.parquet"
        ));
        let prefixes = &statements(&policy, "Allow", "s3:ListBucket")[0]["Condition"]["StringLike"]
            ["s3:prefix"];
        assert!(any_matches(prefixes, "ns-abc/we*ird?$name/"));
        assert!(!any_matches(prefixes, "ns-abc/weird!$name/"));
    }

    #[test]
    fn resource_arns_are_in_the_role_partition() {
        assert_eq!(
            arn_partition("arn:aws:iam::123456789012:role/r"),
            Some("aws")
        );
        assert_eq!(
            arn_partition("arn:aws-cn:iam::123456789012:role/r"),
            Some("aws-cn")
        );
        assert_eq!(
            arn_partition("arn:aws-us-gov:iam::123456789012:role/r"),
            Some("aws-us-gov")
        );
        assert_eq!(arn_partition("role/r"), None);
        assert_eq!(arn_partition("arn::iam::1:role/r"), None);
        assert_eq!(arn_partition("arn:a*s:iam::1:role/r"), None);
        for partition in ["aws-cn", "aws-us-gov"] {
            for access in [AccessLevel::Read, AccessLevel::ReadWrite] {
                let text = session_policy(partition, "s3://wh/ns-abc/events", access).unwrap();
                let policy: Value = serde_json::from_str(&text).unwrap();
                for statement in policy["Statement"].as_array().unwrap() {
                    let resource = statement["Resource"].as_str().unwrap();
                    assert!(
                        resource.starts_with(&format!("arn:{partition}:s3:::wh")),
                        "{resource}"
                    );
                }
                assert!(!text.contains("arn:aws:"), "{text}");
            }
        }
    }

    #[test]
    fn policies_stay_under_the_sts_limit_for_the_longest_names() {
        // The longest bucket name, a bucket root path, the longest namespace prefix (48-char
        // stem and 12 random characters) and the longest table name, in the longest partition.
        let longest = format!(
            "s3://{}/warehouse/{}-abcdefghijkl/{}",
            "b".repeat(63),
            "n".repeat(48),
            "t".repeat(255)
        );
        // A table name with IAM-special characters: each is written as four.
        let special = format!(
            "s3://{}/warehouse/{}-abcdefghijkl/{}{}",
            "b".repeat(63),
            "n".repeat(48),
            "t".repeat(200),
            "*?$".repeat(10)
        );
        for location in [longest, special] {
            for access in [AccessLevel::Read, AccessLevel::ReadWrite] {
                let text = session_policy("aws-us-gov", &location, access).unwrap();
                assert!(
                    text.len() <= MAX_SESSION_POLICY_CHARS,
                    "{} chars",
                    text.len()
                );
            }
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
