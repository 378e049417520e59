//! `block`s and the singleton sections: `cache`, `session`, `protect`, `failure`, `router`.
//!
//! Each is checked field by field and turned into its `hir` form with the defaults of
//! docs/language.md, "Declarations" written out, so later phases never re-derive a default: a
//! block refuses with 403, a session reads the affinity headers and the body fields agents send, and pins for ten minutes,
//! the router answers to `auto`, stores fail open and backends fail closed.

use super::decls::out_of_range;
use super::names::Kind;
use super::types::texpr;
use super::{Checker, Scope};
use crate::hir::{
    BlockActionDef, BlockDef, CacheDef, CooldownDef, EncoderId, FailureDef, HoldDef, ModelId,
    ProtectDef, RouterDef, SessionDef, StoreDef, TExpr, TExprKind, Type,
};
use src_dsl::ast::{self, BlockAction, FailMode, Missing, Outcomes, ProtectMode};
use src_dsl::{codes, Diagnostic, Span};

/// Session pins last ten minutes unless `ttl` says otherwise.
const DEFAULT_SESSION_TTL_MS: u64 = 10 * 60 * 1000;
/// A refusing block answers 403 unless `status` says otherwise.
const DEFAULT_BLOCK_STATUS: u16 = 403;
/// The headers a session id is read from by default, first present wins.
const AFFINITY_HEADERS: [&str; 3] = ["x-model-affinity", "x-session-id", "x-conversation-id"];
/// Then the body fields each API's agents send to name their task, first present wins:
/// Anthropic's clients `metadata.user_id` (Claude Code puts its session in it), Responses a
/// `conversation` (an object with an `id`, or the id itself; a turn continuing a response the
/// router holds reads as naming its conversation's first response), OpenAI's agents a
/// `prompt_cache_key` per conversation, and chat completions its end-user `user`.
const AFFINITY_FIELDS: [&str; 5] = [
    "metadata.user_id",
    "conversation.id",
    "conversation",
    "prompt_cache_key",
    "user",
];

impl Checker<'_> {
    pub(super) fn check_blocks(&mut self) {
        self.scope = Scope::Normal;
        for b in self.decls.blocks.clone() {
            let when = b.when.as_ref().and_then(|w| {
                self.expect_bool(w, &format!("the condition of block `{}`", b.name.name))
            });
            let action = match &b.action {
                BlockAction::Refuse { status, message } => {
                    let status = match status {
                        None => Some(DEFAULT_BLOCK_STATUS),
                        Some(s) => match s.value.as_int() {
                            Some(n @ 400..=599) => Some(n as u16),
                            _ => {
                                self.report(out_of_range(
                                    format!(
                                        "status of block `{}` must be an HTTP error status (400 to 599), found `{}`",
                                        b.name.name, s.value.text
                                    ),
                                    s.span,
                                    "a block refuses the request: use a 4xx or 5xx status such as 403 or 422",
                                ));
                                None
                            }
                        },
                    };
                    status.map(|status| BlockActionDef::Refuse {
                        status,
                        message: message.as_ref().map(|m| m.value.clone()),
                    })
                }
                BlockAction::Redirect { model } => {
                    self.select_model(model).map(BlockActionDef::Redirect)
                }
            };
            let redact = self.block_redact(b);
            let def = match (when, action, redact) {
                (Some(when), Some(action), Some(redact)) => Some(BlockDef {
                    name: b.name.name.clone(),
                    span: b.name.span,
                    when,
                    action,
                    redact,
                }),
                _ => None,
            };
            self.parts.blocks.push(def);
        }
    }

    /// A model a route, fallback or block sends requests to.
    pub(super) fn select_model(&mut self, ident: &ast::Ident) -> Option<ModelId> {
        let index = self.resolve(ident, Kind::Model)?;
        self.uses.models[index] = true;
        Some(ModelId(index as u32))
    }

    pub(super) fn check_sections(&mut self) {
        self.check_cache();
        self.check_session();
        self.check_protect();
        let failure = self.decls.failure.map(|(f, _)| f);
        let mode = |m: &Option<src_dsl::Spanned<FailMode>>| m.as_ref().map(|m| m.value);
        let cooldown = failure.and_then(|f| self.check_cooldown(f));
        self.parts.failure = Some(FailureDef {
            classifier: failure.and_then(|f| mode(&f.classifier)),
            store: failure
                .and_then(|f| mode(&f.store))
                .unwrap_or(FailMode::Open),
            backend: failure
                .and_then(|f| mode(&f.backend))
                .unwrap_or(FailMode::Closed),
            cooldown,
        });
        let router = self.decls.router.map(|(r, _)| r);
        if let Some(share) = router
            .and_then(|r| r.anonymous.as_ref())
            .filter(|a| a.value == src_dsl::ast::Anonymous::Share)
        {
            let cache = if self.decls.cache.is_some() {
                "cached answers and "
            } else {
                ""
            };
            self.report(
                Diagnostic::warning(
                    codes::ANONYMOUS_SHARED,
                    format!(
                        "requests without a credential share {cache}stored responses: any \
                         client without a key reads what another one was answered"
                    ),
                    share.span,
                )
                .with_label_message("one tenant for every keyless client")
                .with_help(
                    "keep `share` only for an open fleet whose clients send no key; \
                     `anonymous = isolate` (the default) gives them no cache and no stored responses",
                ),
            );
        }
        self.parts.router = Some(RouterDef {
            names: router
                .and_then(|r| r.names.as_ref())
                .map(|n| n.value.iter().map(|s| s.value.clone()).collect())
                .unwrap_or_else(|| vec!["auto".to_string()]),
            tokenizer: router
                .and_then(|r| r.tokenizer.as_ref())
                .map(|t| self.resolve_path(&t.value)),
            anonymous: router
                .and_then(|r| r.anonymous.as_ref())
                .map(|a| a.value)
                .unwrap_or_default(),
        });
    }

    /// `cooldown_after` must be a positive integer and `cooldown` positive (E045); either one
    /// turns the cooldown on, the other taking its default.
    fn check_cooldown(&mut self, failure: &ast::Failure) -> Option<CooldownDef> {
        if failure.cooldown_after.is_none() && failure.cooldown.is_none() {
            return None;
        }
        let after = match &failure.cooldown_after {
            None => Some(CooldownDef::DEFAULT_AFTER),
            Some(n) => match n.value.as_int().map(u32::try_from) {
                Some(Ok(after)) if after > 0 => Some(after),
                _ => {
                    self.report(out_of_range(
                        format!(
                            "`cooldown_after` must be a positive integer, found `{}`",
                            n.value.text
                        ),
                        n.span,
                        "write how many failures in a row start a model's cooldown, e.g. \
                         `cooldown_after = 3`",
                    ));
                    None
                }
            },
        };
        let millis = match &failure.cooldown {
            None => Some(CooldownDef::DEFAULT_MILLIS),
            Some(d) if d.value.millis == 0 => {
                self.report(out_of_range(
                    "`cooldown` must be positive".to_owned(),
                    d.span,
                    "write how long a failing model is skipped, e.g. `cooldown = 30s`",
                ));
                None
            }
            Some(d) => Some(d.value.millis),
        };
        Some(CooldownDef {
            after: after?,
            millis: millis?,
        })
    }

    fn check_cache(&mut self) {
        let Some((cache, _)) = self.decls.cache else {
            return;
        };
        self.scope = Scope::Normal;
        let encoder = cache.encoder.as_ref().and_then(|e| {
            let index = self.resolve(e, Kind::Encoder)?;
            self.uses.encoders[index] = true;
            Some(EncoderId(index as u32))
        });
        let threshold = cache.threshold.as_ref().and_then(|t| {
            if (0.0..=1.0).contains(&t.value.value) {
                Some(t.value.value)
            } else {
                self.report(
                    Diagnostic::error(
                        codes::SCORE_RANGE,
                        format!("cache threshold `{}` lies outside [0, 1]", t.value.text),
                        t.span,
                    )
                    .with_label_message("a similarity threshold is a score")
                    .with_help("use a cosine similarity between 0 and 1, e.g. `threshold = 0.92`"),
                );
                None
            }
        });
        let ttl_ok = self.positive_ttl(&cache.ttl, "cache");
        let max_entries = self.cache_bound(&cache.max_entries, "max_entries", "100k");
        let max_bytes = self.cache_bound(&cache.max_bytes, "max_bytes", "512M");
        let store = self.store(&cache.store, "cache");
        if store.as_ref().is_some_and(|s| *s != StoreDef::Memory) {
            self.unused_cache_bounds(cache);
        }
        let skip = match &cache.skip_when {
            Some(e) => self
                .expect_bool(e, "the `skip when` condition of `cache`")
                .map(Some),
            None => Some(None),
        };
        let def = match (encoder, threshold, store, skip, max_entries, max_bytes) {
            (
                Some(encoder),
                Some(threshold),
                Some(store),
                Some(skip_when),
                Some(max_entries),
                Some(max_bytes),
            ) if ttl_ok => Some(CacheDef {
                encoder,
                threshold,
                ttl_ms: cache.ttl.as_ref().map(|t| t.value.millis),
                store,
                max_entries,
                max_bytes,
                skip_when,
            }),
            _ => None,
        };
        self.parts.cache = Some(def);
    }

    /// W042: the bounds are the memory store's; a shared store keeps entries by scope and ttl.
    fn unused_cache_bounds(&mut self, cache: &ast::Cache) {
        let bounds = [
            ("max_entries", &cache.max_entries),
            ("max_bytes", &cache.max_bytes),
        ];
        for (key, bound) in bounds {
            let Some(n) = bound else { continue };
            self.report(
                Diagnostic::warning(
                    codes::UNUSED_CACHE_BOUND,
                    format!("cache `{key}` bounds only the memory store; it does nothing here"),
                    n.span,
                )
                .with_label_message("ignored by a shared store")
                .with_help(
                    "a shared store keeps each scope's newest entries until their `ttl`: remove \
                     the line, or size the shared store itself",
                ),
            );
        }
    }

    /// `max_entries` / `max_bytes`: a whole number of at least 1 (E085). `Some(None)` when not
    /// written, `None` when written wrong.
    fn cache_bound(
        &mut self,
        bound: &Option<src_dsl::Spanned<ast::Number>>,
        key: &str,
        example: &str,
    ) -> Option<Option<u64>> {
        let Some(n) = bound else {
            return Some(None);
        };
        match n.value.as_int() {
            Some(v) if v >= 1 => Some(Some(v as u64)),
            _ => {
                self.report(
                    Diagnostic::error(
                        codes::CACHE_BOUND,
                        format!("cache `{key}` must be a positive whole number"),
                        n.span,
                    )
                    .with_label_message(format!("found `{}`", n.value.text))
                    .with_help(format!(
                        "the memory store keeps at most this many {}: write e.g. `{key} = \
                         {example}` (`k` is ×1,000, `M` ×1,000,000), or remove the line for the \
                         default",
                        if key == "max_bytes" {
                            "bytes"
                        } else {
                            "entries"
                        }
                    )),
                );
                None
            }
        }
    }

    fn positive_ttl(&mut self, ttl: &Option<src_dsl::Spanned<ast::Duration>>, what: &str) -> bool {
        match ttl {
            Some(t) if t.value.millis == 0 => {
                self.report(out_of_range(
                    format!("ttl of `{what}` must be positive"),
                    t.span,
                    "a zero ttl would expire every entry at once: write e.g. `ttl = 10m`",
                ));
                false
            }
            _ => true,
        }
    }

    fn check_session(&mut self) {
        let Some((session, span)) = self.decls.session else {
            return;
        };
        self.scope = Scope::Normal;
        let id = match &session.id {
            Some(e) => self.session_text(e, "`session.id`"),
            None => Some(default_session_id(span)),
        };
        let tenant = match &session.tenant {
            Some(e) => self.session_text(e, "`session.tenant`").map(Some),
            None => Some(None),
        };
        let ttl_ok = self.positive_ttl(&session.ttl, "session");
        let store = self.store(&session.store, "session");
        let def = match (id, tenant, store) {
            (Some(id), Some(tenant), Some(store)) if ttl_ok => Some(SessionDef {
                id,
                tenant,
                ttl_ms: session
                    .ttl
                    .as_ref()
                    .map_or(DEFAULT_SESSION_TTL_MS, |t| t.value.millis),
                store,
                missing: session.missing.as_ref().map_or(Missing::Route, |m| m.value),
                outcomes: session.outcomes.as_ref().map_or(Outcomes::Any, |o| o.value),
            }),
            _ => None,
        };
        self.parts.session = Some(def);
    }

    /// A session key expression: `text` or `text?`.
    fn session_text(&mut self, e: &ast::Expr, what: &str) -> Option<TExpr> {
        let t = self.expr(e, super::types::Hint::None)?;
        if t.ty.is_textual() {
            return Some(t);
        }
        self.mismatch(e.span, &format!("{what} must be text or `text?`"), t.ty);
        None
    }

    fn check_protect(&mut self) {
        let Some((protect, _)) = self.decls.protect else {
            return;
        };
        self.scope = Scope::Protect;
        let mut holds = Vec::with_capacity(protect.holds.len());
        for h in &protect.holds {
            let when = self.expect_bool(
                &h.when,
                &format!("the condition of hold \"{}\"", h.name.value),
            );
            holds.push(when.map(|when| HoldDef {
                name: h.name.value.clone(),
                span: h.span,
                when,
            }));
        }
        self.scope = Scope::Normal;
        let holds: Option<Vec<HoldDef>> = holds.into_iter().collect();
        self.parts.protect = Some(holds.map(|holds| {
            ProtectDef {
                mode: protect
                    .mode
                    .as_ref()
                    .map_or(ProtectMode::Enforce, |m| m.value),
                holds,
                owner_lost: protect.owner_lost.as_ref().map(|o| o.value),
            }
        }));
    }
}

/// The [`AFFINITY_HEADERS`], then the [`AFFINITY_FIELDS`], each `??` the next:
/// `header("x-model-affinity") ?? … ?? body("metadata.user_id") ?? … ?? body("user")`.
fn default_session_id(span: Span) -> TExpr {
    let sources = AFFINITY_HEADERS
        .iter()
        .map(|h| TExprKind::Header((*h).to_string()))
        .chain(
            AFFINITY_FIELDS
                .iter()
                .map(|f| TExprKind::Body((*f).to_string())),
        )
        .map(|kind| texpr(kind, Type::OptText, span));
    let mut chain: Option<TExpr> = None;
    for source in sources {
        chain = Some(match chain {
            None => source,
            Some(first) => texpr(
                TExprKind::Coalesce(Box::new(first), Box::new(source)),
                Type::OptText,
                span,
            ),
        });
    }
    chain.unwrap_or_else(|| texpr(TExprKind::Str(String::new()), Type::OptText, span))
}
