//! The boundary between Rust and JIT-compiled code: the only `unsafe` in the workspace.
//!
//! Compiled entry points have the signature `extern "C" fn(*const Slot) -> u32`: a pointer to
//! the first slot of a [`Row`](crate::ir::Row) in, an encoded outcome out, no callbacks into
//! Rust. The code only reads slots below the program's slot count and writes nothing, so a
//! call is sound when the pointer covers that many slots and the code is still mapped. Both are
//! guaranteed here: [`Entry::call`] checks the length, and [`Code`] frees the code only when it
//! is dropped, which the owning `JitPolicy` does after its entries (they never leave it).
#![expect(
    unsafe_code,
    reason = "the one module where the JIT calls compiled code"
)]

use crate::ir::Slot;
use cranelift_jit::JITModule;
use cranelift_module::FuncId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

type RawEntry = unsafe extern "C" fn(*const Slot) -> u32;

/// Modules whose code is mapped: one per live [`Code`], so a process that keeps replacing its
/// policy can show that the code of the replaced ones is freed.
static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// How many compiled policies' code is mapped in this process now.
pub(super) fn mapped_modules() -> usize {
    MAPPED.load(Ordering::Relaxed)
}

/// The finalized code of one policy. The module is held only to free its memory on drop; it
/// is `Send`, and the mutex (never locked: `Drop` uses `get_mut`) makes the holder `Sync`
/// without an `unsafe impl`.
pub(super) struct Code {
    module: Mutex<Option<JITModule>>,
}

impl Code {
    /// Takes a module whose definitions are finalized.
    pub(super) fn new(module: JITModule) -> Code {
        MAPPED.fetch_add(1, Ordering::Relaxed);
        Code {
            module: Mutex::new(Some(module)),
        }
    }

    /// The entry point `id`, which reads at most `slots` slots.
    pub(super) fn entry(&mut self, id: FuncId, slots: usize) -> Option<Entry> {
        let module = self.module.get_mut().ok()?.as_ref()?;
        let ptr = module.get_finalized_function(id);
        if ptr.is_null() {
            return None;
        }
        // SAFETY: `id` was defined in this module with the signature `(i64 pointer) -> i32` in
        // the host's default calling convention (`JitPolicy::compile` builds it from
        // `module.make_signature()`), and definitions are finalized, so `ptr` is executable code
        // of exactly the `extern "C" fn(*const Slot) -> u32` type.
        let f = unsafe { std::mem::transmute::<*const u8, RawEntry>(ptr) };
        Some(Entry { f, slots })
    }
}

impl Drop for Code {
    fn drop(&mut self) {
        if let Ok(slot) = self.module.get_mut() {
            if let Some(module) = slot.take() {
                // SAFETY: every `Entry` into this module is owned by the same `JitPolicy`, is
                // neither `Clone` nor handed out, and is dropped together with it; `&mut self`
                // proves no call is running. So no pointer into the code is used after this.
                unsafe { module.free_memory() };
                MAPPED.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// A callable entry point.
pub(super) struct Entry {
    f: RawEntry,
    slots: usize,
}

impl Entry {
    /// Runs the entry point on `row`; `None` if the row is too short for it.
    pub(super) fn call(&self, row: &[Slot]) -> Option<u32> {
        if row.len() < self.slots {
            return None;
        }
        // SAFETY: the code reads slots `0..self.slots` through the pointer (16-byte `repr(C)`
        // slots, 8-byte aligned as `Vec<Slot>` guarantees), which the length check keeps inside
        // `row`; it writes no memory and calls nothing. The code is alive: `Code` outlives
        // every `Entry` (see `Drop for Code`).
        Some(unsafe { (self.f)(row.as_ptr()) })
    }
}
