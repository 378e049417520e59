//! The Cranelift JIT: the IR compiled to one native function per scan (`decide`, `hold`).
//!
//! Each condition becomes straight-line code over (value, known) pairs of SSA values — three-
//! valued `and`/`or` as bit operations, not branches — followed by one branch: known false
//! continues with the next condition, anything else returns. Because conditions are chained
//! linearly, the SSA value of a node computed for an earlier condition dominates every later
//! condition and is reused, just as the interpreter reuses its scratch value. Known-ness that
//! is constant at compile time (constants, comparisons of constants) is folded here, so fully
//! constant parts cost nothing.
//!
//! The function returns a `u32`: the top two bits are a tag, the low 30 bits an index.
//! `decide`: tag 0 `Blocked(block)`, 1 `Route(route)`, 2 `Needs(condition)`.
//! `hold`: tag 0 `Held(position)`, 1 `NoHold`, 2 `Needs(condition)`.

mod abi;
#[cfg(test)]
mod tests;

use crate::hir::{ArithOp, BlockId, CmpOp, RouteId};
use crate::ir::{
    CmpTy, CondId, Const, HoldOutcome, Inst, NodeId, NumTy, Outcome, Program, Row, Slot, SlotId,
    ValTy, Verdict,
};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, AbiParam, BlockArg, InstBuilder, MemFlagsData, Value};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};

const TAG_SHIFT: u32 = 30;
const INDEX_MASK: u32 = (1 << TAG_SHIFT) - 1;
const TAG_HIT: u32 = 0;
const TAG_MISS: u32 = 1 << TAG_SHIFT;
const TAG_NEEDS: u32 = 2 << TAG_SHIFT;

#[derive(Debug, thiserror::Error)]
pub enum JitError {
    #[error("the JIT does not support this machine: {0}")]
    Host(String),
    #[error("invalid code generator setting: {0}")]
    Settings(String),
    #[error("code generation failed: {0}")]
    Codegen(String),
}

/// A policy compiled to native code. Immutable, `Send + Sync`; the code lives as long as the
/// value (and so as long as any `Arc` holding it).
pub struct JitPolicy {
    decide: abi::Entry,
    hold: abi::Entry,
    blocks: u32,
    routes: u32,
    slots: usize,
    _code: abi::Code,
}

impl std::fmt::Debug for JitPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JitPolicy")
            .field("blocks", &self.blocks)
            .field("routes", &self.routes)
            .field("slots", &self.slots)
            .finish_non_exhaustive()
    }
}

impl JitPolicy {
    /// Compiles both scans of `program`.
    pub fn compile(program: &Program) -> Result<JitPolicy, JitError> {
        let mut flags = settings::builder();
        let set = |f: &mut settings::Builder, k: &str, v: &str| {
            f.set(k, v)
                .map_err(|e| JitError::Settings(format!("{k}: {e}")))
        };
        set(&mut flags, "opt_level", "speed")?;
        set(&mut flags, "is_pic", "false")?;
        set(
            &mut flags,
            "enable_verifier",
            if cfg!(debug_assertions) {
                "true"
            } else {
                "false"
            },
        )?;
        let isa = cranelift_native::builder()
            .map_err(|e| JitError::Host(e.to_string()))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| JitError::Host(e.to_string()))?;
        let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));

        let decide_id = define(&mut module, program, Scan::Decide)?;
        let hold_id = define(&mut module, program, Scan::Hold)?;
        module
            .finalize_definitions()
            .map_err(|e| JitError::Codegen(e.to_string()))?;

        let slots = program.slot_count();
        let mut code = abi::Code::new(module);
        let missing = || JitError::Codegen("a compiled function has no code".into());
        let decide = code.entry(decide_id, slots).ok_or_else(missing)?;
        let hold = code.entry(hold_id, slots).ok_or_else(missing)?;
        Ok(JitPolicy {
            decide,
            hold,
            blocks: program.block_count() as u32,
            routes: program.route_count() as u32,
            slots,
            _code: code,
        })
    }

    pub fn decide(&self, row: &Row) -> Outcome {
        let code = self.run(&self.decide, row);
        let index = code & INDEX_MASK;
        match code & !INDEX_MASK {
            TAG_HIT if index < self.blocks => Outcome::Decided(Verdict::Blocked(BlockId(index))),
            TAG_HIT => Outcome::Decided(Verdict::Route(RouteId(index - self.blocks))),
            TAG_MISS => Outcome::Decided(Verdict::Route(RouteId(self.routes.saturating_sub(1)))),
            _ => Outcome::Needs(CondId(index)),
        }
    }

    pub fn hold(&self, row: &Row) -> HoldOutcome {
        let code = self.run(&self.hold, row);
        let index = code & INDEX_MASK;
        match code & !INDEX_MASK {
            TAG_HIT => HoldOutcome::Held(index as usize),
            TAG_MISS => HoldOutcome::NoHold,
            _ => HoldOutcome::Needs(CondId(index)),
        }
    }

    fn run(&self, entry: &abi::Entry, row: &Row) -> u32 {
        if let Some(code) = entry.call(row.slots()) {
            return code;
        }
        // A short row: the missing slots are unknown, which is what a full row would say.
        let mut padded = row.slots().to_vec();
        padded.resize(self.slots, Slot::UNKNOWN);
        entry.call(&padded).unwrap_or(TAG_MISS)
    }
}

#[derive(Clone, Copy)]
enum Scan {
    Decide,
    Hold,
}

fn define(module: &mut JITModule, program: &Program, scan: Scan) -> Result<FuncId, JitError> {
    let err = |e: cranelift_module::ModuleError| JitError::Codegen(e.to_string());
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(ptr));
    sig.returns.push(AbiParam::new(types::I32));
    let (name, range) = match scan {
        Scan::Decide => ("decide", program.decide_conds()),
        Scan::Hold => ("hold", program.hold_conds()),
    };
    let id = module
        .declare_function(name, Linkage::Local, &sig)
        .map_err(err)?;
    let mut ctx = module.make_context();
    ctx.func.signature = sig;
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        let exit = b.create_block();
        b.append_block_param(exit, types::I32);
        b.switch_to_block(entry);
        let row = b.block_params(entry)[0];
        let mut e = Emitter {
            b,
            row,
            program,
            memo: vec![None; program.nodes.len()],
        };
        for (pos, ci) in range.enumerate() {
            let cond = &program.conds[ci];
            for &n in &cond.fresh {
                let v = e.node(n);
                e.memo[n.index()] = Some(v);
            }
            let (known, value) = e.get(cond.root);
            let value = e.bit(value.as_bit());
            let hit =
                e.b.ins()
                    .iconst(types::I32, i64::from(TAG_HIT | pos as u32));
            let needs =
                e.b.ins()
                    .iconst(types::I32, i64::from(TAG_NEEDS | ci as u32));
            let next = e.b.create_block();
            match known {
                Bit::C(true) => {
                    e.b.ins()
                        .brif(value, exit, &[BlockArg::Value(hit)], next, &[]);
                }
                Bit::C(false) => {
                    e.b.ins().jump(exit, &[BlockArg::Value(needs)]);
                }
                Bit::V(k) => {
                    // Continue only when known false; otherwise answer hit or needs.
                    let go_on = e.b.ins().band_not(k, value);
                    let code = e.b.ins().select(k, hit, needs);
                    e.b.ins()
                        .brif(go_on, next, &[], exit, &[BlockArg::Value(code)]);
                }
            }
            e.b.switch_to_block(next);
        }
        let miss = e.b.ins().iconst(types::I32, i64::from(TAG_MISS));
        e.b.ins().jump(exit, &[BlockArg::Value(miss)]);
        e.b.switch_to_block(exit);
        let code = e.b.block_params(exit)[0];
        e.b.ins().return_(&[code]);
        e.b.seal_all_blocks();
        let config = module.target_config();
        e.b.finalize(config);
    }
    module.define_function(id, &mut ctx).map_err(err)?;
    module.clear_context(&mut ctx);
    Ok(id)
}

/// A bool (0/1 as `i8`) known at compile time or computed.
#[derive(Clone, Copy, Debug)]
enum Bit {
    C(bool),
    V(Value),
}

/// A node's value: bools as [`Bit`]s (so constants fold), everything else as an SSA value.
#[derive(Clone, Copy, Debug)]
enum NodeVal {
    B(Bit),
    X(Value),
}

impl NodeVal {
    fn as_bit(self) -> Bit {
        match self {
            NodeVal::B(b) => b,
            NodeVal::X(v) => Bit::V(v),
        }
    }
}

struct Emitter<'a, 'p> {
    b: FunctionBuilder<'a>,
    row: Value,
    program: &'p Program,
    /// (known, value) of every node emitted so far; valid in all later conditions.
    memo: Vec<Option<(Bit, NodeVal)>>,
}

impl Emitter<'_, '_> {
    fn get(&mut self, n: NodeId) -> (Bit, NodeVal) {
        // Operands always precede their users in `fresh` order, so this is filled.
        self.memo[n.index()].unwrap_or((Bit::C(false), NodeVal::B(Bit::C(false))))
    }

    fn bit(&mut self, b: Bit) -> Value {
        match b {
            Bit::C(c) => self.b.ins().iconst(types::I8, i64::from(c)),
            Bit::V(v) => v,
        }
    }

    fn value(&mut self, v: NodeVal) -> Value {
        match v {
            NodeVal::B(b) => self.bit(b),
            NodeVal::X(v) => v,
        }
    }

    fn and(&mut self, a: Bit, b: Bit) -> Bit {
        match (a, b) {
            (Bit::C(false), _) | (_, Bit::C(false)) => Bit::C(false),
            (Bit::C(true), x) | (x, Bit::C(true)) => x,
            (Bit::V(x), Bit::V(y)) => Bit::V(self.b.ins().band(x, y)),
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

    fn offset(slot: SlotId, field: i32) -> i32 {
        // 16-byte slots; a policy's slot count is limited to 2^30 by lowering, so this fits
        // whenever the row itself can exist.
        (slot.0 as i32).wrapping_mul(16).wrapping_add(field)
    }

    /// (known, value) of a slot, the value typed for a node of type `ty`.
    fn load(&mut self, slot: SlotId, ty: ValTy) -> (Bit, NodeVal) {
        let flags = MemFlagsData::trusted();
        let k = self
            .b
            .ins()
            .load(types::I64, flags, self.row, Self::offset(slot, 8));
        let known = self.b.ins().icmp_imm_s(IntCC::NotEqual, k, 0);
        let value = match ty {
            ValTy::Float => NodeVal::X(self.b.ins().load(
                types::F64,
                flags,
                self.row,
                Self::offset(slot, 0),
            )),
            ValTy::Bool => {
                let raw = self
                    .b
                    .ins()
                    .load(types::I64, flags, self.row, Self::offset(slot, 0));
                NodeVal::B(Bit::V(self.b.ins().icmp_imm_s(IntCC::NotEqual, raw, 0)))
            }
            ValTy::Int | ValTy::Label | ValTy::Model => NodeVal::X(self.b.ins().load(
                types::I64,
                flags,
                self.row,
                Self::offset(slot, 0),
            )),
        };
        (Bit::V(known), value)
    }

    fn node(&mut self, n: NodeId) -> (Bit, NodeVal) {
        let program = self.program;
        let def = &program.nodes[n.index()];
        match &def.inst {
            Inst::Const(c) => (Bit::C(true), self.constant(*c)),
            Inst::Load(slot) => self.load(*slot, def.ty),
            Inst::Given { slot, inner } => {
                let (gk, gv) = self.load(*slot, def.ty);
                let (ik, iv) = self.get(*inner);
                let gk_v = self.bit(gk);
                let (gv, iv) = (self.value(gv), self.value(iv));
                let value = self.b.ins().select(gk_v, gv, iv);
                let known = self.or(gk, ik);
                let value = if def.ty == ValTy::Bool {
                    NodeVal::B(Bit::V(value))
                } else {
                    NodeVal::X(value)
                };
                (known, value)
            }
            Inst::Not(a) => {
                let (k, v) = self.get(*a);
                (k, NodeVal::B(self.not(v.as_bit())))
            }
            Inst::And(a, b) => {
                let ((ka, va), (kb, vb)) = (self.get(*a), self.get(*b));
                let ta = self.and(ka, va.as_bit());
                let tb = self.and(kb, vb.as_bit());
                let (na, nb) = (self.not(va.as_bit()), self.not(vb.as_bit()));
                let fa = self.and(ka, na);
                let fb = self.and(kb, nb);
                let both = self.and(ka, kb);
                let some_false = self.or(fa, fb);
                let known = self.or(some_false, both);
                (known, NodeVal::B(self.and(ta, tb)))
            }
            Inst::Or(a, b) => {
                let ((ka, va), (kb, vb)) = (self.get(*a), self.get(*b));
                let ta = self.and(ka, va.as_bit());
                let tb = self.and(kb, vb.as_bit());
                let some_true = self.or(ta, tb);
                let both = self.and(ka, kb);
                let known = self.or(some_true, both);
                (known, NodeVal::B(some_true))
            }
            Inst::Neg(ty, a) => {
                let (k, v) = self.get(*a);
                let v = self.value(v);
                let r = match ty {
                    NumTy::Int => self.b.ins().ineg(v),
                    NumTy::Float => self.b.ins().fneg(v),
                };
                (k, NodeVal::X(r))
            }
            Inst::Arith(op, ty, a, b) => {
                let ((ka, va), (kb, vb)) = (self.get(*a), self.get(*b));
                let (x, y) = (self.value(va), self.value(vb));
                let r = match ty {
                    NumTy::Int => self.int_arith(*op, x, y),
                    NumTy::Float => self.float_arith(*op, x, y),
                };
                (self.and(ka, kb), NodeVal::X(r))
            }
            Inst::ToFloat(a) => {
                let (k, v) = self.get(*a);
                let v = self.value(v);
                (k, NodeVal::X(self.b.ins().fcvt_from_sint(types::F64, v)))
            }
            Inst::Cmp(op, ty, a, b) => {
                let ((ka, va), (kb, vb)) = (self.get(*a), self.get(*b));
                let (x, y) = (self.value(va), self.value(vb));
                let r = match ty {
                    CmpTy::Int => self.b.ins().icmp(int_cc(*op, true), x, y),
                    CmpTy::Bits => self.b.ins().icmp(int_cc(*op, false), x, y),
                    CmpTy::Float => self.b.ins().fcmp(float_cc(*op), x, y),
                };
                (self.and(ka, kb), NodeVal::B(Bit::V(r)))
            }
            Inst::IsLabel(a, _, labels) => {
                let (k, v) = self.get(*a);
                let v = self.value(v);
                let mut any = Bit::C(false);
                for l in labels {
                    let eq = self.b.ins().icmp_imm_s(IntCC::Equal, v, i64::from(l.0));
                    any = self.or(any, Bit::V(eq));
                }
                (k, NodeVal::B(any))
            }
            Inst::ModelCost(a) => {
                let (k, v) = self.get(*a);
                let v = self.value(v);
                let mut acc = self.b.ins().f64const(0.0);
                for (i, cost) in program.model_costs.iter().enumerate() {
                    let is = self.b.ins().icmp_imm_s(IntCC::Equal, v, i as i64);
                    let c = self.b.ins().f64const(*cost);
                    acc = self.b.ins().select(is, c, acc);
                }
                (k, NodeVal::X(acc))
            }
        }
    }

    fn constant(&mut self, c: Const) -> NodeVal {
        match c {
            Const::Bool(b) => NodeVal::B(Bit::C(b)),
            Const::Float(bits) => NodeVal::X(self.b.ins().f64const(f64::from_bits(bits))),
            Const::Int(_) | Const::Label(..) | Const::Model(_) => {
                NodeVal::X(self.b.ins().iconst(types::I64, c.bits() as i64))
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
