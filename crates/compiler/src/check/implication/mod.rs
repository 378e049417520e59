//! Routes that can never win (W004): a route whose every matching request is already taken by
//! routes tried before it.
//!
//! Each condition becomes a disjunction of conjunctions (DNF) over atoms, with negation pushed
//! down to the atoms and boolean signals expanded into their definitions:
//! - a comparison of one numeric expression with a literal is an interval of that expression
//!   (int expressions use closed integer bounds, so `n > 3` and `n >= 4` are the same atom);
//! - `is`, `in`, `==` and `!=` of one class value against labels is a set of its labels, so
//!   distinct labels of one classifier exclude each other;
//! - any other boolean expression is an opaque atom, true or false.
//!
//! Atoms are keyed by the structure of the expression they constrain (hash-consed, spans and
//! signal names ignored), so `topic is math` in two routes, or written once through a signal,
//! is the same atom. A conjunction C of route B is implied by a conjunction A of an earlier route
//! when every atom A constrains is constrained at least as tightly by C; B can never win when
//! each of its conjunctions is implied by one of the earlier routes'. The default route is
//! analysed too, as the one conjunction `true`. A condition that is unsatisfiable (`n > 5 and
//! n < 3`) also never wins.
//!
//! When no single earlier conjunction implies C, earlier routes may still take C's requests
//! together (`n > 5` in one route, `n <= 5 and flag` in another, then `flag`): if an earlier
//! conjunction A is met by C in every constraint but one, the part of C inside that constraint
//! is implied by A, and the parts outside it must be implied by one earlier conjunction or split
//! again. The pieces partition C, so this adds warnings only where they are true.
//!
//! The analysis is sound (it never warns wrongly) and bounded:
//! - a condition whose DNF has more than [`MAX_CONJUNCTS`] conjunctions is not analysed, and is
//!   not used to shadow later routes;
//! - earlier conjunctions are indexed by their smallest atom key (any conjunction implying C
//!   constrains only keys C constrains, so it is found under one of C's keys), and at most
//!   [`MAX_CANDIDATES`] candidates are examined per conjunction;
//! - splitting considers only earlier conjunctions that constrain a key the piece constrains
//!   (for `true`, those of a single atom), and stops after [`MAX_PIECES`] pieces and
//!   [`MAX_OVERLAPS`] candidates per conjunction.
//!
//! So the work is at most routes × 64 × 256 implication tests, each linear in the atoms of a
//! conjunction: linear in the number of routes, never quadratic without bound. Giving up only
//! ever means missing a warning.
//!
//! The parts, one concern each:
//! - [`algebra`]: constraints on one key, conjunctions and DNFs, and what they imply;
//! - [`canon`]: conditions in canonical form: hash-consed atom keys and their DNF;
//! - [`cover`]: the earlier routes' conjunctions and the search for ones that cover a new one.

mod algebra;
mod canon;
mod cover;

use super::Checker;
use canon::Analysis;
use cover::{Budget, Pool};
use src_dsl::{codes, Diagnostic};

/// A condition with more conjunctions than this is not analysed.
const MAX_CONJUNCTS: usize = 64;
/// At most this many earlier conjunctions are examined per conjunction.
const MAX_CANDIDATES: usize = 256;
/// At most this many pieces are made of one conjunction when several routes may cover it.
const MAX_PIECES: usize = 8;
/// At most this many earlier conjunctions are tested for overlap while splitting one.
const MAX_OVERLAPS: usize = 32;

impl Checker<'_> {
    /// Reports W004 for every route that can never win (see the module comment).
    pub(super) fn check_shadowed_routes(&mut self) {
        let class_sizes = self.class_labels.iter().map(Vec::len).collect();
        let signal_exprs = std::mem::take(&mut self.signal_exprs);
        let mut analysis = Analysis::new(&signal_exprs, class_sizes);
        let mut pool = Pool::default();
        let mut found = Vec::new();
        for (position, route) in self.parts.routes.iter().enumerate() {
            let Some(route) = route else { continue };
            let dnf = match &route.when {
                Some(w) => analysis.dnf(w, true),
                None => Some(vec![Vec::new()]),
            };
            let Some(dnf) = dnf else { continue };
            if dnf.is_empty() {
                found.push((position, Vec::new()));
                continue;
            }
            let mut covering: Vec<usize> = Vec::new();
            let mut shadowed = true;
            for c in &dnf {
                let mut budget = Budget {
                    pieces: MAX_PIECES,
                    overlaps: MAX_OVERLAPS,
                };
                if !pool.cover_together(c, &analysis.domains, &mut budget, &mut covering) {
                    shadowed = false;
                    break;
                }
            }
            if shadowed {
                covering.sort_unstable();
                found.push((position, covering));
            }
            for c in dnf {
                pool.add(c, position);
            }
        }
        drop(analysis);
        self.signal_exprs = signal_exprs;
        for (position, covering) in found {
            self.report_shadowed(position, &covering);
        }
    }

    fn report_shadowed(&mut self, position: usize, covering: &[usize]) {
        let Some(route) = self.parts.routes.get(position).and_then(Option::as_ref) else {
            return;
        };
        let (name, span) = (route.name.clone(), route.span);
        let when_span = route.when.as_ref().map(|w| w.span);
        let mut d = if covering.is_empty() {
            Diagnostic::warning(
                codes::SHADOWED_ROUTE,
                format!("route `{name}` can never win: its condition never holds"),
                when_span.unwrap_or(span),
            )
            .with_label_message("this condition is always false")
            .with_help("fix the condition, or remove the route")
        } else {
            let names: Vec<String> = covering
                .iter()
                .filter_map(|&p| self.route_at(p).map(|(n, _)| n.to_string()))
                .collect();
            Diagnostic::warning(
                codes::SHADOWED_ROUTE,
                format!("route `{name}` can never win"),
                span,
            )
            .with_label_message(format!(
                "every request it matches is taken first by {}",
                super::list_names(&names)
            ))
            .with_help("remove it, raise its priority above theirs, or narrow their conditions")
        };
        for &p in covering {
            if let Some((n, s)) = self.route_at(p) {
                let n = n.to_string();
                d = d.with_secondary(s, format!("`{n}` is tried before `{name}`"));
            }
        }
        self.report(d);
    }
}

#[cfg(test)]
mod tests;
