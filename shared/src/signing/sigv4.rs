//! SigV4 signatures of checked S3 requests, with the AWS SDK's own signer (`aws-sigv4`).

use std::collections::BTreeMap;
use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SignatureLocation,
    SigningSettings, UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use sha2::{Digest, Sha256};

use super::Refusal;
use super::policy::Payload;

/// Headers the signature replaces: whatever the engine sent for them is dropped.
const REPLACED: &[&str] = &[
    "authorization",
    "x-amz-date",
    "x-amz-content-sha256",
    "x-amz-security-token",
    "host",
];

/// The static keys a bucket is reached with.
pub struct Keys<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
}

/// Signs `method uri` as S3 in `region` at `time`, covering the host, every `x-amz-*` header
/// and `Content-MD5` the engine sent, and the payload as `payload` says. Answers every header
/// the request must carry: the engine's own, less those the signature replaces, plus the
/// signature's (`Authorization`, `x-amz-date`, `x-amz-content-sha256`). Engines that replace
/// their headers with these (Java) and those that add them to their own (PyIceberg, whose
/// request keeps one value per name, the last) both send exactly what was signed.
pub fn sign_request(
    method: &str,
    uri: &str,
    headers: &BTreeMap<String, Vec<String>>,
    payload: &Payload,
    keys: &Keys<'_>,
    region: &str,
    time: SystemTime,
) -> Result<BTreeMap<String, Vec<String>>, Refusal> {
    let mut kept: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut signed: Vec<(String, String)> = Vec::new();
    let mut declared_payload = None;
    for (name, values) in headers {
        let lower = name.to_ascii_lowercase();
        if lower == "x-amz-content-sha256" {
            declared_payload = values.first().cloned();
        }
        if REPLACED.contains(&lower.as_str()) {
            continue;
        }
        if lower.starts_with("x-amz-") || lower == "content-md5" {
            signed.push((lower, values.join(",")));
        }
        kept.insert(name.clone(), values.clone());
    }
    let body_hash;
    let body = match payload {
        Payload::Exactly(body) => {
            body_hash = hex::encode(Sha256::digest(body.as_bytes()));
            SignableBody::Precomputed(body_hash)
        }
        Payload::AsSent => match declared_payload.as_deref() {
            Some("STREAMING-UNSIGNED-PAYLOAD-TRAILER") => {
                SignableBody::StreamingUnsignedPayloadTrailer
            }
            Some(hash) if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
                SignableBody::Precomputed(hash.to_ascii_lowercase())
            }
            _ => SignableBody::UnsignedPayload,
        },
    };
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.signature_location = SignatureLocation::Headers;
    let identity = Credentials::new(
        keys.access_key_id,
        keys.secret_access_key,
        None,
        None,
        "floe-bucket-keys",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(time)
        .settings(settings)
        .build()
        .map_err(|_| Refusal::new("the request cannot be signed"))?
        .into();
    let request = SignableRequest::new(
        method,
        uri,
        signed.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        body,
    )
    .map_err(|_| Refusal::new("the request cannot be signed"))?;
    let (instructions, _signature) = sign(request, &params)
        .map_err(|_| Refusal::new("the request cannot be signed"))?
        .into_parts();
    for (name, value) in instructions.headers() {
        kept.insert(name.to_owned(), vec![value.to_owned()]);
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: Keys<'static> = Keys {
        access_key_id: "AKIDEXAMPLE",
        secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    };

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs)
    }

    #[test]
    fn signatures_cover_amz_headers_and_keep_the_engines_own() {
        let headers = BTreeMap::from([
            ("User-Agent".to_owned(), vec!["Botocore/1.0".to_owned()]),
            (
                "x-amz-checksum-crc32".to_owned(),
                vec!["AAAAAA==".to_owned()],
            ),
            (
                "X-Amz-Content-SHA256".to_owned(),
                vec!["UNSIGNED-PAYLOAD".to_owned()],
            ),
        ]);
        let out = sign_request(
            "PUT",
            "http://127.0.0.1:9000/lake/wh/t/data/a.parquet",
            &headers,
            &Payload::AsSent,
            &KEYS,
            "us-east-1",
            at(1_700_000_000),
        )
        .unwrap();
        assert_eq!(out["User-Agent"], ["Botocore/1.0"]);
        assert!(
            !out.contains_key("X-Amz-Content-SHA256"),
            "replaced: {out:?}"
        );
        assert_eq!(out["x-amz-content-sha256"], ["UNSIGNED-PAYLOAD"]);
        assert_eq!(out["x-amz-date"], ["20231114T221320Z"]);
        let authorization = &out["authorization"][0];
        assert!(
            authorization.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20231114/us-east-1/s3/aws4_request, \
                 SignedHeaders=host;x-amz-checksum-crc32;x-amz-content-sha256;x-amz-date, Signature="
            ),
            "{authorization}"
        );
    }

    #[test]
    fn a_bound_body_is_signed_by_its_hash_and_changes_the_signature() {
        let sign_body = |body: &str| {
            sign_request(
                "POST",
                "http://127.0.0.1:9000/lake?delete",
                &BTreeMap::new(),
                &Payload::Exactly(body.to_owned()),
                &KEYS,
                "us-east-1",
                at(1_700_000_000),
            )
            .unwrap()
        };
        let a = sign_body("<Delete>a</Delete>");
        let b = sign_body("<Delete>b</Delete>");
        assert_eq!(
            a["x-amz-content-sha256"][0],
            hex::encode(Sha256::digest(b"<Delete>a</Delete>"))
        );
        assert_ne!(a["authorization"], b["authorization"]);
    }

    #[test]
    fn the_signature_matches_an_independent_computation() {
        // Recomputed by hand from the SigV4 definition for a GET with an unsigned payload.
        let out = sign_request(
            "GET",
            "https://lake.s3.amazonaws.com/k",
            &BTreeMap::new(),
            &Payload::AsSent,
            &KEYS,
            "us-east-1",
            at(1_700_000_000),
        )
        .unwrap();
        let canonical = "GET\n/k\n\nhost:lake.s3.amazonaws.com\nx-amz-content-sha256:UNSIGNED-PAYLOAD\n\
                         x-amz-date:20231114T221320Z\n\nhost;x-amz-content-sha256;x-amz-date\nUNSIGNED-PAYLOAD";
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n20231114T221320Z\n20231114/us-east-1/s3/aws4_request\n{}",
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        let mac = |key: &[u8], data: &str| {
            let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, key);
            aws_lc_rs::hmac::sign(&key, data.as_bytes())
                .as_ref()
                .to_vec()
        };
        let k = mac(
            format!("AWS4{}", KEYS.secret_access_key).as_bytes(),
            "20231114",
        );
        let k = mac(&k, "us-east-1");
        let k = mac(&k, "s3");
        let k = mac(&k, "aws4_request");
        let expected = hex::encode(mac(&k, &to_sign));
        assert!(
            out["authorization"][0].ends_with(&format!("Signature={expected}")),
            "{:?}",
            out["authorization"]
        );
    }
}
