//! What a signed request may do: the S3 operation it is, at the caller's access level, on
//! objects of the table's own directory only, never a metadata file written by an engine.

use std::collections::BTreeMap;

use super::Refusal;
use super::s3::S3Request;
use crate::objects::is_within;

/// What the caller may do with the table's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// What the signature must bind the body to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// The body is not covered (object data: its size and checksum are the engine's).
    AsSent,
    /// The body must be exactly this (a batch delete, whose keys were checked one by one).
    Exactly(String),
}

/// The S3 operations a table's engine needs, and nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    GetObject,
    HeadObject,
    ListObjects,
    GetBucketLocation,
    HeadBucket,
    PutObject,
    UploadPart,
    CreateMultipartUpload,
    CompleteMultipartUpload,
    AbortMultipartUpload,
    ListParts,
    ListMultipartUploads,
    DeleteObject,
    DeleteObjects,
}

impl Operation {
    fn needs(self) -> Access {
        match self {
            Operation::GetObject
            | Operation::HeadObject
            | Operation::ListObjects
            | Operation::GetBucketLocation
            | Operation::HeadBucket => Access::Read,
            _ => Access::Write,
        }
    }

    fn writes(self) -> bool {
        self.needs() == Access::Write
    }
}

/// Headers that would make a write do more than store bytes: change who may read the object,
/// copy another object (which would read outside the table), lock or redirect it.
const REFUSED_HEADERS: &[&str] = &[
    "x-amz-copy-source",
    "x-amz-acl",
    "x-amz-website-redirect-location",
];
const REFUSED_HEADER_PREFIXES: &[&str] = &["x-amz-grant-", "x-amz-object-lock-"];

/// Query parameters of presigned URLs: a request is signed here, never re-signed.
const PRESIGN_PARAMS: &[&str] = &[
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Signature",
    "X-Amz-Security-Token",
];

/// Checks `request` (its method, headers and body) against the table directory `directory`
/// (a key prefix in the bucket, without trailing `/`) at `access`.
pub fn check(
    method: &str,
    request: &S3Request,
    headers: &BTreeMap<String, Vec<String>>,
    body: Option<&str>,
    directory: &str,
    access: Access,
) -> Result<(Operation, Payload), Refusal> {
    if request
        .query
        .iter()
        .any(|(k, _)| PRESIGN_PARAMS.iter().any(|p| p.eq_ignore_ascii_case(k)))
    {
        return Err(Refusal::new("presigned requests are not signed again"));
    }
    let operation = classify(method, request)?;
    if operation.needs() == Access::Write && access == Access::Read {
        return Err(Refusal::new(
            "read access to this table allows GET and HEAD requests only",
        ));
    }
    if operation.writes() {
        for name in headers.keys() {
            let name = name.to_ascii_lowercase();
            if REFUSED_HEADERS.contains(&name.as_str())
                || REFUSED_HEADER_PREFIXES.iter().any(|p| name.starts_with(p))
            {
                return Err(Refusal(format!(
                    "the header {name} is not allowed on table storage"
                )));
            }
        }
    }
    match &request.key {
        Some(key) => {
            inside(key, directory)?;
            if operation.writes() && is_metadata_file(key) {
                return Err(Refusal::new(
                    "metadata files are written by the catalog only",
                ));
            }
        }
        None => match operation {
            Operation::ListObjects | Operation::ListMultipartUploads => {
                let prefix = request.param("prefix").unwrap_or_default();
                if !is_within(prefix, directory) || !prefix.starts_with(&format!("{directory}/")) {
                    return Err(Refusal::new(
                        "listings are limited to the table's own directory (prefix <location>/)",
                    ));
                }
            }
            Operation::DeleteObjects => {
                let body = body.ok_or_else(|| Refusal::new("a batch delete must send its body"))?;
                let keys = delete_keys(body)?;
                if keys.is_empty() {
                    return Err(Refusal::new("a batch delete must name its keys"));
                }
                for key in &keys {
                    inside(key, directory)?;
                    if is_metadata_file(key) {
                        return Err(Refusal::new(
                            "metadata files are written by the catalog only",
                        ));
                    }
                }
                return Ok((operation, Payload::Exactly(body.to_owned())));
            }
            _ => {}
        },
    }
    Ok((operation, Payload::AsSent))
}

fn inside(key: &str, directory: &str) -> Result<(), Refusal> {
    if key.len() > directory.len() && is_within(key, directory) && !key.contains('\\') {
        Ok(())
    } else {
        Err(Refusal::new(
            "the object is outside the table's own directory",
        ))
    }
}

/// A table's metadata files (`*.metadata.json`, compressed or not): only the catalog writes
/// them, since a commit's safety rests on a metadata file never changing once written.
fn is_metadata_file(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key).to_ascii_lowercase();
    name.ends_with(".metadata.json") || name.contains(".metadata.json.")
}

/// The S3 operation of `method` on `request`: only those an engine needs.
fn classify(method: &str, request: &S3Request) -> Result<Operation, Refusal> {
    let params: Vec<&str> = request.query.iter().map(|(k, _)| k.as_str()).collect();
    let only = |allowed: &[&str]| params.iter().all(|p| allowed.contains(p));
    let object = request.key.is_some();
    let operation = match (method, object) {
        ("GET", true) if request.has("uploadId") => {
            only(&["uploadId", "max-parts", "part-number-marker", "x-id"])
                .then_some(Operation::ListParts)
        }
        ("GET", true) => only(&["versionId", "partNumber", "x-id"]).then_some(Operation::GetObject),
        ("HEAD", true) => only(&["versionId", "partNumber"]).then_some(Operation::HeadObject),
        ("PUT", true) if request.has("uploadId") || request.has("partNumber") => (request
            .has("uploadId")
            && request.has("partNumber")
            && only(&["uploadId", "partNumber", "x-id"]))
        .then_some(Operation::UploadPart),
        ("PUT", true) => only(&["x-id"]).then_some(Operation::PutObject),
        ("POST", true) if request.has("uploads") => {
            only(&["uploads", "x-id"]).then_some(Operation::CreateMultipartUpload)
        }
        ("POST", true) if request.has("uploadId") => {
            only(&["uploadId", "x-id"]).then_some(Operation::CompleteMultipartUpload)
        }
        ("DELETE", true) if request.has("uploadId") => {
            only(&["uploadId", "x-id"]).then_some(Operation::AbortMultipartUpload)
        }
        ("DELETE", true) => only(&["versionId", "x-id"]).then_some(Operation::DeleteObject),
        ("GET", false) if request.has("location") => {
            only(&["location"]).then_some(Operation::GetBucketLocation)
        }
        ("GET", false) if request.has("uploads") => only(&[
            "uploads",
            "prefix",
            "delimiter",
            "key-marker",
            "upload-id-marker",
            "max-uploads",
            "encoding-type",
        ])
        .then_some(Operation::ListMultipartUploads),
        ("GET", false) => only(&[
            "list-type",
            "prefix",
            "delimiter",
            "continuation-token",
            "start-after",
            "max-keys",
            "encoding-type",
            "fetch-owner",
            "marker",
        ])
        .then_some(Operation::ListObjects),
        ("HEAD", false) => params.is_empty().then_some(Operation::HeadBucket),
        ("POST", false) if request.has("delete") => {
            only(&["delete", "x-id"]).then_some(Operation::DeleteObjects)
        }
        _ => None,
    };
    operation.ok_or_else(|| {
        Refusal(format!(
            "this {method} request is not an operation on table storage that the catalog signs"
        ))
    })
}

/// The keys of a DeleteObjects body (`<Delete><Object><Key>..</Key></Object>..</Delete>`).
fn delete_keys(body: &str) -> Result<Vec<String>, Refusal> {
    use aws_smithy_xml::decode::{Document, try_data};
    let invalid = || Refusal::new("the batch delete body is not a valid Delete document");
    let mut document = Document::new(body);
    let mut root = document.root_element().map_err(|_| invalid())?;
    if !root.start_el().matches("Delete") {
        return Err(invalid());
    }
    let mut keys = Vec::new();
    while let Some(mut element) = root.next_tag() {
        if element.start_el().matches("Object") {
            let mut key = None;
            while let Some(mut field) = element.next_tag() {
                if field.start_el().matches("Key") {
                    key = Some(try_data(&mut field).map_err(|_| invalid())?.into_owned());
                }
            }
            keys.push(key.ok_or_else(invalid)?);
        } else if !element.start_el().matches("Quiet") {
            return Err(invalid());
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "wh/ns-abc/t-def";

    fn request(key: Option<&str>, query: &[(&str, &str)]) -> S3Request {
        S3Request {
            key: key.map(str::to_owned),
            query: query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn run(method: &str, r: &S3Request, access: Access) -> Result<(Operation, Payload), Refusal> {
        check(method, r, &BTreeMap::new(), None, DIR, access)
    }

    #[test]
    fn readers_get_and_head_inside_the_directory_only() {
        let data = request(Some("wh/ns-abc/t-def/data/a.parquet"), &[]);
        assert_eq!(
            run("GET", &data, Access::Read).unwrap().0,
            Operation::GetObject
        );
        assert_eq!(
            run("HEAD", &data, Access::Read).unwrap().0,
            Operation::HeadObject
        );
        for method in ["PUT", "DELETE"] {
            assert!(run(method, &data, Access::Read).is_err(), "{method}");
        }
        let upload = request(Some("wh/ns-abc/t-def/data/a.parquet"), &[("uploads", "")]);
        assert!(run("POST", &upload, Access::Read).is_err());
        assert_eq!(
            run("POST", &upload, Access::Write).unwrap().0,
            Operation::CreateMultipartUpload
        );
    }

    #[test]
    fn keys_outside_the_directory_are_refused() {
        for key in [
            "wh/ns-abc/t-defg/data/a.parquet",
            "wh/ns-abc/t-def",
            "wh/ns-abc/other/a",
            "wh/ns-abc/t-def/../other/a",
            "wh/ns-abc/t-def/./a",
            "other-bucket-key",
        ] {
            let r = request(Some(key), &[]);
            assert!(run("GET", &r, Access::Write).is_err(), "{key}");
        }
    }

    #[test]
    fn metadata_files_are_never_written() {
        for key in [
            "wh/ns-abc/t-def/metadata/00001-x.metadata.json",
            "wh/ns-abc/t-def/metadata/00001-x.METADATA.JSON",
            "wh/ns-abc/t-def/metadata/00001-x.metadata.json.gz",
        ] {
            let r = request(Some(key), &[]);
            assert!(run("PUT", &r, Access::Write).is_err(), "{key}");
            assert!(run("DELETE", &r, Access::Write).is_err(), "{key}");
            assert!(run("GET", &r, Access::Read).is_ok(), "{key}");
        }
        let manifest = request(Some("wh/ns-abc/t-def/metadata/snap-1.avro"), &[]);
        assert_eq!(
            run("PUT", &manifest, Access::Write).unwrap().0,
            Operation::PutObject
        );
    }

    #[test]
    fn listings_stay_in_the_directory() {
        let inside = request(
            None,
            &[("list-type", "2"), ("prefix", "wh/ns-abc/t-def/data/")],
        );
        assert_eq!(
            run("GET", &inside, Access::Read).unwrap().0,
            Operation::ListObjects
        );
        for prefix in ["wh/ns-abc/t-de", "wh/ns-abc/t-def", "wh/ns-abc/", ""] {
            let r = request(None, &[("list-type", "2"), ("prefix", prefix)]);
            assert!(run("GET", &r, Access::Read).is_err(), "{prefix:?}");
        }
        let unscoped = request(None, &[("list-type", "2")]);
        assert!(run("GET", &unscoped, Access::Read).is_err());
    }

    #[test]
    fn batch_deletes_are_checked_key_by_key_and_bound_to_their_body() {
        let r = request(None, &[("delete", "")]);
        let body = "<Delete><Object><Key>wh/ns-abc/t-def/data/a</Key></Object>\
                    <Object><Key>wh/ns-abc/t-def/data/b</Key></Object><Quiet>true</Quiet></Delete>";
        let (op, payload) =
            check("POST", &r, &BTreeMap::new(), Some(body), DIR, Access::Write).unwrap();
        assert_eq!(op, Operation::DeleteObjects);
        assert_eq!(payload, Payload::Exactly(body.to_owned()));
        for bad in [
            "<Delete><Object><Key>wh/ns-abc/other/a</Key></Object></Delete>",
            "<Delete><Object><Key>wh/ns-abc/t-def/metadata/1.metadata.json</Key></Object></Delete>",
            "<Delete></Delete>",
            "<Nope/>",
            "not xml",
        ] {
            assert!(
                check("POST", &r, &BTreeMap::new(), Some(bad), DIR, Access::Write).is_err(),
                "{bad}"
            );
        }
        assert!(check("POST", &r, &BTreeMap::new(), None, DIR, Access::Write).is_err());
    }

    #[test]
    fn other_operations_and_dangerous_headers_are_refused() {
        let data = request(Some("wh/ns-abc/t-def/data/a"), &[]);
        for query in [("acl", ""), ("tagging", ""), ("X-Amz-Signature", "x")] {
            let r = request(Some("wh/ns-abc/t-def/data/a"), &[query]);
            assert!(run("GET", &r, Access::Write).is_err(), "{query:?}");
            assert!(run("PUT", &r, Access::Write).is_err(), "{query:?}");
        }
        assert!(run("PATCH", &data, Access::Write).is_err());
        assert!(run("OPTIONS", &data, Access::Write).is_err());
        for header in ["x-amz-copy-source", "X-Amz-Acl", "x-amz-grant-read"] {
            let headers = BTreeMap::from([(header.to_owned(), vec!["v".to_owned()])]);
            assert!(check("PUT", &data, &headers, None, DIR, Access::Write).is_err());
        }
        let policy = request(None, &[("policy", "")]);
        assert!(run("GET", &policy, Access::Write).is_err());
    }
}
