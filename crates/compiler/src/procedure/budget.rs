//! Step 0 of the procedure: the budgets a request counts against ([`Next::Budgets`]), and the
//! one rule every budget store applies to them ([`settle`]), so that the memory store, the Redis
//! script, `src explain` and `src test` cannot disagree about which budget acts.
//!
//! A budget applies to a request when its `per` has a value for it (the tenant always does).
//! The store looks at the applicable budgets' usage in the current window, in declaration
//! order: the first one exceeded acts. When it refuses (`exceeded = reject`) nothing is
//! reserved; otherwise every budget that is not exceeded reserves what the request costs it
//! now (one request for a `requests` budget; tokens and cost are charged when the answer ends).
//!
//! [`Next::Budgets`]: super::Next::Budgets

use crate::hir::{BudgetAction, BudgetId, BudgetUnit};

/// Whose usage a budget counts, as the procedure knows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BudgetKey {
    /// The request's tenant: only the caller knows it (the runtime's tenant function).
    Tenant,
    /// The text `per` yielded for the request.
    Text(String),
}

/// One budget to look up (and reserve from) for the request.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetAsk {
    pub budget: BudgetId,
    pub key: BudgetKey,
    pub unit: BudgetUnit,
    pub limit: f64,
    pub window_ms: u64,
    /// What admitting the request uses of it now: 1 for `requests`, 0 for tokens and cost.
    pub reserve: f64,
    /// `exceeded = reject`: when this budget acts, nothing is reserved.
    pub refuses: bool,
}

/// Step 0 as one store step ([`Next::Budgets`]): the budgets to look up and reserve from and,
/// when the policy keeps sessions, the word that the session's pin may be read in the same step.
///
/// Budgets are counted where the session's pins are (docs/language.md, "`budget`"), and the
/// session is asked about the request's proposal later ([`Next::Session`]) unless a budget, a
/// block or the cache answers the request first. A caller whose store is a shared Redis reads
/// the pin with the reservation, so a request under budgets waits for one round trip to the
/// store, not two, and answers [`Next::Session`] from what it read then.
///
/// [`Next::Budgets`]: super::Next::Budgets
/// [`Next::Session`]: super::Next::Session
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetStep {
    pub asks: Vec<BudgetAsk>,
    /// The policy declares a `session`: its pin may be read in this step.
    pub session: bool,
}

/// What the store found for one [`BudgetAsk`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetUse {
    pub budget: BudgetId,
    /// Used in the current window before this request, in the budget's unit.
    pub used: f64,
    pub limit: f64,
    /// The request does not fit: `used + reserve > limit` (for tokens and cost, `used >= limit`).
    pub exceeded: bool,
    /// Seconds until the window ends (when enough budget returns); at least 1.
    pub retry_after_s: u64,
}

impl BudgetUse {
    /// `budget(NAME).used`: the share used, clamped to 0–1.
    pub fn share(&self) -> f64 {
        if self.limit > 0.0 {
            (self.used / self.limit).clamp(0.0, 1.0)
        } else {
            1.0
        }
    }

    /// `budget(NAME).remaining`, never negative.
    pub fn remaining(&self) -> f64 {
        (self.limit - self.used).max(0.0)
    }
}

/// What the store does with the asks, once it knows each budget's usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// Index (into the asks) of the first exceeded budget: the one that acts.
    pub acting: Option<usize>,
    /// Indices of the asks to reserve `reserve` from (empty when the acting budget refuses).
    pub reserve: Vec<usize>,
}

/// Whether an ask is exceeded at `used`.
pub fn exceeded(ask: &BudgetAsk, used: f64) -> bool {
    if ask.reserve > 0.0 {
        used + ask.reserve > ask.limit
    } else {
        used >= ask.limit
    }
}

/// The rule every store applies (see the module documentation); `used[i]` is ask `i`'s usage.
pub fn settle(asks: &[BudgetAsk], used: &[f64]) -> Settlement {
    let over: Vec<bool> = asks
        .iter()
        .zip(used)
        .map(|(a, u)| exceeded(a, *u))
        .collect();
    let acting = over.iter().position(|o| *o);
    let refused = acting.is_some_and(|i| asks[i].refuses);
    let reserve = if refused {
        Vec::new()
    } else {
        (0..asks.len())
            .filter(|i| !over[*i] && asks[*i].reserve > 0.0)
            .collect()
    };
    Settlement { acting, reserve }
}

/// What a request's budgets came to, for the decision.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Budgets {
    /// Every budget that applied, in declaration order.
    pub uses: Vec<BudgetUse>,
    /// The first exceeded budget and what it does.
    pub acting: Option<(BudgetId, BudgetAction)>,
}

impl Budgets {
    /// The use of one budget, when it applied.
    pub fn get(&self, budget: BudgetId) -> Option<&BudgetUse> {
        self.uses.iter().find(|u| u.budget == budget)
    }
}

/// What one unit of a budget reserves when a request is admitted.
pub fn reserve_of(unit: BudgetUnit) -> f64 {
    match unit {
        BudgetUnit::Requests => 1.0,
        BudgetUnit::Tokens | BudgetUnit::Cost => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(i: u32, limit: f64, refuses: bool) -> BudgetAsk {
        BudgetAsk {
            budget: BudgetId(i),
            key: BudgetKey::Tenant,
            unit: BudgetUnit::Requests,
            limit,
            window_ms: 60_000,
            reserve: 1.0,
            refuses,
        }
    }

    #[test]
    fn the_first_exceeded_acts_and_a_refusal_reserves_nothing() {
        let asks = [ask(0, 5.0, false), ask(1, 2.0, true), ask(2, 2.0, false)];
        let s = settle(&asks, &[1.0, 2.0, 2.0]);
        assert_eq!(s.acting, Some(1));
        assert!(s.reserve.is_empty());
    }

    #[test]
    fn a_downgrade_still_reserves_from_the_budgets_that_fit() {
        let asks = [ask(0, 2.0, false), ask(1, 5.0, true)];
        let s = settle(&asks, &[2.0, 1.0]);
        assert_eq!(s.acting, Some(0));
        assert_eq!(s.reserve, vec![1]);
    }

    #[test]
    fn token_budgets_admit_until_spent() {
        let mut a = ask(0, 100.0, true);
        a.unit = BudgetUnit::Tokens;
        a.reserve = 0.0;
        assert!(!exceeded(&a, 99.0));
        assert!(exceeded(&a, 100.0));
        let s = settle(&[a], &[40.0]);
        assert_eq!(s.acting, None);
        assert!(
            s.reserve.is_empty(),
            "tokens are charged when the answer ends"
        );
    }
}
