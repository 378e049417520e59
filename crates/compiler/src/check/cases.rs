//! `test` declarations: their inputs, stubbed signal values and expectations.
//!
//! Tests run offline, so a test must stub (`given`) every model-backed signal its case needs.
//! Which signals a case reaches depends on the prompt and on the order the runtime evaluates
//! signals in (cheap ones first), so `check` only reports the ones every evaluation order needs
//! (E050): to expect route R, every earlier route's condition must be false and R's true, and a
//! model call is needed when no way of making each condition come out right avoids it. (`a and
//! b` true needs what either side needs; `a or b` true needs only what both sides need.) `src
//! test` reports the rest when it runs.

use super::names::Kind;
use super::types::literal_number;
use super::Checker;
use crate::hir::{
    BudgetAction, BudgetId, ExpectDef, ModelId, RouteId, SignalId, TExpr, TExprKind, TestDef,
    TestInputDef, Type, Value,
};
use crate::load::io_reason;
use src_dsl::ast::{self, Expectation, ExprKind, TestInput};
use src_dsl::{codes, Diagnostic, Span};
use std::collections::HashMap;
use std::path::PathBuf;

/// How deep `given` reachability follows signals into signals before giving up (quietly: a
/// missed report is caught by `src test` at run time).
const MAX_SIGNAL_DEPTH: usize = 64;

/// A model call a test case needs: inside a signal (named so that `given` can stub it), or
/// written directly in a condition (at its span).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Need {
    Signal(u32),
    Call(u32, u32, u32),
}

impl Checker<'_> {
    pub(super) fn check_tests(&mut self) {
        for t in self.decls.tests.clone() {
            let def = self.test_def(t);
            self.parts.tests.push(def);
        }
    }

    fn test_def(&mut self, t: &ast::Test) -> Option<TestDef> {
        let input = match &t.input {
            Some(TestInput::Prompt(p)) => Some(TestInputDef::Prompt(p.value.clone())),
            Some(TestInput::Messages(m)) => self.messages(t, m),
            None => None,
        };
        let mut givens = Vec::with_capacity(t.givens.len());
        let mut budget_givens = Vec::new();
        let mut givens_ok = true;
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for g in &t.givens {
            if let Some(first) = seen.insert(&g.signal.name, g.signal.span) {
                self.report(
                    Diagnostic::error(
                        codes::DUPLICATE_NAME,
                        format!(
                            "`{}` is given twice in test `{}`",
                            g.signal.name, t.name.name
                        ),
                        g.signal.span,
                    )
                    .with_label_message("given again here")
                    .with_secondary(first, "first given here")
                    .with_help("keep one value per signal"),
                );
                givens_ok = false;
                continue;
            }
            let budget = self.decls.get(Kind::Budget, &g.signal.name);
            if let (Some(b), None) = (budget, self.decls.value(&g.signal.name)) {
                match self.budget_given(g) {
                    Some(share) => budget_givens.push((BudgetId(b as u32), share)),
                    None => givens_ok = false,
                }
                continue;
            }
            match self.given(g) {
                Some(v) => givens.push(v),
                None => givens_ok = false,
            }
        }
        let (expect, expect_model) = self.expectation(&t.expect.as_ref()?.value)?;
        if !givens_ok {
            return None;
        }
        self.report_needs(t, &givens, &expect);
        Some(TestDef {
            name: t.name.name.clone(),
            span: t.name.span,
            input: input?,
            system: t.system.as_ref().map(|s| s.value.clone()),
            headers: t
                .headers
                .iter()
                .map(|h| (h.name.value.clone(), h.value.value.clone()))
                .collect(),
            givens,
            budget_givens,
            expect,
            expect_model,
        })
    }

    /// A `given BUDGET = SHARE`: the share of the budget used before the request, in [0, 1]
    /// (E051 otherwise).
    fn budget_given(&mut self, g: &ast::Given) -> Option<f64> {
        let share = literal_number(&g.value)
            .map(|(n, ..)| n)
            .filter(|n| (0.0..=1.0).contains(n));
        if share.is_none() {
            self.report(
                Diagnostic::error(
                    codes::TEST_BAD_GIVEN,
                    format!(
                        "`given {}` needs the share of the budget used",
                        g.signal.name
                    ),
                    g.value.span,
                )
                .with_label_message("expected a number in [0, 1]")
                .with_help(format!(
                    "write e.g. `given {} = 0.9` (90% used before the test's request; 1 is spent)",
                    g.signal.name
                )),
            );
        }
        share
    }

    fn expectation(&mut self, e: &Expectation) -> Option<(ExpectDef, Option<ModelId>)> {
        let (target, model) = match e {
            Expectation::Route { route, model } => {
                let target = self.resolve(route, Kind::Route).and_then(|r| {
                    self.route_position(r)
                        .map(|p| ExpectDef::Route(RouteId(p as u32)))
                });
                (target, model)
            }
            Expectation::Blocked { block, model } => {
                let target = self
                    .resolve(block, Kind::Block)
                    .map(|b| ExpectDef::Blocked(crate::hir::BlockId(b as u32)));
                (target, model)
            }
            Expectation::Rejected { budget } => {
                let target = self
                    .resolve(budget, Kind::Budget)
                    .and_then(|b| self.rejecting_budget(budget, b));
                return Some((target?, None));
            }
        };
        let model = match model {
            Some(m) => {
                let index = self.resolve(m, Kind::Model);
                if let Some(i) = index {
                    self.uses.models[i] = true;
                }
                Some(Some(ModelId(index? as u32)))
            }
            None => Some(None),
        };
        Some((target?, model?))
    }

    /// The budget `expect rejected NAME` names, when its `exceeded` is `reject` (E087: a test
    /// expecting a refusal from a budget that downgrades or observes could never pass).
    fn rejecting_budget(&mut self, name: &ast::Ident, index: usize) -> Option<ExpectDef> {
        // A budget with errors of its own is already reported.
        let def = self.parts.budgets.get(index)?.as_ref()?;
        let does = match def.exceeded {
            BudgetAction::Reject => return Some(ExpectDef::Rejected(BudgetId(index as u32))),
            BudgetAction::To(_) => "downgrades (`exceeded = to ..`)",
            BudgetAction::Observe => "only observes (`exceeded = observe`)",
        };
        let declared = def.span;
        self.report(
            Diagnostic::error(
                codes::TEST_BUDGET_NEVER_REJECTS,
                format!("budget `{}` never rejects a request: it {does}", name.name),
                name.span,
            )
            .with_label_message("expected to reject")
            .with_secondary(declared, "declared here")
            .with_help(
                "expect the route and model the request goes on to (`expect ROUTE model MODEL`), \
                 or declare the budget with `exceeded = reject`",
            ),
        );
        None
    }

    /// Reads a `messages` fixture, relative to the directory of the test's file (E052).
    fn messages(&mut self, t: &ast::Test, m: &src_dsl::Spanned<String>) -> Option<TestInputDef> {
        let dir = self
            .sources
            .get(m.span.file)
            .and_then(|f| f.path.parent().map(PathBuf::from))
            .unwrap_or_default();
        let path = dir.join(&m.value);
        let problem = match std::fs::read_to_string(&path) {
            Err(e) => format!("cannot read `{}`: {}", m.value, io_reason(&e)),
            Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
                Err(e) => format!("`{}` is not JSON: {e}", m.value),
                Ok(value) => match chat_messages(&value) {
                    Ok(()) => return Some(TestInputDef::Messages(value)),
                    Err(why) => format!("`{}` {why}", m.value),
                },
            },
        };
        self.report(
            Diagnostic::error(codes::TEST_MESSAGES_UNREADABLE, problem, m.span)
                .with_label_message(format!("messages of test `{}`", t.name.name))
                .with_help("the file holds a chat request (`{\"messages\": [...]}`) or its `messages` array; the path is relative to the test's file"),
        );
        None
    }

    /// A `given SIGNAL = VALUE`, its value checked against the signal's type (E051).
    fn given(&mut self, g: &ast::Given) -> Option<(SignalId, Value)> {
        let index = self.resolve(&g.signal, Kind::Signal)?;
        let id = self.signal_ids[index];
        // A signal with errors has no type; its errors are already reported.
        let ty = self.signal_types[index]?;
        let v = &g.value;
        let number = literal_number(v);
        let value = match (ty, &v.kind) {
            (Type::Bool, ExprKind::Bool(b)) => Some(Value::Bool(*b)),
            (Type::Int, _) => number.and_then(|(n, is_int, _)| {
                (is_int && n.abs() < 9.0e18).then_some(Value::Int(n as i64))
            }),
            (Type::Score, _) => number
                .filter(|(n, ..)| (0.0..=1.0).contains(n))
                .map(|(n, ..)| Value::Float(n)),
            (Type::Float, _) => number.map(|(n, ..)| Value::Float(n)),
            (Type::Text | Type::OptText, ExprKind::Str(s)) => Some(Value::Text(Some(s.clone()))),
            (Type::Class(set), ExprKind::Name(label)) => {
                return self.label(set, label).map(|l| (id, Value::Label(set, l)));
            }
            (Type::Model, ExprKind::Name(m)) => {
                let m = self.resolve(m, Kind::Model)?;
                Some(Value::Model(ModelId(m as u32)))
            }
            _ => None,
        };
        if let Some(value) = value {
            return Some((id, value));
        }
        let ty_name = self.type_name(ty);
        let expected = match ty {
            Type::Bool => "`true` or `false`".to_string(),
            Type::Int => "a whole number".to_string(),
            Type::Score => "a number in [0, 1]".to_string(),
            Type::Float => "a number".to_string(),
            Type::Text | Type::OptText => "a string".to_string(),
            Type::Class(set) => format!("a label of `{}`", self.set_name(set)),
            Type::Model => "a model name".to_string(),
        };
        let signal = self.decls.signals[index];
        let written = self
            .sources
            .get(v.span.file)
            .and_then(|f| f.text.get(v.span.range()))
            .unwrap_or("this")
            .to_string();
        let mut d = Diagnostic::error(
            codes::TEST_BAD_GIVEN,
            format!(
                "`{written}` is not a value of `{}`, which is `{ty_name}`",
                g.signal.name
            ),
            v.span,
        )
        .with_label_message(format!("expected {expected}"))
        .with_secondary(
            signal.name.span,
            format!("`{}` is declared here", g.signal.name),
        );
        if let (Type::Class(set), ExprKind::Str(s)) = (ty, &v.kind) {
            if self.label_index(set, s).is_some() {
                d = d
                    .with_help("labels are written without quotes")
                    .with_fix(v.span, s.clone());
            }
        }
        self.report(d);
        None
    }

    /// Reports E050 for each model call every evaluation of the case needs without a `given`.
    fn report_needs(&mut self, t: &ast::Test, givens: &[(SignalId, Value)], expect: &ExpectDef) {
        let mut given = vec![false; self.signal_exprs.len()];
        for (s, _) in givens {
            given[s.index()] = true;
        }
        // (condition, value it must take) for every condition the case evaluates.
        let mut conditions: Vec<(TExpr, bool)> = Vec::new();
        let blocks_evaluated = match expect {
            ExpectDef::Blocked(b) => b.index() + 1,
            ExpectDef::Route(_) => self.parts.blocks.len(),
            // Budgets act before any block or route: nothing is evaluated.
            ExpectDef::Rejected(_) => 0,
        };
        for (i, b) in self.parts.blocks.iter().take(blocks_evaluated).enumerate() {
            let Some(b) = b else { return };
            let want = matches!(expect, ExpectDef::Blocked(x) if x.index() == i);
            conditions.push((b.when.clone(), want));
        }
        if let ExpectDef::Route(r) = expect {
            for (i, route) in self.parts.routes.iter().take(r.index() + 1).enumerate() {
                let Some(route) = route else { return };
                if let Some(w) = &route.when {
                    conditions.push((w.clone(), i == r.index()));
                }
            }
        }
        let mut needs = Vec::new();
        let mut memo = HashMap::new();
        for (c, want) in &conditions {
            for n in self.needs(c, *want, None, &given, &mut memo, 0) {
                if !needs.contains(&n) {
                    needs.push(n);
                }
            }
        }
        for n in needs {
            let d = match n {
                Need::Signal(s) => {
                    let Some(def) = self.parts.signals.get(s as usize).and_then(Option::as_ref)
                    else {
                        continue;
                    };
                    Diagnostic::error(
                        codes::TEST_MISSING_GIVEN,
                        format!(
                            "test `{}` needs model-backed signal `{}` but gives it no value",
                            t.name.name, def.name
                        ),
                        t.name.span,
                    )
                    .with_label_message(format!("no `given {}`", def.name))
                    .with_secondary(def.span, "needs a model to compute")
                    .with_help(format!(
                        "tests run without model files: add `given {} = VALUE`",
                        def.name
                    ))
                }
                Need::Call(file, start, end) => {
                    let span = Span {
                        file: src_dsl::FileId(file),
                        start,
                        end,
                    };
                    Diagnostic::error(
                        codes::TEST_MISSING_GIVEN,
                        format!(
                            "test `{}` needs a model call that no `given` can stub",
                            t.name.name
                        ),
                        t.name.span,
                    )
                    .with_label_message("reaches a model call")
                    .with_secondary(span, "written directly in a condition")
                    .with_help("tests can only stub signals: move the call into a `signal` and give that signal a value")
                }
            };
            self.report(d);
        }
    }

    /// The model calls every way of making `e` evaluate to `want` needs (see the module
    /// comment); `inside` is the signal whose definition `e` belongs to.
    fn needs(
        &self,
        e: &TExpr,
        want: bool,
        inside: Option<SignalId>,
        given: &[bool],
        memo: &mut HashMap<(SignalId, bool), Vec<Need>>,
        depth: usize,
    ) -> Vec<Need> {
        match &e.kind {
            TExprKind::Bool(_) => Vec::new(),
            TExprKind::Not(x) => self.needs(x, !want, inside, given, memo, depth),
            TExprKind::And(a, b) | TExprKind::Or(a, b) => {
                let x = self.needs(a, want, inside, given, memo, depth);
                let y = self.needs(b, want, inside, given, memo, depth);
                let both_needed = matches!(e.kind, TExprKind::And(..)) == want;
                if both_needed {
                    union(x, y)
                } else {
                    x.into_iter().filter(|n| y.contains(n)).collect()
                }
            }
            TExprKind::Signal(s) if e.ty == Type::Bool => {
                if given.get(s.index()).copied().unwrap_or(true) || depth > MAX_SIGNAL_DEPTH {
                    return Vec::new();
                }
                if let Some(n) = memo.get(&(*s, want)) {
                    return n.clone();
                }
                let n = match self.signal_exprs.get(s.index()).and_then(Option::as_ref) {
                    Some(def) => self.needs(def, want, Some(*s), given, memo, depth + 1),
                    None => Vec::new(),
                };
                memo.insert((*s, want), n.clone());
                n
            }
            _ => {
                let mut out = Vec::new();
                self.leaf_needs(e, inside, given, &mut out, depth);
                out
            }
        }
    }

    /// Every model call a leaf's value depends on, through signals that are not given.
    fn leaf_needs(
        &self,
        e: &TExpr,
        inside: Option<SignalId>,
        given: &[bool],
        out: &mut Vec<Need>,
        depth: usize,
    ) {
        let need = match &e.kind {
            TExprKind::Signal(s) => {
                if !given.get(s.index()).copied().unwrap_or(true) && depth <= MAX_SIGNAL_DEPTH {
                    if let Some(def) = self.signal_exprs.get(s.index()).and_then(Option::as_ref) {
                        self.leaf_needs(def, Some(*s), given, out, depth + 1);
                    }
                }
                return;
            }
            TExprKind::Classify(..)
            | TExprKind::Guard(..)
            | TExprKind::Detect { .. }
            | TExprKind::Similarity { .. } => match inside {
                Some(s) => Need::Signal(s.0),
                None => Need::Call(e.span.file.0, e.span.start, e.span.end),
            },
            _ => {
                for child in e.children() {
                    self.leaf_needs(child, inside, given, out, depth);
                }
                return;
            }
        };
        if !out.contains(&need) {
            out.push(need);
        }
    }
}

fn union(mut x: Vec<Need>, y: Vec<Need>) -> Vec<Need> {
    for n in y {
        if !x.contains(&n) {
            x.push(n);
        }
    }
    x
}

/// Whether a JSON value is a chat request or its `messages` array: a list of objects, each with
/// a string `role`.
fn chat_messages(value: &serde_json::Value) -> Result<(), String> {
    let messages = match value {
        serde_json::Value::Array(m) => m,
        serde_json::Value::Object(o) => match o.get("messages") {
            Some(serde_json::Value::Array(m)) => m,
            Some(_) => return Err("has a `messages` field that is not a list".into()),
            None => return Err("is an object without a `messages` list".into()),
        },
        _ => return Err("is neither a chat request nor a list of messages".into()),
    };
    for (i, m) in messages.iter().enumerate() {
        if !m.get("role").is_some_and(serde_json::Value::is_string) {
            return Err(format!(
                "has a message without a string `role` (number {})",
                i + 1
            ));
        }
    }
    Ok(())
}
