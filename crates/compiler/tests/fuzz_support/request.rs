//! The property every request body must have, whatever its bytes: shared by the proptest tests
//! (`fuzz_request.rs`) and the coverage-guided fuzz target (`fuzz/fuzz_targets/request.rs`).
//!
//! Any bytes, read as a `/v1/chat/completions` body and as a `/v1/responses` body, are either
//! refused (not JSON, or a [`RequestError`] naming what is wrong: a 400 for the server) or give
//! a [`RequestView`] that the request procedure decides (a decision, or a [`ProcedureError`] the
//! server answers with a 4xx or a 503) — never a panic, and never an internal error.

use src_compiler::engine::EngineKind;
use src_compiler::eval::ModelResult;
use src_compiler::procedure::SessionAnswer;
use src_compiler::request::{Borrowed, RequestError, RequestView};
use src_compiler::ProcedureError;
use src_compiler::{check, compile, load, CheckOptions, CompiledPolicy, Next, Procedure};
use std::path::Path;

/// A request procedure that has not finished after this many steps is stuck.
const MAX_STEPS: usize = 64;

/// Headers a client may send, so header-reading signals and `api_key` have something to read.
pub fn headers() -> Vec<(String, String)> {
    vec![
        ("authorization".into(), "Bearer sk-test".into()),
        ("x-tenant".into(), "acme".into()),
        ("x-session-id".into(), "s1".into()),
    ]
}

/// The policy in `dir`, checked and compiled; `None` when it does not check (a policy that
/// needs files this machine lacks).
pub fn compiled(dir: &Path) -> Option<CompiledPolicy> {
    let outcome = check(load(dir).ok()?, &CheckOptions::default());
    compile(outcome.policy?, EngineKind::default()).ok()
}

/// Checks the property on `bytes` against each of `policies`.
pub fn check_body(bytes: &[u8], policies: &[CompiledPolicy]) -> Result<(), String> {
    check_borrowed(bytes)?;
    let Ok(body) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return Ok(());
    };
    let headers = headers();
    for (api, view) in [
        ("chat", RequestView::from_chat(&body, &headers)),
        ("responses", RequestView::from_responses(&body, &headers)),
    ] {
        match view {
            Ok(view) => {
                check_view(&view).map_err(|e| format!("{api}: {e}"))?;
                for policy in policies {
                    decide(policy, &view).map_err(|e| format!("{api}: {e}"))?;
                }
            }
            Err(err) => check_error(&err).map_err(|e| format!("{api}: {e}"))?,
        }
    }
    Ok(())
}

/// The borrowed readers agree with the `Value` ones on `bytes` as a chat, a Messages and a
/// Responses body:
/// both refuse it as JSON, or both read it, into the same facts or the same [`RequestError`].
pub fn check_borrowed(bytes: &[u8]) -> Result<(), String> {
    let tree = serde_json::from_slice::<serde_json::Value>(bytes);
    let borrowed = Borrowed::parse(bytes);
    let (tree, borrowed) = match (tree, borrowed) {
        (Err(_), None) => return Ok(()),
        (Ok(tree), Some(borrowed)) => (tree, borrowed),
        (Err(err), Some(_)) => {
            return Err(format!(
                "the borrowed tree reads a body serde_json refuses ({err})"
            ))
        }
        // serde_json's own marker keys are left to a `Value` on purpose.
        (Ok(_), None) if contains(bytes, b"$serde_json::private::") => return Ok(()),
        (Ok(_), None) => return Err("the borrowed tree refuses a body serde_json reads".into()),
    };
    let headers = headers();
    let readers = [
        (
            "chat",
            RequestView::from_chat(&tree, &headers),
            RequestView::from_chat(&borrowed, &headers),
        ),
        (
            "Messages",
            RequestView::from_messages(&tree, &headers),
            RequestView::from_messages(&borrowed, &headers),
        ),
        (
            "Responses",
            RequestView::from_responses(&tree, &headers),
            RequestView::from_responses(&borrowed, &headers),
        ),
    ];
    for (api, by_tree, by_borrowed) in readers {
        if by_tree != by_borrowed {
            return Err(format!(
                "the {api} readers disagree: from the Value {by_tree:?}, from the borrowed tree {by_borrowed:?}"
            ));
        }
    }
    Ok(())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn check_view(view: &RequestView) -> Result<(), String> {
    if !view.history.contains(&view.prompt) {
        return Err(format!(
            "the prompt {:?} is not in the history {:?}",
            view.prompt, view.history
        ));
    }
    if view.api_key.as_deref() != Some("sk-test") {
        return Err(format!("api_key is {:?}", view.api_key));
    }
    let counts = [
        view.tools,
        view.turns,
        view.messages,
        view.tool_calls,
        view.tool_results,
    ];
    if counts.iter().any(|n| *n < 0) {
        return Err(format!("a negative count in {counts:?}"));
    }
    Ok(())
}

/// A refusal the server turns into a 400 must say what is wrong.
fn check_error(err: &RequestError) -> Result<(), String> {
    if err.to_string().is_empty() || err.path().is_some_and(str::is_empty) {
        return Err(format!("an error without words: {err:?}"));
    }
    Ok(())
}

/// Drives the procedure to its end as the server does, with every model call failing (the
/// path a real deployment takes when its models are down).
fn decide(policy: &CompiledPolicy, view: &RequestView) -> Result<(), String> {
    let mut procedure = Procedure::new(policy, view);
    for _ in 0..MAX_STEPS {
        match procedure.advance() {
            Ok(Next::Done(decision)) => {
                let refused = decision.refusal.is_some();
                if refused == decision.candidates.is_empty() {
                    return Ok(());
                }
                return Err(format!("refused {refused} with candidates: {decision:?}"));
            }
            Ok(Next::Models(calls)) => {
                for call in &calls {
                    procedure
                        .supply(call, ModelResult::Failed)
                        .map_err(|e| format!("supplying {call:?}: {e}"))?;
                }
            }
            Ok(Next::Cache(_)) => procedure.cache_answered(false),
            Ok(Next::Budgets(_)) => procedure.budgets_answered(&[]),
            Ok(Next::Session(_)) => procedure.session_answered(SessionAnswer::Keep),
            Err(ProcedureError::Internal(what)) => {
                return Err(format!(
                    "internal error: the decision named an unknown {what}"
                ))
            }
            Err(_) => return Ok(()),
        }
    }
    Err(format!("no decision after {MAX_STEPS} steps"))
}
