//! Budgets in the session's Redis, shared by every replica: a reservation is one Lua script
//! (one round trip, atomic), so N concurrent requests over any number of replicas admit exactly
//! the limit. The script applies the compiler's rule
//! (`src_compiler::procedure::budget::settle`) as written there; the contract tests
//! run the same cases against this store and the memory one.
//!
//! Counters are named by [`KeySpace::budget`] and expire a window after their window ends. A
//! counter's hash tag is its `per` value, so on a Redis Cluster the budgets of one request
//! whose `per` values differ live in different slots, which no one script may touch. Such a
//! request is reserved one `per` value at a time, each in one atomic script, and then put right
//! by the compiler's rule over all of them (`Groups`): a group that reserved although a
//! refusing budget of another group acts gives its units back, and a group that refused on its
//! own although an earlier budget of another group acts (and does not refuse) reserves again,
//! with its limits checked again. No counter ever goes over its limit; a refusal reserves
//! nothing once its give-back lands, which a concurrent request may see as use for that moment.
//!
//! A reservation can carry the session's pin read ([`BudgetStore::reserve_carrying`]): on one
//! server or a Sentinel set's primary the reservation script reads and touches the pin too (the
//! session store's own Lua, one script, one round trip); on a Cluster, where the pin's slot is
//! the session's and never the counters', its read goes out beside the script, so the request
//! still waits for one round trip, though Redis is sent two calls.

use std::sync::atomic::{AtomicBool, Ordering};

use redis::Script;
use src_compiler::procedure::budget::{settle, BudgetAsk, BudgetUse};

use super::{BudgetStore, Carried, Counter};
use crate::hooks::{BoxFuture, PinRead};
use crate::store::{KeySpace, Redis, StoreError};

/// KEYS: one counter per ask, then maybe a session's pin. ARGV: the number of counters, per ask
/// `reserve limit refuses expire_ms`, then for a pin `now ttl retain`. Returns `{used}`, each
/// counter's usage before the request as strings (Lua numbers would be truncated to integers),
/// or `{used, pin}` with the pin's hash as it was before `pin_touch` touched it; a refused
/// request does not touch the pin (the session is not asked about it).
const RESERVE: &str = concat!(
    crate::session::store::redis::pin_touch_lua!(),
    r"
local n = tonumber(ARGV[1])
local used = {}
local over = {}
local acting = 0
for i = 1, n do
  local b = 1 + (i - 1) * 4
  local reserve = tonumber(ARGV[b + 1])
  local limit = tonumber(ARGV[b + 2])
  local u = tonumber(redis.call('GET', KEYS[i]) or '0')
  used[i] = u
  local o
  if reserve > 0 then o = (u + reserve > limit) else o = (u >= limit) end
  over[i] = o
  if o and acting == 0 then acting = i end
end
local refused = acting > 0 and ARGV[1 + (acting - 1) * 4 + 3] == '1'
if not refused then
  for i = 1, n do
    local b = 1 + (i - 1) * 4
    local reserve = tonumber(ARGV[b + 1])
    if (not over[i]) and reserve > 0 then
      redis.call('INCRBYFLOAT', KEYS[i], ARGV[b + 1])
      redis.call('PEXPIRE', KEYS[i], ARGV[b + 4])
    end
  end
end
local out = {}
for i = 1, n do out[i] = tostring(used[i]) end
if #KEYS > n and not refused then
  local p = 1 + n * 4
  return {out, pin_touch(KEYS[n + 1], ARGV[p + 1], ARGV[p + 2], ARGV[p + 3])}
end
return {out}
"
);

/// KEYS: counters to give back to; ARGV: the amount of each.
const RELEASE: &str = r"
for i = 1, #KEYS do
  redis.call('INCRBYFLOAT', KEYS[i], -tonumber(ARGV[i]))
end
return 1
";

const CHARGE: &str = r"
redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
";

/// Budgets in a Redis shared by every replica.
pub struct RedisBudgets {
    conn: Redis,
    reserve: Script,
    release: Script,
    charge: Script,
    /// The session store's read-and-touch, for a pin read that goes beside the reservation.
    pin_touch: Script,
    /// Set once the server refused a script over a counter and a pin (a cluster node named as
    /// one server): pins are then read apart.
    apart: AtomicBool,
}

impl RedisBudgets {
    /// Budgets on `conn`, a link shared through [`crate::store::Links`].
    pub fn on(conn: Redis) -> RedisBudgets {
        // Registered on the link: a node that lacks a script (a promoted replica) is sent
        // its body.
        RedisBudgets {
            reserve: conn.script(RESERVE),
            release: conn.script(RELEASE),
            charge: conn.script(CHARGE),
            pin_touch: conn.script(crate::session::store::redis::GET_TOUCH),
            apart: AtomicBool::new(false),
            conn,
        }
    }

    /// Runs the reservation script over the asks at `indices` (all in one slot), each refusing
    /// only when `refusing` and the ask does, and reading `pin` too when given (a store where
    /// one script may touch any key); answers each one's usage before it, and the pin's hash
    /// when it was read.
    async fn reserve_in_slot(
        &self,
        asks: &[(BudgetAsk, Counter)],
        indices: &[usize],
        refusing: bool,
        now_ms: u64,
        pin: Option<&PinRead>,
    ) -> Result<(Vec<f64>, Option<Vec<String>>), StoreError> {
        let mine: Vec<&(BudgetAsk, Counter)> =
            indices.iter().filter_map(|&i| asks.get(i)).collect();
        let counters = mine.len();
        let mut invocation = self.reserve.prepare_invoke();
        invocation.arg(counters);
        for (ask, counter) in mine {
            invocation
                .key(key(counter, now_ms))
                .arg(ask.reserve)
                .arg(ask.limit)
                .arg(u8::from(refusing && ask.refuses))
                .arg(expire_ms(counter, now_ms));
        }
        if let Some(pin) = pin {
            invocation
                .key(&pin.key)
                .arg(pin.now_ms)
                .arg(pin.ttl_ms)
                .arg(pin.retain_ms);
        }
        let mut conn = self.conn.connection();
        let mut answer: Vec<Vec<String>> = self
            .conn
            .bounded("reserve", invocation.invoke_async(&mut conn))
            .await?;
        let read = (answer.len() > 1).then(|| answer.swap_remove(1));
        let used = answer.pop().unwrap_or_default();
        if used.len() != counters {
            return Err(StoreError::Corrupt(format!(
                "{} budget counters answered for {counters} asked",
                used.len(),
            )));
        }
        let used = used.iter().map(|u| number(u)).collect::<Result<_, _>>()?;
        Ok((used, read))
    }

    /// The session store's read-and-touch of `pin`, as a call of its own.
    async fn read_pin(&self, pin: &PinRead) -> Result<Vec<String>, StoreError> {
        let mut conn = self.conn.connection();
        let mut call = self.pin_touch.key(&pin.key);
        call.arg(pin.now_ms).arg(pin.ttl_ms).arg(pin.retain_ms);
        self.conn.bounded("get", call.invoke_async(&mut conn)).await
    }

    /// Reserves `asks`, carrying `pin` in the first script where the store allows.
    async fn reserve_reading(
        &self,
        asks: &[(BudgetAsk, Counter)],
        now_ms: u64,
        pin: Option<&PinRead>,
    ) -> Result<(Vec<BudgetUse>, Option<Vec<String>>), StoreError> {
        if asks.is_empty() {
            return Ok((Vec::new(), None));
        }
        let groups = Groups::of(asks);
        let (used, read) = match groups.0.as_slice() {
            [one] => self.reserve_in_slot(asks, one, true, now_ms, pin).await?,
            _ => {
                self.reserve_across_slots(asks, &groups, now_ms, pin)
                    .await?
            }
        };
        let uses = asks
            .iter()
            .zip(used)
            .map(|((ask, counter), used)| BudgetUse {
                budget: ask.budget,
                used,
                limit: ask.limit,
                exceeded: src_compiler::procedure::budget::exceeded(ask, used),
                retry_after_s: counter.retry_after_s(now_ms),
            })
            .collect();
        Ok((uses, read))
    }

    /// Gives back one reservation of each ask at `indices` (all in one slot).
    async fn release(
        &self,
        asks: &[(BudgetAsk, Counter)],
        indices: &[usize],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        if indices.is_empty() {
            return Ok(());
        }
        let mut invocation = self.release.prepare_invoke();
        for &i in indices {
            if let Some((ask, counter)) = asks.get(i) {
                invocation.key(key(counter, now_ms)).arg(ask.reserve);
            }
        }
        let mut conn = self.conn.connection();
        let _: i64 = self
            .conn
            .bounded("release", invocation.invoke_async(&mut conn))
            .await?;
        Ok(())
    }

    /// Reserves asks whose counters span several slots (see the module documentation).
    /// `pin` is read with the first value's script.
    async fn reserve_across_slots(
        &self,
        asks: &[(BudgetAsk, Counter)],
        groups: &Groups,
        now_ms: u64,
        mut pin: Option<&PinRead>,
    ) -> Result<(Vec<f64>, Option<Vec<String>>), StoreError> {
        let all: Vec<BudgetAsk> = asks.iter().map(|(a, _)| a.clone()).collect();
        let mut used = vec![0.0; asks.len()];
        let mut read = None;
        // What each group reserved on its own, as indices into `asks`.
        let mut reserved: Vec<Vec<usize>> = Vec::with_capacity(groups.0.len());
        for group in &groups.0 {
            let found = match self
                .reserve_in_slot(asks, group, true, now_ms, pin.take())
                .await
            {
                Ok((found, pin_read)) => {
                    read = read.or(pin_read);
                    found
                }
                Err(err) => {
                    // Nothing of a failed request stays reserved (as far as the store lets).
                    for indices in &reserved {
                        let _ = self.release(asks, indices, now_ms).await;
                    }
                    return Err(err);
                }
            };
            let mine: Vec<BudgetAsk> = group.iter().map(|&i| all[i].clone()).collect();
            for (&i, u) in group.iter().zip(&found) {
                used[i] = *u;
            }
            let local = settle(&mine, &found);
            reserved.push(local.reserve.iter().map(|&j| group[j]).collect());
        }
        let global = settle(&all, &used);
        for (group, did) in groups.0.iter().zip(&reserved) {
            let give_back: Vec<usize> = did
                .iter()
                .copied()
                .filter(|i| !global.reserve.contains(i))
                .collect();
            self.release(asks, &give_back, now_ms).await?;
            let missing: Vec<usize> = group
                .iter()
                .copied()
                .filter(|i| global.reserve.contains(i) && !did.contains(i))
                .collect();
            if !missing.is_empty() {
                // Checked against the limits again: a unit taken meanwhile is not overdrawn.
                self.reserve_in_slot(asks, &missing, false, now_ms, None)
                    .await?;
            }
        }
        Ok((used, read))
    }
}

/// A request's asks grouped by `per` value (their hash tag, hence their slot), each group in
/// declaration order, the groups in the order of their first ask.
struct Groups(Vec<Vec<usize>>);

impl Groups {
    fn of(asks: &[(BudgetAsk, Counter)]) -> Groups {
        let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, (_, counter)) in asks.iter().enumerate() {
            match groups.iter_mut().find(|(per, _)| *per == counter.per) {
                Some((_, members)) => members.push(i),
                None => groups.push((&counter.per, vec![i])),
            }
        }
        Groups(groups.into_iter().map(|(_, members)| members).collect())
    }
}

/// Whether a refusal is Redis Cluster's `CROSSSLOT` (as the client names it: `CrossSlot`).
fn cross_slot(why: &str) -> bool {
    why.to_ascii_lowercase().contains("crossslot")
}

/// The counter's key in the window holding `now_ms`.
fn key(counter: &Counter, now_ms: u64) -> String {
    KeySpace::budget(&counter.per, &counter.budget, counter.window_start(now_ms))
}

/// Kept until a window after the window ends, so a late charge still finds it.
fn expire_ms(counter: &Counter, now_ms: u64) -> u64 {
    counter.window_start(now_ms) + 2 * counter.window_ms - now_ms
}

fn number(text: &str) -> Result<f64, StoreError> {
    text.parse()
        .map_err(|_| StoreError::Corrupt(format!("a budget counter reads `{text}`")))
}

impl BudgetStore for RedisBudgets {
    fn reserve<'a>(
        &'a self,
        asks: &'a [(BudgetAsk, Counter)],
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Vec<BudgetUse>, StoreError>> {
        Box::pin(async move { Ok(self.reserve_reading(asks, now_ms, None).await?.0) })
    }

    fn reserve_carrying<'a>(
        &'a self,
        asks: &'a [(BudgetAsk, Counter)],
        now_ms: u64,
        pin: &'a PinRead,
    ) -> BoxFuture<'a, Result<Carried, StoreError>> {
        Box::pin(async move {
            if self.conn.is_cluster() {
                // The pin's hash tag is its session's: no script may touch it with a counter.
                let (reserved, read) =
                    tokio::join!(self.reserve_reading(asks, now_ms, None), self.read_pin(pin));
                let uses = reserved?.0;
                // As the script does: a refused request has no pin to hand on (this read
                // touched it all the same).
                let acting = uses.iter().position(|u| u.exceeded);
                let refused = acting
                    .and_then(|i| asks.get(i))
                    .is_some_and(|(a, _)| a.refuses);
                return Ok(Carried {
                    uses,
                    pin: read.ok().filter(|_| !refused),
                });
            }
            if !self.apart.load(Ordering::Relaxed) {
                match self.reserve_reading(asks, now_ms, Some(pin)).await {
                    // A cluster node reached as one server (`redis(..)` naming it): the script
                    // was refused before it ran, so nothing was reserved; from now on the pin
                    // is left to the session layer.
                    Err(StoreError::Rejected(why)) if cross_slot(&why) => {
                        self.apart.store(true, Ordering::Relaxed);
                    }
                    reserved => {
                        let (uses, pin) = reserved?;
                        return Ok(Carried { uses, pin });
                    }
                }
            }
            let (uses, _) = self.reserve_reading(asks, now_ms, None).await?;
            Ok(Carried { uses, pin: None })
        })
    }

    fn charge<'a>(
        &'a self,
        counter: &'a Counter,
        amount: f64,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let mut invocation = self.charge.prepare_invoke();
            invocation
                .key(key(counter, now_ms))
                .arg(amount)
                .arg(expire_ms(counter, now_ms));
            let _: i64 = self
                .conn
                .bounded("charge", invocation.invoke_async(&mut conn))
                .await?;
            Ok(())
        })
    }

    fn used<'a>(
        &'a self,
        counter: &'a Counter,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<f64, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let text: Option<String> = self
                .conn
                .bounded(
                    "get",
                    redis::cmd("GET")
                        .arg(key(counter, now_ms))
                        .query_async(&mut conn),
                )
                .await?;
            text.as_deref().map_or(Ok(0.0), number)
        })
    }
}
