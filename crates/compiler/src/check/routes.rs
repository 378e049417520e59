//! Routes: targets, priorities and the default route, and the order routes are tried in.
//!
//! Every request must land somewhere and never on a coin toss, so the route table must have
//! exactly one default (a route without `when`, tried last), a priority on every other route,
//! and no two routes sharing a priority; a model listed twice among a route's candidates is
//! tried once, so the second mention is pointed out (W012). The checked routes are sorted by
//! descending priority with the default last, the order the runtime tries them in. Whether a
//! route can ever win is [`super::implication`]'s question.

use super::{Checker, Scope};
use crate::hir::{ModelId, RouteDef, ToolsDef};
use src_dsl::ast::{self, Tools};
use src_dsl::{codes, Diagnostic, Span};
use std::collections::HashMap;

impl Checker<'_> {
    pub(super) fn check_routes(&mut self) {
        self.scope = Scope::Normal;
        let routes = self.decls.routes.clone();
        // (declaration index, priority) of routes with a usable priority.
        let mut ranked: Vec<(usize, i64)> = Vec::new();
        let mut defaults: Vec<usize> = Vec::new();
        let mut by_priority: HashMap<i64, usize> = HashMap::new();
        let mut defs: Vec<Option<RouteDef>> = Vec::with_capacity(routes.len());
        for (i, r) in routes.iter().enumerate() {
            let priority = r.priority.as_ref().and_then(|p| self.priority(r, p));
            match (&r.when, &r.priority) {
                (None, Some(p)) => {
                    self.report(
                        Diagnostic::warning(
                            codes::PRIORITY_ON_DEFAULT,
                            format!("the priority of default route `{}` is ignored", r.name.name),
                            p.span,
                        )
                        .with_label_message("ignored")
                        .with_help("a route without `when` is the default and is always tried last: remove the priority"),
                    );
                    defaults.push(i);
                }
                (None, None) => defaults.push(i),
                (Some(_), None) => self.report(
                    Diagnostic::error(
                        codes::MISSING_PRIORITY,
                        format!("route `{}` has a `when` condition but no priority", r.name.name),
                        r.name.span,
                    )
                    .with_label_message("needs a priority")
                    .with_help(format!(
                        "routes are tried by descending priority: write `route {} priority N {{ ... }}`",
                        r.name.name
                    )),
                ),
                (Some(_), Some(p)) => {
                    if let Some(n) = priority {
                        match by_priority.get(&n) {
                            Some(&first) => {
                                let other = routes[first];
                                let d = Diagnostic::error(
                                    codes::DUPLICATE_PRIORITY,
                                    format!(
                                        "routes `{}` and `{}` share priority {n}",
                                        other.name.name, r.name.name
                                    ),
                                    p.span,
                                )
                                .with_label_message("same priority again")
                                .with_secondary(
                                    other.priority.as_ref().map_or(other.name.span, |p| p.span),
                                    format!("priority of `{}`", other.name.name),
                                )
                                .with_help("which route is tried first would be undefined: give each route its own priority");
                                self.report(d);
                            }
                            None => {
                                by_priority.insert(n, i);
                                ranked.push((i, n));
                            }
                        }
                    }
                }
            }
            defs.push(self.route_def(r, priority));
        }
        self.check_defaults(&routes, &defaults);
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut order: Vec<usize> = ranked.iter().map(|(i, _)| *i).collect();
        order.extend(defaults.first());
        // Routes left out of the order (a missing priority, a second default) have errors; they
        // still count, so that the table has a hole and no policy comes out.
        let complete = order.len() == routes.len();
        self.route_order = order.clone();
        self.parts.routes = order.iter().map(|&i| defs[i].take()).collect();
        if !complete {
            self.parts.routes.push(None);
        }
    }

    fn priority(&mut self, r: &ast::Route, p: &src_dsl::Spanned<ast::Number>) -> Option<i64> {
        match p.value.as_int() {
            Some(n) if n >= 0 => Some(n),
            _ => {
                self.report(
                    Diagnostic::error(
                        codes::INVALID_PRIORITY,
                        format!(
                            "the priority of route `{}` must be a non-negative integer, found `{}`",
                            r.name.name, p.value.text
                        ),
                        p.span,
                    )
                    .with_label_message("not a non-negative integer")
                    .with_help("priorities are whole numbers; higher ones are tried first"),
                );
                None
            }
        }
    }

    fn check_defaults(&mut self, routes: &[&ast::Route], defaults: &[usize]) {
        match defaults {
            [] => {
                let at = routes.first().map_or(self.decls.start, |r| r.name.span);
                let d = Diagnostic::error(
                    codes::NO_DEFAULT_ROUTE,
                    "the policy has no default route",
                    at,
                )
                .with_label_message(if routes.is_empty() {
                    "no route at all"
                } else {
                    "every route has a condition"
                })
                .with_help("add a route without `when`, tried when no other route holds: `route default { to MODEL }`");
                self.report(d);
            }
            [first, rest @ ..] => {
                let first = routes[*first];
                for &i in rest {
                    let r = routes[i];
                    self.report(
                        Diagnostic::error(
                            codes::MULTIPLE_DEFAULT_ROUTES,
                            format!(
                                "routes `{}` and `{}` are both default routes",
                                first.name.name, r.name.name
                            ),
                            r.name.span,
                        )
                        .with_label_message("a second route without `when`")
                        .with_secondary(first.name.span, "the first default route")
                        .with_help(format!(
                            "give `{}` a `when` condition and a priority, or remove it",
                            r.name.name
                        )),
                    );
                }
            }
        }
    }

    fn route_def(&mut self, r: &ast::Route, priority: Option<i64>) -> Option<RouteDef> {
        let when = r
            .when
            .as_ref()
            .map(|w| self.expect_bool(w, &format!("the condition of route `{}`", r.name.name)));
        let to = r.to.as_ref().and_then(|m| self.select_model(m));
        let mut fallbacks = Vec::with_capacity(r.fallbacks.len());
        let mut fallbacks_ok = true;
        let mut listed: Vec<(ModelId, Span)> = Vec::new();
        listed.extend(to.zip(r.to.as_ref().map(|m| m.span)));
        for f in &r.fallbacks {
            match self.select_model(f) {
                Some(m) => {
                    fallbacks.push(m);
                    match listed.iter().find(|(seen, _)| *seen == m) {
                        Some(&(_, first)) => self.report(repeated_candidate(r, f, first)),
                        None => listed.push((m, f.span)),
                    }
                }
                None => fallbacks_ok = false,
            }
        }
        let header_fields = match &r.headers {
            Some(h) => self.header_fields(&r.name, &h.value),
            None => Some(Vec::new()),
        };
        let when = match when {
            Some(Some(w)) => Some(w),
            Some(None) => return None,
            None => None,
        };
        let redact = self.redact(&r.name, r.redact.as_ref());
        let header_fields = header_fields?;
        if !fallbacks_ok {
            return None;
        }
        Some(RouteDef {
            name: r.name.name.clone(),
            span: r.name.span,
            priority: if when.is_some() { priority } else { None },
            when,
            to: to?,
            fallbacks,
            system_prompt: r
                .system_prompt
                .as_ref()
                .map(|s| (s.text.value.clone(), s.replace)),
            headers: r
                .headers
                .as_ref()
                .map(|h| {
                    h.value
                        .iter()
                        .map(|h| (h.name.value.clone(), h.value.value.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            header_fields,
            reasoning: r.reasoning.as_ref().map(|r| r.value),
            tools: match r.tools.as_ref().map(|t| &t.value) {
                None | Some(Tools::Keep) => ToolsDef::Keep,
                Some(Tools::None) => ToolsDef::None,
                Some(Tools::Only(names)) => {
                    ToolsDef::Only(names.iter().map(|n| n.value.clone()).collect())
                }
            },
            cache: r.cache.as_ref().is_none_or(|c| c.value),
            redact: redact?,
        })
    }

    /// The position of a route (by declaration index) in the checked, sorted table.
    pub(super) fn route_position(&self, decl: usize) -> Option<usize> {
        self.route_order.iter().position(|&i| i == decl)
    }

    /// The name span of the route at a position of the sorted table.
    pub(super) fn route_at(&self, position: usize) -> Option<(&str, Span)> {
        let decl = *self.route_order.get(position)?;
        let r = self.decls.routes.get(decl)?;
        Some((r.name.name.as_str(), r.name.span))
    }
}

/// W012: a model that is already among the route's candidates, which the request procedure
/// tries once (docs/language.md, "What happens to a request").
fn repeated_candidate(r: &ast::Route, again: &ast::Ident, first: Span) -> Diagnostic {
    Diagnostic::warning(
        codes::REPEATED_CANDIDATE,
        format!(
            "model `{}` is listed twice among the candidates of route `{}`",
            again.name, r.name.name
        ),
        again.span,
    )
    .with_label_message("listed again here")
    .with_secondary(first, "first listed here")
    .with_help("a model is tried once, so this mention does nothing: remove it, or name the fallback you meant")
}
