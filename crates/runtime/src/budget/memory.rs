//! Budgets counted in this process (a policy without a session, or `store = memory`): one map
//! under one lock, so a reservation reads and adds to all of a request's counters atomically.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use src_compiler::procedure::budget::{settle, BudgetAsk, BudgetUse};

use super::{BudgetStore, Counter};
use crate::hooks::BoxFuture;
use crate::store::StoreError;

/// Counters kept before the map is swept of windows that ended.
const SWEEP_AT: usize = 4096;

/// A counter's window start and its usage in it.
type Window = (u64, f64);

/// Budgets in this process.
#[derive(Default)]
pub struct MemoryBudgets {
    counters: Mutex<HashMap<(String, String), Window>>,
}

impl MemoryBudgets {
    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), Window>> {
        self.counters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Usage of `counter` in the window starting at `start` (0 once that window ended).
    fn read(map: &HashMap<(String, String), Window>, counter: &Counter, start: u64) -> f64 {
        match map.get(&(counter.budget.clone(), counter.per.clone())) {
            Some((s, used)) if *s == start => *used,
            _ => 0.0,
        }
    }

    fn add(map: &mut HashMap<(String, String), Window>, counter: &Counter, start: u64, n: f64) {
        let entry = map
            .entry((counter.budget.clone(), counter.per.clone()))
            .or_insert((start, 0.0));
        if entry.0 != start {
            *entry = (start, 0.0);
        }
        entry.1 += n;
    }

    /// Reserves synchronously (the benchmark and the trait share it).
    pub fn reserve_now(&self, asks: &[(BudgetAsk, Counter)], now_ms: u64) -> Vec<BudgetUse> {
        let mut map = self.lock();
        let used: Vec<f64> = asks
            .iter()
            .map(|(_, c)| Self::read(&map, c, c.window_start(now_ms)))
            .collect();
        let plain: Vec<BudgetAsk> = asks.iter().map(|(a, _)| a.clone()).collect();
        let settled = settle(&plain, &used);
        for &i in &settled.reserve {
            let (ask, counter) = &asks[i];
            Self::add(&mut map, counter, counter.window_start(now_ms), ask.reserve);
        }
        if map.len() > SWEEP_AT {
            // Windows of at most a day are swept once they ended; longer ones stay.
            map.retain(|_, (start, _)| now_ms.saturating_sub(*start) < 86_400_000);
        }
        asks.iter()
            .zip(&used)
            .map(|((ask, counter), used)| BudgetUse {
                budget: ask.budget,
                used: *used,
                limit: ask.limit,
                exceeded: src_compiler::procedure::budget::exceeded(ask, *used),
                retry_after_s: counter.retry_after_s(now_ms),
            })
            .collect()
    }
}

impl BudgetStore for MemoryBudgets {
    fn reserve<'a>(
        &'a self,
        asks: &'a [(BudgetAsk, Counter)],
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Vec<BudgetUse>, StoreError>> {
        Box::pin(async move { Ok(self.reserve_now(asks, now_ms)) })
    }

    fn charge<'a>(
        &'a self,
        counter: &'a Counter,
        amount: f64,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut map = self.lock();
            Self::add(&mut map, counter, counter.window_start(now_ms), amount);
            Ok(())
        })
    }

    fn used<'a>(
        &'a self,
        counter: &'a Counter,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<f64, StoreError>> {
        Box::pin(async move {
            let map = self.lock();
            Ok(Self::read(&map, counter, counter.window_start(now_ms)))
        })
    }
}
