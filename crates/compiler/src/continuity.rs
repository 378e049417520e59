//! The switch protocol of docs/language.md, "`session` and `protect`": what becomes of a call
//! whose session's live pin names another model than the one the decision proposed. The
//! session layer of `src serve` and `src whatif` both settle a switch here, so the built-in
//! hold and the observe mode cannot differ between them.
//!
//! The holds are tried in order: the built-in `provider state` hold first (a call continuing a
//! conversation only its backend holds cannot move: another model would not have it), then the
//! policy's `protect` holds, which the caller evaluates (they may need models or recent
//! outcomes). The first that holds keeps the pin, unless `protect` observes: then it is only
//! reported and the switch goes ahead.

use src_dsl::ast::ProtectMode;

use crate::hir::CheckedPolicy;
use crate::request::RequestView;

/// The name the built-in hold is reported under.
pub const PROVIDER_STATE: &str = "provider state";

/// How a switch away from a live pin settles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Switch {
    /// The hold named kept the pinned model.
    Held(String),
    /// The hold named would have kept it, but `protect` observes: the call switches.
    Observed(String),
    /// No hold held: the call switches.
    Switched,
}

/// The built-in hold that keeps `view`'s call on its pin before any of the policy's.
pub fn built_in_hold(view: &RequestView) -> Option<&'static str> {
    view.provider_state.then_some(PROVIDER_STATE)
}

/// Whether the policy's own holds need to be evaluated at all for `view`'s call: not when the
/// built-in hold holds already, nor without any.
pub fn asks_holds(policy: &CheckedPolicy, view: &RequestView) -> bool {
    built_in_hold(view).is_none() && policy.protect.as_ref().is_some_and(|p| !p.holds.is_empty())
}

/// How the switch settles, given the first of the policy's holds that held (`None` when none
/// did, or none was asked).
pub fn settle(policy: &CheckedPolicy, view: &RequestView, policy_hold: Option<String>) -> Switch {
    let held = built_in_hold(view).map(str::to_owned).or(policy_hold);
    let observe = policy
        .protect
        .as_ref()
        .is_some_and(|p| p.mode == ProtectMode::Observe);
    match held {
        Some(rule) if observe => Switch::Observed(rule),
        Some(rule) => Switch::Held(rule),
        None => Switch::Switched,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::PolicyBuilder;
    use crate::hir::ProtectDef;

    fn view(provider_state: bool) -> RequestView {
        let mut view = RequestView::from_prompt("go on", None, Vec::<(String, String)>::new());
        view.provider_state = provider_state;
        view
    }

    fn protect(mode: ProtectMode) -> ProtectDef {
        ProtectDef {
            mode,
            holds: Vec::new(),
            owner_lost: None,
        }
    }

    #[test]
    fn provider_state_holds_first_even_without_protect() {
        let policy = PolicyBuilder::new().policy;
        assert_eq!(
            settle(&policy, &view(true), None),
            Switch::Held(PROVIDER_STATE.into())
        );
        assert!(!asks_holds(&policy, &view(true)));
        assert_eq!(settle(&policy, &view(false), None), Switch::Switched);
    }

    #[test]
    fn observe_reports_the_hold_and_switches() {
        let mut policy = PolicyBuilder::new().policy;
        policy.protect = Some(protect(ProtectMode::Observe));
        assert_eq!(
            settle(&policy, &view(false), Some("tool loop".into())),
            Switch::Observed("tool loop".into())
        );
        assert_eq!(
            settle(&policy, &view(true), None),
            Switch::Observed(PROVIDER_STATE.into())
        );
        policy.protect = Some(protect(ProtectMode::Enforce));
        assert_eq!(
            settle(&policy, &view(false), Some("tool loop".into())),
            Switch::Held("tool loop".into())
        );
    }
}
