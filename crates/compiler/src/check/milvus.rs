//! The `milvus("http://HOST:19530", collection = "…")` store: E091 (a URL the client cannot
//! open), E092 (a collection name Milvus refuses), E093 (an option other than `collection`),
//! E094 (a session on Milvus) and W044 (a URL on Milvus's metrics port).
//!
//! The URL and the collection are parsed here into the [`MilvusTarget`] the runtime opens as it
//! is, so a policy that checks never fails every lookup for its store's address.

use super::names::nearest;
use super::Checker;
use crate::hir::{MilvusTarget, StoreDef};
use crate::milvus_target::{collection_problem, DEFAULT_PORT, METRICS_PORT};
use src_dsl::ast::Ident;
use src_dsl::{codes, Diagnostic, Span, Spanned};

/// The named options `milvus(..)` takes.
const OPTIONS: [&str; 1] = ["collection"];

const URL_HELP: &str = "write `http://HOST:19530` (`https://` for TLS; \
     `http://USER:PASSWORD@HOST:19530` when Milvus checks credentials)";

impl Checker<'_> {
    /// `milvus(url, collection = "…")` as the store of `section`.
    pub(super) fn milvus(
        &mut self,
        url: &Spanned<String>,
        options: &[(Ident, Spanned<String>)],
        store: Span,
        section: &str,
    ) -> Option<StoreDef> {
        if section != "cache" {
            self.report(
                Diagnostic::error(
                    codes::MILVUS_OUTSIDE_CACHE,
                    format!("the `{section}` store cannot be Milvus"),
                    store,
                )
                .with_label_message("a vector database")
                .with_help(format!(
                    "Milvus holds cached answers only; keep the `{section}` store in `memory` \
                     or on Redis (`redis(\"redis://host:6379/0\")`)"
                )),
            );
            return None;
        }
        let collection = self.milvus_options(options);
        let target = match MilvusTarget::parse(&url.value, None) {
            Ok(target) => Some(target),
            Err(why) => {
                self.report(
                    Diagnostic::error(
                        codes::INVALID_MILVUS_URL,
                        format!("the `{section}` store is not a Milvus URL: {why}"),
                        url.span,
                    )
                    .with_label_message("not a Milvus URL")
                    .with_help(URL_HELP),
                );
                None
            }
        };
        if let Some(target) = &target {
            if target.port() == Some(METRICS_PORT) {
                self.report(
                    Diagnostic::warning(
                        codes::MILVUS_METRICS_PORT,
                        format!(
                            "port {METRICS_PORT} is Milvus's metrics and health port, which \
                             serves no gRPC API"
                        ),
                        url.span,
                    )
                    .with_label_message("the metrics port")
                    .with_help(format!(
                        "Milvus answers gRPC on port {DEFAULT_PORT} unless configured otherwise"
                    )),
                );
            }
        }
        let (mut target, collection) = (target?, collection?);
        if let Some(name) = collection {
            target.collection = name.to_owned();
        }
        Some(StoreDef::Milvus(target))
    }

    /// The collection named in `options` (`Some(None)`: the default); `None` after an error.
    fn milvus_options<'a>(
        &mut self,
        options: &'a [(Ident, Spanned<String>)],
    ) -> Option<Option<&'a str>> {
        let mut ok = true;
        let mut collection = None;
        for (name, value) in options {
            if !OPTIONS.contains(&name.name.as_str()) {
                ok = false;
                let d = Diagnostic::error(
                    codes::UNKNOWN_MILVUS_OPTION,
                    format!("`milvus(..)` has no option `{}`", name.name),
                    name.span,
                )
                .with_label_message("unknown option");
                let d = match nearest(&name.name, OPTIONS) {
                    Some(close) => d
                        .with_help(format!("did you mean `{close}`?"))
                        .with_fix(name.span, close),
                    None => {
                        d.with_help("`milvus(..)` takes the URL and `collection = \"NAME\"` only")
                    }
                };
                self.report(d);
                continue;
            }
            if collection.is_some() {
                ok = false;
                self.report(
                    Diagnostic::error(
                        codes::UNKNOWN_MILVUS_OPTION,
                        "`collection` is given twice",
                        name.span,
                    )
                    .with_label_message("given again")
                    .with_help("name one collection"),
                );
                continue;
            }
            if let Some(why) = collection_problem(&value.value) {
                ok = false;
                self.report(
                    Diagnostic::error(
                        codes::INVALID_MILVUS_COLLECTION,
                        format!(
                            "Milvus refuses the collection name `{}`: {why}",
                            value.value
                        ),
                        value.span,
                    )
                    .with_label_message("not a collection name")
                    .with_help(
                        "use letters, digits and `_`, starting with a letter or `_`, e.g. \
                         `collection = \"src_cache\"`",
                    ),
                );
                continue;
            }
            collection = Some(value.value.as_str());
        }
        ok.then_some(collection)
    }
}
