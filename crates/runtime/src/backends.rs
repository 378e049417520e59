//! Backends as the forwarder sees them: a base URL, credentials, a timeout, and for
//! `simulated = true` an in-process simulator that the policy's snapshot keeps running.
//!
//! Simulated backends are served over real HTTP on `127.0.0.1:0`, so the request path is the
//! same for them as for a GPU backend. The [`SimPool`] reuses a running simulator across reloads
//! when the backend serves the same ids, which keeps its prefix cache warm.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use hyper::header::HeaderValue;
use hyper::http::uri::InvalidUri;
use hyper::Uri;
use src_compiler::hir::BackendDef;
use src_dsl::ast::BackendApi;

use crate::openai::Api;
use crate::sim::{SimConfig, SimHandle, SimModel};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("backend `{backend}` takes its API key from `{var}`, which is not set")]
    MissingKey { backend: String, var: String },
    #[error("backend `{backend}`: the API key in `{var}` cannot be sent in a header")]
    BadKey { backend: String, var: String },
    #[error("cannot start the simulator for backend `{backend}`: {detail}")]
    Simulator { backend: String, detail: String },
}

/// One backend, ready to be forwarded to.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub name: String,
    /// The URL up to and including the API version (`http://host:port/v1`), no trailing slash.
    pub base: String,
    pub authorization: Option<HeaderValue>,
    /// Whether the client's credentials go on to this backend when no `authorization` of its
    /// own replaces them (`client_auth`).
    pub forward_client_auth: bool,
    /// The protocol it speaks; a simulated backend speaks OpenAI's.
    pub api: BackendApi,
    /// The API key as an Anthropic backend takes it (`x-api-key`); `authorization` is then
    /// unset.
    pub api_key: Option<HeaderValue>,
    /// How long the response head may take.
    pub timeout: Duration,
    /// The `host` header of a plain `http` backend's requests, made once here rather than by
    /// the HTTP client on every request (`None` for `https`, whose HTTP/2 names the host in
    /// `:authority`).
    pub host: Option<HeaderValue>,
    pub simulated: bool,
    /// Its answers' `x-sim-*` account reaches the client (a simulator of a pool that relays it).
    pub relays_sim_account: bool,
    /// Keeps a simulated backend running while a snapshot uses it.
    sim: Option<Arc<SimHandle>>,
    /// The URL of each proxied API, parsed once here: parsing one for every forwarded request
    /// cost more than the rest of building the request.
    uris: Vec<(&'static str, Uri)>,
}

impl Endpoint {
    pub async fn resolve(
        backend: &BackendDef,
        served: Vec<String>,
        sims: &SimPool,
        default_timeout: Duration,
        sim_time_scale: f64,
    ) -> Result<Endpoint, BackendError> {
        let timeout = backend
            .timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(default_timeout);
        let simulated = backend.simulated || sims.simulates_all();
        if simulated && served.is_empty() {
            // Nothing is bound to it, so nothing will be forwarded to it: start nothing.
            return Ok(Endpoint {
                name: backend.name.clone(),
                base: String::new(),
                authorization: None,
                forward_client_auth: backend.forward_client_auth,
                api: BackendApi::OpenAi,
                api_key: None,
                timeout,
                host: None,
                simulated: true,
                relays_sim_account: false,
                sim: None,
                uris: Vec::new(),
            });
        }
        if simulated {
            let sim = sims
                .get_or_spawn(&backend.name, served, sim_time_scale)
                .await?;
            let base = format!("{}/v1", sim.base_url());
            return Ok(Endpoint {
                name: backend.name.clone(),
                host: plain_host(&base),
                uris: api_uris(&base),
                base,
                authorization: None,
                forward_client_auth: backend.forward_client_auth,
                api: BackendApi::OpenAi,
                api_key: None,
                timeout,
                simulated: true,
                relays_sim_account: sims.relay_account,
                sim: Some(sim),
            });
        }
        // The checker made sure this is an absolute http or https URL (E047).
        let base = backend.url.trim_end_matches('/').to_owned();
        let key = match &backend.api_key_env {
            None => None,
            Some(var) => {
                let key = std::env::var(var).map_err(|_| BackendError::MissingKey {
                    backend: backend.name.clone(),
                    var: var.clone(),
                })?;
                let value = match backend.api {
                    BackendApi::OpenAi => format!("Bearer {key}"),
                    BackendApi::Anthropic => key,
                };
                let mut value =
                    HeaderValue::from_str(&value).map_err(|_| BackendError::BadKey {
                        backend: backend.name.clone(),
                        var: var.clone(),
                    })?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        let (authorization, api_key) = match backend.api {
            BackendApi::OpenAi => (key, None),
            BackendApi::Anthropic => (None, key),
        };
        Ok(Endpoint {
            name: backend.name.clone(),
            host: plain_host(&base),
            uris: api_uris(&base),
            base,
            authorization,
            forward_client_auth: backend.forward_client_auth,
            api: backend.api,
            api_key,
            timeout,
            simulated: false,
            relays_sim_account: false,
            sim: None,
        })
    }

    /// The key this router sends the backend, bare (`sk-…`, whichever header carries it): what
    /// a relayed error must not show the client.
    pub fn key(&self) -> Option<String> {
        let value = self.authorization.as_ref().or(self.api_key.as_ref())?;
        let value = value.to_str().ok()?;
        let bare = value.strip_prefix("Bearer ").unwrap_or(value).trim();
        (!bare.is_empty()).then(|| bare.to_owned())
    }

    /// The in-process simulator of a `simulated = true` backend.
    pub fn simulator(&self) -> Option<&Arc<SimHandle>> {
        self.sim.as_ref()
    }

    /// The backend URL of an API path (`/chat/completions`, `/models`).
    pub fn url(&self, suffix: &str) -> String {
        let mut url = String::with_capacity(self.base.len() + suffix.len());
        url.push_str(&self.base);
        url.push_str(suffix);
        url
    }

    /// [`Endpoint::url`] as a URI to send a request to.
    pub fn uri(&self, suffix: &str) -> Result<Uri, InvalidUri> {
        match self.uris.iter().find(|(s, _)| *s == suffix) {
            Some((_, uri)) => Ok(uri.clone()),
            None => self.url(suffix).parse(),
        }
    }
}

/// The URLs of the proxied APIs on the backend at `base`.
fn api_uris(base: &str) -> Vec<(&'static str, Uri)> {
    [Api::Chat, Api::Responses, Api::Messages]
        .into_iter()
        .filter_map(|api| {
            let uri = format!("{base}{}", api.suffix()).parse().ok()?;
            Some((api.suffix(), uri))
        })
        .collect()
}

/// The `host` header HTTP/1.1 requests to the `http` URL `base` carry: its host, and its port
/// unless that is 80 (what hyper's pooled client would write itself).
fn plain_host(base: &str) -> Option<HeaderValue> {
    let uri: hyper::Uri = base.parse().ok()?;
    if uri.scheme_str() != Some("http") {
        return None;
    }
    let host = uri.host()?;
    let value = match uri.port_u16() {
        Some(port) if port != 80 => format!("{host}:{port}"),
        _ => host.to_owned(),
    };
    HeaderValue::from_str(&value).ok()
}

type SimKey = (String, Vec<String>);

/// Simulators of `simulated = true` backends, shared across reloads while a snapshot holds them.
#[derive(Default)]
pub struct SimPool {
    sims: tokio::sync::Mutex<HashMap<SimKey, Weak<SimHandle>>>,
    /// What each simulator is started with: its seed, its faults, and the settings of the
    /// served ids it lists (the others get the defaults).
    template: SimConfig,
    /// Every backend is simulated, whatever the policy says.
    simulate_all: bool,
    /// Its simulators' `x-sim-*` account reaches clients ([`crate::ServeConfig::relay_sim_account`]).
    relay_account: bool,
}

impl SimPool {
    pub fn new() -> SimPool {
        SimPool::default()
    }

    /// A pool whose simulators start from `template` (see [`crate::ServeConfig::simulator`]);
    /// with `simulate_all`, backends the policy does not mark `simulated` are simulated too.
    pub fn configured(template: SimConfig, simulate_all: bool) -> SimPool {
        SimPool {
            sims: tokio::sync::Mutex::default(),
            template,
            simulate_all,
            relay_account: false,
        }
    }

    /// This pool with its simulators' account relayed to clients, or not.
    pub fn relaying_account(self, relay_account: bool) -> SimPool {
        SimPool {
            relay_account,
            ..self
        }
    }

    /// Whether every backend is simulated.
    pub fn simulates_all(&self) -> bool {
        self.simulate_all
    }

    async fn get_or_spawn(
        &self,
        backend: &str,
        mut served: Vec<String>,
        time_scale: f64,
    ) -> Result<Arc<SimHandle>, BackendError> {
        served.sort();
        served.dedup();
        let key = (backend.to_owned(), served);
        let mut sims = self.sims.lock().await;
        sims.retain(|_, sim| sim.strong_count() > 0);
        if let Some(sim) = sims.get(&key).and_then(Weak::upgrade) {
            return Ok(sim);
        }
        let failed = |detail: String| BackendError::Simulator {
            backend: backend.to_owned(),
            detail,
        };
        let models = key
            .1
            .iter()
            .map(|id| {
                self.template
                    .models
                    .iter()
                    .find(|m| &m.id == id)
                    .cloned()
                    .unwrap_or_else(|| SimModel::new(id.clone()))
            })
            .collect();
        let cfg = SimConfig {
            models,
            time_scale,
            ..self.template.clone()
        };
        let sim = Arc::new(
            SimHandle::spawn(cfg)
                .await
                .map_err(|err| failed(err.to_string()))?,
        );
        sims.insert(key, Arc::downgrade(&sim));
        Ok(sim)
    }
}

#[cfg(test)]
mod tests {
    use super::plain_host;

    #[test]
    fn the_host_header_is_the_host_and_a_port_other_than_80() {
        let host = |base: &str| plain_host(base).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(
            host("http://127.0.0.1:8000/v1").as_deref(),
            Some("127.0.0.1:8000")
        );
        assert_eq!(
            host("http://frontend.svc/v1").as_deref(),
            Some("frontend.svc")
        );
        assert_eq!(
            host("http://frontend.svc:80/v1").as_deref(),
            Some("frontend.svc")
        );
        assert_eq!(host("http://[::1]:9000/v1").as_deref(), Some("[::1]:9000"));
        assert_eq!(host("https://api.example.com/v1"), None);
        assert_eq!(host(""), None);
    }
}
