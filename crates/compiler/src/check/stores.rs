//! The `store` of `cache` and `session`: `memory`, one Redis (`redis("…")`, E046), a Redis
//! Cluster (`redis_cluster([...])`) or a Sentinel set (`redis_sentinel([...], master = "…")`),
//! E070–E073 and W040–W041; a Milvus collection (`milvus("…")`, the cache only) in
//! [`super::milvus`].
//!
//! Each node URL is parsed here into the [`RedisTarget`] the runtime opens as it is, so a policy
//! that checks is never refused at load, or failed on every request, for its store. Every node
//! is checked (one error per bad node, not only the first), each error on the node it is about.

use super::Checker;
use crate::hir::{RedisTarget, RedisUrl, StoreDef, TargetError};
use src_dsl::ast;
use src_dsl::{codes, Diagnostic, Span, Spanned};

/// Where a store URL's help points.
const STORE_HELP: &str =
    "write `redis://host:6379/0` (`rediss://` for TLS; `redis://:PASSWORD@host:6379/0` with a password)";

/// Where a cluster or sentinel node's help points.
const NODE_HELP: &str = "write each node as `redis://HOST:PORT` (`rediss://` for TLS; \
     `redis://:PASSWORD@HOST:PORT` with a password)";

impl Checker<'_> {
    /// The store of `cache` or `session` (`section`), memory when none is written.
    pub(super) fn store(
        &mut self,
        store: &Option<Spanned<ast::Store>>,
        section: &str,
    ) -> Option<StoreDef> {
        let Some(store) = store else {
            return Some(StoreDef::Memory);
        };
        match &store.value {
            ast::Store::Memory => Some(StoreDef::Memory),
            ast::Store::Redis(url) => self.single(url, section),
            ast::Store::Cluster(nodes) => {
                let urls = self.nodes(nodes, section, "redis_cluster", true)?;
                self.target(RedisTarget::cluster(&urls), nodes)
            }
            ast::Store::Sentinel { sentinels, master } => {
                let master = self.master(master.as_ref(), store.span, section);
                let urls = self.nodes(sentinels, section, "redis_sentinel", false);
                if sentinels.value.len() == 1 {
                    self.report(
                        Diagnostic::warning(
                            codes::LONE_SENTINEL,
                            format!("the `{section}` store lists one sentinel only"),
                            sentinels.span,
                        )
                        .with_label_message("one sentinel")
                        .with_help(
                            "list every sentinel of the set: while the one listed is down, the \
                             router cannot learn which server is the primary",
                        ),
                    );
                }
                let (urls, master) = (urls?, master?);
                self.target(RedisTarget::sentinel(&urls, master), sentinels)
            }
            ast::Store::Milvus { url, options } => self.milvus(url, options, store.span, section),
        }
    }

    /// `redis("…")`: E046 unless the client opens it.
    fn single(&mut self, url: &Spanned<String>, section: &str) -> Option<StoreDef> {
        match RedisUrl::parse(&url.value) {
            Ok(parsed) => Some(StoreDef::Redis(RedisTarget::Single(parsed))),
            Err(why) => {
                self.report(
                    Diagnostic::error(
                        codes::INVALID_STORE_URL,
                        format!("the `{section}` store is not a Redis URL: {why}"),
                        url.span,
                    )
                    .with_label_message("not a Redis URL")
                    .with_help(STORE_HELP),
                );
                None
            }
        }
    }

    /// The node URLs of `form`, each checked on its own: E070 for none, E071 for one the client
    /// cannot use as a node (`cluster`: database 0 only), W040 for one listed twice.
    fn nodes<'a>(
        &mut self,
        nodes: &'a Spanned<Vec<Spanned<String>>>,
        section: &str,
        form: &str,
        cluster: bool,
    ) -> Option<Vec<&'a str>> {
        if nodes.value.is_empty() {
            let example = if cluster {
                "`redis_cluster([\"redis://10.0.0.1:7000\", \"redis://10.0.0.2:7000\"])`; \
                 the client discovers the other nodes"
            } else {
                "`redis_sentinel([\"redis://10.0.0.1:26379\", \"redis://10.0.0.2:26379\"], \
                 master = \"mymaster\")`"
            };
            self.report(
                Diagnostic::error(
                    codes::EMPTY_STORE_NODES,
                    format!("the `{section}` store `{form}` lists no node"),
                    nodes.span,
                )
                .with_label_message("no node")
                .with_help(format!("list at least one node: {example}")),
            );
            return None;
        }
        let mut ok = true;
        for (index, node) in nodes.value.iter().enumerate() {
            let why = match RedisUrl::parse(&node.value) {
                Err(why) => Some((format!("it is not a Redis URL: {why}"), NODE_HELP)),
                Ok(url) if url.is_socket() => Some((
                    "it is a Unix socket; cluster and sentinel nodes are reached over TCP".into(),
                    NODE_HELP,
                )),
                Ok(url) if cluster && url.database() != 0 => Some((
                    format!(
                        "it names database {}; a Redis Cluster has database 0 only",
                        url.database()
                    ),
                    "remove the database from the URL (`redis://HOST:PORT`)",
                )),
                Ok(_) => None,
            };
            if let Some((why, help)) = why {
                ok = false;
                self.report(
                    Diagnostic::error(
                        codes::INVALID_STORE_NODE,
                        format!("node {} of the `{section}` store: {why}", index + 1),
                        node.span,
                    )
                    .with_label_message("not a usable node")
                    .with_help(help),
                );
            }
            if let Some(first) = nodes.value[..index].iter().find(|n| n.value == node.value) {
                self.report(
                    Diagnostic::warning(
                        codes::DUPLICATE_STORE_NODE,
                        format!(
                            "the `{section}` store lists `{}` twice",
                            redacted(&node.value)
                        ),
                        node.span,
                    )
                    .with_secondary(first.span, "first listed here")
                    .with_help("remove the second one"),
                );
            }
        }
        ok.then(|| nodes.value.iter().map(|n| n.value.as_str()).collect())
    }

    /// `master = "NAME"`: E072 when it is missing or empty.
    fn master<'a>(
        &mut self,
        master: Option<&'a Spanned<String>>,
        store: Span,
        section: &str,
    ) -> Option<&'a str> {
        let help = "name the primary as the sentinels know it, e.g. `master = \"mymaster\"` \
                    (the NAME of `sentinel monitor NAME HOST PORT QUORUM`)";
        let (why, span) = match master {
            Some(m) if !m.value.trim().is_empty() => return Some(&m.value),
            Some(m) => ("an empty `master` name", m.span),
            None => ("no `master` name", store),
        };
        self.report(
            Diagnostic::error(
                codes::SENTINEL_MASTER_MISSING,
                format!("the `{section}` store `redis_sentinel` has {why}"),
                span,
            )
            .with_label_message("which primary?")
            .with_help(help),
        );
        None
    }

    /// The target the nodes make, or E073 on the node that disagrees with the first.
    fn target(
        &mut self,
        target: Result<RedisTarget, TargetError>,
        nodes: &Spanned<Vec<Spanned<String>>>,
    ) -> Option<StoreDef> {
        match target {
            Ok(target) => Some(StoreDef::Redis(target)),
            Err(why) => {
                let index = why.node().unwrap_or(0);
                let span = nodes.value.get(index).map_or(nodes.span, |n| n.span);
                let mut diagnostic = Diagnostic::error(
                    codes::MIXED_STORE_NODES,
                    format!("the store's nodes disagree: {why}"),
                    span,
                )
                .with_label_message("differs from the first node")
                .with_help(
                    "give every node the same scheme (`redis://` or `rediss://`), user name, \
                     password and database",
                );
                if let Some(first) = nodes.value.first() {
                    diagnostic = diagnostic.with_secondary(first.span, "the first node");
                }
                self.report(diagnostic);
                None
            }
        }
    }
}

/// A node as written, its password (if any) hidden.
fn redacted(text: &str) -> String {
    match RedisUrl::parse(text) {
        Ok(url) => url.redacted().into_owned(),
        Err(_) => text.to_owned(),
    }
}
