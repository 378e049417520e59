//! The session fixture that store tests share: a policy that pins a session's model while a
//! tool call is in flight, on the store a test names, and a call in the middle of that tool
//! loop. A history that mentions `segfault` routes to `strong`, any other to `small`, so the
//! model of a call whose result says `fine` tells whether the stored pin held.

/// The policy over `store` (a store expression: `redis("…")`, `redis_cluster([…])`, …) with
/// `failure { store = FAILURE }`.
pub fn pinned_policy(store: &str, failure: &str) -> String {
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small  {{ backend = sim  serves = "small-id" }}
model strong {{ backend = sim  serves = "strong-id" }}
route coding priority 10 {{ when contains(history, ["segfault"])  to strong }}
route default {{ to small }}
session {{ store = {store} }}
protect {{ hold "tool call in flight" when request.tool_loop }}
failure {{ store = {failure} }}
"#
    )
}

/// A chat call in the middle of a tool loop whose tool result says `result`.
pub fn tool_loop(result: &str) -> serde_json::Value {
    serde_json::json!({"model": "auto", "messages": [
        {"role": "user", "content": "rename it"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "function",
            "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": result},
    ]})
}
