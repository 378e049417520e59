//! Staged evaluation of one request: compute only what the decision needs, cheapest first.
//!
//! An [`Evaluation`] owns the request's row. Each `step` runs the engine; while the answer is
//! "this condition needs slots", it computes the unknown slots that could settle that condition
//! (and only that one): request facts all at once, then one phrase/regex/word atom at a time,
//! then one `fuzzy`/`fuzzy_hits`/`bm25` atom at a time, then `tokens`/`language`, re-deciding after each — a later atom is never computed if an
//! earlier one settled the condition. Model-backed atoms are handed back to the caller as
//! [`ModelCall`]s (the runtime batches them; `src explain` answers them from `--given`), all
//! those of the current condition at once, so one round trip serves it.
//!
//! A value pinned with [`Evaluation::give`] replaces its signal, so atoms reachable only
//! through the signal are never needed. A condition that stays unknown because what it needs
//! cannot be had (a failed model call, `outcomes(pinned).fail_rate` with no outcomes) is
//! treated as not holding, except that a failed model call under `failure.classifier = closed`
//! (explicit, or by default for a model a `block` reads) ends the evaluation with
//! [`Step::Failed`]: the runtime answers 503.

mod atoms;

use crate::compiled::CompiledPolicy;
use crate::hir::{
    BudgetId, ClassSet, ClassifierId, DetectorId, EncoderId, GuardId, LabelId, ModelId, SignalId,
    Value,
};
use crate::interp::{self, Trace};
use crate::ir::{
    Atom, AtomId, CondId, CostClass, HoldOutcome, Inst, NodeId, Outcome, Program, Row, SignalNode,
    Slot, SlotId, SlotKind, ValTy, Verdict,
};
use crate::request::RequestView;
use atoms::Computed;
use src_dsl::ast::FailMode;
use std::sync::Arc;

/// The model an atom runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelKind {
    Classifier(ClassifierId),
    Guard(GuardId),
    /// A detector's entities of the types in [`ModelCall::examples`].
    Detector(DetectorId),
    /// Similarity under this encoder to the atom's examples ([`ModelCall::examples`]).
    Similarity(EncoderId),
}

/// One model-backed atom to compute: run `model` on `text`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelCall {
    pub atom: AtomId,
    pub model: ModelKind,
    pub text: String,
    /// The examples of a similarity atom, or the entity types a detector call asks about (empty
    /// for classifiers and guards), so a model runtime that sees only the checked policy can
    /// answer the call.
    pub examples: Arc<[String]>,
    /// Whether the atom fails closed (`failure.classifier = closed`, or unset and a `block`
    /// uses it): a model runtime that could read only part of the text answers as a failure
    /// would, a guard, detector or `similarity` at its worst (score 1).
    pub closed: bool,
}

impl ModelCall {
    /// The examples of a similarity atom (stable per atom: embed them once per policy).
    pub fn examples<'p>(&self, program: &'p Program) -> &'p [String] {
        match program.atom(self.atom).map(|a| &a.atom) {
            Some(Atom::Similarity(_, _, examples)) => examples,
            _ => &[],
        }
    }
}

/// The answer to a [`ModelCall`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ModelResult {
    /// A classifier's top label and its confidence.
    Class { label: LabelId, confidence: f64 },
    /// A guard's unsafe probability, a similarity, or a detector's best score for an entity of
    /// the asked types (0 when it found none); the detector's threshold turns that into found
    /// or not.
    Score(f64),
    /// The call failed or timed out.
    Failed,
}

/// Model atoms whose failure leaves a condition undecidable under a closed failure mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedModels {
    pub cond: CondId,
    pub atoms: Vec<AtomId>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Decided(Verdict),
    NeedModels(Vec<ModelCall>),
    Failed(FailedModels),
}

#[derive(Debug, Clone, PartialEq)]
pub enum HoldStep {
    /// The hold at this position holds: keep the pinned model.
    Held(usize),
    NoHold,
    NeedModels(Vec<ModelCall>),
    Failed(FailedModels),
}

/// `cache.skip_when` staged the same way.
#[derive(Debug, Clone, PartialEq)]
pub enum CacheStep {
    Skip,
    Lookup,
    NeedModels(Vec<ModelCall>),
    Failed(FailedModels),
}

/// Where an atom stands in this evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomState {
    /// Not needed so far.
    Untouched,
    /// Computed from the request (or the session, for `protect` inputs).
    Computed,
    /// Not available for this request; conditions needing it cannot hold.
    Absent,
    /// Handed to the caller, no answer yet.
    Requested,
    Supplied,
    Failed,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GiveError {
    #[error("no signal #{0} in this policy")]
    UnknownSignal(u32),
    #[error("signal `{signal}` is {expected}; the given value is not")]
    Type {
        signal: String,
        expected: &'static str,
    },
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SupplyError {
    #[error("no atom #{0} in this policy")]
    UnknownAtom(u32),
    #[error("the result does not fit `{atom}`")]
    Mismatch { atom: String },
}

impl CompiledPolicy {
    /// Starts evaluating `req`; nothing is computed until a step asks for it.
    pub fn evaluate<'a>(&'a self, req: &'a RequestView) -> Evaluation<'a> {
        let program = &self.program;
        Evaluation {
            policy: self,
            req,
            row: program.new_row(),
            atoms: vec![AtomState::Untouched; program.atoms().len()],
            text_givens: vec![None; program.signal_count()],
            forced: vec![false; program.conds().len()],
            failed_open: Vec::new(),
        }
    }
}

/// The evaluation of one request against one policy.
pub struct Evaluation<'a> {
    policy: &'a CompiledPolicy,
    req: &'a RequestView,
    row: Row,
    atoms: Vec<AtomState>,
    /// Given values of text signals.
    text_givens: Vec<Option<Option<String>>>,
    /// Conditions settled as not holding because nothing left can decide them.
    forced: Vec<bool>,
    failed_open: Vec<CondId>,
}

enum Scan<T> {
    Done(T),
    Needs(CondId),
}

enum Staged<T> {
    Done(T),
    Models(Vec<ModelCall>),
    Failed(FailedModels),
}

enum Advance {
    Progress,
    Models(Vec<ModelCall>),
    Stuck(Vec<AtomId>),
}

impl<'a> Evaluation<'a> {
    /// Advances the routing decision (blocks, then routes) as far as it can without models.
    pub fn step(&mut self) -> Step {
        match self.stage(|ev| match ev.decide_now() {
            Outcome::Decided(v) => Scan::Done(v),
            Outcome::Needs(c) => Scan::Needs(c),
        }) {
            Staged::Done(v) => Step::Decided(v),
            Staged::Models(calls) => Step::NeedModels(calls),
            Staged::Failed(f) => Step::Failed(f),
        }
    }

    /// Advances the `protect` holds for a proposed switch away from `pinned`.
    pub fn hold_step(
        &mut self,
        pinned: ModelId,
        proposed: ModelId,
        fail_rate: Option<f64>,
        count: i64,
    ) -> HoldStep {
        let facts = [
            (Atom::Pinned, Some(Slot::known(u64::from(pinned.0)))),
            (Atom::Proposed, Some(Slot::known(u64::from(proposed.0)))),
            (
                Atom::OutcomeFailRate,
                fail_rate.map(|f| Slot::known(f.to_bits())),
            ),
            (Atom::OutcomeCount, Some(Slot::known(count as u64))),
        ];
        for (atom, value) in facts {
            let Some(id) = self.atom_id(&atom) else {
                continue;
            };
            let slot = self.policy.program.atoms()[id.index()].slot;
            match value {
                Some(v) => {
                    self.row.set(slot, v);
                    self.atoms[id.index()] = AtomState::Computed;
                }
                None => {
                    self.row.clear(slot);
                    self.atoms[id.index()] = AtomState::Absent;
                }
            }
        }
        match self.stage(|ev| match ev.hold_now() {
            HoldOutcome::Held(i) => Scan::Done(HoldStep::Held(i)),
            HoldOutcome::NoHold => Scan::Done(HoldStep::NoHold),
            HoldOutcome::Needs(c) => Scan::Needs(c),
        }) {
            Staged::Done(h) => h,
            Staged::Models(calls) => HoldStep::NeedModels(calls),
            Staged::Failed(f) => HoldStep::Failed(f),
        }
    }

    /// Advances `cache.skip_when` (no such condition: look the cache up).
    pub fn cache_step(&mut self) -> CacheStep {
        let Some(cond) = self.policy.program.cache_skip() else {
            return CacheStep::Lookup;
        };
        match self.stage(|ev| {
            let value = interp::eval_cond(&ev.policy.program, cond, &ev.row);
            match value.or(ev.forced[cond.index()].then_some(false)) {
                Some(true) => Scan::Done(true),
                Some(false) => Scan::Done(false),
                None => Scan::Needs(cond),
            }
        }) {
            Staged::Done(true) => CacheStep::Skip,
            Staged::Done(false) => CacheStep::Lookup,
            Staged::Models(calls) => CacheStep::NeedModels(calls),
            Staged::Failed(f) => CacheStep::Failed(f),
        }
    }

    /// Records the answer to a model call from the last step.
    pub fn supply(&mut self, call: &ModelCall, result: ModelResult) -> Result<(), SupplyError> {
        let program = &self.policy.program;
        let def = program
            .atom(call.atom)
            .ok_or(SupplyError::UnknownAtom(call.atom.0))?;
        let mismatch = || SupplyError::Mismatch {
            atom: program.atom_text(&def.atom),
        };
        match (&def.atom, result) {
            (_, ModelResult::Failed) => {
                self.row.clear(def.slot);
                self.atoms[call.atom.index()] = AtomState::Failed;
                return Ok(());
            }
            (Atom::Classify(c, _), ModelResult::Class { label, confidence }) => {
                let labels = self.policy.checked.labels(ClassSet::Classifier(*c)).len();
                let conf_slot = def.confidence.ok_or_else(mismatch)?;
                if label.index() >= labels {
                    return Err(mismatch());
                }
                self.row.set_label(def.slot, label);
                self.row.set_float(conf_slot, confidence);
            }
            (Atom::Guard(..) | Atom::Similarity(..), ModelResult::Score(score)) => {
                self.row.set_float(def.slot, score);
            }
            (Atom::Detect(d, ..), ModelResult::Score(score)) => {
                let threshold = self
                    .policy
                    .checked
                    .detectors
                    .get(d.index())
                    .ok_or_else(mismatch)?
                    .threshold;
                self.row.set_bool(def.slot, score >= threshold);
            }
            _ => return Err(mismatch()),
        }
        self.atoms[call.atom.index()] = AtomState::Supplied;
        Ok(())
    }

    /// Pins a signal's value (`given` in tests, `--given` in `src explain`). A class value's
    /// confidence is pinned to 1. An int is accepted for a float or score signal.
    pub fn give(&mut self, signal: SignalId, v: Value) -> Result<(), GiveError> {
        let program = &self.policy.program;
        let node = program
            .signal(signal)
            .ok_or(GiveError::UnknownSignal(signal.0))?;
        let name = || {
            program
                .names()
                .signals
                .get(signal.index())
                .cloned()
                .unwrap_or_default()
        };
        let wrong = |expected: &'static str| GiveError::Type {
            signal: name(),
            expected,
        };
        match node {
            SignalNode::Text(_) => match v {
                Value::Text(t) => self.text_givens[signal.index()] = Some(t),
                _ => return Err(wrong("text")),
            },
            SignalNode::Scalar(n) => {
                let slot = given_slot(program, *n).ok_or_else(|| wrong("not givable"))?;
                let kind = program.slots()[slot.index()].kind;
                let value = match (kind, v) {
                    (SlotKind::Bool, Value::Bool(b)) => Slot::known(u64::from(b)),
                    (SlotKind::Int, Value::Int(i)) => Slot::known(i as u64),
                    (SlotKind::Float, Value::Float(f)) => Slot::known(f.to_bits()),
                    (SlotKind::Float, Value::Int(i)) => Slot::known((i as f64).to_bits()),
                    (SlotKind::Model, Value::Model(m))
                        if m.index() < self.policy.checked.models.len() =>
                    {
                        Slot::known(u64::from(m.0))
                    }
                    (kind, _) => return Err(wrong(kind_name(kind))),
                };
                self.row.set(slot, value);
            }
            SignalNode::Class {
                set,
                label,
                confidence,
            } => {
                let ok = |s: ClassSet, l: LabelId| {
                    s == *set && l.index() < self.policy.checked.labels(s).len()
                };
                let l = match v {
                    Value::Label(s, l) if ok(s, l) => l,
                    _ => return Err(wrong("a label of its classifier")),
                };
                let ls = given_slot(program, *label).ok_or_else(|| wrong("not givable"))?;
                let cs = given_slot(program, *confidence).ok_or_else(|| wrong("not givable"))?;
                self.row.set_label(ls, l);
                self.row.set_float(cs, 1.0);
            }
        }
        Ok(())
    }

    /// The text a budget's `per` expression yields for this request, trimmed; `None` when the
    /// budget counts per tenant, or when the expression yields no text.
    pub fn budget_text(&self, budget: BudgetId) -> Option<&str> {
        let key = self.policy.program.budget_key(budget)?;
        self.text(key).map(str::trim).filter(|t| !t.is_empty())
    }

    /// Sets `budget(NAME).used` (a share, 0–1) and `.remaining` (in the budget's unit).
    pub fn set_budget(&mut self, budget: BudgetId, used: f64, remaining: f64) {
        for (atom, value) in [
            (Atom::BudgetUsed(budget), used),
            (Atom::BudgetRemaining(budget), remaining),
        ] {
            let Some(id) = self.atom_id(&atom) else {
                continue;
            };
            let slot = self.policy.program.atoms()[id.index()].slot;
            self.row.set(slot, Slot::known(value.to_bits()));
            self.atoms[id.index()] = AtomState::Computed;
        }
    }

    /// Every signal with its value where this evaluation knows it (text signals that may hold
    /// the API key are never shown).
    pub fn signal_values(&self) -> Vec<(SignalId, Option<Value>)> {
        let program = &self.policy.program;
        (0..program.signal_count())
            .map(|i| {
                let id = SignalId(i as u32);
                (id, self.signal_value(id))
            })
            .collect()
    }

    fn signal_value(&self, id: SignalId) -> Option<Value> {
        let program = &self.policy.program;
        match program.signal(id)? {
            SignalNode::Text(t) => {
                if t.mentions_api_key() {
                    return None;
                }
                Some(Value::Text(self.text(t).map(str::to_string)))
            }
            SignalNode::Scalar(n) => {
                let v = interp::eval_node(program, *n, &self.row);
                if !v.known {
                    return None;
                }
                Some(match program.nodes()[n.index()].ty {
                    ValTy::Bool => Value::Bool(v.bits != 0),
                    ValTy::Int => Value::Int(v.bits as i64),
                    ValTy::Float => Value::Float(f64::from_bits(v.bits)),
                    ValTy::Model => Value::Model(ModelId(v.bits as u32)),
                    ValTy::Label => return None,
                })
            }
            SignalNode::Class { set, label, .. } => {
                let v = interp::eval_node(program, *label, &self.row);
                v.known
                    .then_some(Value::Label(*set, LabelId(v.bits as u32)))
            }
        }
    }

    /// Signals whose value this evaluation never learned (not needed, so not computed): those
    /// [`Evaluation::signal_values`] answers `None` for, found without copying any value (every
    /// request asks, for its log line).
    pub fn skipped_signals(&self) -> Vec<SignalId> {
        let program = &self.policy.program;
        (0..program.signal_count())
            .map(|i| SignalId(i as u32))
            .filter(|&id| !self.signal_known(id))
            .collect()
    }

    /// Whether [`Evaluation::signal_value`] would answer a value for `id`.
    fn signal_known(&self, id: SignalId) -> bool {
        let program = &self.policy.program;
        match program.signal(id) {
            None => false,
            Some(SignalNode::Text(t)) => !t.mentions_api_key(),
            Some(SignalNode::Scalar(n)) => {
                program.nodes()[n.index()].ty != ValTy::Label
                    && interp::eval_node(program, *n, &self.row).known
            }
            Some(SignalNode::Class { label, .. }) => {
                interp::eval_node(program, *label, &self.row).known
            }
        }
    }

    /// Atoms computed or supplied so far.
    pub fn computed_atoms(&self) -> Vec<AtomId> {
        self.atoms
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, AtomState::Computed | AtomState::Supplied))
            .map(|(i, _)| AtomId(i as u32))
            .collect()
    }

    pub fn atom_states(&self) -> &[AtomState] {
        &self.atoms
    }

    /// Conditions treated as not holding because a model failed (fail-open) or an input was
    /// absent: the runtime records them.
    pub fn failed_open(&self) -> &[CondId] {
        &self.failed_open
    }

    pub fn row(&self) -> &Row {
        &self.row
    }

    /// The decide scan over what is known now, with a trace (for `src explain`).
    pub fn trace(&self) -> (Outcome, Trace) {
        interp::decide_traced_forcing(&self.policy.program, &self.row, &|c| self.is_forced(c))
    }

    /// The decide scan over what is known now, without a trace: what is decided, or the
    /// condition the evaluation waits on.
    pub fn pending(&self) -> Outcome {
        self.decide_now()
    }

    fn decide_now(&self) -> Outcome {
        if self.failed_open.is_empty() {
            self.policy.engine().decide(&self.row)
        } else {
            interp::decide_forcing(&self.policy.program, &self.row, &|c| self.is_forced(c))
        }
    }

    fn hold_now(&self) -> HoldOutcome {
        if self.failed_open.is_empty() {
            self.policy.engine().hold(&self.row)
        } else {
            interp::hold_forcing(&self.policy.program, &self.row, &|c| self.is_forced(c))
        }
    }

    fn is_forced(&self, c: CondId) -> bool {
        self.forced.get(c.index()).copied().unwrap_or(false)
    }

    fn atom_id(&self, atom: &Atom) -> Option<AtomId> {
        let program = &self.policy.program;
        program
            .atoms()
            .iter()
            .position(|a| &a.atom == atom)
            .map(|i| AtomId(i as u32))
    }

    fn stage<T>(&mut self, scan: impl Fn(&Self) -> Scan<T>) -> Staged<T> {
        loop {
            let cond = match scan(self) {
                Scan::Done(t) => return Staged::Done(t),
                Scan::Needs(c) => c,
            };
            match self.advance(cond) {
                Advance::Progress => {}
                Advance::Models(calls) => return Staged::Models(calls),
                Advance::Stuck(atoms) => {
                    let closed: Vec<AtomId> = atoms
                        .into_iter()
                        .filter(|a| {
                            self.atoms[a.index()] == AtomState::Failed && self.fails_closed(*a)
                        })
                        .collect();
                    if !closed.is_empty() {
                        return Staged::Failed(FailedModels {
                            cond,
                            atoms: closed,
                        });
                    }
                    // Terminates: each pass either computes an atom, hands calls back, or
                    // settles one more condition.
                    if let Some(f) = self.forced.get_mut(cond.index()) {
                        *f = true;
                    }
                    self.failed_open.push(cond);
                }
            }
        }
    }

    fn fails_closed(&self, atom: AtomId) -> bool {
        match self.policy.checked.failure.classifier {
            Some(FailMode::Closed) => true,
            Some(FailMode::Open) => false,
            None => self
                .policy
                .block_atoms
                .get(atom.index())
                .copied()
                .unwrap_or(false),
        }
    }

    /// Computes or requests what could settle `cond`.
    fn advance(&mut self, cond: CondId) -> Advance {
        let program = &self.policy.program;
        let mut open: Vec<AtomId> = Vec::new();
        let mut stuck: Vec<AtomId> = Vec::new();
        for slot in program.unknown_slots(cond, &self.row) {
            let Some(a) = program.slot_atom(slot) else {
                continue;
            };
            let list = match self.atoms[a.index()] {
                AtomState::Untouched | AtomState::Requested => &mut open,
                AtomState::Absent | AtomState::Failed => &mut stuck,
                AtomState::Computed | AtomState::Supplied => continue,
            };
            if !list.contains(&a) {
                list.push(a);
            }
        }
        let cost = |a: &AtomId| program.atoms()[a.index()].cost;
        let Some(first) = open.first() else {
            return Advance::Stuck(stuck);
        };
        match cost(first) {
            CostClass::Fact => {
                let facts: Vec<AtomId> = open
                    .iter()
                    .copied()
                    .filter(|a| cost(a) == CostClass::Fact)
                    .collect();
                for a in facts {
                    self.store(a);
                }
                Advance::Progress
            }
            CostClass::Scan | CostClass::Approximate | CostClass::Analyze => {
                let a = *first;
                self.store(a);
                Advance::Progress
            }
            CostClass::Model => {
                let calls = open
                    .iter()
                    .filter_map(|a| self.call(*a))
                    .collect::<Vec<_>>();
                for c in &calls {
                    self.atoms[c.atom.index()] = AtomState::Requested;
                }
                if calls.is_empty() {
                    Advance::Stuck(stuck)
                } else {
                    Advance::Models(calls)
                }
            }
        }
    }

    fn store(&mut self, a: AtomId) {
        let computed = self.compute(a);
        let Some(def) = self.policy.program.atom(a) else {
            return;
        };
        match computed {
            Computed::Value(v, conf) => {
                self.row.set(def.slot, v);
                if let (Some(cs), Some(c)) = (def.confidence, conf) {
                    self.row.set(cs, c);
                }
                self.atoms[a.index()] = AtomState::Computed;
            }
            Computed::Absent => self.atoms[a.index()] = AtomState::Absent,
        }
    }

    fn call(&self, a: AtomId) -> Option<ModelCall> {
        let def = self.policy.program.atom(a)?;
        let (model, text, examples) = match &def.atom {
            Atom::Classify(c, t) => (ModelKind::Classifier(*c), t, Arc::from([])),
            Atom::Guard(g, t) => (ModelKind::Guard(*g), t, Arc::from([])),
            Atom::Detect(d, t, entities) => (ModelKind::Detector(*d), t, Arc::clone(entities)),
            Atom::Similarity(e, t, examples) => {
                (ModelKind::Similarity(*e), t, Arc::clone(examples))
            }
            _ => return None,
        };
        Some(ModelCall {
            atom: a,
            model,
            text: self.text(text).unwrap_or("").to_string(),
            examples,
            closed: self.fails_closed(a),
        })
    }
}

/// The slot a signal's `given` node reads.
fn given_slot(program: &Program, node: NodeId) -> Option<SlotId> {
    match program.nodes().get(node.index())?.inst {
        Inst::Given { slot, .. } => Some(slot),
        _ => None,
    }
}

fn kind_name(kind: SlotKind) -> &'static str {
    match kind {
        SlotKind::Bool => "a bool",
        SlotKind::Int => "an int",
        SlotKind::Float => "a number",
        SlotKind::Label(_) => "a label",
        SlotKind::Model => "a model",
    }
}

#[cfg(test)]
mod tests;
