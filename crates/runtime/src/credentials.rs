//! What counts as a client's credential: the headers that carry one, and the policy's text
//! expressions whose value can be one (`api_key`, `header("authorization")`, a text signal over
//! them), so that such a value is hashed or redacted wherever the router keeps or shows it
//! (tenants, recordings).

use src_compiler::hir::{CheckedPolicy, TExpr, TExprKind};

/// Text signals may use other text signals; the checker forbids cycles, this bounds the walk
/// anyway (past it, the value is taken for a credential).
const MAX_DEPTH: usize = 64;

/// Whether a text expression's value can be a client's credential: it reads `api_key` or a
/// credential header, directly or through a text signal.
pub fn reads_credential(policy: &CheckedPolicy, expr: &TExpr, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return true;
    }
    match &expr.kind {
        TExprKind::ApiKey => true,
        TExprKind::Header(name) => is_credential_header(name),
        TExprKind::Coalesce(a, b) => {
            reads_credential(policy, a, depth + 1) || reads_credential(policy, b, depth + 1)
        }
        TExprKind::Signal(id) => policy
            .signals
            .get(id.index())
            .is_some_and(|s| reads_credential(policy, &s.expr, depth + 1)),
        _ => false,
    }
}

/// The headers that carry a client's credentials, with the proxy's own.
pub fn is_credential_header(name: &str) -> bool {
    crate::headers::CLIENT_CREDENTIALS
        .iter()
        .chain(&["proxy-authorization", "cookie"])
        .any(|h| name.eq_ignore_ascii_case(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::identity;
    use src_compiler::request::RequestView;
    use src_compiler::{check, load, CheckOptions};

    fn checked() -> CheckedPolicy {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("policy.sr");
        std::fs::write(&path, POLICY).expect("the policy is written");
        check(load(&path).expect("loads"), &CheckOptions::default())
            .policy
            .expect("the policy checks")
    }

    const POLICY: &str = r#"
backend b { url = "http://127.0.0.1:9/v1" }
model small { backend = b  serves = "s" }
signal key_text  = header("X-Api-Key")
signal team      = header("x-team")
signal either    = team ?? key_text
route default { to small }
session { tenant = api_key }
"#;

    #[test]
    fn an_expression_over_a_credential_is_one_and_others_are_not() {
        let policy = &checked();
        let expr = |name: &str| {
            let id = policy.signal_by_name(name).expect("the signal");
            &policy.signals[id.index()].expr
        };
        assert!(reads_credential(policy, expr("key_text"), 0));
        assert!(!reads_credential(policy, expr("team"), 0));
        assert!(
            reads_credential(policy, expr("either"), 0),
            "through a coalesce"
        );
        let tenant = policy
            .session
            .as_ref()
            .and_then(|s| s.tenant.as_ref())
            .expect("a tenant");
        assert!(reads_credential(policy, tenant, 0));
    }

    #[test]
    fn a_tenant_read_from_a_credential_never_holds_it() {
        let policy = checked();
        let headers = [(
            "authorization".to_owned(),
            "Bearer sk-live-secret".to_owned(),
        )];
        let view = RequestView::from_prompt("hi", None, &headers);
        let tenant = identity::tenant(&policy, &view);
        assert!(!tenant.contains("sk-live-secret"), "{tenant}");
        let other = [("authorization".to_owned(), "Bearer sk-other".to_owned())];
        let other = identity::tenant(&policy, &RequestView::from_prompt("hi", None, &other));
        assert_ne!(tenant, other);
    }
}
