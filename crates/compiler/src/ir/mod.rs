//! The one IR that both decision engines run.
//!
//! A checked policy is lowered into three tables:
//! - **atoms**: every value a decision needs that is not plain logic or arithmetic (request facts,
//!   text tests, phrase and regex matches, classifier, guard and similarity calls, the `protect`
//!   inputs). The runtime computes atoms from a request into **slots** of a flat [`Row`]; text
//!   never reaches an engine. Identical atoms are one atom.
//! - **nodes**: a hash-consed DAG of typed three-valued operations over slots and constants.
//!   Signals are inlined as shared subexpressions, each wrapped in a `given` node so a test (or
//!   `src explain --given`) can pin the signal's value and the atoms behind it are never needed.
//! - **conditions**: the roots the engines scan — blocks in declaration order, routes by
//!   descending priority with the default last (always true), `protect` holds in order, and
//!   `cache.skip_when`.
//!
//! Nodes are numbered in creation order, so a node's operands always have smaller ids; each
//! condition lists the nodes it is the first in its scan to need (`fresh`). Both engines walk
//! those lists in order, which makes evaluation iterative and lets the JIT reuse the SSA value
//! of a subexpression an earlier condition already computed.

pub mod listing;
mod lower;
mod row;
mod stages;

pub use lower::{lower, LowerError};
pub use row::{Row, Slot};

use crate::hir::{
    ArithOp, BlockId, BudgetId, ClassSet, ClassifierId, CmpOp, DetectorId, EncoderId, GuardId,
    LabelId, RequestField, RouteId, SignalId,
};
use crate::pii::EntityType;
use src_dsl::Span;

macro_rules! ir_id {
    ($($(#[$doc:meta])* $name:ident),*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize { self.0 as usize }
        }
    )*};
}
ir_id!(
    /// A slot of a [`Row`].
    SlotId,
    /// An entry of [`Program::atoms`].
    AtomId,
    /// An entry of [`Program::nodes`].
    NodeId,
    /// An entry of [`Program::conds`].
    CondId
);

/// What a slot holds. All kinds are stored in a slot's `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlotKind {
    /// 0 or 1.
    Bool,
    /// An `i64`.
    Int,
    /// The bits of an `f64`.
    Float,
    /// A label index of the set.
    Label(ClassSet),
    /// A [`ModelId`](crate::hir::ModelId).
    Model,
}

/// How expensive an atom is to compute; the runtime computes cheap classes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CostClass {
    /// Request facts, headers, text comparisons, `protect` inputs.
    Fact = 0,
    /// Phrase lists, regexes, word counts.
    Scan = 1,
    /// `fuzzy`, `fuzzy_hits` and `bm25`: word-by-word edit distances and term counts, after the
    /// exact phrase scans.
    Approximate = 2,
    /// `tokens` and `language`.
    Analyze = 3,
    /// Classifier, guard, detector and similarity: a model runs.
    Model = 4,
}

/// A text-valued expression, evaluated by the runtime inside an atom.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TextExpr {
    Lit(String),
    Prompt,
    History,
    System,
    ApiKey,
    /// The header name, lowercased.
    Header(String),
    /// A dotted path into the request body.
    Body(String),
    Coalesce(Box<TextExpr>, Box<TextExpr>),
    /// A text signal, inlined; kept so a given value can replace it.
    Signal(SignalId, Box<TextExpr>),
}

impl TextExpr {
    /// Whether the value may be the API key (never shown in explanations or logs).
    pub fn mentions_api_key(&self) -> bool {
        match self {
            TextExpr::ApiKey => true,
            TextExpr::Coalesce(a, b) => a.mentions_api_key() || b.mentions_api_key(),
            TextExpr::Signal(_, e) => e.mentions_api_key(),
            _ => false,
        }
    }
}

/// A value the runtime computes from a request (or from the session, for `protect`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Atom {
    Request(RequestField),
    /// A comparison of two texts; an absent `text?` equals no string (and equals another absent
    /// one); ordering comparisons involving an absent text are false.
    TextCmp(CmpOp, TextExpr, TextExpr),
    Contains(TextExpr, Vec<String>),
    Hits(TextExpr, Vec<String>),
    Density(TextExpr, Vec<String>),
    Sequence(TextExpr, Vec<String>),
    /// `fuzzy`; the threshold as the bits of its `f64` (atoms are hashed).
    Fuzzy(TextExpr, Vec<String>, u64),
    /// `fuzzy_hits`; the threshold as for [`Atom::Fuzzy`].
    FuzzyHits(TextExpr, Vec<String>, u64),
    Bm25(TextExpr, Vec<String>),
    Count(TextExpr, String),
    Matches(TextExpr, String),
    /// `pii`: the entity types, sorted and without repeats (one atom per set).
    Pii(TextExpr, Vec<EntityType>),
    Words(TextExpr),
    Tokens(TextExpr),
    /// Two slots: the label and the detector's confidence.
    Language(TextExpr),
    /// Two slots: the top label and its confidence.
    Classify(ClassifierId, TextExpr),
    Guard(GuardId, TextExpr),
    /// A detector call: the entity types asked about, sorted and without repeats (one atom per
    /// set), shared with every model call made for the atom.
    Detect(DetectorId, TextExpr, std::sync::Arc<[String]>),
    /// The examples are shared with every model call made for the atom, not copied.
    Similarity(EncoderId, TextExpr, std::sync::Arc<[String]>),
    Pinned,
    Proposed,
    OutcomeFailRate,
    OutcomeCount,
    /// `budget(NAME).used`, supplied by the procedure once the budgets are answered.
    BudgetUsed(BudgetId),
    /// `budget(NAME).remaining`, supplied with `BudgetUsed`.
    BudgetRemaining(BudgetId),
}

impl Atom {
    pub fn cost(&self) -> CostClass {
        match self {
            Atom::Request(_)
            | Atom::TextCmp(..)
            | Atom::Pinned
            | Atom::Proposed
            | Atom::OutcomeFailRate
            | Atom::OutcomeCount
            | Atom::BudgetUsed(_)
            | Atom::BudgetRemaining(_) => CostClass::Fact,
            Atom::Contains(..)
            | Atom::Hits(..)
            | Atom::Density(..)
            | Atom::Sequence(..)
            | Atom::Count(..)
            | Atom::Matches(..)
            | Atom::Pii(..)
            | Atom::Words(_) => CostClass::Scan,
            Atom::Fuzzy(..) | Atom::FuzzyHits(..) | Atom::Bm25(..) => CostClass::Approximate,
            Atom::Tokens(_) | Atom::Language(_) => CostClass::Analyze,
            Atom::Classify(..) | Atom::Guard(..) | Atom::Detect(..) | Atom::Similarity(..) => {
                CostClass::Model
            }
        }
    }

    /// The kind of the atom's value slot, and of its confidence slot when it has one.
    pub fn slot_kinds(&self) -> (SlotKind, Option<SlotKind>) {
        match self {
            Atom::Request(
                RequestField::Stream | RequestField::ToolLoop | RequestField::ProviderState,
            )
            | Atom::TextCmp(..)
            | Atom::Contains(..)
            | Atom::Sequence(..)
            | Atom::Fuzzy(..)
            | Atom::Matches(..)
            | Atom::Pii(..)
            | Atom::Detect(..) => (SlotKind::Bool, None),
            Atom::Request(_)
            | Atom::Hits(..)
            | Atom::FuzzyHits(..)
            | Atom::Count(..)
            | Atom::Words(_)
            | Atom::Tokens(_)
            | Atom::OutcomeCount => (SlotKind::Int, None),
            Atom::Density(..)
            | Atom::Bm25(..)
            | Atom::Guard(..)
            | Atom::Similarity(..)
            | Atom::OutcomeFailRate
            | Atom::BudgetUsed(_)
            | Atom::BudgetRemaining(_) => (SlotKind::Float, None),
            Atom::Language(_) => (SlotKind::Label(ClassSet::Language), Some(SlotKind::Float)),
            Atom::Classify(c, _) => (
                SlotKind::Label(ClassSet::Classifier(*c)),
                Some(SlotKind::Float),
            ),
            Atom::Pinned | Atom::Proposed => (SlotKind::Model, None),
        }
    }

    /// The text the atom reads, if any.
    pub fn text(&self) -> Option<&TextExpr> {
        match self {
            Atom::Contains(t, _)
            | Atom::Hits(t, _)
            | Atom::Density(t, _)
            | Atom::Sequence(t, _)
            | Atom::Fuzzy(t, ..)
            | Atom::FuzzyHits(t, ..)
            | Atom::Bm25(t, _)
            | Atom::Count(t, _)
            | Atom::Matches(t, _)
            | Atom::Pii(t, _)
            | Atom::Words(t)
            | Atom::Tokens(t)
            | Atom::Language(t)
            | Atom::Classify(_, t)
            | Atom::Guard(_, t)
            | Atom::Detect(_, t, _)
            | Atom::Similarity(_, t, _) => Some(t),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AtomDef {
    pub atom: Atom,
    pub cost: CostClass,
    /// The value slot.
    pub slot: SlotId,
    /// The confidence slot of a classifier or `language` atom.
    pub confidence: Option<SlotId>,
}

/// Who fills a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotSource {
    /// The atom's value.
    Atom(AtomId),
    /// The atom's confidence.
    Confidence(AtomId),
    /// A value pinned for a signal (`given`); unknown unless given.
    Given(SignalId),
    /// The confidence of a pinned class signal (1 when given).
    GivenConfidence(SignalId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotDef {
    pub kind: SlotKind,
    pub source: SlotSource,
}

/// The machine type of a node's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValTy {
    Bool,
    Int,
    Float,
    Label,
    Model,
}

/// The numeric type an arithmetic node works in (operands already promoted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumTy {
    Int,
    Float,
}

/// How a comparison compares: signed integers, IEEE floats, or raw bits (bools, labels,
/// models, compared as unsigned integers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpTy {
    Int,
    Float,
    Bits,
}

/// A constant; floats as bits so constants hash and compare exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Const {
    Bool(bool),
    Int(i64),
    Float(u64),
    Label(ClassSet, u32),
    Model(u32),
}

impl Const {
    /// The slot encoding of the constant.
    pub fn bits(self) -> u64 {
        match self {
            Const::Bool(b) => u64::from(b),
            Const::Int(i) => i as u64,
            Const::Float(bits) => bits,
            Const::Label(_, l) | Const::Model(l) => u64::from(l),
        }
    }

    pub fn ty(self) -> ValTy {
        match self {
            Const::Bool(_) => ValTy::Bool,
            Const::Int(_) => ValTy::Int,
            Const::Float(_) => ValTy::Float,
            Const::Label(..) => ValTy::Label,
            Const::Model(_) => ValTy::Model,
        }
    }
}

/// One operation. Every operand is a smaller [`NodeId`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Inst {
    Const(Const),
    Load(SlotId),
    /// The given slot's value when it is known, else `inner`.
    Given {
        slot: SlotId,
        inner: NodeId,
    },
    Not(NodeId),
    And(NodeId, NodeId),
    Or(NodeId, NodeId),
    Neg(NumTy, NodeId),
    Arith(ArithOp, NumTy, NodeId, NodeId),
    /// Int to float promotion.
    ToFloat(NodeId),
    Cmp(CmpOp, CmpTy, NodeId, NodeId),
    /// The label is one of these (sorted, deduplicated).
    IsLabel(NodeId, ClassSet, Vec<LabelId>),
    /// The declared cost of a model value (0 for an id outside the table).
    ModelCost(NodeId),
}

impl Inst {
    /// The operands, in order.
    pub fn operands(&self) -> impl Iterator<Item = NodeId> {
        let (a, b) = match self {
            Inst::Const(_) | Inst::Load(_) => (None, None),
            Inst::Given { inner, .. } => (Some(*inner), None),
            Inst::Not(a)
            | Inst::Neg(_, a)
            | Inst::ToFloat(a)
            | Inst::IsLabel(a, ..)
            | Inst::ModelCost(a) => (Some(*a), None),
            Inst::And(a, b) | Inst::Or(a, b) | Inst::Arith(_, _, a, b) | Inst::Cmp(_, _, a, b) => {
                (Some(*a), Some(*b))
            }
        };
        a.into_iter().chain(b)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeDef {
    pub inst: Inst,
    pub ty: ValTy,
}

/// What a condition decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CondOwner {
    Block(BlockId),
    Route(RouteId),
    /// A `protect` hold, by position.
    Hold(usize),
    CacheSkip,
}

/// The boolean structure of a condition as written, down to its leaves (comparisons, tests,
/// signal references): what a trace reports when a condition fails.
#[derive(Debug, Clone, PartialEq)]
pub struct CondTree {
    pub span: Span,
    pub node: NodeId,
    pub shape: Shape,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    And(Box<CondTree>, Box<CondTree>),
    Or(Box<CondTree>, Box<CondTree>),
    Not(Box<CondTree>),
    Leaf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cond {
    pub owner: CondOwner,
    /// The `when` expression (the route itself for the default route).
    pub span: Span,
    pub root: NodeId,
    /// Nodes this condition is the first in its scan to need, in increasing order.
    pub fresh: Vec<NodeId>,
    pub tree: CondTree,
}

/// How a signal was lowered.
#[derive(Debug, Clone, PartialEq)]
pub enum SignalNode {
    /// A bool, int, float, score or model signal: its `given` node.
    Scalar(NodeId),
    /// A class signal: `given` nodes of its label and confidence.
    Class {
        set: ClassSet,
        label: NodeId,
        confidence: NodeId,
    },
    /// A text signal: inlined into the atoms that read it.
    Text(TextExpr),
}

/// Names of the policy's declarations, for listings and explanations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Names {
    pub signals: Vec<String>,
    pub blocks: Vec<String>,
    pub routes: Vec<String>,
    pub holds: Vec<String>,
    pub models: Vec<String>,
    pub classifiers: Vec<String>,
    pub guards: Vec<String>,
    pub encoders: Vec<String>,
    pub detectors: Vec<String>,
    /// Label names per classifier.
    pub classifier_labels: Vec<Vec<String>>,
    pub budgets: Vec<String>,
}

impl Names {
    fn get(list: &[String], i: usize) -> &str {
        list.get(i).map_or("?", String::as_str)
    }

    pub fn label(&self, set: ClassSet, label: u32) -> &str {
        match set {
            ClassSet::Classifier(c) => self
                .classifier_labels
                .get(c.index())
                .map_or("?", |l| Self::get(l, label as usize)),
            ClassSet::Language => Self::get(crate::language::labels(), label as usize),
        }
    }
}

/// The lowered policy: what the interpreter runs and the JIT compiles.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub(crate) slots: Vec<SlotDef>,
    pub(crate) atoms: Vec<AtomDef>,
    pub(crate) nodes: Vec<NodeDef>,
    /// Blocks, then routes, then holds, then the cache skip condition.
    pub(crate) conds: Vec<Cond>,
    pub(crate) block_count: usize,
    pub(crate) route_count: usize,
    pub(crate) hold_count: usize,
    pub(crate) signals: Vec<SignalNode>,
    pub(crate) model_costs: Vec<f64>,
    /// Each budget's `per` as text; `None` for `per = tenant`.
    pub(crate) budget_keys: Vec<Option<TextExpr>>,
    pub(crate) names: Names,
}

/// A decision that ends the scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    Blocked(BlockId),
    Route(RouteId),
}

/// What `decide` says about a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Decided(Verdict),
    /// This condition is unknown and every earlier one is false: its unknown slots must be
    /// computed before the decision can be made.
    Needs(CondId),
}

/// What `hold` says about a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HoldOutcome {
    /// The hold at this position holds: keep the pinned model.
    Held(usize),
    NoHold,
    Needs(CondId),
}

impl Program {
    /// A budget's `per` as text; `None` for `per = tenant` (or no such budget).
    pub fn budget_key(&self, budget: BudgetId) -> Option<&TextExpr> {
        self.budget_keys.get(budget.index())?.as_ref()
    }

    pub fn slots(&self) -> &[SlotDef] {
        &self.slots
    }

    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub fn atoms(&self) -> &[AtomDef] {
        &self.atoms
    }

    pub fn atom(&self, id: AtomId) -> Option<&AtomDef> {
        self.atoms.get(id.index())
    }

    pub fn nodes(&self) -> &[NodeDef] {
        &self.nodes
    }

    pub fn conds(&self) -> &[Cond] {
        &self.conds
    }

    pub fn cond(&self, id: CondId) -> Option<&Cond> {
        self.conds.get(id.index())
    }

    pub fn names(&self) -> &Names {
        &self.names
    }

    /// Declared model costs, by [`ModelId`](crate::hir::ModelId).
    pub fn model_costs(&self) -> &[f64] {
        &self.model_costs
    }

    /// The conditions `decide` scans: blocks, then routes.
    pub fn decide_conds(&self) -> std::ops::Range<usize> {
        0..self.block_count + self.route_count
    }

    pub fn block_cond(&self, block: BlockId) -> CondId {
        CondId(block.0)
    }

    pub fn route_cond(&self, route: RouteId) -> CondId {
        CondId((self.block_count + route.index()) as u32)
    }

    /// The conditions `hold` scans.
    pub fn hold_conds(&self) -> std::ops::Range<usize> {
        let start = self.block_count + self.route_count;
        start..start + self.hold_count
    }

    pub fn block_count(&self) -> usize {
        self.block_count
    }

    pub fn route_count(&self) -> usize {
        self.route_count
    }

    pub fn hold_count(&self) -> usize {
        self.hold_count
    }

    /// The `cache.skip_when` condition.
    pub fn cache_skip(&self) -> Option<CondId> {
        let at = self.block_count + self.route_count + self.hold_count;
        (at < self.conds.len()).then_some(CondId(at as u32))
    }

    /// How each signal was lowered, by [`SignalId`].
    pub fn signal(&self, id: SignalId) -> Option<&SignalNode> {
        self.signals.get(id.index())
    }

    pub fn signal_count(&self) -> usize {
        self.signals.len()
    }

    /// The slot `protect` fills for this atom, if the policy uses it.
    pub fn atom_slot(&self, atom: &Atom) -> Option<SlotId> {
        self.atoms.iter().find(|a| &a.atom == atom).map(|a| a.slot)
    }

    /// A row of the right length with every slot unknown.
    pub fn new_row(&self) -> Row {
        Row::unknown(self.slots.len())
    }

    /// The atom whose value or confidence a slot holds.
    pub fn slot_atom(&self, slot: SlotId) -> Option<AtomId> {
        match self.slots.get(slot.index())?.source {
            SlotSource::Atom(a) | SlotSource::Confidence(a) => Some(a),
            SlotSource::Given(_) | SlotSource::GivenConfidence(_) => None,
        }
    }
}

#[cfg(test)]
mod tests;
