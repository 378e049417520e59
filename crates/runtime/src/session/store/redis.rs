//! The shared store (`store = redis("redis://…")`): pins every router replica sees.
//!
//! Each session's keys — its pin hash (`m` model, `r` route, empty for none, `t` turns, `c`
//! created ms, `s` last seen ms, `v` version, `h` switch history as JSON), its outcome windows
//! (`pass`/`fail`, newest first, trimmed to the window) and its idempotency keys — are named by
//! [`KeySpace`] and share the session's Redis Cluster hash tag, so every script below touches one
//! slot. Every step is one Lua script or one command, hence one round trip and atomic: the hot
//! path reads the pin and slides it in the same script; the first pin is created only if absent (the
//! hash analogue of `SET NX PX`); a switch is a compare-and-set on the version it read. The
//! connection is multiplexed and reconnects by itself, and every call has a timeout, so a dead
//! Redis costs a request at most that long and the store recovers when Redis returns.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use redis::{RedisError, Script};

use crate::hooks::BoxFuture;
use crate::session::identity::Identity;
use crate::session::pin::{Pin, SwitchRecord};
use crate::session::store::{
    retain_ms, Cas, OutcomeKey, OutcomeStats, Put, Recorded, SessionStore, StoreError, Verdict,
    IDEMPOTENCY_MS, OUTCOME_WINDOW,
};
use crate::store::{KeySpace, Redis};

/// Default bound on every Redis call.
pub const DEFAULT_TIMEOUT: Duration = crate::store::DEFAULT_TIMEOUT;

/// The hot path's read-and-touch as a Lua function, `pin_touch(key, now, ttl, retain)`: the pin
/// hash as it was, and a live one (seen within `ttl`) counts a turn, is seen `now` and is kept
/// `retain` more milliseconds. A macro, so that the budget store's reservation script, which
/// carries a pin read, runs the very same text.
macro_rules! pin_touch_lua {
    () => {
        r"
local function pin_touch(key, now_text, ttl, retain)
  local h = redis.call('HGETALL', key)
  if #h == 0 then return h end
  local seen = tonumber(redis.call('HGET', key, 's'))
  local now = tonumber(now_text)
  if seen ~= nil and now < seen + tonumber(ttl) then
    redis.call('HINCRBY', key, 't', 1)
    if now > seen then redis.call('HSET', key, 's', now_text) end
    redis.call('PEXPIRE', key, retain)
  end
  return h
end
"
    };
}
pub(crate) use pin_touch_lua;

/// KEYS[1] the pin; ARGV: now, ttl, retention.
pub(crate) const GET_TOUCH: &str = concat!(
    pin_touch_lua!(),
    "return pin_touch(KEYS[1], ARGV[1], ARGV[2], ARGV[3])\n"
);

const TOUCH: &str = r"
local seen = tonumber(redis.call('HGET', KEYS[1], 's'))
local now = tonumber(ARGV[1])
if seen == nil or now >= seen + tonumber(ARGV[2]) then return 0 end
redis.call('HINCRBY', KEYS[1], 't', 1)
if now > seen then redis.call('HSET', KEYS[1], 's', ARGV[1]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
";

const PUT_IF_ABSENT: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HGETALL', KEYS[1]) end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {}
";

/// ARGV: the version read, the retention, the turns read, then the new pin's fields. Turns
/// counted by touches since the read are added back; the last-seen time never goes back.
const COMPARE_AND_SET: &str = r"
local v = redis.call('HGET', KEYS[1], 'v')
if v ~= ARGV[1] then return {0, redis.call('HGETALL', KEYS[1])} end
local extra = (tonumber(redis.call('HGET', KEYS[1], 't')) or 0) - tonumber(ARGV[3])
local seen = tonumber(redis.call('HGET', KEYS[1], 's')) or 0
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
if extra > 0 then redis.call('HINCRBY', KEYS[1], 't', extra) end
if seen > tonumber(redis.call('HGET', KEYS[1], 's')) then redis.call('HSET', KEYS[1], 's', seen) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, {}}
";

/// KEYS[1] the window; KEYS[2], when given, the idempotency key (both in the session's slot).
const RECORD: &str = r"
if #KEYS == 2 then
  if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[4]) then return 0 end
end
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
";

/// Pins in a Redis server shared by every replica.
pub struct RedisStore {
    conn: Redis,
    get_touch: Script,
    touch: Script,
    put_if_absent: Script,
    compare_and_set: Script,
    record: Script,
}

impl RedisStore {
    /// A store for `url`; connects lazily (and reconnects by itself), so a Redis that is down
    /// at startup only fails the calls made while it is down. Must be called inside a Tokio
    /// runtime.
    pub fn connect(url: &str, timeout: Duration) -> Result<RedisStore, StoreError> {
        Ok(RedisStore::on(Redis::connect(url, timeout)?))
    }

    /// A store on `conn`, a link shared through [`crate::store::Links`].
    pub fn on(conn: Redis) -> RedisStore {
        RedisStore {
            get_touch: conn.script(GET_TOUCH),
            touch: conn.script(TOUCH),
            put_if_absent: conn.script(PUT_IF_ABSENT),
            compare_and_set: conn.script(COMPARE_AND_SET),
            record: conn.script(RECORD),
            conn,
        }
    }

    /// Runs one store step under the timeout.
    async fn bounded<T>(
        &self,
        op: &'static str,
        step: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        self.conn.bounded(op, step).await
    }
}

/// Keys `SCAN` is asked for per step, and the most steps one listing takes on each node (the
/// server, or each master of a cluster): the console's listing costs Redis a bounded amount of
/// work however many pins it holds.
const SCAN_COUNT: usize = 200;
const SCAN_STEPS: usize = 20;

/// The identity a pin key names.
fn identity_of(key: &str) -> Option<Identity> {
    let (tenant, id) = KeySpace::pin_identity(key)?;
    Some(Identity { tenant, id })
}

pub(crate) fn pin_key(key: &Identity) -> String {
    KeySpace::pin(&key.tenant, &key.id)
}

fn outcome_key(key: &OutcomeKey) -> String {
    KeySpace::outcomes(&key.session.tenant, &key.session.id, &key.model)
}

fn idempotency_key(session: &Identity, key: &str) -> String {
    KeySpace::idempotency(&session.tenant, &session.id, key)
}

/// The hash fields of a pin, in `HSET` argument order.
fn fields(pin: &Pin) -> Result<Vec<String>, StoreError> {
    let history = serde_json::to_string(&pin.history)
        .map_err(|e| StoreError::Corrupt(format!("cannot encode a switch history: {e}")))?;
    Ok(vec![
        "m".into(),
        pin.model.clone(),
        "r".into(),
        pin.route.clone().unwrap_or_default(),
        "t".into(),
        pin.turns.to_string(),
        "c".into(),
        pin.created_ms.to_string(),
        "s".into(),
        pin.seen_ms.to_string(),
        "v".into(),
        pin.version.to_string(),
        "h".into(),
        history,
    ])
}

/// The pin a read-and-touch at `now_ms` leaves, from the hash it answered (the pin as it was):
/// the same touch applied, a stale pin untouched.
pub(crate) fn read_touched(
    flat: Vec<String>,
    now_ms: u64,
    ttl_ms: u64,
) -> Result<Option<Pin>, StoreError> {
    Ok(parse(flat)?.map(|pin| {
        if pin.is_stale(now_ms, ttl_ms) {
            pin
        } else {
            pin.touched(now_ms)
        }
    }))
}

/// A pin from `HGETALL`'s flat field/value list; `None` for an empty (absent) hash.
fn parse(flat: Vec<String>) -> Result<Option<Pin>, StoreError> {
    if flat.is_empty() {
        return Ok(None);
    }
    let mut map: HashMap<String, String> = HashMap::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        map.insert(k, v);
    }
    let text = |name: &str| {
        map.get(name)
            .cloned()
            .ok_or_else(|| StoreError::Corrupt(format!("pin without field `{name}`")))
    };
    let number = |name: &str| -> Result<u64, StoreError> {
        text(name)?
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("pin field `{name}` is not a number")))
    };
    let route = text("r")?;
    let history: Vec<SwitchRecord> = match map.get("h") {
        Some(h) => {
            serde_json::from_str(h).map_err(|e| StoreError::Corrupt(format!("pin history: {e}")))?
        }
        None => Vec::new(),
    };
    Ok(Some(Pin {
        model: text("m")?,
        route: (!route.is_empty()).then_some(route),
        turns: number("t")?,
        created_ms: number("c")?,
        seen_ms: number("s")?,
        history,
        version: number("v")?,
    }))
}

impl SessionStore for RedisStore {
    fn list<'a>(
        &'a self,
        limit: usize,
        _now_ms: u64,
    ) -> BoxFuture<'a, Result<Vec<(Identity, Pin)>, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let mut keys: Vec<String> = Vec::new();
            // A cluster's masters each hold part of the pins and are walked one by one.
            let nodes = self.bounded("scan", conn.scan_nodes()).await?;
            for node in &nodes {
                let mut cursor: u64 = 0;
                for _ in 0..SCAN_STEPS {
                    let (next, found) = self
                        .bounded(
                            "scan",
                            conn.scan_step(node, cursor, KeySpace::pin_pattern(), SCAN_COUNT),
                        )
                        .await?;
                    keys.extend(found);
                    cursor = next;
                    if cursor == 0 || keys.len() >= limit {
                        break;
                    }
                }
                if keys.len() >= limit {
                    break;
                }
            }
            keys.sort();
            keys.dedup();
            keys.truncate(limit);
            let mut listed = Vec::with_capacity(keys.len());
            for key in keys {
                let Some(identity) = identity_of(&key) else {
                    continue;
                };
                let flat: Vec<String> = self
                    .bounded(
                        "get",
                        redis::cmd("HGETALL").arg(&key).query_async(&mut conn),
                    )
                    .await?;
                // A pin that expired between the scan and the read is simply not listed.
                if let Some(pin) = parse(flat)? {
                    listed.push((identity, pin));
                }
            }
            Ok(listed)
        })
    }

    fn kind(&self) -> &'static str {
        "redis"
    }

    fn get<'a>(
        &'a self,
        key: &'a Identity,
        _now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<Pin>, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let flat: Vec<String> = self
                .bounded(
                    "get",
                    redis::cmd("HGETALL")
                        .arg(pin_key(key))
                        .query_async(&mut conn),
                )
                .await?;
            parse(flat)
        })
    }

    fn touch<'a>(
        &'a self,
        key: &'a Identity,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let mut call = self.touch.key(pin_key(key));
            call.arg(now_ms).arg(ttl_ms).arg(retain_ms(ttl_ms));
            let touched: i64 = self.bounded("touch", call.invoke_async(&mut conn)).await?;
            Ok(touched == 1)
        })
    }

    fn get_and_touch<'a>(
        &'a self,
        key: &'a Identity,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Option<Pin>, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let mut call = self.get_touch.key(pin_key(key));
            call.arg(now_ms).arg(ttl_ms).arg(retain_ms(ttl_ms));
            let flat: Vec<String> = self.bounded("get", call.invoke_async(&mut conn)).await?;
            read_touched(flat, now_ms, ttl_ms)
        })
    }

    fn put_if_absent<'a>(
        &'a self,
        key: &'a Identity,
        pin: &'a Pin,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Put, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let mut call = self.put_if_absent.key(pin_key(key));
            call.arg(retain_ms(ttl_ms)).arg(fields(pin)?);
            let flat: Vec<String> = self.bounded("put", call.invoke_async(&mut conn)).await?;
            Ok(match parse(flat)? {
                None => Put::Stored,
                Some(existing) => Put::Exists(existing),
            })
        })
    }

    fn compare_and_set<'a>(
        &'a self,
        key: &'a Identity,
        read: &'a Pin,
        pin: &'a Pin,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Cas, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let mut call = self.compare_and_set.key(pin_key(key));
            call.arg(read.version)
                .arg(retain_ms(ttl_ms))
                .arg(read.turns)
                .arg(fields(pin)?);
            let (stored, current): (i64, Vec<String>) =
                self.bounded("cas", call.invoke_async(&mut conn)).await?;
            Ok(if stored == 1 {
                Cas::Stored
            } else {
                Cas::Conflict(parse(current)?)
            })
        })
    }

    fn record_outcome<'a>(
        &'a self,
        key: &'a OutcomeKey,
        verdict: Verdict,
        idempotency: Option<&'a str>,
        _now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Recorded, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let mut call = self.record.key(outcome_key(key));
            if let Some(idem) = idempotency {
                call.key(idempotency_key(&key.session, idem));
            }
            call.arg(verdict_word(verdict))
                .arg(OUTCOME_WINDOW)
                .arg(retain_ms(ttl_ms))
                .arg(IDEMPOTENCY_MS);
            let recorded: i64 = self.bounded("record", call.invoke_async(&mut conn)).await?;
            Ok(if recorded == 1 {
                Recorded::New
            } else {
                Recorded::Duplicate
            })
        })
    }

    fn outcomes<'a>(
        &'a self,
        key: &'a OutcomeKey,
        _now_ms: u64,
    ) -> BoxFuture<'a, Result<OutcomeStats, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let words: Vec<String> = self
                .bounded(
                    "outcomes",
                    redis::cmd("LRANGE")
                        .arg(outcome_key(key))
                        .arg(0)
                        .arg(OUTCOME_WINDOW - 1)
                        .query_async(&mut conn),
                )
                .await?;
            let verdicts = words
                .iter()
                .map(|w| match w.as_str() {
                    "pass" => Ok(Verdict::Pass),
                    "fail" => Ok(Verdict::Fail),
                    other => Err(StoreError::Corrupt(format!("outcome `{other}`"))),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(OutcomeStats::of(verdicts))
        })
    }
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Fail => "fail",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(tenant: &str, id: &str) -> Identity {
        Identity {
            tenant: tenant.into(),
            id: id.into(),
        }
    }

    #[test]
    fn key_parts_cannot_spell_another_tenants_key() {
        assert_ne!(pin_key(&id("a:b", "c")), pin_key(&id("a", "b:c")));
        assert_ne!(pin_key(&id("a%3Ab", "c")), pin_key(&id("a:b", "c")));
        assert_eq!(pin_key(&id("t", "s-1")), "sr:v1:{t:s-1}:pin");
        assert_eq!(identity_of(&pin_key(&id("a:b", "c"))), Some(id("a:b", "c")));
    }

    #[test]
    fn pins_survive_the_hash_encoding() {
        let pin = Pin::first("strong", Some("coding"), 42)
            .touched(50)
            .switched("small", None, 60, Some("tool call in flight"));
        let flat = fields(&pin).unwrap_or_default();
        assert_eq!(parse(flat), Ok(Some(pin)));
        assert_eq!(parse(Vec::new()), Ok(None));
    }

    #[test]
    fn unreadable_pins_are_an_error_not_a_panic() {
        let flat = vec![
            "m".to_owned(),
            "x".to_owned(),
            "t".to_owned(),
            "NaN".to_owned(),
        ];
        assert!(matches!(parse(flat), Err(StoreError::Corrupt(_))));
    }
}
