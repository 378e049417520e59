//! What a request's `model` names (step 2 of docs/language.md, "What happens to a request"):
//! one of `router.names` asks for routing; a declared model's name or alias is taken as the
//! proposal; so is a served id (`serves`) bound to exactly one model, so that clients moved from
//! a Dynamo or vLLM frontend keep working with the ids they send. The table is built once per
//! compiled policy, and every front door (`src serve`, `src explain`, `src test`) reads it
//! through [`crate::CompiledPolicy::target`].

use crate::hir::{CheckedPolicy, ModelId};
use std::collections::HashMap;

/// What one `model` value names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// One of `router.names`: route it.
    Route,
    /// A declared model, by name, alias or the served id only it is bound to.
    Model(ModelId),
    /// A served id that several models are bound to: the client must name one of them
    /// ([`models_serving`] lists them).
    Ambiguous,
}

/// Every name a request may put in `model`, with what it names.
pub(crate) fn targets(policy: &CheckedPolicy) -> HashMap<String, Target> {
    let mut targets = HashMap::new();
    // Served ids first, so that a model name or alias equal to another model's served id names
    // that model (`src check` warns of it, W010).
    for (i, model) in policy.models.iter().enumerate() {
        let id = ModelId(i as u32);
        targets
            .entry(model.serves.clone())
            .and_modify(|t| {
                if *t != Target::Model(id) {
                    *t = Target::Ambiguous;
                }
            })
            .or_insert(Target::Model(id));
    }
    // Model names and aliases next, router names last: the checker forbids overlaps (E044),
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

/// The names of the models bound to the served id `serves`, in declaration order.
pub fn models_serving<'p>(policy: &'p CheckedPolicy, serves: &str) -> Vec<&'p str> {
    policy
        .models
        .iter()
        .filter(|m| m.serves == serves)
        .map(|m| m.name.as_str())
        .collect()
}
