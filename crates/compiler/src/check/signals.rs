//! Signals: the order they are computed in, cycles among them, and their types.
//!
//! A signal's type is the type of its definition, which may read other signals, so signals are
//! typed in dependency order. The order comes from the names each definition mentions (a
//! syntactic over-approximation: `topic == code` mentions `code` even where `code` turns out to
//! be a label), split into strongly connected components with Tarjan's algorithm, run
//! iteratively so a long chain of signals cannot exhaust the stack. A component of one signal
//! that does not mention itself is typed directly; a larger one is typed twice: once to learn
//! which mentions are real signal uses, then in the order those real uses allow. Only a cycle of
//! real uses is an error (E014); the signals on it get no type, and their users stay quiet.

use super::names::Kind;
use super::{Checker, Scope};
use crate::hir::{SignalDef, SignalId};
use src_dsl::ast::{Expr, ExprKind};
use src_dsl::{codes, Diagnostic};

impl Checker<'_> {
    pub(super) fn check_signals(&mut self) {
        let n = self.decls.signals.len();
        let mentions: Vec<Vec<usize>> = self
            .decls
            .signals
            .iter()
            .map(|s| {
                let mut out = Vec::new();
                self.mentioned_signals(&s.expr, &mut out);
                out
            })
            .collect();
        let components = strongly_connected(&mentions);
        self.signal_types = vec![None; n];
        self.signal_ids = vec![SignalId(0); n];
        self.signal_exprs = vec![None; n];
        self.parts.signals = vec![None; n];
        let mut position = 0;
        for comp in &components {
            for (k, &s) in comp.iter().enumerate() {
                self.signal_ids[s] = SignalId((position + k) as u32);
            }
            let cyclic = comp.len() > 1 || mentions[comp[0]].contains(&comp[0]);
            if cyclic {
                self.type_component(comp, position);
            } else {
                let deps = self.type_signal(comp[0]);
                debug_assert!(!deps.contains(&comp[0]));
            }
            position += comp.len();
        }
    }

    /// Types one signal, recording its definition; returns the signals it really uses.
    fn type_signal(&mut self, s: usize) -> Vec<usize> {
        let signal = self.decls.signals[s];
        self.scope = Scope::Normal;
        self.signal_deps = Some(Vec::new());
        let typed = self.expr(&signal.expr, super::types::Hint::None);
        let deps = self.signal_deps.take().unwrap_or_default();
        let id = self.signal_ids[s];
        self.signal_types[s] = typed.as_ref().map(|t| t.ty);
        self.signal_exprs[id.index()] = typed.clone();
        self.parts.signals[id.index()] = typed.map(|expr| SignalDef {
            name: signal.name.name.clone(),
            span: signal.name.span,
            expr,
        });
        deps
    }

    /// Types a component whose signals mention each other (see the module comment).
    fn type_component(&mut self, comp: &[usize], position: usize) {
        let before = self.diags.len();
        let mut real: Vec<(usize, Vec<usize>)> = Vec::new();
        for &s in comp {
            let deps = self.type_signal(s);
            real.push((s, deps.into_iter().filter(|d| comp.contains(d)).collect()));
        }
        let graph: Vec<Vec<usize>> = comp
            .iter()
            .map(|s| {
                let deps = &real.iter().find(|(r, _)| r == s).map(|(_, d)| d.clone());
                deps.iter()
                    .flatten()
                    .filter_map(|d| comp.iter().position(|c| c == d))
                    .collect()
            })
            .collect();
        let inner = strongly_connected(&graph);
        let cycles: Vec<&Vec<usize>> = inner
            .iter()
            .filter(|c| c.len() > 1 || graph[c[0]].contains(&c[0]))
            .collect();
        if !cycles.is_empty() {
            for cycle in cycles {
                let members: Vec<usize> = cycle.iter().map(|&i| comp[i]).collect();
                self.report_cycle(&members, &graph, comp);
                for s in members {
                    let id = self.signal_ids[s];
                    self.signal_types[s] = None;
                    self.parts.signals[id.index()] = None;
                    self.signal_exprs[id.index()] = None;
                }
            }
            return;
        }
        // No real cycle: the mentions that made the component were labels. Type again in the
        // order of the real uses, replacing the first round's diagnostics.
        self.diags.truncate(before);
        let order: Vec<usize> = inner.iter().map(|c| comp[c[0]]).collect();
        for (k, &s) in order.iter().enumerate() {
            self.signal_ids[s] = SignalId((position + k) as u32);
            self.signal_types[s] = None;
        }
        for &s in &order {
            let _ = self.type_signal(s);
        }
    }

    fn report_cycle(&mut self, members: &[usize], graph: &[Vec<usize>], comp: &[usize]) {
        // The shortest walk of real uses from the first-declared member back to itself.
        let start = members.iter().copied().min().unwrap_or(members[0]);
        let uses = |s: usize| -> Vec<usize> {
            comp.iter()
                .position(|&c| c == s)
                .map(|i| graph[i].iter().map(|&j| comp[j]).collect())
                .unwrap_or_default()
        };
        let mut parent: Vec<(usize, usize)> = Vec::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut end = None;
        'search: while let Some(at) = queue.pop_front() {
            for next in uses(at) {
                if !members.contains(&next) {
                    continue;
                }
                if next == start {
                    end = Some(at);
                    break 'search;
                }
                if parent.iter().all(|(c, _)| *c != next) {
                    parent.push((next, at));
                    queue.push_back(next);
                }
            }
        }
        let mut path = vec![start];
        let mut at = end.unwrap_or(start);
        while at != start {
            path.push(at);
            at = parent
                .iter()
                .find(|(c, _)| *c == at)
                .map_or(start, |(_, p)| *p);
        }
        path.push(start);
        path.reverse();
        let names: Vec<&str> = path
            .iter()
            .map(|&s| self.decls.signals[s].name.name.as_str())
            .collect();
        let first = &self.decls.signals[start].name;
        let mut sorted = members.to_vec();
        sorted.sort_unstable();
        let all: Vec<&str> = sorted
            .iter()
            .map(|&s| self.decls.signals[s].name.name.as_str())
            .collect();
        let mut d = Diagnostic::error(
            codes::SIGNAL_CYCLE,
            if members.len() == 1 {
                format!("signal `{}` depends on itself", first.name)
            } else {
                format!("signals {} depend on each other", super::list_names(&all))
            },
            first.span,
        )
        .with_label_message("this signal is part of a cycle")
        .with_note(format!("cycle: {}", names.join(" -> ")))
        .with_help("a signal cannot use itself, directly or through other signals");
        for &s in members.iter().filter(|&&s| s != start) {
            let name = &self.decls.signals[s].name;
            d = d.with_secondary(name.span, format!("`{}` is on the cycle", name.name));
        }
        self.report(d);
    }

    /// Declaration indices of the signals an expression mentions by name.
    fn mentioned_signals(&self, e: &Expr, out: &mut Vec<usize>) {
        let mut stack = vec![e];
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Name(id) => {
                    if let Some(s) = self.decls.get(Kind::Signal, &id.name) {
                        if !out.contains(&s) {
                            out.push(s);
                        }
                    }
                }
                ExprKind::List(items) | ExprKind::Call(_, items) => stack.extend(items),
                ExprKind::Field(x, _)
                | ExprKind::Unary(_, x)
                | ExprKind::Is(x, _)
                | ExprKind::In(x, _)
                | ExprKind::Paren(x) => stack.push(x),
                ExprKind::Binary(_, a, b) => {
                    stack.push(a);
                    stack.push(b);
                }
                ExprKind::Bool(_)
                | ExprKind::Number(_)
                | ExprKind::Str(_)
                | ExprKind::Duration(_) => {}
            }
        }
    }
}

/// Tarjan's strongly connected components of `graph` (edges from a node to what it uses),
/// iteratively. Components come out dependencies first; nodes inside a component keep their
/// index order.
pub(super) fn strongly_connected(graph: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let n = graph.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        // (node, position of the next edge to follow)
        let mut work = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut edge)) = work.last_mut() {
            if let Some(&w) = graph[v].get(*edge) {
                *edge += 1;
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                comp.sort_unstable();
                out.push(comp);
            }
        }
    }
    out
}
