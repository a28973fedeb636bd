//! Compressed table answers built from a cached, compressed metadata document.
//!
//! A table answer is a few hundred bytes of envelope around a metadata document that never
//! changes once written. The document is compressed once per file ([`Segment`]) and each answer
//! compresses only its envelope around it: gzip as one deflate stream whose document part is the
//! cached one (sync-flushed, so streams join at a byte boundary) and whose checksum is combined
//! from the parts' checksums; zstd as three frames, which RFC 8878 lets a stream hold. Either
//! way the answer inflates to exactly the bytes of the plain answer.
//!
//! The choice of encoding is tower-http's (the compression layer every other answer goes
//! through): the highest q-value among gzip and zstd, zstd on a tie, none for `identity` or
//! without `Accept-Encoding`; answers under [`crate::http::MIN_COMPRESSED_BYTES`] go plain.

use bytes::Bytes;
use flate2::{Compress, Compression, FlushCompress, Status};

/// A compressed encoding Floe answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Encoding {
    Gzip,
    Zstd,
}

impl Encoding {
    pub fn header_value(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Zstd => "zstd",
        }
    }

    /// The encoding tower-http's compression layer would pick for `headers`, `None` for plain.
    pub fn negotiate(headers: &http::HeaderMap) -> Option<Encoding> {
        // Ranked as tower-http ranks them on equal q-values: identity < gzip < zstd.
        let mut best: Option<(u16, u8, Option<Encoding>)> = None;
        let offers = headers
            .get_all(http::header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','));
        for offer in offers {
            let mut parts = offer.splitn(2, ';');
            let name = parts.next().unwrap_or_default().trim();
            let (rank, encoding) =
                if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
                    (1, Some(Encoding::Gzip))
                } else if name.eq_ignore_ascii_case("zstd") {
                    (2, Some(Encoding::Zstd))
                } else if name.eq_ignore_ascii_case("identity") {
                    (0, None)
                } else {
                    continue;
                };
            let quality = match parts.next() {
                Some(q) => match q_value(q.trim()) {
                    Some(q) => q,
                    None => continue,
                },
                None => 1000,
            };
            if quality > 0 && best.is_none_or(|(q, r, _)| (quality, rank) >= (q, r)) {
                best = Some((quality, rank, encoding));
            }
        }
        best.and_then(|(_, _, encoding)| encoding)
    }
}

/// An RFC 9110 q-value (`q=0.5`) in thousandths, as tower-http reads it.
fn q_value(text: &str) -> Option<u16> {
    let rest = text
        .strip_prefix("q=")
        .or_else(|| text.strip_prefix("Q="))?;
    let (whole, fraction) = match rest.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (rest, ""),
    };
    let whole: u16 = match whole {
        "0" => 0,
        "1" => 1000,
        _ => return None,
    };
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut value = whole;
    let mut factor = 100;
    for digit in fraction.bytes() {
        value += factor * u16::from(digit - b'0');
        factor /= 10;
    }
    (value <= 1000).then_some(value)
}

/// One document compressed for splicing into answers.
#[derive(Debug)]
pub struct Segment {
    /// gzip: raw deflate blocks ending on a sync flush (no header, no final block); zstd: one
    /// whole frame.
    pub bytes: Bytes,
    /// CRC-32 and length of the document, which the gzip trailer covers.
    crc: u32,
    len: u64,
}

impl Segment {
    /// Compresses `document` at the fastest level, as the compression layer does.
    pub fn compress(document: &[u8], encoding: Encoding) -> std::io::Result<Segment> {
        let bytes = match encoding {
            Encoding::Gzip => deflate(document, FlushCompress::Sync)?,
            Encoding::Zstd => zstd::bulk::compress(document, 1)?,
        };
        let mut crc = crc32fast::Hasher::new();
        if encoding == Encoding::Gzip {
            crc.update(document);
        }
        Ok(Segment {
            bytes: Bytes::from(bytes),
            crc: crc.finalize(),
            len: document.len() as u64,
        })
    }

    /// The cache weight of this segment.
    pub fn weight(&self) -> usize {
        self.bytes.len()
    }
}

/// `prefix`, the segment's document and `suffix`, compressed as one answer.
pub fn assemble(
    prefix: &[u8],
    segment: &Segment,
    suffix: &[u8],
    encoding: Encoding,
) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(segment.bytes.len() + prefix.len() + suffix.len() + 64);
    match encoding {
        Encoding::Gzip => {
            // Header: deflate, no flags, no time, unknown OS.
            out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
            out.extend_from_slice(&deflate(prefix, FlushCompress::Sync)?);
            out.extend_from_slice(&segment.bytes);
            out.extend_from_slice(&deflate(suffix, FlushCompress::Finish)?);
            let mut crc = crc32fast::Hasher::new();
            crc.update(prefix);
            crc.combine(&crc32fast::Hasher::new_with_initial_len(
                segment.crc,
                segment.len,
            ));
            crc.update(suffix);
            let len = prefix.len() as u64 + segment.len + suffix.len() as u64;
            out.extend_from_slice(&crc.finalize().to_le_bytes());
            out.extend_from_slice(&(len as u32).to_le_bytes());
        }
        Encoding::Zstd => {
            out.extend_from_slice(&zstd::bulk::compress(prefix, 1)?);
            out.extend_from_slice(&segment.bytes);
            out.extend_from_slice(&zstd::bulk::compress(suffix, 1)?);
        }
    }
    Ok(out)
}

/// Raw deflate of `data` at the fastest level, ended by `flush`: `Sync` leaves the stream open
/// at a byte boundary for more blocks, `Finish` closes it.
fn deflate(data: &[u8], flush: FlushCompress) -> std::io::Result<Vec<u8>> {
    let mut compress = Compress::new(Compression::fast(), false);
    let mut out = Vec::with_capacity(data.len() / 3 + 64);
    loop {
        let consumed = compress.total_in() as usize;
        let status = compress
            .compress_vec(&data[consumed..], &mut out, flush)
            .map_err(std::io::Error::other)?;
        let all_in = compress.total_in() as usize == data.len();
        let done = match flush {
            FlushCompress::Finish => status == Status::StreamEnd,
            // A flush is complete once the output was not filled to the brim.
            _ => all_in && out.len() < out.capacity(),
        };
        if done {
            return Ok(out);
        }
        out.reserve(out.capacity().max(256));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn headers(accept: &str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::ACCEPT_ENCODING, accept.parse().unwrap());
        headers
    }

    #[test]
    fn negotiation_follows_the_compression_layer() {
        let pick = |accept: &str| Encoding::negotiate(&headers(accept));
        assert_eq!(Encoding::negotiate(&http::HeaderMap::new()), None);
        assert_eq!(pick("gzip"), Some(Encoding::Gzip));
        assert_eq!(pick("x-gzip, deflate"), Some(Encoding::Gzip));
        assert_eq!(pick("gzip, zstd"), Some(Encoding::Zstd));
        assert_eq!(pick("zstd;q=0.5, gzip"), Some(Encoding::Gzip));
        assert_eq!(pick("gzip;q=0"), None);
        assert_eq!(pick("identity, gzip;q=0.9"), None);
        assert_eq!(pick("gzip;q=0.9, identity;q=0.5"), Some(Encoding::Gzip));
        assert_eq!(pick("br, deflate"), None);
        assert_eq!(pick("gzip;q=2"), None, "an invalid q-value drops the offer");
        assert_eq!(pick("GZIP;Q=0.100"), Some(Encoding::Gzip));
    }

    fn gunzip(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    fn unzstd(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        zstd::stream::read::Decoder::new(bytes)
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn assembled_answers_inflate_to_the_plain_bytes() {
        let document: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("{{\"snapshot-id\":{i}}},").into_bytes())
            .collect();
        for (prefix, suffix) in [
            (
                &b"{\"metadata-location\":\"s3://b/t/m.json\",\"metadata\":"[..],
                &b",\"config\":{}}"[..],
            ),
            (&b""[..], &b""[..]),
        ] {
            let plain = [prefix, &document[..], suffix].concat();
            let gzip = Segment::compress(&document, Encoding::Gzip).unwrap();
            let answer = assemble(prefix, &gzip, suffix, Encoding::Gzip).unwrap();
            // GzDecoder reads one member and checks its CRC and length: the answer is one.
            assert_eq!(gunzip(&answer), plain);
            assert!(answer.len() < plain.len() / 4);
            let zstd = Segment::compress(&document, Encoding::Zstd).unwrap();
            let answer = assemble(prefix, &zstd, suffix, Encoding::Zstd).unwrap();
            assert_eq!(unzstd(&answer), plain);
        }
    }
}
