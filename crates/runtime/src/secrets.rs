//! Credentials that must never be shown: the one rule for taking a known secret out of a text
//! (a backend's error that echoes the key it was sent, `src doctor`'s probe details) and the
//! body wrapper that applies it to a relayed upstream error.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use crate::relay::body::{BoxError, ProxyBody};

/// What a secret is replaced with.
pub const REDACTED: &str = "<redacted>";

/// An upstream error body is scrubbed whole up to this size; past it the rest passes as it
/// came (backend errors are a few hundred bytes; the bound keeps a huge one from being held).
const MAX_SCRUBBED: usize = 1 << 20;

/// `text` with each non-empty secret replaced by [`REDACTED`].
pub fn redact(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|s| !s.is_empty())
        .fold(text.to_owned(), |t, s| t.replace(s.as_str(), REDACTED))
}

/// Whether `bytes` holds any of `secrets`.
fn holds(bytes: &[u8], secrets: &[String]) -> bool {
    secrets
        .iter()
        .filter(|s| !s.is_empty())
        .any(|s| bytes.windows(s.len()).any(|w| w == s.as_bytes()))
}

/// `bytes` with each secret replaced (as bytes: an error body need not be UTF-8).
fn redact_bytes(bytes: &[u8], secrets: &[String]) -> Bytes {
    if !holds(bytes, secrets) {
        return Bytes::copy_from_slice(bytes);
    }
    let mut out = bytes.to_vec();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        let needle = secret.as_bytes();
        let mut next = Vec::with_capacity(out.len());
        let mut rest = out.as_slice();
        while let Some(at) = rest.windows(needle.len()).position(|w| w == needle) {
            next.extend_from_slice(&rest[..at]);
            next.extend_from_slice(REDACTED.as_bytes());
            rest = &rest[at + needle.len()..];
        }
        next.extend_from_slice(rest);
        out = next;
    }
    Bytes::from(out)
}

/// A body relayed with `secrets` taken out: read whole (up to `MAX_SCRUBBED`) since a key may
/// be split across frames, then handed on as one frame; trailers pass as they are.
pub struct Scrubbed {
    inner: ProxyBody,
    secrets: Vec<String>,
    held: Vec<u8>,
    /// Past the bound, or at the end: frames pass as they come.
    through: bool,
    /// Trailers that arrived while data was held.
    pending: Option<Frame<Bytes>>,
}

impl Scrubbed {
    pub fn new(inner: ProxyBody, secrets: Vec<String>) -> Scrubbed {
        Scrubbed {
            inner,
            secrets,
            held: Vec::new(),
            through: false,
            pending: None,
        }
    }

    fn release(&mut self) -> Option<Frame<Bytes>> {
        if self.held.is_empty() {
            return None;
        }
        let held = std::mem::take(&mut self.held);
        Some(Frame::data(redact_bytes(&held, &self.secrets)))
    }
}

impl Body for Scrubbed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if this.through {
                if let Some(frame) = this.release().or_else(|| this.pending.take()) {
                    return Poll::Ready(Some(Ok(frame)));
                }
                return Pin::new(&mut this.inner).poll_frame(cx);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.through = true;
                    return Poll::Ready(this.release().map(Ok));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.held.extend_from_slice(&data);
                        if this.held.len() > MAX_SCRUBBED {
                            this.through = true;
                        }
                    }
                    Err(trailers) => {
                        // The data held goes first; the trailers wait their turn.
                        this.through = true;
                        this.pending = Some(trailers);
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.through && self.held.is_empty() && self.pending.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn every_occurrence_of_every_secret_goes() {
        let secrets = vec!["sk-abc".to_owned(), String::new()];
        assert_eq!(
            redact("bad key Bearer sk-abc (sk-abc)", &secrets),
            "bad key Bearer <redacted> (<redacted>)"
        );
        assert_eq!(
            redact_bytes(b"x sk-abc y", &secrets),
            Bytes::from_static(b"x <redacted> y")
        );
    }

    #[tokio::test]
    async fn a_scrubbed_body_loses_its_secrets() -> Result<(), BoxError> {
        let body = ProxyBody::from(Bytes::from_static(b"{\"error\":\"Bearer sk-abc\"}"));
        let out = Scrubbed::new(body, vec!["sk-abc".into()]).collect().await?;
        assert_eq!(
            out.to_bytes(),
            Bytes::from_static(b"{\"error\":\"Bearer <redacted>\"}")
        );
        Ok(())
    }
}
