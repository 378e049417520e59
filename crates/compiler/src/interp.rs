//! The reference interpreter: the executable meaning of the IR.
//!
//! Every rule of three-valued evaluation lives in `eval_inst`; the JIT must agree with it bit
//! for bit (a proptest checks that). Evaluation is iterative over each condition's `fresh`
//! nodes, in the order the scan needs them, so deep expressions cannot exhaust the stack and a
//! subexpression shared by several conditions is computed once per scan.
//!
//! Semantics, summarised (the interpreter is the spec, these are its rules):
//! - `and` is false when either side is known false, true when both are known true, else
//!   unknown; `or` is its dual; `not` flips a known value.
//! - Arithmetic, comparisons, `is`, `.cost` with an unknown operand are unknown.
//! - int arithmetic wraps; int and float division by zero is 0; `i64::MIN / -1` is `i64::MIN`.
//! - `min(a, b)` is `if a < b {a} else {b}`, `max(a, b)` is `if a > b {a} else {b}`.
//! - float comparisons are IEEE: NaN compares false, `!=` with NaN is true.

use crate::hir::{ArithOp, BlockId, CmpOp, RouteId};
use crate::ir::Row;
use crate::ir::{
    CmpTy, CondId, CondOwner, CondTree, HoldOutcome, Inst, NodeId, NumTy, Outcome, Program, Shape,
    SlotId, ValTy, Verdict,
};
use src_dsl::Span;
use std::cell::RefCell;

/// A three-valued node value: `bits` in the slot encoding, meaningful only when `known`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Val {
    pub bits: u64,
    pub known: bool,
}

impl Val {
    pub const UNKNOWN: Val = Val {
        bits: 0,
        known: false,
    };

    fn of(bits: u64) -> Val {
        Val { bits, known: true }
    }

    fn bool(b: bool) -> Val {
        Val::of(u64::from(b))
    }

    /// `Some(value)` of a bool node when known.
    pub fn truth(self) -> Option<bool> {
        self.known.then_some(self.bits != 0)
    }

    fn map(self, f: impl FnOnce(u64) -> u64) -> Val {
        if self.known {
            Val::of(f(self.bits))
        } else {
            Val::UNKNOWN
        }
    }

    fn zip(self, other: Val, f: impl FnOnce(u64, u64) -> u64) -> Val {
        if self.known && other.known {
            Val::of(f(self.bits, other.bits))
        } else {
            Val::UNKNOWN
        }
    }
}

/// `decide`: blocks in order, then routes in order; the first known-true condition wins, and an
/// unknown condition before any winner asks for its slots.
pub fn decide(program: &Program, row: &Row) -> Outcome {
    decide_forcing(program, row, &|_| false)
}

/// `decide`, treating the conditions `forced` accepts as false while they are unknown. The
/// staged evaluator uses this for a condition no computable slot can settle (a failed model
/// call under `failure.classifier = open`).
pub fn decide_forcing(program: &Program, row: &Row, forced: &dyn Fn(CondId) -> bool) -> Outcome {
    let scan = scan(program, program.decide_conds(), row, forced, None);
    decide_outcome(program, scan)
}

/// `decide` with a trace of every condition it looked at.
pub fn decide_traced(program: &Program, row: &Row) -> (Outcome, Trace) {
    decide_traced_forcing(program, row, &|_| false)
}

/// [`decide_traced`] with [`decide_forcing`]'s treatment of settled conditions.
pub fn decide_traced_forcing(
    program: &Program,
    row: &Row,
    forced: &dyn Fn(CondId) -> bool,
) -> (Outcome, Trace) {
    let mut trace = Trace::default();
    let scan = scan(
        program,
        program.decide_conds(),
        row,
        forced,
        Some(&mut trace.conds),
    );
    (decide_outcome(program, scan), trace)
}

/// `hold`: the `protect` holds in order.
pub fn hold(program: &Program, row: &Row) -> HoldOutcome {
    hold_forcing(program, row, &|_| false)
}

pub fn hold_forcing(program: &Program, row: &Row, forced: &dyn Fn(CondId) -> bool) -> HoldOutcome {
    match scan(program, program.hold_conds(), row, forced, None) {
        Scan::Hit(i) => HoldOutcome::Held(i),
        Scan::Exhausted => HoldOutcome::NoHold,
        Scan::Needs(c) => HoldOutcome::Needs(c),
    }
}

/// The value of one condition on its own (`cache.skip_when`, explanations).
pub fn eval_cond(program: &Program, cond: CondId, row: &Row) -> Option<bool> {
    let root = program.cond(cond)?.root;
    eval_node(program, root, row).truth()
}

/// The value of any node (a signal's, for explanations). Only the nodes it depends on are
/// evaluated.
pub fn eval_node(program: &Program, node: NodeId, row: &Row) -> Val {
    if node.index() >= program.nodes.len() {
        return Val::UNKNOWN;
    }
    with_scratch(program.nodes.len(), |s| {
        s.eval_closure(program, node, row);
        s.vals[node.index()]
    })
}

impl Program {
    /// The unknown slots that could still settle `cond`, cheapest cost class first. Subtrees
    /// whose value is already known, and signals whose value is given, are not searched:
    /// computing their slots could not change the outcome. The work is proportional to the
    /// condition's own subgraph, not to the policy.
    pub fn unknown_slots(&self, cond: CondId, row: &Row) -> Vec<SlotId> {
        let Some(root) = self.cond(cond).map(|c| c.root) else {
            return Vec::new();
        };
        let mut out = with_scratch(self.nodes.len(), |s| {
            s.eval_closure(self, root, row);
            let mut out = Vec::new();
            let seen = s.next_epoch();
            s.stack.push(root);
            while let Some(n) = s.stack.pop() {
                if s.vals[n.index()].known || s.stamps[n.index()] == seen {
                    continue;
                }
                s.stamps[n.index()] = seen;
                match &self.nodes[n.index()].inst {
                    Inst::Load(slot) => out.push(*slot),
                    // The node is unknown, so the given slot is too: only the inner value can
                    // help.
                    Inst::Given { inner, .. } => s.stack.push(*inner),
                    inst => s.stack.extend(inst.operands()),
                }
            }
            out
        });
        out.sort_by_key(|&s| (self.slot_cost(s), s));
        out.dedup();
        out
    }

    fn slot_cost(&self, slot: SlotId) -> u8 {
        self.slot_atom(slot)
            .and_then(|a| self.atom(a))
            .map_or(u8::MAX, |a| a.cost as u8)
    }
}

/// What each condition a scan looked at came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    pub conds: Vec<CondTrace>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CondTrace {
    pub cond: CondId,
    pub owner: CondOwner,
    pub span: Span,
    /// `Some(true)` held, `Some(false)` did not hold, `None` unknown.
    pub state: Option<bool>,
    /// For a condition that did not hold: the parts (leaves, or a `not` whose operand held)
    /// that made it false. For an unknown one: the parts still unknown.
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Part {
    pub span: Span,
    pub state: Option<bool>,
}

enum Scan {
    /// Position of the first known-true condition within the scanned range.
    Hit(usize),
    Exhausted,
    Needs(CondId),
}

fn decide_outcome(program: &Program, scan: Scan) -> Outcome {
    let blocks = program.block_count();
    let last_route = RouteId(program.route_count().saturating_sub(1) as u32);
    match scan {
        Scan::Hit(i) if i < blocks => Outcome::Decided(Verdict::Blocked(BlockId(i as u32))),
        Scan::Hit(i) => Outcome::Decided(Verdict::Route(RouteId((i - blocks) as u32))),
        Scan::Needs(c) => Outcome::Needs(c),
        // Lowering makes the default route last and always true; keep the JIT's answer.
        Scan::Exhausted => Outcome::Decided(Verdict::Route(last_route)),
    }
}

/// Per-thread working memory, indexed by node, reused across calls so that no call pays for
/// the size of the whole policy. Stale entries are harmless: node values are written before
/// they are read (operands have smaller ids, and a scan or a closure evaluates in increasing
/// order), and a visit mark counts only when it carries the current epoch.
#[derive(Default)]
struct Scratch {
    vals: Vec<Val>,
    /// Visit marks: a node is marked when its stamp equals the epoch in use.
    stamps: Vec<u32>,
    epoch: u32,
    stack: Vec<NodeId>,
    /// The closure being evaluated, in evaluation order.
    order: Vec<NodeId>,
}

impl Scratch {
    fn fit(&mut self, n: usize) {
        if self.vals.len() < n {
            self.vals.resize(n, Val::UNKNOWN);
            self.stamps.resize(n, 0);
        }
    }

    /// A fresh epoch: every node is unmarked.
    fn next_epoch(&mut self) -> u32 {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamps.fill(0);
            self.epoch = 1;
        }
        self.stack.clear();
        self.epoch
    }

    /// Evaluates `root` and the nodes it depends on (only those) into `vals`.
    fn eval_closure(&mut self, program: &Program, root: NodeId, row: &Row) {
        let seen = self.next_epoch();
        self.order.clear();
        self.stack.push(root);
        while let Some(n) = self.stack.pop() {
            if self.stamps[n.index()] == seen {
                continue;
            }
            self.stamps[n.index()] = seen;
            self.order.push(n);
            self.stack.extend(program.nodes[n.index()].inst.operands());
        }
        // Operands have smaller ids than their users.
        self.order.sort_unstable();
        for &n in &self.order {
            self.vals[n.index()] = eval_inst(program, n, &self.vals, row);
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` over the per-thread scratch, sized for `n` nodes (a fresh one if the thread's is
/// in use).
fn with_scratch<R>(n: usize, f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut scratch) => {
            scratch.fit(n);
            f(&mut scratch)
        }
        Err(_) => {
            let mut scratch = Scratch::default();
            scratch.fit(n);
            f(&mut scratch)
        }
    })
}

fn scan(
    program: &Program,
    range: std::ops::Range<usize>,
    row: &Row,
    forced: &dyn Fn(CondId) -> bool,
    mut trace: Option<&mut Vec<CondTrace>>,
) -> Scan {
    with_scratch(program.nodes.len(), |scratch| {
        let vals = &mut scratch.vals[..];
        for (pos, ci) in range.enumerate() {
            let Some(cond) = program.conds.get(ci) else {
                break;
            };
            for &n in &cond.fresh {
                vals[n.index()] = eval_inst(program, n, vals, row);
            }
            let id = CondId(ci as u32);
            let mut state = vals[cond.root.index()].truth();
            if state.is_none() && forced(id) {
                state = Some(false);
            }
            if let Some(t) = trace.as_deref_mut() {
                let mut parts = Vec::new();
                if state != Some(true) {
                    explain(&cond.tree, vals, &mut parts);
                }
                t.push(CondTrace {
                    cond: id,
                    owner: cond.owner,
                    span: cond.span,
                    state,
                    parts,
                });
            }
            match state {
                Some(true) => return Scan::Hit(pos),
                Some(false) => {}
                None => return Scan::Needs(id),
            }
        }
        Scan::Exhausted
    })
}

/// The parts of a condition tree that made it false (or keep it unknown).
fn explain(tree: &CondTree, vals: &[Val], out: &mut Vec<Part>) {
    let state = vals[tree.node.index()].truth();
    let leaf = Part {
        span: tree.span,
        state,
    };
    match &tree.shape {
        Shape::And(a, b) | Shape::Or(a, b) => {
            for child in [a, b] {
                if vals[child.node.index()].truth() == state {
                    explain(child, vals, out);
                }
            }
        }
        Shape::Not(_) | Shape::Leaf => out.push(leaf),
    }
}

/// One node's value from its operands' values (already in `vals`) and the row.
fn eval_inst(program: &Program, node: NodeId, vals: &[Val], row: &Row) -> Val {
    let def = &program.nodes[node.index()];
    let v = |n: &NodeId| vals[n.index()];
    let load = |slot: SlotId| {
        let s = row.get(slot);
        if !s.is_known() {
            Val::UNKNOWN
        } else if def.ty == ValTy::Bool {
            Val::bool(s.value != 0)
        } else {
            Val::of(s.value)
        }
    };
    match &def.inst {
        Inst::Const(c) => Val::of(c.bits()),
        Inst::Load(slot) => load(*slot),
        Inst::Given { slot, inner } => {
            let given = load(*slot);
            if given.known {
                given
            } else {
                v(inner)
            }
        }
        Inst::Not(a) => v(a).map(|b| u64::from(b == 0)),
        Inst::And(a, b) => {
            let (a, b) = (v(a), v(b));
            if a.truth() == Some(false) || b.truth() == Some(false) {
                Val::bool(false)
            } else if a.known && b.known {
                Val::bool(true)
            } else {
                Val::UNKNOWN
            }
        }
        Inst::Or(a, b) => {
            let (a, b) = (v(a), v(b));
            if a.truth() == Some(true) || b.truth() == Some(true) {
                Val::bool(true)
            } else if a.known && b.known {
                Val::bool(false)
            } else {
                Val::UNKNOWN
            }
        }
        Inst::Neg(NumTy::Int, a) => v(a).map(|x| (x as i64).wrapping_neg() as u64),
        Inst::Neg(NumTy::Float, a) => v(a).map(|x| (-f64::from_bits(x)).to_bits()),
        Inst::Arith(op, NumTy::Int, a, b) => {
            v(a).zip(v(b), |x, y| int_arith(*op, x as i64, y as i64) as u64)
        }
        Inst::Arith(op, NumTy::Float, a, b) => v(a).zip(v(b), |x, y| {
            float_arith(*op, f64::from_bits(x), f64::from_bits(y)).to_bits()
        }),
        Inst::ToFloat(a) => v(a).map(|x| (x as i64 as f64).to_bits()),
        Inst::Cmp(op, ty, a, b) => v(a).zip(v(b), |x, y| u64::from(compare(*op, *ty, x, y))),
        Inst::IsLabel(a, _, labels) => {
            v(a).map(|x| u64::from(labels.iter().any(|l| u64::from(l.0) == x)))
        }
        Inst::ModelCost(a) => v(a).map(|x| {
            usize::try_from(x)
                .ok()
                .and_then(|i| program.model_costs.get(i))
                .copied()
                .unwrap_or(0.0)
                .to_bits()
        }),
    }
}

pub(crate) fn int_arith(op: ArithOp, a: i64, b: i64) -> i64 {
    match op {
        ArithOp::Add => a.wrapping_add(b),
        ArithOp::Sub => a.wrapping_sub(b),
        ArithOp::Mul => a.wrapping_mul(b),
        ArithOp::Div if b == 0 => 0,
        ArithOp::Div => a.wrapping_div(b),
        ArithOp::Min => {
            if a < b {
                a
            } else {
                b
            }
        }
        ArithOp::Max => {
            if a > b {
                a
            } else {
                b
            }
        }
    }
}

pub(crate) fn float_arith(op: ArithOp, a: f64, b: f64) -> f64 {
    match op {
        ArithOp::Add => a + b,
        ArithOp::Sub => a - b,
        ArithOp::Mul => a * b,
        ArithOp::Div if b == 0.0 => 0.0,
        ArithOp::Div => a / b,
        ArithOp::Min => {
            if a < b {
                a
            } else {
                b
            }
        }
        ArithOp::Max => {
            if a > b {
                a
            } else {
                b
            }
        }
    }
}

fn compare(op: CmpOp, ty: CmpTy, x: u64, y: u64) -> bool {
    match ty {
        CmpTy::Int => ordered(op, &(x as i64), &(y as i64)),
        CmpTy::Bits => ordered(op, &x, &y),
        CmpTy::Float => {
            let (a, b) = (f64::from_bits(x), f64::from_bits(y));
            match op {
                CmpOp::Eq => a == b,
                CmpOp::Ne => a != b,
                CmpOp::Lt => a < b,
                CmpOp::Le => a <= b,
                CmpOp::Gt => a > b,
                CmpOp::Ge => a >= b,
            }
        }
    }
}

fn ordered<T: Ord>(op: CmpOp, a: &T, b: &T) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

#[cfg(test)]
mod tests;
