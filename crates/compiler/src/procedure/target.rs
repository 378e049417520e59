//! What a request's `model` names (step 2 of docs/language.md, "What happens to a request"):
//! one of `router.names` asks for routing; a declared model's name or alias is taken as the
//! proposal. The table is built once per compiled policy.

use crate::hir::{CheckedPolicy, ModelId};
use std::collections::HashMap;

/// What one `model` value names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// One of `router.names`: route it.
    Route,
    /// A declared model, by name or alias.
    Model(ModelId),
}

/// Every name a request may put in `model`, with what it names.
pub(crate) fn targets(policy: &CheckedPolicy) -> HashMap<String, Target> {
    let mut targets = HashMap::new();
    // Model names and aliases first, router names last: the checker forbids overlaps (E044),
    // and should one slip through, routing wins, as the client asked for it by name.
    for (i, model) in policy.models.iter().enumerate() {
        let id = ModelId(i as u32);
        targets.insert(model.name.clone(), Target::Model(id));
        for alias in &model.aliases {
            targets.insert(alias.clone(), Target::Model(id));
        }
    }
    for name in &policy.router.names {
        targets.insert(name.clone(), Target::Route);
    }
    targets
}
