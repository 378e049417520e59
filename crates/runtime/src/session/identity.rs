//! Who a call belongs to: the session identity and the tenant that scopes it.
//!
//! `session.id` and `session.tenant` are `text?` expressions (declared as in
//! docs/language.md, "`session` and `protect`", read at step 5 of
//! docs/language.md, "What happens to a request"). They are tiny — headers, body fields, the API key,
//! literals, `??` chains, text signals — so they are evaluated here directly over the
//! [`RequestView`] instead of through the staged evaluator, which only carries text inside atoms.
//!
//! The tenant is one function ([`tenant`]) for every store — pins, cached answers, stored
//! responses, outcome reports, the console: a hash of the request's credential in whatever form
//! it came (`authorization`, `api-key`, `x-api-key`; see `RequestView::api_key`), so the key
//! itself never reaches a store, a log line or a metric, followed by the value of the session's
//! `tenant` expression when the policy declares one. A tenant expression narrows a credential's
//! tenant and never widens it: two keys never share, whatever header they send, and one
//! tenant cannot name another's pins by claiming its name. A request with no credential is
//! [`ANONYMOUS`]; unless the policy says `router { anonymous = share }` it gets no cache and no
//! stored responses ([`isolated`]).

use sha2::{Digest, Sha256};
use src_compiler::hir::{CheckedPolicy, SessionDef, TExpr, TExprKind};
use src_compiler::request::RequestView;
use src_dsl::ast::Anonymous;

use crate::hex::lower as hex;

/// The credential part of the tenant of calls that carry no credential. Not hex, so never the
/// hash of a key.
pub const ANONYMOUS: &str = "anonymous";

/// Between the credential's hash and the tenant expression's value: a key hash is hex and
/// [`ANONYMOUS`] has no `/`, so the two parts can always be told apart.
const TENANT_PARTS: char = '/';

/// Hex digits of the API key's sha256 kept as the tenant: 128 bits, collision-free in practice.
const TENANT_HASH_HEX: usize = 32;

/// Identities longer than this are replaced by their hash so store keys stay bounded.
const MAX_ID_BYTES: usize = 256;

/// Text signals may use other text signals; the checker forbids cycles, this bounds the walk
/// anyway so a malformed policy value can never recurse without end.
const MAX_DEPTH: usize = 64;

/// A call's continuity key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    pub tenant: String,
    pub id: String,
}

/// The identity of a call under `def`, or `None` when its `id` expression yields no text (an
/// absent header, or text that is empty after trimming).
pub fn identify(policy: &CheckedPolicy, def: &SessionDef, view: &RequestView) -> Option<Identity> {
    let id = session_id(&eval_text(policy, &def.id, view, 0)?)?;
    Some(Identity {
        tenant: tenant(policy, view),
        id,
    })
}

/// A session id as pins key it: trimmed, hashed when very long; `None` when blank.
pub fn session_id(raw: &str) -> Option<String> {
    non_blank(raw.to_owned()).map(bound_id)
}

/// The tenant of a call, the same for every store: the credential's hash ([`tenant_of_key`]),
/// then `/` and the session's `tenant` expression's value when it has one.
pub fn tenant(policy: &CheckedPolicy, view: &RequestView) -> String {
    let mut tenant = tenant_of_key(view.api_key.as_deref());
    let Some(expr) = policy.session.as_ref().and_then(|def| def.tenant.as_ref()) else {
        return tenant;
    };
    if let Some(claimed) = eval_text(policy, expr, view, 0).and_then(non_blank) {
        tenant.push(TENANT_PARTS);
        // A tenant read from a credential (`tenant = api_key`) is kept as its hash, as the
        // credential part is: stores, the console and logs then never hold the key.
        if crate::credentials::reads_credential(policy, expr, 0) {
            tenant.push_str(&tenant_of_key(Some(&claimed)));
        } else {
            tenant.push_str(&claimed);
        }
    }
    tenant
}

/// Whether a call is kept away from what tenants share (the cache, stored responses): it
/// carries no credential and the policy keeps such calls apart (`anonymous = isolate`, the
/// default), since no two of them can be told apart.
pub fn isolated(policy: &CheckedPolicy, view: &RequestView) -> bool {
    view.api_key.is_none() && policy.router.anonymous == Anonymous::Isolate
}

/// The default tenant: a hex prefix of the key's sha256, or [`ANONYMOUS`] without a key.
pub fn tenant_of_key(api_key: Option<&str>) -> String {
    match api_key.filter(|k| !k.trim().is_empty()) {
        Some(key) => {
            let mut hex = hex(&Sha256::digest(key.as_bytes()));
            hex.truncate(TENANT_HASH_HEX);
            hex
        }
        None => ANONYMOUS.to_owned(),
    }
}

fn non_blank(text: String) -> Option<String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        None
    } else if trimmed.len() == text.len() {
        Some(text)
    } else {
        Some(trimmed.to_owned())
    }
}

fn bound_id(id: String) -> String {
    if id.len() <= MAX_ID_BYTES {
        id
    } else {
        format!("sha256:{}", hex(&Sha256::digest(id.as_bytes())))
    }
}

/// Evaluates a text-valued expression; `None` is an absent `text?`. Expressions of other types
/// (which the checker never lets through here) are absent too, never a panic.
fn eval_text(
    policy: &CheckedPolicy,
    expr: &TExpr,
    view: &RequestView,
    depth: usize,
) -> Option<String> {
    if depth > MAX_DEPTH {
        return None;
    }
    match &expr.kind {
        TExprKind::Str(s) => Some(s.clone()),
        TExprKind::Header(name) => view.header(name).map(str::to_owned),
        TExprKind::Body(path) => view.body_field(path).map(str::to_owned),
        TExprKind::ApiKey => view.api_key.clone(),
        TExprKind::Prompt => Some(view.prompt.clone()),
        TExprKind::History => Some(view.history.clone()),
        TExprKind::System => Some(view.system.clone()),
        TExprKind::Coalesce(a, b) => {
            eval_text(policy, a, view, depth + 1).or_else(|| eval_text(policy, b, view, depth + 1))
        }
        TExprKind::Signal(id) => {
            let signal = policy.signals.get(id.index())?;
            eval_text(policy, &signal.expr, view, depth + 1)
        }
        _ => None,
    }
}

/// Where an identity expression reads the identity from, for the "send one of" hint.
pub(crate) enum IdSource<'a> {
    Header(&'a str),
    Body(&'a str),
}

/// The headers and body fields an identity expression reads, in order, for the "send one of"
/// hint.
pub(crate) fn id_headers(e: &TExpr) -> Vec<IdSource<'_>> {
    match &e.kind {
        TExprKind::Header(h) => vec![IdSource::Header(h.as_str())],
        TExprKind::Body(p) => vec![IdSource::Body(p.as_str())],
        TExprKind::Coalesce(a, b) => {
            let mut v = id_headers(a);
            v.extend(id_headers(b));
            v
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_hash_is_a_prefix_of_its_sha256_and_never_the_key() {
        let tenant = tenant_of_key(Some("sk-secret"));
        let full = hex(&Sha256::digest(b"sk-secret"));
        assert_eq!(tenant.len(), TENANT_HASH_HEX);
        assert!(full.starts_with(&tenant));
        assert!(!tenant.contains("secret"));
        assert_ne!(tenant_of_key(Some("sk-other")), tenant);
        assert_eq!(tenant_of_key(None), ANONYMOUS);
        assert_eq!(tenant_of_key(Some("  ")), ANONYMOUS);
    }

    #[test]
    fn long_ids_are_hashed_and_short_ones_kept() {
        assert_eq!(bound_id("abc".into()), "abc");
        let long = "x".repeat(MAX_ID_BYTES + 1);
        let bounded = bound_id(long.clone());
        assert!(bounded.starts_with("sha256:"));
        assert_eq!(bounded.len(), "sha256:".len() + 64);
        assert_ne!(bound_id(format!("{long}y")), bounded);
    }

    #[test]
    fn blank_text_is_no_identity() {
        assert_eq!(non_blank("  ".into()), None);
        assert_eq!(non_blank(" a ".into()), Some("a".into()));
        assert_eq!(non_blank("a".into()), Some("a".into()));
    }
}
