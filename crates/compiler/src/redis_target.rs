//! [`RedisTarget`]: the Redis a `store = redis(..)`, `redis_cluster(..)` or `redis_sentinel(..)`
//! names, with every node URL parsed as a [`RedisUrl`] (E046, E070–E073, W040, W041).
//!
//! A cluster is reached through seed nodes (the client discovers the rest and follows MOVED,
//! ASK and failovers); a Sentinel set through its sentinels, which name the current primary
//! of `master`. The client opens every node of one target with the first URL's TLS mode and
//! credentials (and, for Sentinel, its database), so the nodes of one target must agree on
//! them: [`RedisTarget::cluster`] and [`RedisTarget::sentinel`] refuse what the client would
//! silently open otherwise.

use std::fmt;

use crate::redis_url::{RedisUrl, RedisUrlError};

/// A Redis every replica of a router shares, in one of three topologies.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum RedisTarget {
    /// One server (`redis("…")`).
    Single(RedisUrl),
    /// A Redis Cluster, through its seed nodes (`redis_cluster([...])`).
    Cluster(Vec<RedisUrl>),
    /// A primary watched by Redis Sentinel (`redis_sentinel([...], master = "NAME")`).
    Sentinel {
        sentinels: Vec<RedisUrl>,
        master: String,
    },
}

/// Why a node list is not a [`RedisTarget`]; each names the node it is about (`index` from 0,
/// the message counting from 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("it lists no node")]
    Empty,
    #[error("node {} is not a Redis URL: {why}", .index + 1)]
    Url { index: usize, why: RedisUrlError },
    #[error("node {} is a Unix socket; cluster and sentinel nodes are reached over TCP", .index + 1)]
    Socket { index: usize },
    #[error("node {} names database {db}; a Redis Cluster has database 0 only", .index + 1)]
    ClusterDatabase { index: usize, db: u32 },
    #[error("node {} differs from the first in its {what}; one client opens every node with the first node's", .index + 1)]
    Mixed { index: usize, what: &'static str },
}

impl TargetError {
    /// The node the error is about, when it is about one.
    pub fn node(&self) -> Option<usize> {
        match self {
            TargetError::Empty => None,
            TargetError::Url { index, .. }
            | TargetError::Socket { index }
            | TargetError::ClusterDatabase { index, .. }
            | TargetError::Mixed { index, .. } => Some(*index),
        }
    }
}

impl RedisTarget {
    /// A cluster through `nodes`: TCP nodes on database 0 that agree on TLS and credentials.
    pub fn cluster(nodes: &[&str]) -> Result<RedisTarget, TargetError> {
        let urls = nodes_of(nodes)?;
        for (index, url) in urls.iter().enumerate() {
            let db = url.database();
            if db != 0 {
                return Err(TargetError::ClusterDatabase { index, db });
            }
        }
        Ok(RedisTarget::Cluster(urls))
    }

    /// A Sentinel set through `sentinels`, serving `master`: TCP sentinels that agree on TLS,
    /// credentials and database (the primary is opened with the same).
    pub fn sentinel(sentinels: &[&str], master: &str) -> Result<RedisTarget, TargetError> {
        Ok(RedisTarget::Sentinel {
            sentinels: nodes_of(sentinels)?,
            master: master.to_owned(),
        })
    }

    /// `redis`, `redis_cluster` or `redis_sentinel`, as the policy writes it.
    pub fn kind(&self) -> &'static str {
        match self {
            RedisTarget::Single(_) => "redis",
            RedisTarget::Cluster(_) => "redis_cluster",
            RedisTarget::Sentinel { .. } => "redis_sentinel",
        }
    }

    /// Every URL written: the server, the seed nodes or the sentinels.
    pub fn urls(&self) -> &[RedisUrl] {
        match self {
            RedisTarget::Single(url) => std::slice::from_ref(url),
            RedisTarget::Cluster(urls) => urls,
            RedisTarget::Sentinel { sentinels, .. } => sentinels,
        }
    }

    /// Whether the connections are TLS.
    pub fn is_tls(&self) -> bool {
        self.urls().iter().any(RedisUrl::is_tls)
    }
}

/// Each node parsed, over TCP, agreeing with the first on TLS, credentials and database.
fn nodes_of(nodes: &[&str]) -> Result<Vec<RedisUrl>, TargetError> {
    if nodes.is_empty() {
        return Err(TargetError::Empty);
    }
    let mut urls: Vec<RedisUrl> = Vec::with_capacity(nodes.len());
    for (index, text) in nodes.iter().enumerate() {
        let url = RedisUrl::parse(text).map_err(|why| TargetError::Url { index, why })?;
        if url.is_socket() {
            return Err(TargetError::Socket { index });
        }
        if let Some(first) = urls.first() {
            let what = if first.is_tls() != url.is_tls() {
                Some("TLS mode")
            } else if first.credentials() != url.credentials() {
                Some("user name or password")
            } else if first.database() != url.database() {
                Some("database")
            } else {
                None
            };
            if let Some(what) = what {
                return Err(TargetError::Mixed { index, what });
            }
        }
        urls.push(url);
    }
    Ok(urls)
}

impl From<RedisUrl> for RedisTarget {
    fn from(url: RedisUrl) -> RedisTarget {
        RedisTarget::Single(url)
    }
}

/// As the policy writes it, passwords replaced by `***`.
impl fmt::Display for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, urls: &[RedisUrl]| {
            let shown: Vec<String> = urls.iter().map(|u| format!("\"{u}\"")).collect();
            write!(f, "[{}]", shown.join(", "))
        };
        match self {
            RedisTarget::Single(url) => write!(f, "redis(\"{url}\")"),
            RedisTarget::Cluster(urls) => {
                f.write_str("redis_cluster(")?;
                list(f, urls)?;
                f.write_str(")")
            }
            RedisTarget::Sentinel { sentinels, master } => {
                f.write_str("redis_sentinel(")?;
                list(f, sentinels)?;
                write!(f, ", master = \"{master}\")")
            }
        }
    }
}

impl fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_and_sentinels_parse() {
        let cluster = RedisTarget::cluster(&["redis://a:7000", "redis://b:7001/0"]);
        assert!(matches!(&cluster, Ok(RedisTarget::Cluster(urls)) if urls.len() == 2));
        let sentinel = RedisTarget::sentinel(&["redis://:pw@s1:26379/2", "redis://:pw@s2/2"], "m");
        let Ok(target) = sentinel else {
            panic!("sentinels that agree parse: {sentinel:?}");
        };
        assert_eq!(target.kind(), "redis_sentinel");
        assert_eq!(
            target.to_string(),
            "redis_sentinel([\"redis://:***@s1:26379/2\", \"redis://:***@s2/2\"], master = \"m\")"
        );
    }

    #[test]
    fn node_lists_say_what_is_wrong_and_where() {
        assert_eq!(RedisTarget::cluster(&[]), Err(TargetError::Empty));
        let bad = RedisTarget::cluster(&["redis://a", "a:6379"]);
        assert!(matches!(bad, Err(TargetError::Url { index: 1, .. })));
        assert_eq!(
            RedisTarget::cluster(&["unix:///run/r.sock"]),
            Err(TargetError::Socket { index: 0 })
        );
        assert_eq!(
            RedisTarget::cluster(&["redis://a/3"]),
            Err(TargetError::ClusterDatabase { index: 0, db: 3 })
        );
        assert_eq!(
            RedisTarget::cluster(&["redis://a", "rediss://b"]),
            Err(TargetError::Mixed {
                index: 1,
                what: "TLS mode"
            })
        );
        assert_eq!(
            RedisTarget::sentinel(&["redis://:x@a", "redis://:y@b"], "m"),
            Err(TargetError::Mixed {
                index: 1,
                what: "user name or password"
            })
        );
        assert_eq!(
            RedisTarget::sentinel(&["redis://a/1", "redis://b/2"], "m"),
            Err(TargetError::Mixed {
                index: 1,
                what: "database"
            })
        );
        let hidden = RedisTarget::cluster(&["redis://:hunter2@a/x"]);
        let shown = format!("{hidden:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
