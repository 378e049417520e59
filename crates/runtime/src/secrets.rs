//! Credentials that must never be shown: the one rule for taking a known secret out of a text
//! (a backend's error that echoes the key it was sent, `src doctor`'s probe details) and the
//! rewriter that applies it to a relayed upstream error.

use bytes::Bytes;

use crate::relay::rewriting::Rewriter;

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

/// Takes `secrets` out of a relayed body (a [`Rewriter`]): read whole (up to
/// `MAX_SCRUBBED`) since a key may be split across frames, then handed on as one piece.
pub struct Scrubbed {
    secrets: Vec<String>,
    held: Vec<u8>,
    /// Past the bound: pieces pass as they come.
    through: bool,
}

impl Scrubbed {
    pub fn new(secrets: Vec<String>) -> Scrubbed {
        Scrubbed {
            secrets,
            held: Vec::new(),
            through: false,
        }
    }

    fn release(&mut self) -> Bytes {
        let held = std::mem::take(&mut self.held);
        redact_bytes(&held, &self.secrets)
    }
}

impl Rewriter for Scrubbed {
    fn feed(&mut self, data: &Bytes) -> Bytes {
        if self.through {
            return data.clone();
        }
        self.held.extend_from_slice(data);
        if self.held.len() > MAX_SCRUBBED {
            self.through = true;
            return self.release();
        }
        Bytes::new()
    }

    fn finish(&mut self) -> Bytes {
        self.release()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::body::{BoxError, ProxyBody};
    use crate::relay::rewriting::Rewritten;
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
        let out = Rewritten::new(body, Scrubbed::new(vec!["sk-abc".into()]))
            .collect()
            .await?;
        assert_eq!(
            out.to_bytes(),
            Bytes::from_static(b"{\"error\":\"Bearer <redacted>\"}")
        );
        Ok(())
    }
}
