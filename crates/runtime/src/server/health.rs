//! Backend probes: every backend a model is bound to is asked `GET {url}/models` (with a
//! timeout) at start, on an interval and after each reload, and the outcome is recorded in the
//! server's [`crate::readiness::Readiness`], which `/readyz` reports. Simulated backends are never probed.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, AUTHORIZATION};
use hyper::{Request, StatusCode};
use tokio::sync::watch;

use crate::app::App;
use crate::backends::Endpoint;
use crate::readiness::bound_endpoints;

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
    for (base, ok, detail) in results {
        app.readiness.record(&base, ok, detail);
    }
    app.readiness.publish(&snapshot);
    // Cooldowns other replicas started are read on the same beat.
    app.cooldowns.sync(snapshot.policy()).await;
}

async fn probe_one(app: &App, endpoint: &Endpoint) -> (String, bool, String) {
    let url = endpoint.url("/models");
    let mut request = match Request::get(&url).body(Full::new(Bytes::new())) {
        Ok(r) => r,
        Err(err) => return (endpoint.base.clone(), false, err.to_string()),
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
            // Drain the small answer so the connection returns to the pool.
            let _ =
                tokio::time::timeout(app.cfg.probe_timeout, response.into_body().collect()).await;
            let ok = status < StatusCode::INTERNAL_SERVER_ERROR;
            (
                endpoint.base.clone(),
                ok,
                format!("answered {}", status.as_u16()),
            )
        }
        Err(err) => (endpoint.base.clone(), false, err.to_string()),
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
