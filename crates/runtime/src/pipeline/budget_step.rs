//! The procedure's `Next::Budgets`, answered: the request's budget counters (its tenant, or the
//! text each `per` yielded), reserved from in the policy's budget store in one atomic step that
//! carries the session's pin read where the step says the policy keeps sessions (the session
//! layer names the pin, the store reads it with the counters), a store failure judged by
//! `failure.store`; and what the answer reports of them (`x-sr-budget`, the metrics, the charge
//! of tokens and cost once the answer ends).

use std::sync::Arc;

use src_compiler::hir::{BudgetAction, BudgetUnit, CheckedPolicy};
use src_compiler::procedure::budget::{BudgetAsk, BudgetUse, Budgets};

use crate::budget::{BudgetLayer, BudgetStore, Carried, Charge, Counter};
use crate::hooks::{PinAhead, PinRead};
use crate::openai::ApiError;
use crate::store::failure::{self, Failed, Site};

/// What reserving found, kept for the answer.
#[derive(Default)]
pub struct Reserved {
    pub uses: Vec<BudgetUse>,
    /// Each counter the request counts against, with its unit.
    pub counters: Vec<(Counter, BudgetUnit)>,
    pub store: Option<Arc<dyn BudgetStore>>,
    /// The session's pin, read with the reservation, for the session layer.
    pub ahead: Option<PinAhead>,
}

/// Reserves `asks` for a request of `tenant`, carrying `pin` (the session's pin read) when
/// given. Under `failure.store = open` a store that fails leaves the request uncounted (every
/// budget reads as unused); under `closed` it is a 503.
pub async fn reserve(
    layer: &BudgetLayer,
    policy: &CheckedPolicy,
    asks: &[BudgetAsk],
    tenant: &str,
    pin: Option<PinRead>,
) -> Result<Reserved, ApiError> {
    let keyed: Vec<(BudgetAsk, Counter)> = asks
        .iter()
        .map(|a| (a.clone(), Counter::of(policy, a, tenant)))
        .collect();
    let counters = keyed.iter().map(|(a, c)| (c.clone(), a.unit)).collect();
    let def = BudgetLayer::store_def(policy);
    let site = |op| Site {
        store: "budget",
        kind: crate::store::kind_of(&def),
        op,
    };
    let mode = policy.failure.store;
    let store = match failure::guard(mode, site("connect"), layer.store(policy)) {
        Ok(store) => store,
        Err(failed) => return skip_or_refuse(failed),
    };
    let now = layer.now_ms();
    let reserved = match &pin {
        Some(read) => store.reserve_carrying(&keyed, now, read).await,
        None => store
            .reserve(&keyed, now)
            .await
            .map(|uses| Carried { uses, pin: None }),
    };
    let carried = match failure::guard(mode, site("reserve"), reserved) {
        Ok(carried) => carried,
        Err(failed) => return skip_or_refuse(failed),
    };
    Ok(Reserved {
        uses: carried.uses,
        counters,
        store: Some(store),
        ahead: pin
            .zip(carried.pin)
            .map(|(read, fields)| PinAhead { read, fields }),
    })
}

fn skip_or_refuse(failed: Failed) -> Result<Reserved, ApiError> {
    match failed {
        Failed::Skip(_) => Ok(Reserved::default()),
        Failed::Refuse(refusal) => Err(ApiError::service_unavailable(refusal.message())),
    }
}

/// Counts what the request's budgets came to in the metrics: each one's share, the units
/// reserved, and the one that acted.
pub fn count(layer: &BudgetLayer, policy: &CheckedPolicy, budgets: &Budgets) {
    let metrics = layer.metrics();
    for u in &budgets.uses {
        let Some(def) = policy.budgets.get(u.budget.index()) else {
            continue;
        };
        metrics.observed(&def.name, u.share());
        let refused = matches!(budgets.acting, Some((_, BudgetAction::Reject)));
        if def.unit == BudgetUnit::Requests && !u.exceeded && !refused {
            metrics.charged(&def.name, 1.0);
        }
    }
    if let Some((budget, action)) = budgets.acting {
        if let Some(def) = policy.budgets.get(budget.index()) {
            metrics.exceeded(&def.name, action_word(action));
        }
    }
}

/// `reject`, `to` or `observe`.
pub fn action_word(action: BudgetAction) -> &'static str {
    match action {
        BudgetAction::Reject => "reject",
        BudgetAction::To(_) => "to",
        BudgetAction::Observe => "observe",
    }
}

/// The `x-sr-budget` value: `NAME; used=U; limit=L` per budget, `; exceeded=ACTION` on the one
/// that acted; `None` when no budget applied.
pub fn header(policy: &CheckedPolicy, budgets: &Budgets) -> Option<String> {
    let parts: Vec<String> = budgets
        .uses
        .iter()
        .filter_map(|u| {
            let def = policy.budgets.get(u.budget.index())?;
            let mut part = format!(
                "{}; used={}; limit={}",
                def.name,
                number(u.used),
                number(u.limit)
            );
            if let Some((b, action)) = budgets.acting {
                if b == u.budget {
                    part.push_str("; exceeded=");
                    part.push_str(action_word(action));
                }
            }
            Some(part)
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// A usage as a header writes it: an integer without decimals, else three.
fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n:.3}")
    }
}

/// The charge of the request's token and cost budgets, once its answer ends.
pub fn charge(layer: &BudgetLayer, reserved: &Reserved, budgets: &Budgets) -> Option<Charge> {
    // A refused request is answered by the router: nothing to charge.
    if matches!(budgets.acting, Some((_, BudgetAction::Reject))) {
        return None;
    }
    Charge::of(layer, reserved.store.as_ref()?, &reserved.counters)
}
