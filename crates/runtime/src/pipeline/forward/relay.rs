//! An upstream answer handed to the client: its head cleaned of all but the headers a client
//! reads (`hygiene::returned`) and given the router's, its body relayed by [`Relay`] (idle timeout, session
//! outcomes, cache fill, cooldown verdict, a translation's rewrite).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::Response;

use crate::cache::Fill;
use crate::cooldown::Verdict;
use crate::headers::{self, path, TEXT_EVENT_STREAM};
use crate::hooks::UpstreamOutcomes;
use crate::pipeline::answer::set_sr_headers;
use crate::pipeline::forward::hygiene::returned_headers;
use crate::relay::body::{ProxyBody, Relay, Rewrite};
use crate::relay::completion::Completion;
use crate::relay::counted::Counted;
use crate::relay::rewriting::Rewritten;
use crate::secrets::{redact, Scrubbed};

/// What the relay of an upstream answer needs besides the answer.
pub(super) struct Answer<'a> {
    pub sent_at: Instant,
    pub timeout: Duration,
    pub protection: Option<&'a str>,
    pub model: &'a str,
    pub outcomes: Option<Arc<dyn UpstreamOutcomes>>,
    /// Set when this answer, once whole, goes into the response cache.
    pub fill: Option<Fill>,
    pub verdict: Option<Verdict>,
    /// Set when a whole JSON answer is rewritten for the client (a translated one).
    pub rewrite: Option<Rewrite>,
    /// The router's own counts, logged for what a translated answer's backend did not report.
    pub counted: Option<Arc<Counted>>,
    /// The simulator's `x-sim-*` account goes on to the client.
    pub sim_account: bool,
    /// The backend's key, taken out of a failed answer's headers and (whole) body: a backend
    /// that echoes a rejected key must not hand it to the client.
    pub key: Option<String>,
}

pub(super) fn relay(
    upstream: Response<Incoming>,
    answer: Answer<'_>,
    mut done: Completion,
) -> Response<ProxyBody> {
    let Answer {
        sent_at,
        timeout,
        protection,
        model,
        outcomes,
        fill,
        verdict,
        rewrite,
        counted,
        sim_account,
        key,
    } = answer;
    let (mut parts, body) = upstream.into_parts();
    let sse = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(TEXT_EVENT_STREAM));
    done.record.status = parts.status.as_u16();
    done.record.path = path::UPSTREAM;
    done.answer_head(sent_at.elapsed());
    // The upstream's headers, less what the client has no use for (the backend's internals,
    // the upstream connection's own): no value is copied.
    let mut response = Response::new(ProxyBody::Full(Full::new(Bytes::new())));
    *response.status_mut() = parts.status;
    *response.headers_mut() = returned_headers(std::mem::take(&mut parts.headers), sim_account);
    let headers = response.headers_mut();
    if sse {
        // The relay may end a failed stream with an error event of its own.
        headers.remove(hyper::header::CONTENT_LENGTH);
    }
    set_sr_headers(headers, &done.record, Some(model));
    if let Some(protection) = protection.and_then(|p| HeaderValue::from_str(p).ok()) {
        headers.insert(HeaderName::from_static(headers::SR_PROTECTION), protection);
    }
    let mut relay = Relay::new(body, sse, sent_at, done).with_idle_timeout(timeout);
    if let Some(outcomes) = outcomes {
        relay = relay.with_outcomes(outcomes, model);
    }
    if let Some(fill) = fill {
        relay = relay.with_cache(fill);
    }
    if let Some(verdict) = verdict {
        relay = relay.with_verdict(verdict);
    }
    if let Some(rewrite) = rewrite {
        relay = relay.with_rewrite(rewrite);
    }
    if let Some(counted) = counted {
        relay = relay.with_counts(counted);
    }
    let body = ProxyBody::Relay(Box::new(relay));
    *response.body_mut() = match key.filter(|_| !response.status().is_success()) {
        Some(key) => {
            let secrets = vec![key];
            let headers = response.headers_mut();
            for value in headers.values_mut() {
                if let Some(text) = value.to_str().ok().filter(|t| t.contains(&secrets[0])) {
                    if let Ok(clean) = HeaderValue::from_str(&redact(text, &secrets)) {
                        *value = clean;
                    }
                }
            }
            if sse {
                // A stream is relayed as it comes (its frames are the client's as they arrive).
                body
            } else {
                headers.remove(hyper::header::CONTENT_LENGTH);
                Rewritten::boxed(body, Scrubbed::new(secrets))
            }
        }
        None => body,
    };
    response
}
