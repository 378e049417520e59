//! The tenant and session of a request, as the console shows them: the tenant the session layer
//! would scope it to (the policy's `tenant` expression, else a hash of the API key, never the key)
//! and its session id (hashed when long), and the prompt's length (its text only where the
//! operator enabled prompt display). Worked out only while a page watches the live stream, and
//! carried by the request's record ([`Who`] is the log's, as the record is).

use src_compiler::hir::CheckedPolicy;
use src_compiler::request::RequestView;

use crate::log::Who;
use crate::session::identity::tenant;
use crate::session::listing::shown_id;

/// Characters of a prompt a live line carries at most.
pub const PROMPT_SHOWN: usize = 500;

/// Who sent `view` under `policy`; `session` is the session id the session layer found;
/// `prompts`: whether the prompt's text may be shown.
pub fn who(
    policy: &CheckedPolicy,
    view: &RequestView,
    session: Option<&str>,
    prompts: bool,
) -> Who {
    let tenant = tenant(policy, view);
    Who {
        tenant,
        session: session.map(shown_id),
        prompt_chars: view.prompt.chars().count(),
        prompt: prompts.then(|| view.prompt.chars().take(PROMPT_SHOWN).collect()),
    }
}
