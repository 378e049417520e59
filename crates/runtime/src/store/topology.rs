//! The connections under a store link, for each Redis topology a policy can
//! name ([`RedisTarget`]): one server, a Redis Cluster, or a primary watched by Sentinel.
//!
//! - **One server**: a lazy [`ConnectionManager`] per serving shard, as before.
//! - **Cluster**: the `redis` crate's cluster client (`cluster-async`), one pending connection
//!   per shard: it discovers the slots from the seed nodes on its first command, sends each
//!   command straight to the master that owns its key's slot (one round trip, no proxy hop),
//!   follows MOVED and ASK, and refreshes the slot map when a node is lost or a replica is
//!   promoted.
//! - **Sentinel**: the `redis` crate's sentinel client finds the current primary; a lazy
//!   [`ConnectionManager`] talks to it until a command finds it gone (a dead connection) or
//!   demoted (`READONLY`), when the sentinels are asked again and the command sent once more to
//!   the primary they name now.
//!
//! Scripts: every script the stores run is registered on the link (`Scripts`); a node that
//! answers `NOSCRIPT` to `EVALSHA` (a restarted node, a promoted replica, a slot that moved) is
//! sent `EVAL` with the body instead, which runs the script on the very node that owns the keys
//! and caches it there. A cluster never needs `SCRIPT LOAD` on every node, which would fail
//! while one of them is down.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{
    Client, Cmd, ErrorKind, IntoConnectionInfo, Pipeline, RedisError, RedisResult, ServerErrorKind,
    Value,
};
use src_compiler::hir::{RedisTarget, RedisUrl};

use crate::shard::{PerShard, DEFAULT_SLOTS};
use crate::store::error::StoreError;

/// A lazy connection manager. It makes one connection attempt when a connection is needed
/// and none again before the next call: a request never waits out connection retries, and
/// while the Redis is down its breaker's prober is what tries again.
pub(crate) fn manager(client: Client, timeout: Duration) -> Result<ConnectionManager, StoreError> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(0)
        .set_max_delay(timeout);
    ConnectionManager::new_lazy_with_config(client, config)
        .map_err(|e| StoreError::Config(e.to_string()))
}

/// The client of `url`; opening one connects to nothing.
pub(crate) fn open(url: &str) -> Result<Client, StoreError> {
    Client::open(url).map_err(|e| StoreError::Config(format!("`{}`: {e}", redact(url))))
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://…@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// The scripts the stores on one link run, by SHA1, so a `NOSCRIPT` answer can be followed by
/// `EVAL` with the body.
#[derive(Default)]
pub(crate) struct Scripts {
    known: RwLock<Vec<(String, &'static str)>>,
}

impl Scripts {
    pub(crate) fn register(&self, script: &redis::Script, code: &'static str) {
        let mut known = self.known.write().unwrap_or_else(PoisonError::into_inner);
        if !known.iter().any(|(sha, _)| sha == script.get_hash()) {
            known.push((script.get_hash().to_owned(), code));
        }
    }

    fn body(&self, sha: &[u8]) -> Option<&'static str> {
        let known = self.known.read().unwrap_or_else(PoisonError::into_inner);
        known
            .iter()
            .find(|(s, _)| s.as_bytes() == sha)
            .map(|(_, code)| *code)
    }

    /// `EVAL BODY ...` for an `EVALSHA SHA ...` whose script is registered.
    pub(crate) fn eval_for(&self, cmd: &Cmd) -> Option<Cmd> {
        let mut args = cmd.args_iter().map(|arg| match arg {
            redis::Arg::Simple(bytes) => Some(bytes),
            _ => None,
        });
        let name = args.next()??;
        if !name.eq_ignore_ascii_case(b"EVALSHA") {
            return None;
        }
        let body = self.body(args.next()??)?;
        let mut eval = redis::cmd("EVAL");
        eval.arg(body);
        for arg in args {
            eval.arg(arg?);
        }
        Some(eval)
    }
}

/// Whether `err` answers that the script is not cached on the node.
pub(crate) fn no_script(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// Whether `err` says the connection (not the command) failed: a dead socket, or a connection
/// attempt that failed earlier and is remembered. A timeout is not sent again: it would double
/// the wait.
pub(crate) fn connection_failed(err: &RedisError) -> bool {
    !err.is_timeout() && (err.is_io_error() || err.is_unrecoverable_error())
}

/// Whether `err` says the store is between masters: a cluster slot without a reachable master
/// (`CLUSTERDOWN`, `TRYAGAIN`, redirections the client could not follow, no connection for the
/// slot), a primary that lost its replicas' quorum or is loading (`MASTERDOWN`, `LOADING`), a
/// demoted primary (`READONLY`), or sentinels that name no primary. A failover answers these
/// for a while; they are an outage (the breaker opens, `failure.store` judges each call, one
/// log line), not an error of the command.
pub(crate) fn failing_over(err: &RedisError) -> bool {
    err.is_cluster_error()
        || matches!(
            err.kind(),
            ErrorKind::ClusterConnectionNotFound
                | ErrorKind::MasterNameNotFoundBySentinel
                | ErrorKind::NoValidReplicasFoundBySentinel
                | ErrorKind::Server(
                    ServerErrorKind::MasterDown
                        | ServerErrorKind::ReadOnly
                        | ServerErrorKind::BusyLoading
                )
        )
}

/// How often failed calls may renew a cluster's connections: often enough to follow a failover
/// within a fraction of a node timeout, rarely enough that an outage is no reconnection storm.
const RENEW_AFTER_FAILURE: Duration = Duration::from_millis(250);

/// The connections of one link.
#[allow(
    clippy::large_enum_variant,
    reason = "one pool per link, made once and never moved: its size costs nothing"
)]
pub(crate) enum Pool {
    Single {
        client: Client,
        /// The connection made with the link, for the threads off the shards and the fallback.
        first: ConnectionManager,
        shards: PerShard<ConnectionManager>,
        timeout: Duration,
    },
    Cluster {
        client: Box<redis::cluster::ClusterClient>,
        /// Each shard's connection with the generation it was made in.
        shards: PerShard<Mutex<Option<(u64, ClusterConnection)>>>,
        /// Raised by [`Pool::renew`]: connections of an older generation are replaced.
        generation: AtomicU64,
        /// When the pool was opened, and when (milliseconds after that) a failed call last
        /// renewed it ([`Pool::renew_after_failure`]).
        opened: Instant,
        renewed_ms: AtomicU64,
        timeout: Duration,
    },
    Sentinel(Arc<Sentinel>),
}

impl Pool {
    /// Checks `target` and prepares its connections (nothing is sent until the first call).
    /// Must be called inside a Tokio runtime.
    pub(crate) fn open(target: &RedisTarget, timeout: Duration) -> Result<Pool, StoreError> {
        match target {
            RedisTarget::Single(url) => Pool::single(url.as_str(), timeout),
            RedisTarget::Cluster(urls) => {
                let config = |e: RedisError| StoreError::Config(format!("{target}: {e}"));
                let mut infos = Vec::with_capacity(urls.len());
                for url in urls {
                    infos.push(url.as_str().into_connection_info().map_err(config)?);
                }
                let first = infos.first().cloned();
                let mut builder = ClusterClientBuilder::new(infos)
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    // The call's own bound ends a failover that outlasts it; inside it, the
                    // client retries a command on the promoted replica.
                    .retries(3)
                    .min_retry_wait(10)
                    .max_retry_wait(timeout.as_millis().try_into().unwrap_or(u64::MAX));
                if let Some(redis) = first.as_ref().map(|i| i.redis_settings()) {
                    if let Some(user) = redis.username() {
                        builder = builder.username(user);
                    }
                    if let Some(password) = redis.password() {
                        builder = builder.password(password);
                    }
                }
                if let Some(tls) = urls.first().and_then(tls_mode) {
                    builder = builder.tls(tls);
                }
                let client = builder.build().map_err(config)?;
                Ok(Pool::Cluster {
                    client: Box::new(client),
                    shards: PerShard::new(DEFAULT_SLOTS),
                    generation: AtomicU64::new(0),
                    opened: Instant::now(),
                    renewed_ms: AtomicU64::new(0),
                    timeout,
                })
            }
            RedisTarget::Sentinel { sentinels, master } => Ok(Pool::Sentinel(Arc::new(
                Sentinel::new(sentinels, master, timeout)?,
            ))),
        }
    }

    pub(crate) fn single(url: &str, timeout: Duration) -> Result<Pool, StoreError> {
        let client = open(url)?;
        let first = manager(client.clone(), timeout)?;
        Ok(Pool::Single {
            client,
            first,
            shards: PerShard::new(DEFAULT_SLOTS),
            timeout,
        })
    }

    /// The calling thread's connection, made on its first call (inside that thread's runtime).
    pub(crate) fn connection(&self) -> Inner {
        match self {
            Pool::Single {
                client,
                first,
                shards,
                timeout,
            } => {
                if crate::shard::slot() == 0 {
                    return Inner::Single(first.clone());
                }
                Inner::Single(
                    shards
                        .get_or_init(|| {
                            // The URL and the settings were accepted for `first`; should
                            // another connection still be refused, the shard shares `first`.
                            manager(client.clone(), *timeout).unwrap_or_else(|_| first.clone())
                        })
                        .clone(),
                )
            }
            Pool::Cluster {
                client,
                shards,
                generation,
                timeout,
                ..
            } => {
                let now = generation.load(Ordering::Relaxed);
                let mut held = shards
                    .get_or_init(|| Mutex::new(None))
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                match &*held {
                    Some((made, conn)) if *made == now => Inner::Cluster(conn.clone()),
                    _ => {
                        let config = ClusterConfig::new()
                            .set_connection_timeout(*timeout)
                            .set_response_timeout(*timeout);
                        let conn = client.get_pending_async_connection_with_config(config);
                        *held = Some((now, conn.clone()));
                        Inner::Cluster(conn)
                    }
                }
            }
            Pool::Sentinel(sentinel) => Inner::Sentinel(Arc::clone(sentinel)),
        }
    }
}

impl Pool {
    /// Makes every shard's next connection a new one. The breaker's prober calls it before
    /// each probe of a cluster: a connection whose slot map still names a dead master would
    /// fail every probe (a `PING` to every master does not make the client read the map
    /// again), while a new one reads the map from the seeds, promoted replicas included.
    pub(crate) fn renew(&self) {
        if let Pool::Cluster { generation, .. } = self {
            generation.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// After a call could not reach a cluster: makes every shard's next connection a new one,
    /// at most once per [`RENEW_AFTER_FAILURE`]. A shard whose slot map still names a dead
    /// master fails only the calls for that master's slots; the other masters answer, so the
    /// breaker may stay closed and its prober never renews that shard's connection.
    pub(crate) fn renew_after_failure(&self) {
        if let Pool::Cluster {
            generation,
            opened,
            renewed_ms,
            ..
        } = self
        {
            let now = u64::try_from(opened.elapsed().as_millis()).unwrap_or(u64::MAX);
            let last = renewed_ms.load(Ordering::Relaxed);
            let every = u64::try_from(RENEW_AFTER_FAILURE.as_millis()).unwrap_or(u64::MAX);
            if now.saturating_sub(last) >= every
                && renewed_ms
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                generation.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Pool::Cluster { .. })
    }

    /// Whether the topology fails over by itself (a cluster, a Sentinel set): its outages
    /// last about a node timeout, so its breaker probes more often.
    pub(crate) fn fails_over(target: &RedisTarget) -> bool {
        !matches!(target, RedisTarget::Single(_))
    }
}

fn tls_mode(url: &RedisUrl) -> Option<redis::TlsMode> {
    if !url.is_tls() {
        return None;
    }
    Some(if url.as_str().ends_with("#insecure") {
        redis::TlsMode::Insecure
    } else {
        redis::TlsMode::Secure
    })
}

/// One connection of a link, in its topology.
#[derive(Clone)]
pub(crate) enum Inner {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(Arc<Sentinel>),
}

impl Inner {
    pub(crate) async fn send(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Inner::Single(c) => c.send_packed_command(cmd).await,
            Inner::Cluster(c) => c.req_packed_command(cmd).await,
            Inner::Sentinel(s) => s.send(cmd).await,
        }
    }

    pub(crate) async fn send_many(
        &mut self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match self {
            Inner::Single(c) => c.send_packed_commands(pipeline, offset, count).await,
            Inner::Cluster(c) => c.req_packed_commands(pipeline, offset, count).await,
            Inner::Sentinel(s) => s.send_many(pipeline, offset, count).await,
        }
    }

    pub(crate) fn db(&self) -> i64 {
        match self {
            Inner::Single(c) => c.get_db(),
            Inner::Cluster(_) => 0,
            Inner::Sentinel(s) => s.db,
        }
    }
}

/// Where one `SCAN` walk runs, with a cursor of its own: the server (one server, a Sentinel
/// set's primary), or one master of a cluster, since a cluster node's `SCAN` sees only the keys
/// of its own slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanNode {
    Server,
    Master { host: String, port: u16 },
}

impl Inner {
    /// The nodes a walk over every key visits: the server, or each master of a cluster that
    /// serves slots and is not marked failed (as the node asked sees the cluster now).
    pub(crate) async fn scan_nodes(&mut self) -> RedisResult<Vec<ScanNode>> {
        let Inner::Cluster(conn) = self else {
            return Ok(vec![ScanNode::Server]);
        };
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("NODES");
        let nodes = conn
            .route_command(cmd, RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random))
            .await?;
        let text: String = redis::from_redis_value(nodes)?;
        Ok(serving_masters(&text))
    }

    /// Sends `cmd` to `node` (a keyless command such as `SCAN` would go to any one node).
    pub(crate) async fn send_to(&mut self, node: &ScanNode, cmd: &Cmd) -> RedisResult<Value> {
        match (self, node) {
            (Inner::Cluster(conn), ScanNode::Master { host, port }) => {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                conn.route_command(cmd.clone(), routing).await
            }
            (inner, _) => inner.send(cmd).await,
        }
    }
}

/// The masters of a `CLUSTER NODES` answer that serve slots and are not failed.
fn serving_masters(nodes: &str) -> Vec<ScanNode> {
    let mut masters = Vec::new();
    for line in nodes.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // id, host:port@bus, flags, master id, ping, pong, epoch, link state, slot ranges...
        let [_, addr, flags, _, _, _, _, _, _slots, ..] = fields.as_slice() else {
            continue;
        };
        let flags: Vec<&str> = flags.split(',').collect();
        if !flags.contains(&"master") || flags.iter().any(|f| f.starts_with("fail")) {
            continue;
        }
        let addr = addr.split('@').next().unwrap_or(addr);
        let Some((host, port)) = addr.rsplit_once(':') else {
            continue;
        };
        if let Ok(port) = port.parse::<u16>() {
            masters.push(ScanNode::Master {
                host: host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned(),
                port,
            });
        }
    }
    masters
}

/// A primary found through Sentinel, and the connection to it.
pub(crate) struct Sentinel {
    /// Asks the sentinels, one lookup at a time.
    client: tokio::sync::Mutex<SentinelClient>,
    /// The connection to the primary last named, with its generation.
    current: Mutex<Option<(u64, ConnectionManager)>>,
    generation: AtomicU64,
    timeout: Duration,
    db: i64,
}

impl Sentinel {
    fn new(
        sentinels: &[RedisUrl],
        master: &str,
        timeout: Duration,
    ) -> Result<Sentinel, StoreError> {
        let config = |e: RedisError| StoreError::Config(format!("sentinel `{master}`: {e}"));
        let mut infos = Vec::with_capacity(sentinels.len());
        for url in sentinels {
            infos.push(url.as_str().into_connection_info().map_err(config)?);
        }
        // The primary is opened with the first sentinel URL's database, credentials and TLS
        // mode (the checker made every sentinel URL agree on them).
        let redis = infos
            .first()
            .map(|i| i.redis_settings().clone())
            .unwrap_or_default();
        let db = redis.db();
        let mut node = SentinelNodeConnectionInfo::default().set_redis_connection_info(redis);
        if let Some(tls) = sentinels.first().and_then(tls_mode) {
            node = node.set_tls_mode(tls);
        }
        let client = SentinelClient::build(infos, master, Some(node), SentinelServerType::Master)
            .map_err(config)?;
        Ok(Sentinel {
            client: tokio::sync::Mutex::new(client),
            current: Mutex::new(None),
            generation: AtomicU64::new(0),
            timeout,
            db,
        })
    }

    fn cached(&self) -> Option<(u64, ConnectionManager)> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The connection to the primary, asking the sentinels when none is known.
    async fn primary(&self) -> RedisResult<(u64, ConnectionManager)> {
        if let Some(known) = self.cached() {
            return Ok(known);
        }
        let mut client = self.client.lock().await;
        // Another call may have asked while this one waited.
        if let Some(known) = self.cached() {
            return Ok(known);
        }
        let primary = client.async_get_client().await?;
        let conn = manager(primary, self.timeout).map_err(|e| {
            RedisError::from((ErrorKind::InvalidClientConfig, "sentinel", e.to_string()))
        })?;
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((generation, conn.clone()));
        Ok((generation, conn))
    }

    /// Forgets the primary of `generation` (unless a newer one is already known).
    fn forget(&self, generation: u64) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|(g, _)| *g == generation) {
            *current = None;
        }
    }

    async fn send(&self, cmd: &Cmd) -> RedisResult<Value> {
        let (generation, mut conn) = self.primary().await?;
        match conn.send_packed_command(cmd).await {
            Err(err) if moved_on(&err) => {
                self.forget(generation);
                let (_, mut conn) = self.primary().await?;
                conn.send_packed_command(cmd).await
            }
            answered => answered,
        }
    }

    async fn send_many(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let (generation, mut conn) = self.primary().await?;
        match conn.send_packed_commands(pipeline, offset, count).await {
            Err(err) if moved_on(&err) => {
                self.forget(generation);
                let (_, mut conn) = self.primary().await?;
                conn.send_packed_commands(pipeline, offset, count).await
            }
            answered => answered,
        }
    }
}

/// Whether `err` says the primary is gone (a dead connection) or was demoted (`READONLY`).
fn moved_on(err: &RedisError) -> bool {
    connection_failed(err) || err.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_is_scanned_on_each_serving_master() {
        let nodes = "\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7002@17002 master - 0 1 2 connected 5461-10922
c3 127.0.0.1:7003@17003 master,fail - 0 1 3 disconnected 10923-16383
d4 127.0.0.1:7004@17004 master - 0 1 7 connected 10923-16383
e5 127.0.0.1:7005@17005 slave a1 0 1 1 connected
f6 [::1]:7006@17006 master - 0 1 8 connected 16000
g7 127.0.0.1:7007@17007 master - 0 1 9 connected
";
        let master = |host: &str, port| ScanNode::Master {
            host: host.to_owned(),
            port,
        };
        assert_eq!(
            serving_masters(nodes),
            vec![
                master("127.0.0.1", 7001),
                master("127.0.0.1", 7002),
                master("127.0.0.1", 7004),
                master("::1", 7006),
            ]
        );
    }
}
