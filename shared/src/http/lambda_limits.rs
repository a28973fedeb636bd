//! What AWS Lambda can carry back through API Gateway: a response payload of at most 6 MB, in
//! which the body travels base64-encoded when compressed and as an escaped JSON string
//! otherwise. An answer that would not fit is replaced by a spec ErrorModel telling the client
//! how to ask for less, instead of the gateway's opaque failure.

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header::{ACCEPT_ENCODING, CONTENT_ENCODING};

use crate::error::CatalogError;

/// AWS Lambda's limit on a synchronous invocation's response payload.
pub const LAMBDA_RESPONSE_LIMIT: usize = 6 * 1024 * 1024;

/// Room left in the payload for the status, the headers and the envelope's own fields.
const ENVELOPE_ALLOWANCE: usize = 16 * 1024;

/// Middleware of the Lambda functions (outermost, so it sees the bytes as sent).
pub async fn fit_lambda_response(request: Request, next: Next) -> Response {
    let asked_compressed = request
        .headers()
        .get(ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("gzip") || v.contains("zstd"));
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::error!(error = %e, "cannot collect the response body");
            return CatalogError::Internal("Internal server error".into()).into_response();
        }
    };
    let compressed = parts.headers.contains_key(CONTENT_ENCODING);
    let carried = if compressed {
        base64_len(bytes.len())
    } else {
        escaped_len(&bytes)
    };
    if carried + ENVELOPE_ALLOWANCE <= LAMBDA_RESPONSE_LIMIT {
        return Response::from_parts(parts, Body::from(bytes));
    }
    tracing::warn!(
        status = parts.status.as_u16(),
        body_bytes = bytes.len(),
        carried,
        compressed,
        "answer over the Lambda response limit; refused"
    );
    let mut advice = String::from(
        "load tables with snapshots=refs (PyIceberg: snapshot-loading-mode=refs in the catalog \
         properties; Java, Spark and Trino: the same catalog property)",
    );
    if !asked_compressed {
        advice.push_str(" and send Accept-Encoding: gzip");
    }
    CatalogError::ResponseTooLarge(format!(
        "The answer is {:.1} MB, over the 6 MB AWS Lambda can return through this endpoint: {advice}",
        bytes.len() as f64 / 1_000_000.0
    ))
    .into_response()
}

/// Length of `n` bytes in base64 with padding.
fn base64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

/// Length of `body` as the contents of a JSON string: quotes and backslashes take two bytes,
/// other control characters six (`\u0000`), except the four with short escapes.
fn escaped_len(body: &[u8]) -> usize {
    body.iter()
        .map(|&b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' => 2,
            0x08 | 0x0c => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_match_what_the_payload_carries() {
        for n in [0, 1, 2, 3, 4, 1000, 1001] {
            let data = vec![7u8; n];
            use base64::Engine as _;
            let encoded = base64::engine::general_purpose::STANDARD.encode(&data);
            assert_eq!(base64_len(n), encoded.len(), "{n}");
        }
        let body = "{\"a\":\"b\\\\c\n\u{1}é\"}";
        let as_json_string = serde_json::to_string(body).unwrap();
        assert_eq!(escaped_len(body.as_bytes()), as_json_string.len() - 2);
    }
}
