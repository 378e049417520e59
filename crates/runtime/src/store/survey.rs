//! What a Redis store is made of, asked of its servers: for one server its role; for a Redis
//! Cluster its masters, their replicas and how many of the 16384 slots they cover; for a
//! Sentinel set the primary the sentinels name and its replicas. `src doctor` prints it, so an
//! operator sees the topology the router will use before serving with it.
//!
//! Each question goes to one node at a time (the first seed or sentinel that answers) on a
//! connection of its own, bounded by the timeout; nothing here is on a request path.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{Client, RedisError};
use src_compiler::hir::{RedisTarget, RedisUrl};

use crate::store::error::StoreError;
use crate::store::topology::redact;

/// Slots of a Redis Cluster.
pub const CLUSTER_SLOTS: u32 = 16384;

/// The topology found behind a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survey {
    /// `redis`, `redis_cluster` or `redis_sentinel`.
    pub kind: &'static str,
    /// The node that answered (a seed, a sentinel, or the server), password hidden.
    pub asked: String,
    /// Masters (`HOST:PORT`): the server, each cluster master, or the Sentinel primary.
    pub masters: Vec<String>,
    /// Replicas (`HOST:PORT`) in working order.
    pub replicas: Vec<String>,
    /// Nodes a cluster or the sentinels mark as failed or down.
    pub failed: Vec<String>,
    /// Cluster slots served by a live master (`None` outside a cluster).
    pub slots: Option<u32>,
}

impl Survey {
    /// Whether the store can serve every key: a master is known and, in a cluster, every slot
    /// has one.
    pub fn serves_every_key(&self) -> bool {
        !self.masters.is_empty() && self.slots.is_none_or(|s| s == CLUSTER_SLOTS)
    }

    /// One line for people: `3 masters, 3 replicas, 16384/16384 slots`.
    pub fn summary(&self) -> String {
        let mut line = format!(
            "{}: {} master(s), {} replica(s)",
            self.kind,
            self.masters.len(),
            self.replicas.len()
        );
        if let Some(slots) = self.slots {
            line.push_str(&format!(", {slots}/{CLUSTER_SLOTS} slots covered"));
        }
        if !self.failed.is_empty() {
            line.push_str(&format!(", failed: {}", self.failed.join(" ")));
        }
        line.push_str(&format!(
            " (masters {}; asked {})",
            self.masters.join(" "),
            self.asked
        ));
        line
    }
}

/// Asks `target`'s servers what it is made of, each question bounded by `timeout`.
pub async fn survey(target: &RedisTarget, timeout: Duration) -> Result<Survey, StoreError> {
    let mut last = StoreError::Unavailable("no node answered".into());
    for url in target.urls() {
        let answered = match target {
            RedisTarget::Single(_) => single(url, timeout).await,
            RedisTarget::Cluster(_) => cluster(url, timeout).await,
            RedisTarget::Sentinel { master, .. } => sentinel(url, master, timeout).await,
        };
        match answered {
            Ok(survey) => return Ok(survey),
            Err(err) => last = err,
        }
    }
    Err(last)
}

async fn connect(url: &RedisUrl, timeout: Duration) -> Result<MultiplexedConnection, StoreError> {
    let client = Client::open(url.as_str()).map_err(|e| StoreError::Config(e.to_string()))?;
    bounded(timeout, client.get_multiplexed_async_connection()).await
}

async fn bounded<T>(
    timeout: Duration,
    step: impl std::future::Future<Output = Result<T, RedisError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, step).await {
        Err(_) => Err(StoreError::Timeout {
            op: "survey",
            after: timeout,
        }),
        Ok(Err(e)) => Err(StoreError::Unavailable(e.to_string())),
        Ok(Ok(v)) => Ok(v),
    }
}

async fn single(url: &RedisUrl, timeout: Duration) -> Result<Survey, StoreError> {
    let mut conn = connect(url, timeout).await?;
    let info: String = bounded(
        timeout,
        redis::cmd("INFO").arg("replication").query_async(&mut conn),
    )
    .await?;
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let me = redact(url.as_str());
    let replicas = info
        .lines()
        .filter(|l| l.starts_with("slave") && l.contains("state=online"))
        .filter_map(|l| {
            let ip = l.split("ip=").nth(1)?.split(',').next()?;
            let port = l.split("port=").nth(1)?.split(',').next()?;
            Some(format!("{ip}:{port}"))
        })
        .collect();
    let masters = match field("role") {
        Some("master") => vec![me.clone()],
        _ => Vec::new(),
    };
    Ok(Survey {
        kind: "redis",
        asked: me,
        masters,
        replicas,
        failed: Vec::new(),
        slots: None,
    })
}

async fn cluster(url: &RedisUrl, timeout: Duration) -> Result<Survey, StoreError> {
    let mut conn = connect(url, timeout).await?;
    let nodes: String = bounded(
        timeout,
        redis::cmd("CLUSTER").arg("NODES").query_async(&mut conn),
    )
    .await?;
    let mut survey = Survey {
        kind: "redis_cluster",
        asked: redact(url.as_str()),
        masters: Vec::new(),
        replicas: Vec::new(),
        failed: Vec::new(),
        slots: Some(0),
    };
    let mut covered = 0u32;
    for line in nodes.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, addr, flags, _, _, _, _, link, slots @ ..] = fields.as_slice() else {
            continue;
        };
        let addr = addr.split('@').next().unwrap_or(addr).to_owned();
        if flags.contains("fail") || *link != "connected" && !flags.contains("myself") {
            survey.failed.push(addr);
            continue;
        }
        if flags.contains("master") {
            survey.masters.push(addr);
            covered += slots.iter().map(|r| slot_count(r)).sum::<u32>();
        } else if flags.contains("slave") {
            survey.replicas.push(addr);
        }
    }
    survey.masters.sort();
    survey.replicas.sort();
    survey.slots = Some(covered);
    Ok(survey)
}

/// Slots in one `CLUSTER NODES` range (`0-5460`, `5461`); migrating entries (`[...]`) count 0.
fn slot_count(range: &str) -> u32 {
    if range.starts_with('[') {
        return 0;
    }
    let (a, b) = range.split_once('-').unwrap_or((range, range));
    match (a.parse::<u32>(), b.parse::<u32>()) {
        (Ok(a), Ok(b)) if b >= a => b - a + 1,
        _ => 0,
    }
}

async fn sentinel(url: &RedisUrl, master: &str, timeout: Duration) -> Result<Survey, StoreError> {
    let mut conn = connect(url, timeout).await?;
    let primary: Option<(String, String)> = bounded(
        timeout,
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(master)
            .query_async(&mut conn),
    )
    .await?;
    let Some((host, port)) = primary else {
        return Err(StoreError::Rejected(format!(
            "the sentinel at {} knows no master `{master}`",
            redact(url.as_str())
        )));
    };
    let replicas: Vec<Vec<String>> = bounded(
        timeout,
        redis::cmd("SENTINEL")
            .arg("REPLICAS")
            .arg(master)
            .query_async(&mut conn),
    )
    .await?;
    let mut survey = Survey {
        kind: "redis_sentinel",
        asked: redact(url.as_str()),
        masters: vec![format!("{host}:{port}")],
        replicas: Vec::new(),
        failed: Vec::new(),
        slots: None,
    };
    for replica in replicas {
        let get = |key: &str| {
            replica
                .chunks(2)
                .find(|kv| kv.first().is_some_and(|k| k == key))
                .and_then(|kv| kv.get(1))
                .map(String::as_str)
                .unwrap_or_default()
        };
        let addr = format!("{}:{}", get("ip"), get("port"));
        let flags = get("flags");
        if flags.contains("down") || flags.contains("disconnected") {
            survey.failed.push(addr);
        } else {
            survey.replicas.push(addr);
        }
    }
    Ok(survey)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_ranges_are_counted() {
        assert_eq!(slot_count("0-5460"), 5461);
        assert_eq!(slot_count("5461"), 1);
        assert_eq!(slot_count("[93->-abc]"), 0);
        assert_eq!(slot_count("x"), 0);
    }
}
