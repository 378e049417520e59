//! The Cranelift JIT: the IR compiled to one native function per scan (`decide`, `hold`).
//!
//! The ABI is deliberately boring (see `abi`): `extern "C" fn(*const Slot) -> u32`, a pointer
//! to the row in, an encoded outcome out, no callbacks. Code generation (see `emit`) gives each
//! condition a two-valued fast path guarded by one known bit, and an exact three-valued cold
//! path; the interpreter remains the definition of what both compute.
//!
//! The returned `u32` holds a tag in its top two bits and an index in the low 30 bits.
//! `decide`: tag 0 `Blocked(block)` or `Route(route)` (the index counts blocks, then routes),
//! 1 no condition held (cannot happen: the default route is always true), 2 `Needs(condition)`.
//! `hold`: tag 0 `Held(position)`, 1 `NoHold`, 2 `Needs(condition)`.

mod abi;
mod emit;

use crate::hir::{BlockId, RouteId};
use crate::ir::{CondId, HoldOutcome, Outcome, Program, Row, Slot, Verdict};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, Block, BlockArg, InstBuilder, Signature, Value};
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
        // `none`, measured: the code is already in the shape we want (two-valued spine,
        // shared values, cold paths last), and the e-graph pass of `speed` re-elaborates spine
        // values inside the fast and cold blocks that use them, losing the sharing between
        // conditions: at 100 routes `speed` ran about 4x slower and compiled about 1.5x slower.
        set(&mut flags, "opt_level", "none")?;
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

/// How many compiled policies' native code is mapped in this process now (each [`JitPolicy`]
/// frees its code when it is dropped): a server that reloads its policy should hold one or two,
/// however many reloads it has done.
pub fn mapped_policies() -> usize {
    abi::mapped_modules()
}

#[derive(Clone, Copy)]
enum Scan {
    Decide,
    Hold,
}

/// Conditions per compiled function. Code generation time grows faster than linearly with
/// function size (measured: 100 routes 12 ms, 1,000 routes 240 ms as one function), so a long
/// scan is split into parts that an entry function calls in order.
pub(crate) const PART: usize = 64;

fn define(module: &mut JITModule, program: &Program, scan: Scan) -> Result<FuncId, JitError> {
    let (name, range) = match scan {
        Scan::Decide => ("decide", program.decide_conds()),
        Scan::Hold => ("hold", program.hold_conds()),
    };
    if range.len() <= PART {
        return define_part(module, program, name, range.clone(), range.start);
    }
    let mut parts = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let end = (at + PART).min(range.end);
        let part_name = format!("{name}_{}", parts.len());
        parts.push(define_part(
            module,
            program,
            &part_name,
            at..end,
            range.start,
        )?);
        at = end;
    }
    define_function(module, name, |module, mut b, row, exit| {
        for part in parts {
            let callee = module.declare_func_in_func(part, b.func);
            let call = b.ins().call(callee, &[row]);
            let code = b.inst_results(call)[0];
            let undecided = b.ins().icmp_imm_s(IntCC::Equal, code, i64::from(TAG_MISS));
            let next = b.create_block();
            b.ins()
                .brif(undecided, next, &[], exit, &[BlockArg::Value(code)]);
            b.switch_to_block(next);
        }
        let miss = b.ins().iconst(types::I32, i64::from(TAG_MISS));
        b.ins().jump(exit, &[BlockArg::Value(miss)]);
        b
    })
}

fn declare(module: &mut JITModule, name: &str) -> Result<(FuncId, Signature), JitError> {
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(ptr));
    sig.returns.push(AbiParam::new(types::I32));
    let id = module
        .declare_function(name, Linkage::Local, &sig)
        .map_err(|e| JitError::Codegen(e.to_string()))?;
    Ok((id, sig))
}

/// Declares and defines one function of the entry signature. `body` emits the code between
/// the entry block, where the builder starts, and the exit block, which returns its one `i32`
/// parameter (the answer); it gets the row pointer and the exit block.
fn define_function<F>(module: &mut JITModule, name: &str, body: F) -> Result<FuncId, JitError>
where
    F: for<'b> FnOnce(&mut JITModule, FunctionBuilder<'b>, Value, Block) -> FunctionBuilder<'b>,
{
    let mut ctx = module.make_context();
    let (id, sig) = declare(module, name)?;
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
        let mut b = body(module, b, row, exit);
        b.switch_to_block(exit);
        let code = b.block_params(exit)[0];
        b.ins().return_(&[code]);
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    module
        .define_function(id, &mut ctx)
        .map_err(|e| JitError::Codegen(e.to_string()))?;
    module.clear_context(&mut ctx);
    Ok(id)
}

fn define_part(
    module: &mut JITModule,
    program: &Program,
    name: &str,
    range: std::ops::Range<usize>,
    scan_start: usize,
) -> Result<FuncId, JitError> {
    define_function(module, name, |_, b, row, exit| {
        emit::scan(b, row, program, range, scan_start, exit)
    })
}
