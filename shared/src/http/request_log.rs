//! One structured line per request: method, path, status and time taken, never headers or
//! bodies. A tower layer rather than `axum::middleware::from_fn`, which clones and boxes the
//! rest of the stack for every request (a tenth of a warm loadTable's instructions), and
//! rather than tower-http's `TraceLayer`, which carries the request's method and path to its
//! response callback only in a span made for every request.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::extract::Request;
use axum::response::Response;
use http::Method;
use tower::{Layer, Service};

/// Logs every request the wrapped service answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestLogLayer;

impl<S> Layer<S> for RequestLogLayer {
    type Service = RequestLog<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestLog { inner }
    }
}

#[derive(Debug, Clone)]
pub struct RequestLog<S> {
    inner: S,
}

impl<S> Service<Request> for RequestLog<S>
where
    S: Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Logged<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let asked = tracing::enabled!(tracing::Level::INFO)
            .then(|| (request.method().clone(), request.uri().path().to_owned()));
        Logged {
            answer: self.inner.call(request),
            started: Instant::now(),
            asked,
        }
    }
}

pin_project_lite::pin_project! {
    /// The answer's future, logging when it completes.
    pub struct Logged<F> {
        #[pin]
        answer: F,
        started: Instant,
        // Method and path, when the line will be written.
        asked: Option<(Method, String)>,
    }
}

impl<F, E> Future for Logged<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let answer = ready!(this.answer.poll(cx));
        if let (Ok(response), Some((method, path))) = (&answer, this.asked.take()) {
            tracing::info!(
                %method,
                path,
                status = response.status().as_u16(),
                elapsed_us = this.started.elapsed().as_micros() as u64,
                "request"
            );
        }
        Poll::Ready(answer)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use http::StatusCode;
    use tower::ServiceExt;

    use super::*;

    /// Log output, shared with the test.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn one_line_a_request_with_its_method_path_and_status_alone() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let app = Router::new().route("/t/{name}", get(|| async { StatusCode::IM_A_TEAPOT }));
        let request = Request::get("/t/orders?pageToken=s3cr3t")
            .header("authorization", "Bearer s3cr3t")
            .body(Body::empty())
            .unwrap();
        let answer = RequestLogLayer.layer(app).oneshot(request).await.unwrap();
        assert_eq!(answer.status(), StatusCode::IM_A_TEAPOT);
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let logged: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(logged.len(), 1, "{text}");
        let fields = &logged[0]["fields"];
        assert_eq!(fields["message"], "request");
        assert_eq!(fields["method"], "GET");
        assert_eq!(fields["path"], "/t/orders");
        assert_eq!(fields["status"], 418);
        assert!(fields["elapsed_us"].is_u64());
        assert!(
            !text.contains("s3cr3t"),
            "no query or header is logged: {text}"
        );
    }
}
