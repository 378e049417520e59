//! Code generation for one scan (the conditions of `decide` or `hold`, in order).
//!
//! Every condition is compiled twice over shared values:
//! - the **spine**, straight-line code that computes each node's two-valued value (what it is
//!   if its inputs are known) and, symbolically, the set of known bits that together guarantee
//!   it is known. Conditions are chained linearly, so spine values computed for one condition
//!   dominate every later one and are reused, like the interpreter's scratch values.
//! - a **cold path**, taken only when that guarantee fails for the condition: exact Kleene
//!   three-valued logic with bools as two bits ("known true", "known false"), which makes `and`
//!   and `or` one instruction each and `not` free.
//!
//! A fully known row therefore costs two-valued logic plus one branch per condition: "known and
//! false" goes on to the next condition, anything else (a hit, or a known bit missing) leaves for
//! the condition's cold block. Known-ness that is constant at compile time (constants) is folded
//! away.
//!
//! What limits a long scan is the size of its fall-through code, which is all executed on the
//! worst-case row: at 1,000 routes it no longer fits the instruction cache. So everything else
//! stays out of it: cold blocks (the exact paths, and answering a hit) are marked cold, so
//! Cranelift places them after the function's hot code; and the spine values that cold paths of
//! later conditions read (a shared signal's test, a slot's known bit) are kept in stack slots,
//! stored once where they are computed, instead of staying live in registers across the scan
//! and making the register allocator spill the fall-through path's own values.

use super::{TAG_HIT, TAG_MISS, TAG_NEEDS};
use crate::hir::{ArithOp, CmpOp};
use crate::ir::{CmpTy, Const, Inst, NodeId, NumTy, Program, SlotId, ValTy};
use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, Block, BlockArg, InstBuilder, MemFlagsData, StackSlot, StackSlotData, StackSlotKind,
    Value, ValueDef,
};
use cranelift_frontend::FunctionBuilder;
use std::collections::HashMap;
use std::rc::Rc;

/// Emits the conditions in `range` (a part of the scan that begins at `scan_start`); `exit`
/// takes the encoded outcome, `TAG_MISS` when none of them decides.
pub(super) fn scan<'a>(
    b: FunctionBuilder<'a>,
    row: Value,
    program: &Program,
    range: std::ops::Range<usize>,
    scan_start: usize,
    exit: Block,
) -> FunctionBuilder<'a> {
    let n = program.nodes.len();
    let mut e = Emitter {
        b,
        row,
        program,
        spine: vec![None; n],
        atoms: Vec::new(),
        slot_known: HashMap::new(),
        conj: HashMap::new(),
        slow: vec![None; n],
        cond_start: 0,
        kept: HashMap::new(),
        reloaded: HashMap::new(),
    };
    let mut cold = Vec::new();
    for ci in range {
        let cond = &program.conds[ci];
        let pos = ci - scan_start;
        let cond_start = e.b.func.dfg.num_values();
        // The nodes this condition is the first in this function to need, operands first.
        for node in e.unemitted(cond.root) {
            let s = e.spine_value(node);
            e.spine[node.index()] = Some(s);
        }
        let root = e.spine_of(cond.root);
        let value = root.v.bit();
        let known = e.conjunction(&root.k);
        let next = e.b.create_block();
        let hit = i64::from(TAG_HIT | pos as u32);
        let needs = i64::from(TAG_NEEDS | ci as u32);
        if let Bit::C(true) = known {
            e.branch_on(value, hit, next, exit);
        } else {
            // One test on the fall-through path: known and false goes on to the next condition;
            // anything else (a hit, or a condition not known to be two-valued) leaves it for a
            // cold block, which answers a known hit at once and evaluates the rest exactly.
            let check = e.b.create_block();
            e.b.set_cold_block(check);
            let go_on = e.and_not(known, value);
            e.branch(go_on, next, check);
            e.b.switch_to_block(check);
            let slow = e.b.create_block();
            e.b.set_cold_block(slow);
            if let Bit::V(_) = known {
                let taken = e.b.create_block();
                e.b.set_cold_block(taken);
                e.branch(known, taken, slow);
                e.b.switch_to_block(taken);
                let code = e.b.ins().iconst(types::I32, hit);
                e.b.ins().jump(exit, &[BlockArg::Value(code)]);
            } else {
                e.b.ins().jump(slow, &[]);
            }
            cold.push((slow, cond.root, cond_start, hit, needs, next));
        }
        e.b.switch_to_block(next);
    }
    let miss = e.b.ins().iconst(types::I32, i64::from(TAG_MISS));
    e.b.ins().jump(exit, &[BlockArg::Value(miss)]);
    // Cold paths last, so the spine falls through.
    for (slow, root, cond_start, hit, needs, next) in cold {
        e.b.switch_to_block(slow);
        let (t, f) = e.three_valued(root, cond_start);
        e.answer(t, f, hit, needs, next, exit);
    }
    e.keep_values();
    e.b
}

/// A bool (0/1 as `i8`) known at compile time or computed.
#[derive(Clone, Copy, Debug)]
enum Bit {
    C(bool),
    V(Value),
}

/// A two-valued spine value: bools as bits, everything else as an SSA value.
#[derive(Clone, Copy, Debug)]
enum SV {
    B(Bit),
    X(Value),
}

impl SV {
    fn bit(self) -> Bit {
        match self {
            SV::B(b) => b,
            SV::X(v) => Bit::V(v),
        }
    }
}

#[derive(Clone, Debug)]
struct Spine {
    v: SV,
    /// Atomic known bits whose conjunction guarantees the node is known (empty: always).
    k: Rc<[u32]>,
}

/// An exact three-valued value on the cold path.
#[derive(Clone, Copy, Debug)]
enum Slow {
    Bool { t: Bit, f: Bit },
    Num { k: Bit },
}

struct Emitter<'a, 'p> {
    b: FunctionBuilder<'a>,
    row: Value,
    program: &'p Program,
    spine: Vec<Option<Spine>>,
    /// Atomic known bits (`i8`), emitted in the spine.
    atoms: Vec<Value>,
    slot_known: HashMap<SlotId, u32>,
    /// Materialised conjunctions of atomic bits.
    conj: HashMap<Rc<[u32]>, Bit>,
    /// Cold-path values of the condition being emitted.
    slow: Vec<Option<Slow>>,
    /// The first value number of the condition whose cold path is being emitted: spine values
    /// below it belong to earlier conditions.
    cond_start: usize,
    /// Spine values that cold paths of later conditions read, each kept in its own stack slot.
    kept: HashMap<Value, StackSlot>,
    /// Values of `kept` already loaded in the cold path being emitted.
    reloaded: HashMap<Value, Value>,
}

impl Emitter<'_, '_> {
    fn unemitted(&self, root: NodeId) -> Vec<NodeId> {
        let nodes = &self.program.nodes;
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            if self.spine[n.index()].is_some() || !seen.insert(n) {
                continue;
            }
            out.push(n);
            stack.extend(nodes[n.index()].inst.operands());
        }
        out.sort_unstable();
        out
    }

    fn spine_of(&self, n: NodeId) -> Spine {
        // Operands precede their users in `fresh` order, so this is always filled.
        self.spine[n.index()].clone().unwrap_or(Spine {
            v: SV::B(Bit::C(false)),
            k: Rc::from(Vec::new()),
        })
    }

    fn bit(&mut self, b: Bit) -> Value {
        match b {
            Bit::C(c) => self.b.ins().iconst(types::I8, i64::from(c)),
            Bit::V(v) => v,
        }
    }

    fn value(&mut self, v: SV) -> Value {
        match v {
            SV::B(b) => self.bit(b),
            SV::X(v) => v,
        }
    }

    fn and(&mut self, a: Bit, b: Bit) -> Bit {
        match (a, b) {
            (Bit::C(false), _) | (_, Bit::C(false)) => Bit::C(false),
            (Bit::C(true), x) | (x, Bit::C(true)) => x,
            (Bit::V(x), Bit::V(y)) => Bit::V(self.b.ins().band(x, y)),
        }
    }

    /// `a and not b`.
    fn and_not(&mut self, a: Bit, b: Bit) -> Bit {
        match (a, b) {
            (Bit::C(false), _) | (_, Bit::C(true)) => Bit::C(false),
            (x, Bit::C(false)) => x,
            (Bit::C(true), y) => self.not(y),
            (Bit::V(x), Bit::V(y)) => Bit::V(self.b.ins().band_not(x, y)),
        }
    }

    fn or(&mut self, a: Bit, b: Bit) -> Bit {
        match (a, b) {
            (Bit::C(true), _) | (_, Bit::C(true)) => Bit::C(true),
            (Bit::C(false), x) | (x, Bit::C(false)) => x,
            (Bit::V(x), Bit::V(y)) => Bit::V(self.b.ins().bor(x, y)),
        }
    }

    fn not(&mut self, a: Bit) -> Bit {
        match a {
            Bit::C(c) => Bit::C(!c),
            Bit::V(x) => Bit::V(self.b.ins().bxor_imm_s(x, 1)),
        }
    }

    /// `if c { x } else { y }` on bits.
    fn select_bit(&mut self, c: Bit, x: Bit, y: Bit) -> Bit {
        match (c, x, y) {
            (Bit::C(true), x, _) => x,
            (Bit::C(false), _, y) => y,
            (c, Bit::C(true), Bit::C(false)) => c,
            (c, Bit::C(false), Bit::C(true)) => self.not(c),
            (_, Bit::C(a), Bit::C(b)) if a == b => Bit::C(a),
            (Bit::V(c), x, y) => {
                let (x, y) = (self.bit(x), self.bit(y));
                Bit::V(self.b.ins().select(c, x, y))
            }
        }
    }

    /// Jumps to `then` when `c` holds, else to `otherwise`.
    fn branch(&mut self, c: Bit, then: Block, otherwise: Block) {
        match c {
            Bit::C(true) => self.b.ins().jump(then, &[]),
            Bit::C(false) => self.b.ins().jump(otherwise, &[]),
            Bit::V(v) => self.b.ins().brif(v, then, &[], otherwise, &[]),
        };
    }

    /// Jumps to `exit(hit)` when `v` holds, else to `next`.
    fn branch_on(&mut self, v: Bit, hit: i64, next: Block, exit: Block) {
        match v {
            Bit::C(true) => {
                let hit = self.b.ins().iconst(types::I32, hit);
                self.b.ins().jump(exit, &[BlockArg::Value(hit)]);
            }
            Bit::C(false) => {
                self.b.ins().jump(next, &[]);
            }
            Bit::V(v) => {
                // A hit leaves the scan once per call: its code goes with the cold paths, so
                // the fall-through path holds only the test and the branch.
                let taken = self.b.create_block();
                self.b.set_cold_block(taken);
                self.b.ins().brif(v, taken, &[], next, &[]);
                self.b.switch_to_block(taken);
                let hit = self.b.ins().iconst(types::I32, hit);
                self.b.ins().jump(exit, &[BlockArg::Value(hit)]);
            }
        }
    }

    /// Continues to `next` when known false; otherwise answers hit (known true) or needs.
    fn answer(&mut self, t: Bit, f: Bit, hit: i64, needs: i64, next: Block, exit: Block) {
        if let Bit::C(true) = f {
            self.b.ins().jump(next, &[]);
            return;
        }
        let code = match t {
            Bit::C(true) => self.b.ins().iconst(types::I32, hit),
            Bit::C(false) => self.b.ins().iconst(types::I32, needs),
            Bit::V(t) => {
                let hit = self.b.ins().iconst(types::I32, hit);
                let needs = self.b.ins().iconst(types::I32, needs);
                self.b.ins().select(t, hit, needs)
            }
        };
        match f {
            Bit::V(f) => {
                self.b
                    .ins()
                    .brif(f, next, &[], exit, &[BlockArg::Value(code)]);
            }
            Bit::C(_) => {
                self.b.ins().jump(exit, &[BlockArg::Value(code)]);
            }
        }
    }

    fn offset(slot: SlotId, field: i32) -> i32 {
        // 16-byte slots; lowering limits a policy to 2^30 slots, and a row of that many slots
        // cannot exist, so a larger offset is never read.
        (slot.0 as i32).wrapping_mul(16).wrapping_add(field)
    }

    /// The atomic known bit of a slot, loaded once.
    fn slot_known(&mut self, slot: SlotId) -> u32 {
        if let Some(&id) = self.slot_known.get(&slot) {
            return id;
        }
        let k = self.b.ins().load(
            types::I64,
            MemFlagsData::trusted(),
            self.row,
            Self::offset(slot, 8),
        );
        let k = self.b.ins().icmp_imm_s(IntCC::NotEqual, k, 0);
        let id = self.atom(k);
        self.slot_known.insert(slot, id);
        id
    }

    fn atom(&mut self, v: Value) -> u32 {
        self.atoms.push(v);
        (self.atoms.len() - 1) as u32
    }

    /// A spine value for the cold path being emitted. One computed for an earlier condition
    /// is read back from a stack slot, stored where it was computed: the spine values that cold
    /// paths share (a signal's test, a slot's known bit) would otherwise stay live across the
    /// whole scan and take registers from the fall-through path.
    fn cold_value(&mut self, v: Value) -> Value {
        if v.index() >= self.cond_start {
            return v;
        }
        if let Some(&r) = self.reloaded.get(&v) {
            return r;
        }
        let slot = match self.kept.get(&v) {
            Some(&slot) => slot,
            None => {
                let data = StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3);
                let slot = self.b.create_sized_stack_slot(data);
                self.kept.insert(v, slot);
                slot
            }
        };
        let ty = self.b.func.dfg.value_type(v);
        let ptr = self.b.func.dfg.value_type(self.row);
        let r = self.b.ins().stack_load(ptr, ty, slot, 0);
        self.reloaded.insert(v, r);
        r
    }

    fn cold_bit(&mut self, b: Bit) -> Bit {
        match b {
            Bit::V(v) => Bit::V(self.cold_value(v)),
            c => c,
        }
    }

    /// A node's spine value, for the cold path being emitted.
    fn cold_spine(&mut self, n: NodeId) -> SV {
        match self.spine_of(n).v {
            SV::B(b) => SV::B(self.cold_bit(b)),
            SV::X(v) => SV::X(self.cold_value(v)),
        }
    }

    /// An atomic known bit, for the cold path being emitted.
    fn cold_atom(&mut self, a: u32) -> Bit {
        let v = self.atoms[a as usize];
        Bit::V(self.cold_value(v))
    }

    /// Stores each value that a cold path reads back (see `cold_value`) right after the
    /// instruction that computes it.
    fn keep_values(&mut self) {
        let ptr = self.b.func.dfg.value_type(self.row);
        let mut kept: Vec<(Value, StackSlot)> = self.kept.drain().collect();
        kept.sort_unstable_by_key(|(v, _)| *v);
        for (v, slot) in kept {
            let ValueDef::Result(inst, _) = self.b.func.dfg.value_def(v) else {
                continue;
            };
            let mut pos = FuncCursor::new(self.b.func).after_inst(inst);
            pos.ins().stack_store(ptr, v, slot, 0);
        }
    }

    /// A slot's value, typed for a node of type `ty` (a bool as an `i8` 0/1).
    fn slot_value(&mut self, slot: SlotId, ty: ValTy) -> SV {
        let load_ty = if ty == ValTy::Float {
            types::F64
        } else {
            types::I64
        };
        let v = self.b.ins().load(
            load_ty,
            MemFlagsData::trusted(),
            self.row,
            Self::offset(slot, 0),
        );
        if ty == ValTy::Bool {
            SV::B(Bit::V(self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)))
        } else {
            SV::X(v)
        }
    }

    /// The conjunction of a set of atomic known bits, emitted once per distinct set.
    fn conjunction(&mut self, set: &Rc<[u32]>) -> Bit {
        if let Some(&b) = self.conj.get(set) {
            return b;
        }
        let mut acc = Bit::C(true);
        for &a in set.iter() {
            let v = self.atoms[a as usize];
            acc = self.and(acc, Bit::V(v));
        }
        self.conj.insert(Rc::clone(set), acc);
        acc
    }

    fn union(a: &Rc<[u32]>, b: &Rc<[u32]>) -> Rc<[u32]> {
        if b.is_empty() || Rc::ptr_eq(a, b) {
            return Rc::clone(a);
        }
        if a.is_empty() {
            return Rc::clone(b);
        }
        let mut v: Vec<u32> = a.iter().chain(b.iter()).copied().collect();
        v.sort_unstable();
        v.dedup();
        Rc::from(v)
    }

    /// A comparison or label test of non-bool operands: it is known exactly when all its
    /// inputs are (no `and`/`or` below it), so its spine conjunction is exact and the cold path
    /// need not look inside it.
    fn is_leaf(&self, n: NodeId) -> bool {
        let nodes = &self.program.nodes;
        match &nodes[n.index()].inst {
            Inst::IsLabel(..) => true,
            Inst::Cmp(_, _, a, _) => nodes[a.index()].ty != ValTy::Bool,
            _ => false,
        }
    }

    fn spine_value(&mut self, n: NodeId) -> Spine {
        let program = self.program;
        let def = &program.nodes[n.index()];
        let empty = || Rc::from(Vec::new());
        match &def.inst {
            Inst::Const(c) => Spine {
                v: self.constant(*c),
                k: empty(),
            },
            Inst::Load(slot) => {
                let id = self.slot_known(*slot);
                Spine {
                    v: self.slot_value(*slot, def.ty),
                    k: Rc::from(vec![id]),
                }
            }
            Inst::Given { slot, inner } => {
                let gk = self.slot_known(*slot);
                let gkv = Bit::V(self.atoms[gk as usize]);
                let gv = self.slot_value(*slot, def.ty);
                let inner = self.spine_of(*inner);
                let v = match (gv, inner.v) {
                    (SV::B(g), SV::B(i)) => SV::B(self.select_bit(gkv, g, i)),
                    (g, i) => {
                        let (g, i) = (self.value(g), self.value(i));
                        let c = self.bit(gkv);
                        SV::X(self.b.ins().select(c, g, i))
                    }
                };
                let k = if inner.k.is_empty() {
                    empty()
                } else {
                    let ki = self.conjunction(&inner.k);
                    match self.or(gkv, ki) {
                        Bit::V(v) => Rc::from(vec![self.atom(v)]),
                        Bit::C(_) => empty(),
                    }
                };
                Spine { v, k }
            }
            Inst::Not(a) => {
                let a = self.spine_of(*a);
                Spine {
                    v: SV::B(self.not(a.v.bit())),
                    k: a.k,
                }
            }
            Inst::And(a, b) | Inst::Or(a, b) => {
                let (a, b) = (self.spine_of(*a), self.spine_of(*b));
                let v = if matches!(def.inst, Inst::And(..)) {
                    self.and(a.v.bit(), b.v.bit())
                } else {
                    self.or(a.v.bit(), b.v.bit())
                };
                Spine {
                    v: SV::B(v),
                    k: Self::union(&a.k, &b.k),
                }
            }
            Inst::Neg(ty, a) => {
                let a = self.spine_of(*a);
                let x = self.value(a.v);
                let v = match ty {
                    NumTy::Int => self.b.ins().ineg(x),
                    NumTy::Float => self.b.ins().fneg(x),
                };
                Spine {
                    v: SV::X(v),
                    k: a.k,
                }
            }
            Inst::Arith(op, ty, a, b) => {
                let (a, b) = (self.spine_of(*a), self.spine_of(*b));
                let (x, y) = (self.value(a.v), self.value(b.v));
                let v = match ty {
                    NumTy::Int => self.int_arith(*op, x, y),
                    NumTy::Float => self.float_arith(*op, x, y),
                };
                Spine {
                    v: SV::X(v),
                    k: Self::union(&a.k, &b.k),
                }
            }
            Inst::ToFloat(a) => {
                let a = self.spine_of(*a);
                let x = self.value(a.v);
                Spine {
                    v: SV::X(self.b.ins().fcvt_from_sint(types::F64, x)),
                    k: a.k,
                }
            }
            Inst::Cmp(op, ty, a, b) => {
                let (a, b) = (self.spine_of(*a), self.spine_of(*b));
                let (x, y) = (self.value(a.v), self.value(b.v));
                let r = match ty {
                    CmpTy::Int => self.b.ins().icmp(int_cc(*op, true), x, y),
                    CmpTy::Bits => self.b.ins().icmp(int_cc(*op, false), x, y),
                    CmpTy::Float => self.b.ins().fcmp(float_cc(*op), x, y),
                };
                Spine {
                    v: SV::B(Bit::V(r)),
                    k: Self::union(&a.k, &b.k),
                }
            }
            Inst::IsLabel(a, _, labels) => {
                let a = self.spine_of(*a);
                let x = self.value(a.v);
                let mut any = Bit::C(false);
                for l in labels {
                    let eq = self.b.ins().icmp_imm_s(IntCC::Equal, x, i64::from(l.0));
                    any = self.or(any, Bit::V(eq));
                }
                Spine {
                    v: SV::B(any),
                    k: a.k,
                }
            }
            Inst::ModelCost(a) => {
                let a = self.spine_of(*a);
                let x = self.value(a.v);
                let mut acc = self.b.ins().f64const(0.0);
                for (i, cost) in program.model_costs.iter().enumerate() {
                    let is = self.b.ins().icmp_imm_s(IntCC::Equal, x, i as i64);
                    let c = self.b.ins().f64const(*cost);
                    acc = self.b.ins().select(is, c, acc);
                }
                Spine {
                    v: SV::X(acc),
                    k: a.k,
                }
            }
        }
    }

    fn constant(&mut self, c: Const) -> SV {
        match c {
            Const::Bool(b) => SV::B(Bit::C(b)),
            Const::Float(bits) => SV::X(self.b.ins().f64const(f64::from_bits(bits))),
            Const::Int(_) | Const::Label(..) | Const::Model(_) => {
                SV::X(self.b.ins().iconst(types::I64, c.bits() as i64))
            }
        }
    }

    /// (known true, known false) of `root` by exact Kleene logic, emitted in the current
    /// (cold) block from the spine's values and known bits.
    fn three_valued(&mut self, root: NodeId, cond_start: usize) -> (Bit, Bit) {
        self.cond_start = cond_start;
        self.reloaded.clear();
        let nodes = self.skeleton(root);
        for &n in &nodes {
            let s = self.slow_node(n);
            self.slow[n.index()] = Some(s);
        }
        let out = match self.slow_of(root) {
            Slow::Bool { t, f } => (t, f),
            Slow::Num { k } => {
                let v = self.cold_spine(root).bit();
                (self.and(k, v), self.and_not(k, v))
            }
        };
        for n in nodes {
            self.slow[n.index()] = None;
        }
        out
    }

    /// The bool structure above the leaves of `root`, in increasing order: what the cold path
    /// evaluates exactly.
    fn skeleton(&self, root: NodeId) -> Vec<NodeId> {
        let nodes = &self.program.nodes;
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            out.push(n);
            if nodes[n.index()].ty == ValTy::Bool && !self.is_leaf(n) {
                stack.extend(nodes[n.index()].inst.operands());
            }
        }
        out.sort_unstable();
        out
    }

    /// The conjunction of a known-bit set, computed in the cold path being emitted.
    fn cold_conjunction(&mut self, set: &Rc<[u32]>) -> Bit {
        let mut acc = Bit::C(true);
        for &a in set.iter() {
            let b = self.cold_atom(a);
            acc = self.and(acc, b);
        }
        acc
    }

    fn slow_of(&self, n: NodeId) -> Slow {
        self.slow[n.index()].unwrap_or(Slow::Num { k: Bit::C(false) })
    }

    fn known(&mut self, n: NodeId) -> Bit {
        match self.slow[n.index()] {
            Some(Slow::Bool { t, f }) => self.or(t, f),
            Some(Slow::Num { k }) => k,
            // Not in the skeleton: a non-bool value, whose spine conjunction is exact.
            None => {
                let k = self.spine_of(n).k;
                self.cold_conjunction(&k)
            }
        }
    }

    fn bool_of(&mut self, k: Bit, v: Bit) -> Slow {
        Slow::Bool {
            t: self.and(k, v),
            f: self.and_not(k, v),
        }
    }

    fn slow_node(&mut self, n: NodeId) -> Slow {
        let program = self.program;
        let def = &program.nodes[n.index()];
        match &def.inst {
            Inst::Const(Const::Bool(b)) => Slow::Bool {
                t: Bit::C(*b),
                f: Bit::C(!*b),
            },
            Inst::Const(_) => Slow::Num { k: Bit::C(true) },
            Inst::Load(slot) => {
                let id = self.slot_known(*slot);
                let k = self.cold_atom(id);
                match self.spine_of(n).v {
                    SV::B(_) => {
                        let v = self.cold_spine(n).bit();
                        self.bool_of(k, v)
                    }
                    SV::X(_) => Slow::Num { k },
                }
            }
            Inst::Given { slot, inner } => {
                let id = self.slot_known(*slot);
                let gk = self.cold_atom(id);
                match self.slow_of(*inner) {
                    Slow::Bool { t, f } => {
                        let gv = self.slot_value(*slot, def.ty).bit();
                        let not_gv = self.not(gv);
                        Slow::Bool {
                            t: self.select_bit(gk, gv, t),
                            f: self.select_bit(gk, not_gv, f),
                        }
                    }
                    Slow::Num { k } => Slow::Num { k: self.or(gk, k) },
                }
            }
            Inst::Not(a) => match self.slow_of(*a) {
                Slow::Bool { t, f } => Slow::Bool { t: f, f: t },
                Slow::Num { k } => {
                    let v = self.cold_spine(n).bit();
                    let nv = self.not(v);
                    self.bool_of(k, nv)
                }
            },
            Inst::And(a, b) | Inst::Or(a, b) => {
                let (ta, fa) = self.truth(*a);
                let (tb, fb) = self.truth(*b);
                if matches!(def.inst, Inst::And(..)) {
                    Slow::Bool {
                        t: self.and(ta, tb),
                        f: self.or(fa, fb),
                    }
                } else {
                    Slow::Bool {
                        t: self.or(ta, tb),
                        f: self.and(fa, fb),
                    }
                }
            }
            Inst::Neg(_, a) | Inst::ToFloat(a) | Inst::ModelCost(a) => {
                Slow::Num { k: self.known(*a) }
            }
            Inst::Arith(_, _, a, b) => {
                let (ka, kb) = (self.known(*a), self.known(*b));
                Slow::Num {
                    k: self.and(ka, kb),
                }
            }
            Inst::Cmp(..) | Inst::IsLabel(..) if self.is_leaf(n) => {
                let k = self.spine_of(n).k;
                let k = self.cold_conjunction(&k);
                let v = self.cold_spine(n).bit();
                self.bool_of(k, v)
            }
            Inst::Cmp(_, _, a, b) => {
                let (ka, kb) = (self.known(*a), self.known(*b));
                let k = self.and(ka, kb);
                let v = self.cold_spine(n).bit();
                self.bool_of(k, v)
            }
            Inst::IsLabel(a, ..) => {
                let k = self.known(*a);
                let v = self.cold_spine(n).bit();
                self.bool_of(k, v)
            }
        }
    }

    fn truth(&mut self, n: NodeId) -> (Bit, Bit) {
        match self.slow_of(n) {
            Slow::Bool { t, f } => (t, f),
            Slow::Num { k } => {
                let v = self.cold_spine(n).bit();
                (self.and(k, v), self.and_not(k, v))
            }
        }
    }

    fn int_arith(&mut self, op: ArithOp, x: Value, y: Value) -> Value {
        let b = &mut self.b;
        match op {
            ArithOp::Add => b.ins().iadd(x, y),
            ArithOp::Sub => b.ins().isub(x, y),
            ArithOp::Mul => b.ins().imul(x, y),
            ArithOp::Div => {
                // `sdiv` traps on a zero divisor and on MIN / -1: divide by 1 in those cases and
                // pick the defined answers (0, and the wrapping negation) afterwards.
                let zero = b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                let minus_one = b.ins().icmp_imm_s(IntCC::Equal, y, -1);
                let special = b.ins().bor(zero, minus_one);
                let one = b.ins().iconst(types::I64, 1);
                let divisor = b.ins().select(special, one, y);
                let q = b.ins().sdiv(x, divisor);
                let neg = b.ins().ineg(x);
                let q = b.ins().select(minus_one, neg, q);
                let z = b.ins().iconst(types::I64, 0);
                b.ins().select(zero, z, q)
            }
            ArithOp::Min => {
                let lt = b.ins().icmp(IntCC::SignedLessThan, x, y);
                b.ins().select(lt, x, y)
            }
            ArithOp::Max => {
                let gt = b.ins().icmp(IntCC::SignedGreaterThan, x, y);
                b.ins().select(gt, x, y)
            }
        }
    }

    fn float_arith(&mut self, op: ArithOp, x: Value, y: Value) -> Value {
        let b = &mut self.b;
        match op {
            ArithOp::Add => b.ins().fadd(x, y),
            ArithOp::Sub => b.ins().fsub(x, y),
            ArithOp::Mul => b.ins().fmul(x, y),
            ArithOp::Div => {
                let zero = b.ins().f64const(0.0);
                let is_zero = b.ins().fcmp(FloatCC::Equal, y, zero);
                let q = b.ins().fdiv(x, y);
                b.ins().select(is_zero, zero, q)
            }
            ArithOp::Min => {
                let lt = b.ins().fcmp(FloatCC::LessThan, x, y);
                b.ins().select(lt, x, y)
            }
            ArithOp::Max => {
                let gt = b.ins().fcmp(FloatCC::GreaterThan, x, y);
                b.ins().select(gt, x, y)
            }
        }
    }
}

fn int_cc(op: CmpOp, signed: bool) -> IntCC {
    match (op, signed) {
        (CmpOp::Eq, _) => IntCC::Equal,
        (CmpOp::Ne, _) => IntCC::NotEqual,
        (CmpOp::Lt, true) => IntCC::SignedLessThan,
        (CmpOp::Le, true) => IntCC::SignedLessThanOrEqual,
        (CmpOp::Gt, true) => IntCC::SignedGreaterThan,
        (CmpOp::Ge, true) => IntCC::SignedGreaterThanOrEqual,
        (CmpOp::Lt, false) => IntCC::UnsignedLessThan,
        (CmpOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
        (CmpOp::Gt, false) => IntCC::UnsignedGreaterThan,
        (CmpOp::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
    }
}

/// Rust's float operators: ordered comparisons, and `!=` as "unordered or not equal".
fn float_cc(op: CmpOp) -> FloatCC {
    match op {
        CmpOp::Eq => FloatCC::Equal,
        CmpOp::Ne => FloatCC::NotEqual,
        CmpOp::Lt => FloatCC::LessThan,
        CmpOp::Le => FloatCC::LessThanOrEqual,
        CmpOp::Gt => FloatCC::GreaterThan,
        CmpOp::Ge => FloatCC::GreaterThanOrEqual,
    }
}
