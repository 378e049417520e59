//! Backend probes: every backend a model is bound to is asked `GET {url}/models` (with a
//! timeout) at start, on an interval and after each reload, and the outcome — with the served
//! ids of the answer when it is a model list, read up to [`LIST_LIMIT`] bytes — is recorded in
//! the server's [`crate::readiness::Readiness`], which `/readyz` reports. Simulated backends are
//! never probed.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, AUTHORIZATION};
use hyper::{Request, StatusCode};
use tokio::sync::watch;

use crate::app::App;
use crate::backends::Endpoint;
use crate::readiness::{bound_endpoints, listed_ids};

/// The most of a model list a probe reads; a longer answer is not read as a list (its ids prove
/// nothing), only as an answer.
pub const LIST_LIMIT: usize = 1024 * 1024;

/// Probes the current snapshot's backends now, then every `probe_interval` and after each
/// reload (the `reloaded` channel ticks), until `stop` changes.
pub async fn probe_loop(
    app: Arc<App>,
    mut reloaded: watch::Receiver<u64>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        probe_all(&app).await;
        tokio::select! {
            _ = tokio::time::sleep(app.cfg.probe_interval) => {}
            changed = reloaded.changed() => if changed.is_err() { return },
            _ = stop.changed() => return,
        }
    }
}

async fn probe_all(app: &App) {
    let snapshot = app.store.current();
    let probes = bound_endpoints(&snapshot)
        .filter(|e| !e.simulated)
        .map(|endpoint| probe_one(app, endpoint));
    let results = futures_join(probes).await;
    for (base, ok, detail, listed) in results {
        app.readiness.record(&base, ok, detail, listed);
    }
    app.readiness.publish(&snapshot);
    // Cooldowns other replicas started are read on the same beat.
    app.cooldowns.sync(snapshot.policy()).await;
}

type Probed = (
    String,
    bool,
    String,
    Option<std::collections::HashSet<String>>,
);

async fn probe_one(app: &App, endpoint: &Endpoint) -> Probed {
    let url = endpoint.url("/models");
    let mut request = match Request::get(&url).body(Full::new(Bytes::new())) {
        Ok(r) => r,
        Err(err) => return (endpoint.base.clone(), false, err.to_string(), None),
    };
    if let Some(auth) = &endpoint.authorization {
        request.headers_mut().insert(AUTHORIZATION, auth.clone());
    }
    crate::anthropic::dialect::set_probe_headers(request.headers_mut(), endpoint);
    request.headers_mut().insert(
        hyper::header::USER_AGENT,
        HeaderValue::from_static("src-router-probe"),
    );
    let outcome = app.upstream.send(request, app.cfg.probe_timeout).await;
    match outcome {
        Ok(response) => {
            let status = response.status();
            // Read the small answer (which also returns the connection to the pool).
            let body = Limited::new(response.into_body(), LIST_LIMIT);
            let read = tokio::time::timeout(app.cfg.probe_timeout, body.collect()).await;
            let listed = match read {
                Ok(Ok(collected)) if status.is_success() => listed_ids(&collected.to_bytes()),
                _ => None,
            };
            let ok = status < StatusCode::INTERNAL_SERVER_ERROR;
            (
                endpoint.base.clone(),
                ok,
                format!("answered {}", status.as_u16()),
                listed,
            )
        }
        Err(err) => (endpoint.base.clone(), false, err.to_string(), None),
    }
}

/// Runs the probes concurrently (a handful per policy) without pulling in a futures crate.
async fn futures_join<F, T>(futures: impl Iterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T>,
{
    let mut pending: Vec<_> = futures.map(|f| Some(Box::pin(f))).collect();
    let mut out = Vec::with_capacity(pending.len());
    std::future::poll_fn(|cx| {
        let mut all_done = true;
        for slot in pending.iter_mut() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        out.push(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => all_done = false,
                }
            }
        }
        if all_done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    out
}
