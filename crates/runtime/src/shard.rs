//! Which serving shard the calling thread is (`server::shards`), and values kept one per shard.
//!
//! A shard keeps every task of a request on its own thread. A client whose connection task lives
//! on another thread (a backend pool, a multiplexed Redis connection) would send each call
//! through a wake-up of that thread and back; [`PerShard`] gives each shard its own.

use std::cell::Cell;
use std::sync::OnceLock;

thread_local! {
    /// 0 off the shards, `1 + i` on shard `i`.
    static SHARD: Cell<usize> = const { Cell::new(0) };
}

/// Marks the calling thread as shard `index` (called once by each shard thread as it starts).
pub(crate) fn enter(index: usize) {
    SHARD.with(|shard| shard.set(index + 1));
}

/// The calling thread's slot: 0 off the shards, `1 + i` on shard `i`.
pub(crate) fn slot() -> usize {
    SHARD.with(Cell::get)
}

/// Slots a [`PerShard`] has when its owner does not know the shard count; shards beyond it share.
pub(crate) const DEFAULT_SLOTS: usize = 65;

/// One lazily made `T` for each shard, and one for every thread off the shards.
pub(crate) struct PerShard<T> {
    slots: Box<[OnceLock<T>]>,
}

impl<T> PerShard<T> {
    /// Room for `slots` values (at least one); threads whose slot is beyond share by remainder.
    pub(crate) fn new(slots: usize) -> PerShard<T> {
        PerShard {
            slots: (0..slots.max(1)).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The calling thread's value, made by `init` on its first call.
    pub(crate) fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        self.slots[slot() % self.slots.len()].get_or_init(init)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn each_shard_makes_its_own_value_once() {
        let made = Arc::new(AtomicUsize::new(0));
        let values = Arc::new(PerShard::<usize>::new(3));
        let on = |index: Option<usize>| {
            let (made, values) = (Arc::clone(&made), Arc::clone(&values));
            std::thread::spawn(move || {
                if let Some(i) = index {
                    enter(i);
                }
                let make = || made.fetch_add(1, Ordering::SeqCst);
                let first = *values.get_or_init(make);
                let again = *values.get_or_init(|| unreachable!("made once per slot"));
                assert_eq!(first, again);
                first
            })
            .join()
            .unwrap()
        };
        let off = on(None);
        let zero = on(Some(0));
        let one = on(Some(1));
        assert_eq!(made.load(Ordering::SeqCst), 3);
        assert_ne!(zero, one);
        assert_ne!(off, zero);
        // Another thread off the shards shares the first one's value; shard 2 (slot 3) shares
        // slot 0's by remainder.
        assert_eq!(on(None), off);
        assert_eq!(on(Some(2)), off);
        assert_eq!(made.load(Ordering::SeqCst), 3);
    }
}
