//! The worst-case number of model rounds before a condition decides: what bounds the time a
//! request can spend on model-backed signals (each round waits at most the runtime's model
//! timeout). Deployment checks compare it with a gateway's deadline (`src check --envoy`).
//!
//! The procedure computes the model atoms a condition needs all at once, the first time a
//! condition in scan order needs them; so in the worst case every earlier condition that first
//! needs a model atom costs one round, and the condition itself one more if it does.

use super::{CondOwner, CostClass, Inst, Program, SlotSource};

impl Program {
    /// For each condition in scan order: its owner and the most model rounds a request can wait
    /// for until that condition is decided.
    pub fn model_rounds(&self) -> Vec<(CondOwner, usize)> {
        let mut rounds = 0;
        self.conds
            .iter()
            .map(|cond| {
                if cond
                    .fresh
                    .iter()
                    .any(|node| self.loads_model_atom(node.index()))
                {
                    rounds += 1;
                }
                (cond.owner, rounds)
            })
            .collect()
    }

    fn loads_model_atom(&self, node: usize) -> bool {
        let slot = match self.nodes.get(node).map(|n| &n.inst) {
            Some(Inst::Load(slot)) => *slot,
            _ => return false,
        };
        match self.slots.get(slot.index()).map(|s| s.source) {
            Some(SlotSource::Atom(atom) | SlotSource::Confidence(atom)) => self
                .atoms
                .get(atom.index())
                .is_some_and(|a| a.cost == CostClass::Model),
            _ => false,
        }
    }
}
