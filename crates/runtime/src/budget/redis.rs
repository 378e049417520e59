//! Budgets in the session's Redis, shared by every replica: a reservation is one Lua script
//! (one round trip, atomic), so N concurrent requests over any number of replicas admit exactly
//! the limit. The script applies the compiler's rule
//! ([`settle`](src_compiler::procedure::budget::settle)) as written there; the contract tests
//! run the same cases against this store and the memory one.
//!
//! Counters are named by [`KeySpace::budget`] and expire a window after their window ends.

use redis::Script;
use src_compiler::procedure::budget::{BudgetAsk, BudgetUse};

use super::{BudgetStore, Counter};
use crate::hooks::BoxFuture;
use crate::store::{KeySpace, Redis, StoreError};

/// KEYS: one counter per ask. ARGV: per ask, `reserve limit refuses expire_ms`. Returns each
/// counter's usage before the request, as strings (Lua numbers would be truncated to integers).
const RESERVE: &str = r"
local n = #KEYS
local used = {}
local over = {}
local acting = 0
for i = 1, n do
  local b = (i - 1) * 4
  local reserve = tonumber(ARGV[b + 1])
  local limit = tonumber(ARGV[b + 2])
  local u = tonumber(redis.call('GET', KEYS[i]) or '0')
  used[i] = u
  local o
  if reserve > 0 then o = (u + reserve > limit) else o = (u >= limit) end
  over[i] = o
  if o and acting == 0 then acting = i end
end
local refused = acting > 0 and ARGV[(acting - 1) * 4 + 3] == '1'
if not refused then
  for i = 1, n do
    local b = (i - 1) * 4
    local reserve = tonumber(ARGV[b + 1])
    if (not over[i]) and reserve > 0 then
      redis.call('INCRBYFLOAT', KEYS[i], ARGV[b + 1])
      redis.call('PEXPIRE', KEYS[i], ARGV[b + 4])
    end
  end
end
local out = {}
for i = 1, n do out[i] = tostring(used[i]) end
return out
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
    charge: Script,
}

impl RedisBudgets {
    /// Budgets on `conn`, a link shared through [`crate::store::Links`].
    pub fn on(conn: Redis) -> RedisBudgets {
        RedisBudgets {
            conn,
            reserve: Script::new(RESERVE),
            charge: Script::new(CHARGE),
        }
    }
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
        Box::pin(async move {
            if asks.is_empty() {
                return Ok(Vec::new());
            }
            let mut invocation = self.reserve.prepare_invoke();
            for (ask, counter) in asks {
                invocation
                    .key(key(counter, now_ms))
                    .arg(ask.reserve)
                    .arg(ask.limit)
                    .arg(u8::from(ask.refuses))
                    .arg(expire_ms(counter, now_ms));
            }
            let mut conn = self.conn.connection();
            let used: Vec<String> = self
                .conn
                .bounded("reserve", invocation.invoke_async(&mut conn))
                .await?;
            if used.len() != asks.len() {
                return Err(StoreError::Corrupt(format!(
                    "{} budget counters answered for {} asked",
                    used.len(),
                    asks.len()
                )));
            }
            asks.iter()
                .zip(used)
                .map(|((ask, counter), used)| {
                    let used = number(&used)?;
                    Ok(BudgetUse {
                        budget: ask.budget,
                        used,
                        limit: ask.limit,
                        exceeded: src_compiler::procedure::budget::exceeded(ask, used),
                        retry_after_s: counter.retry_after_s(now_ms),
                    })
                })
                .collect()
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
