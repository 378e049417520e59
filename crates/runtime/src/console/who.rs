//! The tenant and session of a request, as the console shows them: the tenant the session layer
//! would scope it to (the policy's `tenant` expression, else a hash of the API key, never the key)
//! and its session id (hashed when long). Worked out only while a page watches the live stream.

use src_compiler::hir::CheckedPolicy;
use src_compiler::request::RequestView;

use crate::session::identity::{tenant, tenant_of_key};
use crate::session::listing::shown_id;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    pub tenant: String,
    pub session: Option<String>,
}

/// Who sent `view` under `policy`; `session` is the session id the session layer found.
pub fn who(policy: &CheckedPolicy, view: &RequestView, session: Option<&str>) -> Who {
    let tenant = match &policy.session {
        Some(def) => tenant(policy, def, view),
        None => tenant_of_key(view.api_key.as_deref()),
    };
    Who {
        tenant,
        session: session.map(shown_id),
    }
}
