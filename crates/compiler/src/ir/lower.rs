//! `lower`: a checked policy becomes one [`Program`].
//!
//! Lowering is where values are split by who computes them: anything read from the request or
//! a model becomes an atom (deduplicated structurally, so `contains(prompt, ["x"])` written in
//! three signals is scanned once), text stays inside atoms, and the rest becomes hash-consed
//! nodes. The checker has already accepted the policy, so a shape it would reject is reported
//! as a [`LowerError`] rather than trusted, never a panic.

use super::CmpTy;
use super::{
    Atom, AtomDef, AtomId, Cond, CondOwner, CondTree, Const, Inst, Names, NodeDef, NodeId, NumTy,
    Program, Shape, SignalNode, SlotDef, SlotId, SlotKind, SlotSource, TextExpr, ValTy,
};
use crate::hir::{
    BlockId, CheckedPolicy, ClassSet, CmpOp, RouteId, SignalId, TExpr, TExprKind, Type,
};
use src_dsl::Span;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LowerError {
    #[error("{what} where the checker guarantees otherwise (bytes {}..{})", span.start, span.end)]
    Unexpected { what: &'static str, span: Span },
    #[error("signal `{0}` depends on itself")]
    SignalCycle(String),
    #[error("signal #{0} is not declared")]
    UnknownSignal(u32),
    #[error("the last route is not a default route (a route without `when`)")]
    NoDefaultRoute,
    #[error("the policy needs more than {0} slots, nodes or conditions")]
    TooLarge(u32),
}

/// Lowers a checked policy into the IR both engines run.
pub fn lower(policy: &CheckedPolicy) -> Result<Program, LowerError> {
    let mut l = Lowerer::new(policy);
    for i in 0..policy.signals.len() {
        l.signal(SignalId(to_u32(i)?))?;
    }
    let mut conds = Vec::new();
    for (i, block) in policy.blocks.iter().enumerate() {
        let tree = l.cond(&block.when)?;
        conds.push((CondOwner::Block(BlockId(to_u32(i)?)), block.when.span, tree));
    }
    match policy.routes.last() {
        Some(last) if last.when.is_none() => {}
        _ => return Err(LowerError::NoDefaultRoute),
    }
    for (i, route) in policy.routes.iter().enumerate() {
        let (span, tree) = match &route.when {
            Some(when) => (when.span, l.cond(when)?),
            None => {
                let node = l.node(Inst::Const(Const::Bool(true)), ValTy::Bool)?;
                let tree = CondTree {
                    span: route.span,
                    node,
                    shape: Shape::Leaf,
                };
                (route.span, tree)
            }
        };
        conds.push((CondOwner::Route(RouteId(to_u32(i)?)), span, tree));
    }
    let holds = policy.protect.as_ref().map_or(&[][..], |p| &p.holds[..]);
    for (i, hold) in holds.iter().enumerate() {
        let tree = l.cond(&hold.when)?;
        conds.push((CondOwner::Hold(i), hold.when.span, tree));
    }
    if let Some(skip) = policy.cache.as_ref().and_then(|c| c.skip_when.as_ref()) {
        let tree = l.cond(skip)?;
        conds.push((CondOwner::CacheSkip, skip.span, tree));
    }
    to_u32(conds.len())?;
    l.finish(conds, holds.len())
}

fn to_u32(n: usize) -> Result<u32, LowerError> {
    // The JIT packs condition indices into 30 bits; keep every table within that.
    const LIMIT: u32 = 1 << 30;
    u32::try_from(n)
        .ok()
        .filter(|&n| n < LIMIT)
        .ok_or(LowerError::TooLarge(LIMIT))
}

/// A lowered expression.
#[derive(Debug, Clone)]
enum Val {
    Scalar(NodeId),
    Class {
        set: ClassSet,
        label: NodeId,
        confidence: NodeId,
    },
    Text(TextExpr),
}

struct Lowerer<'p> {
    policy: &'p CheckedPolicy,
    slots: Vec<SlotDef>,
    atoms: Vec<AtomDef>,
    atom_ix: HashMap<Atom, AtomId>,
    nodes: Vec<NodeDef>,
    node_ix: HashMap<Inst, NodeId>,
    signals: Vec<Option<SignalNode>>,
    visiting: Vec<bool>,
}

impl<'p> Lowerer<'p> {
    fn new(policy: &'p CheckedPolicy) -> Self {
        let n = policy.signals.len();
        Lowerer {
            policy,
            slots: Vec::new(),
            atoms: Vec::new(),
            atom_ix: HashMap::new(),
            nodes: Vec::new(),
            node_ix: HashMap::new(),
            signals: vec![None; n],
            visiting: vec![false; n],
        }
    }

    fn node(&mut self, inst: Inst, ty: ValTy) -> Result<NodeId, LowerError> {
        if let Some(&id) = self.node_ix.get(&inst) {
            return Ok(id);
        }
        let id = NodeId(to_u32(self.nodes.len())?);
        self.nodes.push(NodeDef {
            inst: inst.clone(),
            ty,
        });
        self.node_ix.insert(inst, id);
        Ok(id)
    }

    fn ty(&self, n: NodeId) -> ValTy {
        self.nodes[n.index()].ty
    }

    fn slot(&mut self, kind: SlotKind, source: SlotSource) -> Result<SlotId, LowerError> {
        let id = SlotId(to_u32(self.slots.len())?);
        self.slots.push(SlotDef { kind, source });
        Ok(id)
    }

    fn load(&mut self, slot: SlotId, kind: SlotKind) -> Result<NodeId, LowerError> {
        self.node(Inst::Load(slot), val_ty(kind))
    }

    /// The atom's value (deduplicated), loaded from its slot(s).
    fn atom(&mut self, atom: Atom) -> Result<Val, LowerError> {
        let (kind, conf_kind) = atom.slot_kinds();
        let id = match self.atom_ix.get(&atom) {
            Some(&id) => id,
            None => {
                let id = AtomId(to_u32(self.atoms.len())?);
                let slot = self.slot(kind, SlotSource::Atom(id))?;
                let confidence = match conf_kind {
                    Some(k) => Some(self.slot(k, SlotSource::Confidence(id))?),
                    None => None,
                };
                self.atoms.push(AtomDef {
                    cost: atom.cost(),
                    atom: atom.clone(),
                    slot,
                    confidence,
                });
                self.atom_ix.insert(atom, id);
                id
            }
        };
        let def = &self.atoms[id.index()];
        let (slot, conf) = (def.slot, def.confidence);
        let value = self.load(slot, kind)?;
        match (kind, conf, conf_kind) {
            (SlotKind::Label(set), Some(conf), Some(ck)) => Ok(Val::Class {
                set,
                label: value,
                confidence: self.load(conf, ck)?,
            }),
            _ => Ok(Val::Scalar(value)),
        }
    }

    fn signal(&mut self, id: SignalId) -> Result<SignalNode, LowerError> {
        let i = id.index();
        if let Some(Some(done)) = self.signals.get(i) {
            return Ok(done.clone());
        }
        let policy = self.policy;
        let def = policy
            .signals
            .get(i)
            .ok_or(LowerError::UnknownSignal(id.0))?;
        if self.visiting[i] {
            return Err(LowerError::SignalCycle(def.name.clone()));
        }
        self.visiting[i] = true;
        let value = self.expr(&def.expr);
        self.visiting[i] = false;
        let lowered = match value? {
            Val::Text(t) => SignalNode::Text(TextExpr::Signal(id, Box::new(t))),
            Val::Scalar(inner) => {
                let ty = self.ty(inner);
                let kind = match ty {
                    ValTy::Bool => SlotKind::Bool,
                    ValTy::Int => SlotKind::Int,
                    ValTy::Float => SlotKind::Float,
                    ValTy::Model => SlotKind::Model,
                    ValTy::Label => {
                        return Err(LowerError::Unexpected {
                            what: "a bare label signal",
                            span: def.span,
                        })
                    }
                };
                let slot = self.slot(kind, SlotSource::Given(id))?;
                SignalNode::Scalar(self.node(Inst::Given { slot, inner }, ty)?)
            }
            Val::Class {
                set,
                label,
                confidence,
            } => {
                let ls = self.slot(SlotKind::Label(set), SlotSource::Given(id))?;
                let cs = self.slot(SlotKind::Float, SlotSource::GivenConfidence(id))?;
                SignalNode::Class {
                    set,
                    label: self.node(
                        Inst::Given {
                            slot: ls,
                            inner: label,
                        },
                        ValTy::Label,
                    )?,
                    confidence: self.node(
                        Inst::Given {
                            slot: cs,
                            inner: confidence,
                        },
                        ValTy::Float,
                    )?,
                }
            }
        };
        self.signals[i] = Some(lowered.clone());
        Ok(lowered)
    }

    fn cnst(&mut self, c: Const) -> Result<NodeId, LowerError> {
        self.node(Inst::Const(c), c.ty())
    }

    fn expr(&mut self, e: &TExpr) -> Result<Val, LowerError> {
        use TExprKind as K;
        let scalar = |n| Ok(Val::Scalar(n));
        match &e.kind {
            K::Bool(b) => scalar(self.cnst(Const::Bool(*b))?),
            K::Int(i) => match e.ty {
                Type::Float | Type::Score => {
                    scalar(self.cnst(Const::Float((*i as f64).to_bits()))?)
                }
                _ => scalar(self.cnst(Const::Int(*i))?),
            },
            K::Float(f) => scalar(self.cnst(Const::Float(f.to_bits()))?),
            K::Str(s) => Ok(Val::Text(TextExpr::Lit(s.clone()))),
            K::Label(l) => match e.ty {
                Type::Class(set) => Ok(Val::Class {
                    set,
                    label: self.cnst(Const::Label(set, l.0))?,
                    confidence: self.cnst(Const::Float(1.0f64.to_bits()))?,
                }),
                _ => Err(unexpected("a label outside a class type", e)),
            },
            K::Model(m) => scalar(self.cnst(Const::Model(m.0))?),
            K::Signal(s) => Ok(match self.signal(*s)? {
                SignalNode::Scalar(n) => Val::Scalar(n),
                SignalNode::Class {
                    set,
                    label,
                    confidence,
                } => Val::Class {
                    set,
                    label,
                    confidence,
                },
                SignalNode::Text(t) => Val::Text(t),
            }),
            K::Prompt => Ok(Val::Text(TextExpr::Prompt)),
            K::History => Ok(Val::Text(TextExpr::History)),
            K::System => Ok(Val::Text(TextExpr::System)),
            K::ApiKey => Ok(Val::Text(TextExpr::ApiKey)),
            K::Header(h) => Ok(Val::Text(TextExpr::Header(h.to_lowercase()))),
            K::Body(p) => Ok(Val::Text(TextExpr::Body(p.clone()))),
            K::Coalesce(a, b) => Ok(Val::Text(TextExpr::Coalesce(
                Box::new(self.text(a)?),
                Box::new(self.text(b)?),
            ))),
            K::Request(f) => self.atom(Atom::Request(*f)),
            K::Contains { text, phrases } => {
                let t = self.text(text)?;
                self.atom(Atom::Contains(t, phrases.clone()))
            }
            K::Hits { text, phrases } => {
                let t = self.text(text)?;
                self.atom(Atom::Hits(t, phrases.clone()))
            }
            K::Density { text, phrases } => {
                let t = self.text(text)?;
                self.atom(Atom::Density(t, phrases.clone()))
            }
            K::Sequence { text, phrases } => {
                let t = self.text(text)?;
                self.atom(Atom::Sequence(t, phrases.clone()))
            }
            K::Fuzzy { text, phrases, min } => {
                let t = self.text(text)?;
                self.atom(Atom::Fuzzy(t, phrases.clone(), min.to_bits()))
            }
            K::FuzzyHits { text, phrases, min } => {
                let t = self.text(text)?;
                self.atom(Atom::FuzzyHits(t, phrases.clone(), min.to_bits()))
            }
            K::Bm25 { text, phrases } => {
                let t = self.text(text)?;
                self.atom(Atom::Bm25(t, phrases.clone()))
            }
            K::Count { text, regex } => {
                let t = self.text(text)?;
                self.atom(Atom::Count(t, regex.clone()))
            }
            K::Matches { text, regex } => {
                let t = self.text(text)?;
                self.atom(Atom::Matches(t, regex.clone()))
            }
            K::Pii { text, types } => {
                let t = self.text(text)?;
                let mut types = types.clone();
                types.sort();
                self.atom(Atom::Pii(t, types))
            }
            K::Words(t) => {
                let t = self.text(t)?;
                self.atom(Atom::Words(t))
            }
            K::Tokens(t) => {
                let t = self.text(t)?;
                self.atom(Atom::Tokens(t))
            }
            K::Language(t) => {
                let t = self.text(t)?;
                self.atom(Atom::Language(t))
            }
            K::Classify(c, t) => {
                let t = self.text(t)?;
                self.atom(Atom::Classify(*c, t))
            }
            K::Guard(g, t) => {
                let t = self.text(t)?;
                self.atom(Atom::Guard(*g, t))
            }
            K::Detect {
                detector,
                text,
                entities,
            } => {
                let t = self.text(text)?;
                let mut entities = entities.clone();
                entities.sort();
                entities.dedup();
                self.atom(Atom::Detect(*detector, t, entities.into()))
            }
            K::Similarity {
                encoder,
                text,
                examples,
            } => {
                let t = self.text(text)?;
                self.atom(Atom::Similarity(*encoder, t, examples.as_slice().into()))
            }
            K::Pinned => self.atom(Atom::Pinned),
            K::Proposed => self.atom(Atom::Proposed),
            K::OutcomeFailRate => self.atom(Atom::OutcomeFailRate),
            K::OutcomeCount => self.atom(Atom::OutcomeCount),
            K::BudgetUsed(b) => self.atom(Atom::BudgetUsed(*b)),
            K::BudgetRemaining(b) => self.atom(Atom::BudgetRemaining(*b)),
            K::Confidence(c) => match self.expr(c)? {
                Val::Class { confidence, .. } => scalar(confidence),
                _ => Err(unexpected("`.confidence` of a non-class value", e)),
            },
            K::Cost(m) => {
                let n = self.scalar_of(m, ValTy::Model)?;
                if let Inst::Const(Const::Model(id)) = self.nodes[n.index()].inst {
                    let cost = self.policy.models.get(id as usize).map_or(0.0, |m| m.cost);
                    return scalar(self.cnst(Const::Float(cost.to_bits()))?);
                }
                scalar(self.node(Inst::ModelCost(n), ValTy::Float)?)
            }
            K::Not(a) => {
                let a = self.scalar_of(a, ValTy::Bool)?;
                scalar(self.node(Inst::Not(a), ValTy::Bool)?)
            }
            K::And(a, b) | K::Or(a, b) => {
                let a = self.scalar_of(a, ValTy::Bool)?;
                let b = self.scalar_of(b, ValTy::Bool)?;
                let inst = if matches!(e.kind, K::And(..)) {
                    Inst::And(a, b)
                } else {
                    Inst::Or(a, b)
                };
                scalar(self.node(inst, ValTy::Bool)?)
            }
            K::Neg(a) => {
                let a = self.number(a)?;
                let (nt, ty) = match self.ty(a) {
                    ValTy::Int => (NumTy::Int, ValTy::Int),
                    _ => (NumTy::Float, ValTy::Float),
                };
                scalar(self.node(Inst::Neg(nt, a), ty)?)
            }
            K::Arith(op, a, b) => {
                let (a, b) = (self.number(a)?, self.number(b)?);
                if self.ty(a) == ValTy::Int && self.ty(b) == ValTy::Int {
                    scalar(self.node(Inst::Arith(*op, NumTy::Int, a, b), ValTy::Int)?)
                } else {
                    let (a, b) = (self.float(a)?, self.float(b)?);
                    scalar(self.node(Inst::Arith(*op, NumTy::Float, a, b), ValTy::Float)?)
                }
            }
            K::Cmp(op, a, b) => self.cmp(*op, a, b, e),
            K::IsLabel(c, labels) => match self.expr(c)? {
                Val::Class { set, label, .. } => {
                    let mut labels = labels.clone();
                    labels.sort_unstable();
                    labels.dedup();
                    scalar(self.node(Inst::IsLabel(label, set, labels), ValTy::Bool)?)
                }
                _ => Err(unexpected("`is` on a non-class value", e)),
            },
        }
    }

    fn cmp(&mut self, op: CmpOp, a: &TExpr, b: &TExpr, e: &TExpr) -> Result<Val, LowerError> {
        let (la, lb) = (self.expr(a)?, self.expr(b)?);
        let (x, y, ct) = match (la, lb) {
            (Val::Text(x), Val::Text(y)) => return self.atom(Atom::TextCmp(op, x, y)),
            (Val::Class { label: x, .. }, Val::Class { label: y, .. }) => (x, y, CmpTy::Bits),
            (Val::Scalar(x), Val::Scalar(y)) => match (self.ty(x), self.ty(y)) {
                (ValTy::Int, ValTy::Int) => (x, y, CmpTy::Int),
                (ValTy::Int | ValTy::Float, ValTy::Int | ValTy::Float) => {
                    (self.float(x)?, self.float(y)?, CmpTy::Float)
                }
                (tx, ty) if tx == ty => (x, y, CmpTy::Bits),
                _ => return Err(unexpected("a comparison of mismatched types", e)),
            },
            _ => return Err(unexpected("a comparison of mismatched types", e)),
        };
        Ok(Val::Scalar(
            self.node(Inst::Cmp(op, ct, x, y), ValTy::Bool)?,
        ))
    }

    fn float(&mut self, n: NodeId) -> Result<NodeId, LowerError> {
        if self.ty(n) == ValTy::Float {
            return Ok(n);
        }
        if let Inst::Const(Const::Int(i)) = self.nodes[n.index()].inst {
            return self.cnst(Const::Float((i as f64).to_bits()));
        }
        self.node(Inst::ToFloat(n), ValTy::Float)
    }

    fn number(&mut self, e: &TExpr) -> Result<NodeId, LowerError> {
        match self.expr(e)? {
            Val::Scalar(n) if matches!(self.ty(n), ValTy::Int | ValTy::Float) => Ok(n),
            _ => Err(unexpected("a non-numeric operand of arithmetic", e)),
        }
    }

    fn scalar_of(&mut self, e: &TExpr, want: ValTy) -> Result<NodeId, LowerError> {
        match self.expr(e)? {
            Val::Scalar(n) if self.ty(n) == want => Ok(n),
            _ => Err(unexpected("an operand of the wrong type", e)),
        }
    }

    fn text(&mut self, e: &TExpr) -> Result<TextExpr, LowerError> {
        match self.expr(e)? {
            Val::Text(t) => Ok(t),
            _ => Err(unexpected("a non-text argument where text is expected", e)),
        }
    }

    /// A condition: its `and`/`or`/`not` structure kept for traces, the rest as leaves.
    fn cond(&mut self, e: &TExpr) -> Result<CondTree, LowerError> {
        let (shape, node) = match &e.kind {
            TExprKind::And(a, b) | TExprKind::Or(a, b) => {
                let (ta, tb) = (self.cond(a)?, self.cond(b)?);
                let and = matches!(e.kind, TExprKind::And(..));
                let inst = if and {
                    Inst::And(ta.node, tb.node)
                } else {
                    Inst::Or(ta.node, tb.node)
                };
                let node = self.node(inst, ValTy::Bool)?;
                let (ta, tb) = (Box::new(ta), Box::new(tb));
                let shape = if and {
                    Shape::And(ta, tb)
                } else {
                    Shape::Or(ta, tb)
                };
                (shape, node)
            }
            TExprKind::Not(a) => {
                let ta = self.cond(a)?;
                let node = self.node(Inst::Not(ta.node), ValTy::Bool)?;
                (Shape::Not(Box::new(ta)), node)
            }
            _ => (Shape::Leaf, self.scalar_of(e, ValTy::Bool)?),
        };
        Ok(CondTree {
            span: e.span,
            node,
            shape,
        })
    }

    fn finish(
        mut self,
        conds: Vec<(CondOwner, Span, CondTree)>,
        hold_count: usize,
    ) -> Result<Program, LowerError> {
        let policy = self.policy;
        let block_count = policy.blocks.len();
        let route_count = policy.routes.len();
        // Each scan (decide, hold, cache skip) evaluates its conditions in order; a node belongs
        // to the first condition of its scan that needs it.
        let mut seen = vec![false; self.nodes.len()];
        let mut out = Vec::with_capacity(conds.len());
        for (i, (owner, span, tree)) in conds.into_iter().enumerate() {
            if i == 0
                || i == block_count + route_count
                || i == block_count + route_count + hold_count
            {
                seen.iter_mut().for_each(|s| *s = false);
            }
            let fresh = fresh_nodes(&self.nodes, tree.node, &mut seen);
            out.push(Cond {
                owner,
                span,
                root: tree.node,
                fresh,
                tree,
            });
        }
        let signals = self
            .signals
            .drain(..)
            .enumerate()
            .map(|(i, s)| s.ok_or(LowerError::UnknownSignal(i as u32)))
            .collect::<Result<Vec<_>, _>>()?;
        // A budget's `per` as text the evaluation reads (`None`: the tenant, which the caller
        // knows).
        let mut budget_keys = Vec::with_capacity(policy.budgets.len());
        for b in &policy.budgets {
            budget_keys.push(match &b.per {
                crate::hir::BudgetPerDef::Tenant => None,
                crate::hir::BudgetPerDef::Text(e) => Some(self.text(e)?),
            });
        }
        let names = Names {
            budgets: policy.budgets.iter().map(|b| b.name.clone()).collect(),
            signals: policy.signals.iter().map(|s| s.name.clone()).collect(),
            blocks: policy.blocks.iter().map(|b| b.name.clone()).collect(),
            routes: policy.routes.iter().map(|r| r.name.clone()).collect(),
            holds: policy
                .protect
                .iter()
                .flat_map(|p| p.holds.iter().map(|h| h.name.clone()))
                .collect(),
            models: policy.models.iter().map(|m| m.name.clone()).collect(),
            classifiers: policy.classifiers.iter().map(|c| c.name.clone()).collect(),
            guards: policy.guards.iter().map(|g| g.name.clone()).collect(),
            encoders: policy.encoders.iter().map(|e| e.name.clone()).collect(),
            detectors: policy.detectors.iter().map(|d| d.name.clone()).collect(),
            classifier_labels: policy
                .classifiers
                .iter()
                .map(|c| c.labels.clone())
                .collect(),
        };
        Ok(Program {
            slots: self.slots,
            atoms: self.atoms,
            nodes: self.nodes,
            conds: out,
            block_count,
            route_count,
            hold_count,
            signals,
            model_costs: policy.models.iter().map(|m| m.cost).collect(),
            budget_keys,
            names,
        })
    }
}

/// The nodes reachable from `root` not yet `seen`, in increasing (topological) order.
fn fresh_nodes(nodes: &[NodeDef], root: NodeId, seen: &mut [bool]) -> Vec<NodeId> {
    let mut fresh = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut seen[n.index()], true) {
            continue;
        }
        fresh.push(n);
        stack.extend(
            nodes[n.index()]
                .inst
                .operands()
                .filter(|o| !seen[o.index()]),
        );
    }
    fresh.sort_unstable();
    fresh
}

fn val_ty(kind: SlotKind) -> ValTy {
    match kind {
        SlotKind::Bool => ValTy::Bool,
        SlotKind::Int => ValTy::Int,
        SlotKind::Float => ValTy::Float,
        SlotKind::Label(_) => ValTy::Label,
        SlotKind::Model => ValTy::Model,
    }
}

fn unexpected(what: &'static str, e: &TExpr) -> LowerError {
    LowerError::Unexpected { what, span: e.span }
}
