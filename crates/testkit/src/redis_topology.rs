//! Real Redis topologies for tests: a six-node Redis Cluster (three masters, three replicas)
//! and a Sentinel set (a primary, a replica, three sentinels), each started on loopback by the
//! test itself, ready once it can serve (every slot covered, the replica in sync, the sentinels
//! aware of one another), killed when dropped. `kill` takes one node away as a crash would, so
//! a test can watch the failover.
//!
//! A cluster node also listens on its port + 10000 (the cluster bus), so ports are chosen
//! below 55535 with both free. Timeouts are short (`node_timeout`, Sentinel's
//! `down-after-milliseconds`) so a failover takes about a second or two, not the production
//! default of fifteen to thirty.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::redis::command_on;

/// How long a topology may take to become ready (usually one to three seconds).
const READY_WITHIN: Duration = Duration::from_secs(30);

/// A cluster node's timeout in these tests (milliseconds): a master missing this long is
/// failed over to its replica.
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// Sentinel's `down-after-milliseconds` in these tests.
pub const SENTINEL_DOWN_AFTER_MS: u64 = 1000;

/// One `redis-server` process of a topology.
struct Node {
    port: u16,
    child: Option<Child>,
}

impl Node {
    fn kill(&mut self) {
        crate::process::stop(&mut self.child);
    }
}

/// A port below 55535 whose bus port (+10000) is free as well.
fn cluster_port(taken: &[u16]) -> u16 {
    for _ in 0..1000 {
        let port = crate::free_port();
        let Some(bus) = port.checked_add(10_000) else {
            continue;
        };
        if port >= 55_535 || taken.contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", bus)).is_ok() {
            return port;
        }
    }
    panic!("no free port below 55535 with a free bus port");
}

/// How many ports a node is tried on before the topology gives up.
const PORT_TRIES: usize = 5;

/// Starts one node on a port from `pick`, ready once that very process answers (its
/// `process_id`, so a stranger on a reused port is not mistaken for it). A port taken between
/// the pick and the bind (by another test's server, or a client connection's ephemeral port)
/// makes the node exit: it is then started again on another port.
fn launch(
    what: &str,
    dir: &Path,
    mut pick: impl FnMut() -> u16,
    args: impl Fn(u16) -> Vec<String>,
) -> Node {
    let mut logs = String::new();
    for _ in 0..PORT_TRIES {
        let port = pick();
        let log = dir.join(format!("{what}-{port}.log"));
        let out = std::fs::File::create(&log).ok();
        let err = out.as_ref().and_then(|f| f.try_clone().ok());
        let mut command = Command::new("redis-server");
        command
            .args(args(port))
            .stdout(out.map_or_else(Stdio::null, Stdio::from))
            .stderr(err.map_or_else(Stdio::null, Stdio::from));
        let started = crate::process::start_ready(
            &mut command,
            "install it with `apt-get install -y redis-server`",
            READY_WITHIN,
            Duration::from_millis(20),
            |pid| command_on(port, "INFO server").contains(&format!("process_id:{pid}")),
        );
        if let Some(child) = started {
            return Node {
                port,
                child: Some(child),
            };
        }
        let tail = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = tail.lines().rev().take(3).collect();
        logs.push_str(&format!("\n  port {port}: {}", tail.join(" | ")));
    }
    panic!("{what} did not start on any of {PORT_TRIES} ports:{logs}");
}

fn wait_for(what: &str, ready: impl FnMut() -> bool) {
    crate::process::until(what, READY_WITHIN, Duration::from_millis(50), ready);
}

/// Waits until every replica of the server on `port` has every write the server had taken
/// when the wait began (later writes, from a load still running, may be in flight).
fn wait_synced(port: u16) {
    let offsets = || {
        let info = command_on(port, "INFO replication");
        let own: Option<u64> = info
            .lines()
            .find_map(|l| l.strip_prefix("master_repl_offset:"))
            .and_then(|o| o.trim().parse().ok());
        let replicas: Vec<u64> = info
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains("offset="))
            .filter_map(|l| l.split("offset=").nth(1)?.split(',').next()?.parse().ok())
            .collect();
        (own, replicas)
    };
    let mut target = None;
    wait_for(&format!("the replicas of {port}"), || {
        let (own, replicas) = offsets();
        let Some(want) = *target.get_or_insert(own) else {
            target = None;
            return false;
        };
        !replicas.is_empty() && replicas.iter().all(|&r| r >= want)
    });
}

fn scratch(kind: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "src-test-{kind}-{}-{}",
        std::process::id(),
        crate::free_port()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("cannot make {}: {e}", dir.display());
    }
    dir
}

/// A six-node Redis Cluster: three masters, each with one replica.
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: PathBuf,
}

impl RedisCluster {
    /// Starts six nodes, creates the cluster, and waits until every node sees all 16384 slots
    /// served and each master has its replica.
    pub fn start() -> RedisCluster {
        let dir = scratch("cluster");
        let mut cluster = RedisCluster {
            nodes: Vec::new(),
            dir,
        };
        for _ in 0..6 {
            let taken: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
            let node = launch(
                "cluster-node",
                &cluster.dir,
                || cluster_port(&taken),
                |port| node_args(port, &cluster.dir),
            );
            cluster.nodes.push(node);
        }
        let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for port in &ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        let created = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        assert!(
            matches!(created, Ok(s) if s.success()),
            "redis-cli --cluster create failed: {created:?}"
        );
        cluster.wait_ok();
        cluster
    }

    /// Waits until every live node reports `cluster_state:ok` and three masters, each with a
    /// live replica, serve all slots.
    pub fn wait_ok(&self) {
        wait_for("the cluster", || {
            let live: Vec<u16> = self.live_ports();
            let all_ok = live.iter().all(|&p| {
                let info = command_on(p, "CLUSTER INFO");
                info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
            });
            let masters = self.masters();
            all_ok
                && masters.len() == 3
                && masters.iter().all(|(p, _)| self.replica_seen(*p).is_some())
        });
    }

    /// Waits until every live node is ok, and (after a failover) the survivors serve every
    /// slot again; masters may then lack a replica.
    pub fn wait_served(&self) {
        wait_for("the cluster after a failover", || {
            self.live_ports().iter().all(|&p| {
                let info = command_on(p, "CLUSTER INFO");
                info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
            })
        });
    }

    fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
            .collect()
    }

    /// Every node's URL (seeds for a client).
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect()
    }

    /// `redis_cluster([...])` over the given number of seed nodes, as a policy writes it.
    pub fn store(&self, seeds: usize) -> String {
        let urls: Vec<String> = self
            .urls()
            .into_iter()
            .take(seeds.max(1))
            .map(|u| format!("\"{u}\""))
            .collect();
        format!("redis_cluster([{}])", urls.join(", "))
    }

    /// The ports of the live masters with the slots each serves, as a live node sees them.
    pub fn masters(&self) -> Vec<(u16, Vec<(u16, u16)>)> {
        let Some(&seen_from) = self.live_ports().first() else {
            return Vec::new();
        };
        let nodes = command_on(seen_from, "CLUSTER NODES");
        let mut masters = Vec::new();
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 8 || !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let Some(port) = fields[1]
                .split('@')
                .next()
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse::<u16>().ok())
            else {
                continue;
            };
            let ranges: Vec<(u16, u16)> = fields[8..]
                .iter()
                .filter_map(|r| {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    Some((a.parse().ok()?, b.parse().ok()?))
                })
                .collect();
            if !ranges.is_empty() {
                masters.push((port, ranges));
            }
        }
        masters
    }

    /// The port of the replica of the master on `port`.
    pub fn replica_of(&self, port: u16) -> u16 {
        self.replica_seen(port)
            .unwrap_or_else(|| panic!("the master on {port} has no replica"))
    }

    /// The port of the replica of the master on `port`, as the first live node sees the cluster
    /// now (a new replica reaches every node's view by gossip, a moment after it reaches one).
    fn replica_seen(&self, port: u16) -> Option<u16> {
        let Some(&seen_from) = self.live_ports().first() else {
            panic!("no live node");
        };
        let nodes = command_on(seen_from, "CLUSTER NODES");
        let port_of = |addr: &str| {
            addr.split('@')
                .next()
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse::<u16>().ok())
        };
        let lines: Vec<Vec<&str>> = nodes
            .lines()
            .map(|l| l.split_whitespace().collect())
            .filter(|f: &Vec<&str>| f.len() >= 8)
            .collect();
        let Some(id) = lines
            .iter()
            .find(|f| port_of(f[1]) == Some(port))
            .map(|f| f[0])
        else {
            panic!("no node on {port}");
        };
        lines
            .iter()
            .find(|f| f[2].contains("slave") && f[3] == id)
            .and_then(|f| port_of(f[1]))
    }

    /// The port of the master serving `key` now.
    pub fn master_of(&self, key: &str) -> u16 {
        let Some(&seen_from) = self.live_ports().first() else {
            panic!("no live node");
        };
        let slot: u16 = command_on(seen_from, &format!("CLUSTER KEYSLOT {key}"))
            .trim()
            .trim_start_matches(':')
            .parse()
            .unwrap_or_else(|e| panic!("CLUSTER KEYSLOT answered no number: {e}"));
        self.masters()
            .into_iter()
            .find(|(_, ranges)| ranges.iter().any(|&(a, b)| a <= slot && slot <= b))
            .map(|(port, _)| port)
            .unwrap_or_else(|| panic!("no master serves slot {slot}"))
    }

    /// Keys (of those given) stored on each live master now, counted with `DBSIZE`-like
    /// `EXISTS` on the master that serves each.
    pub fn spread(&self, keys: &[String]) -> Vec<(u16, usize)> {
        let mut counts: Vec<(u16, usize)> = Vec::new();
        for key in keys {
            let port = self.master_of(key);
            match counts.iter_mut().find(|(p, _)| *p == port) {
                Some((_, n)) => *n += 1,
                None => counts.push((port, 1)),
            }
        }
        counts
    }

    /// Sends one inline command to the node on `port`.
    pub fn command(&self, port: u16, line: &str) -> String {
        command_on(port, line)
    }

    /// Waits until the replica of the master on `port` has every write the master took.
    pub fn wait_replicated(&self, port: u16) {
        wait_synced(port);
    }

    /// Kills the node on `port` (SIGKILL), as a crash would.
    pub fn kill(&mut self, port: u16) {
        if let Some(node) = self.nodes.iter_mut().find(|n| n.port == port) {
            node.kill();
        }
    }

    /// The cluster's node timeout.
    pub fn node_timeout(&self) -> Duration {
        Duration::from_millis(NODE_TIMEOUT_MS)
    }
}

fn node_args(port: u16, dir: &Path) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        &NODE_TIMEOUT_MS.to_string(),
        "--cluster-config-file",
        &format!("nodes-{port}.conf"),
        "--dir",
        &dir.to_string_lossy(),
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The name the sentinels of [`RedisSentinels`] know their primary by.
pub const MASTER: &str = "src-primary";

/// A primary, its replica and three sentinels watching them (quorum 2).
pub struct RedisSentinels {
    data: Vec<Node>,
    sentinels: Vec<Node>,
    dir: PathBuf,
}

impl RedisSentinels {
    pub fn start() -> RedisSentinels {
        let dir = scratch("sentinel");
        let mut set = RedisSentinels {
            data: Vec::new(),
            sentinels: Vec::new(),
            dir,
        };
        let data_args = |port: u16, of: Option<u16>, dir: &Path| {
            let dir = dir.to_string_lossy().into_owned();
            let mut args: Vec<String> = [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                // A replica's full sync writes its snapshot here, not in the test's directory.
                "--dir",
                &dir,
                "--dbfilename",
                &format!("dump-{port}.rdb"),
                "--save",
                "",
                "--appendonly",
                "no",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            if let Some(of) = of {
                args.extend(["--replicaof".into(), "127.0.0.1".into(), of.to_string()]);
            }
            args
        };
        let node = launch("primary", &set.dir, crate::free_port, |port| {
            data_args(port, None, &set.dir)
        });
        let primary = node.port;
        set.data.push(node);
        let node = launch("replica", &set.dir, crate::free_port, |port| {
            data_args(port, Some(primary), &set.dir)
        });
        let replica = node.port;
        set.data.push(node);
        wait_for("the replica", || {
            command_on(replica, "INFO replication").contains("master_link_status:up")
        });
        for _ in 0..3 {
            let node = launch("sentinel", &set.dir, crate::free_port, |port| {
                let conf = set.dir.join(format!("sentinel-{port}.conf"));
                let text = format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n\
                     sentinel down-after-milliseconds {MASTER} {SENTINEL_DOWN_AFTER_MS}\n\
                     sentinel failover-timeout {MASTER} 5000\n",
                    dir = set.dir.display()
                );
                if let Err(e) = std::fs::write(&conf, text) {
                    panic!("cannot write {}: {e}", conf.display());
                }
                vec![conf.to_string_lossy().into_owned(), "--sentinel".into()]
            });
            set.sentinels.push(node);
        }
        // A failover needs the sentinels to know one another and the replica.
        wait_for("the sentinels", || {
            set.sentinels.iter().all(|s| {
                let others = command_on(s.port, &format!("SENTINEL SENTINELS {MASTER}"));
                let replicas = command_on(s.port, &format!("SENTINEL REPLICAS {MASTER}"));
                others.starts_with("*2") && replicas.starts_with("*1")
            })
        });
        set
    }

    /// The sentinels' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect()
    }

    /// `redis_sentinel([...], master = "…")`, as a policy writes it.
    pub fn store(&self) -> String {
        let urls: Vec<String> = self.urls().iter().map(|u| format!("\"{u}\"")).collect();
        format!(
            "redis_sentinel([{}], master = \"{MASTER}\")",
            urls.join(", ")
        )
    }

    /// The port of the primary the sentinels name now.
    pub fn primary(&self) -> u16 {
        for s in self.sentinels.iter().filter(|s| s.child.is_some()) {
            let answer = command_on(
                s.port,
                &format!("SENTINEL GET-MASTER-ADDR-BY-NAME {MASTER}"),
            );
            if let Some(port) = answer
                .lines()
                .filter(|l| !l.starts_with(['*', '$']))
                .nth(1)
                .and_then(|p| p.trim().parse().ok())
            {
                return port;
            }
        }
        panic!("no sentinel names a primary");
    }

    /// The ports of the primary and the replica (both, whichever is which now).
    pub fn data_ports(&self) -> Vec<u16> {
        self.data.iter().map(|n| n.port).collect()
    }

    /// Sends one inline command to the node on `port`.
    pub fn command(&self, port: u16, line: &str) -> String {
        command_on(port, line)
    }

    /// Waits until the replica has every write the primary took.
    pub fn wait_replicated(&self) {
        wait_synced(self.primary());
    }

    /// Kills the data node on `port` (SIGKILL), as a crash would.
    pub fn kill(&mut self, port: u16) {
        if let Some(node) = self.data.iter_mut().find(|n| n.port == port) {
            node.kill();
        }
    }

    /// Waits until the sentinels name a live primary other than `old`, and it accepts writes.
    pub fn wait_promoted(&self, old: u16) -> u16 {
        let mut promoted = old;
        wait_for("the failover", || {
            promoted = self.primary();
            promoted != old && command_on(promoted, "INFO replication").contains("role:master")
        });
        promoted
    }
}

impl Drop for RedisSentinels {
    fn drop(&mut self) {
        for node in self.sentinels.iter_mut().chain(self.data.iter_mut()) {
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
