//! A response body sent as the parts it is made of. A table answer is a small envelope around a
//! metadata document that is already in memory (cached, or just written); sending the three
//! parts as they are spares copying a document of megabytes into one buffer per answer.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// Its parts, one frame each, with an exact size (so the compression layer's size predicate and
/// `Content-Length` see the whole answer).
pub(crate) struct PartsBody {
    parts: VecDeque<Bytes>,
    remaining: u64,
}

impl PartsBody {
    pub(crate) fn new(parts: impl IntoIterator<Item = Bytes>) -> Self {
        let parts: VecDeque<Bytes> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        let remaining = parts.iter().map(|p| p.len() as u64).sum();
        Self { parts, remaining }
    }
}

impl http_body::Body for PartsBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let next = self.parts.pop_front();
        if let Some(part) = &next {
            self.remaining -= part.len() as u64;
        }
        Poll::Ready(next.map(|part| Ok(Frame::data(part))))
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn the_parts_arrive_in_order_with_an_exact_size() {
        let body = PartsBody::new([
            Bytes::from_static(b"{\"a\":"),
            Bytes::new(),
            Bytes::from_static(b"[1,2]"),
            Bytes::from_static(b"}"),
        ]);
        assert_eq!(body.size_hint().exact(), Some(11));
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"{\"a\":[1,2]}");
    }
}
