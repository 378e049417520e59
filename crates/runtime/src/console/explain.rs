//! `POST /v1/console/explain`: the console's explain box. The loaded policy decides a pasted
//! prompt or request with the compiler's explainer — the function `src explain` calls — so the
//! page and the CLI answer alike; model-backed signals run on this server's model runtime, and
//! nothing is sent upstream or looked up in a cache or a session store.
//!
//! Body: `{"prompt": "...", "headers": {"name": "value"}}` or `{"request": {a chat, Responses or
//! Messages body}, "headers": {...}, "api": "chat" | "responses" | "messages"}` (`api` optional:
//! the body's shape tells, as `src explain` tells it).

use std::sync::Arc;

use serde_json::Value;
use src_compiler::eval::{ModelCall, ModelResult};
use src_compiler::explain::{explain, read_body, ModelAnswers, ModelsUnavailable};
use src_compiler::failover::Wire;
use src_compiler::hir::CheckedPolicy;
use src_compiler::request::RequestView;

use crate::hooks::ModelSignals;
use crate::openai::ApiError;
use crate::policy_store::Snapshot;

/// Explains `body` under `snapshot`, on a blocking thread (the explainer is synchronous).
pub async fn answer(
    snapshot: Arc<Snapshot>,
    models: Arc<dyn ModelSignals>,
    body: &[u8],
) -> Result<Value, ApiError> {
    let body: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
    let (view, wire) = request_view(&body)?;
    let handle = tokio::runtime::Handle::current();
    let decided = tokio::task::spawn_blocking(move || {
        let mut runner = Runner { models, handle };
        explain(&snapshot.compiled, &view, wire, &[], &mut runner)
    })
    .await
    .map_err(|e| ApiError::internal(format!("the explain task failed: {e}")))?;
    decided.map_err(|e| ApiError::bad_request(e.to_string()))
}

fn request_view(body: &Value) -> Result<(RequestView, Wire), ApiError> {
    let headers: Vec<(String, String)> = match body.get("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                (k.to_ascii_lowercase(), v)
            })
            .collect(),
        Some(_) => return Err(ApiError::bad_request("`headers` must be an object")),
    };
    if let Some(prompt) = body.get("prompt") {
        let prompt = prompt
            .as_str()
            .ok_or_else(|| ApiError::bad_request("`prompt` must be a string"))?;
        return Ok((RequestView::from_prompt(prompt, None, &headers), Wire::Chat));
    }
    let request = body
        .get("request")
        .ok_or_else(|| ApiError::bad_request("give `prompt` or `request`"))?;
    let api = match body.get("api") {
        None | Some(Value::Null) => None,
        Some(Value::String(api)) => Some(match api.as_str() {
            "chat" => Wire::Chat,
            "responses" => Wire::Responses,
            "messages" => Wire::Messages,
            other => {
                return Err(ApiError::bad_request(format!(
                    "`api` is `{other}`; give `chat`, `responses` or `messages`"
                )))
            }
        }),
        Some(_) => return Err(ApiError::bad_request("`api` must be a string")),
    };
    read_body(request, &headers, api)
        .map_err(|e| ApiError::bad_request(format!("`request` is not a valid request: {e}")))
}

/// The server's model runtime, driven from the explainer's blocking thread.
struct Runner {
    models: Arc<dyn ModelSignals>,
    handle: tokio::runtime::Handle,
}

impl ModelAnswers for Runner {
    fn answer(
        &mut self,
        policy: &CheckedPolicy,
        calls: &[ModelCall],
    ) -> Result<Vec<ModelResult>, ModelsUnavailable> {
        self.handle
            .block_on(self.models.compute(policy, calls))
            .map_err(|e| ModelsUnavailable::Failed(e.to_string()))
    }
}
