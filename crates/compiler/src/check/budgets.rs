//! `budget` declarations: whose usage each counts (`per`), over what window, one limit in one
//! unit, and what a request over it gets. The errors here (E080–E084) are the budget's own; a
//! `budget(NAME)` in an expression is resolved by `types`.

use super::names::{nearest, Kind};
use super::types::Hint;
use super::{Checker, Scope};
use crate::hir::{BudgetAction, BudgetDef, BudgetPerDef, BudgetUnit, ModelId, TExpr, TExprKind};
use src_dsl::ast::{self, BudgetPer, Exceeded};
use src_dsl::{codes, Diagnostic, Spanned};

impl Checker<'_> {
    pub(super) fn check_budgets(&mut self) {
        self.scope = Scope::Normal;
        let budgets = self.decls.budgets.clone();
        for b in budgets {
            let def = self.check_budget(b);
            self.parts.budgets.push(def);
        }
    }

    fn check_budget(&mut self, b: &ast::Budget) -> Option<BudgetDef> {
        let per = match &b.per {
            None | Some(BudgetPer::Tenant(_)) => Some(BudgetPerDef::Tenant),
            Some(BudgetPer::Expr(e)) => self.budget_per(&b.name.name, e).map(BudgetPerDef::Text),
        };
        let limit = self.budget_limit(b);
        let window = match &b.window {
            Some(w) if w.value.millis == 0 => {
                self.report(
                    Diagnostic::error(
                        codes::BUDGET_RANGE,
                        format!("the window of budget `{}` must be positive", b.name.name),
                        w.span,
                    )
                    .with_label_message("a zero window")
                    .with_help("a budget counts over a window of time: write e.g. `window = 1m`"),
                );
                None
            }
            Some(w) => Some(w.value.millis),
            // E004 is the parser's.
            None => None,
        };
        let exceeded = match b.exceeded.as_ref().map(|e| &e.value) {
            None | Some(Exceeded::Reject) => Some(BudgetAction::Reject),
            Some(Exceeded::Observe) => Some(BudgetAction::Observe),
            Some(Exceeded::To(model)) => {
                self.budget_model(&b.name.name, model).map(BudgetAction::To)
            }
        };
        let (unit, limit) = limit?;
        Some(BudgetDef {
            name: b.name.name.clone(),
            span: b.name.span,
            per: per?,
            window_ms: window?,
            unit,
            limit,
            exceeded: exceeded?,
        })
    }

    /// Exactly one of `requests`, `tokens` and `cost` (E080), positive (E081).
    fn budget_limit(&mut self, b: &ast::Budget) -> Option<(BudgetUnit, f64)> {
        let written: Vec<(BudgetUnit, &Spanned<ast::Number>)> = [
            (BudgetUnit::Requests, &b.requests),
            (BudgetUnit::Tokens, &b.tokens),
            (BudgetUnit::Cost, &b.cost),
        ]
        .into_iter()
        .filter_map(|(u, n)| n.as_ref().map(|n| (u, n)))
        .collect();
        let (unit, n) = match written.as_slice() {
            [] => {
                self.report(
                    Diagnostic::error(
                        codes::BUDGET_LIMIT,
                        format!("budget `{}` has no limit", b.name.name),
                        b.name.span,
                    )
                    .with_label_message("limits nothing")
                    .with_help("give it one of `requests = N`, `tokens = N` or `cost = N`"),
                );
                return None;
            }
            [one] => *one,
            [first, second, ..] => {
                self.report(
                    Diagnostic::error(
                        codes::BUDGET_LIMIT,
                        format!("budget `{}` has more than one limit", b.name.name),
                        second.1.span,
                    )
                    .with_label_message(format!("a second limit, in {}", second.0.as_str()))
                    .with_secondary(first.1.span, format!("limits {}", first.0.as_str()))
                    .with_help(
                        "a budget limits one unit, so `.used` and `.remaining` mean one thing: \
                         declare another budget for the other limit",
                    ),
                );
                return None;
            }
        };
        let ok = n.value.value > 0.0
            && n.value.value.is_finite()
            && (unit == BudgetUnit::Cost || n.value.is_int);
        if !ok {
            let what = if unit == BudgetUnit::Cost {
                "a positive number"
            } else {
                "a positive integer"
            };
            self.report(
                Diagnostic::error(
                    codes::BUDGET_RANGE,
                    format!(
                        "the {} limit of budget `{}` must be {what}",
                        unit.as_str(),
                        b.name.name
                    ),
                    n.span,
                )
                .with_label_message(format!("found `{}`", n.value.text))
                .with_help(format!(
                    "a budget of zero would refuse everything: write e.g. `{} = 20`, or remove \
                     the budget",
                    unit.as_str()
                )),
            );
            return None;
        }
        Some((unit, n.value.value))
    }

    /// `per = EXPR`: text the request carries (E084 otherwise), read without models or budgets.
    fn budget_per(&mut self, budget: &str, e: &ast::Expr) -> Option<TExpr> {
        let t = self.expr(e, Hint::None)?;
        let computed = t.any(&|x| {
            matches!(
                x.kind,
                TExprKind::Classify(..)
                    | TExprKind::Guard(..)
                    | TExprKind::Detect { .. }
                    | TExprKind::Similarity { .. }
                    | TExprKind::BudgetUsed(_)
                    | TExprKind::BudgetRemaining(_)
                    | TExprKind::Signal(_)
            )
        });
        if t.ty.is_textual() && !computed {
            return Some(t);
        }
        let found = if computed {
            "reads a signal, a model or a budget".to_string()
        } else {
            format!("is {}", self.type_name(t.ty))
        };
        self.report(
            Diagnostic::error(
                codes::BUDGET_PER,
                format!(
                    "the `per` of budget `{budget}` must be `tenant` or text the request carries"
                ),
                e.span,
            )
            .with_label_message(format!("this {found}"))
            .with_help(
                "write `per = tenant`, or a request's text such as `header(\"x-team\")` or \
                 `body(\"user\")` (a request it yields no text for is not counted)",
            ),
        );
        None
    }

    /// The model of `exceeded = to MODEL` (E082 with a did-you-mean).
    fn budget_model(&mut self, budget: &str, model: &ast::Ident) -> Option<ModelId> {
        if let Some(i) = self.decls.get(Kind::Model, &model.name) {
            self.uses.models[i] = true;
            return Some(ModelId(i as u32));
        }
        let models = self.decls.names_of(Kind::Model);
        let d = Diagnostic::error(
            codes::BUDGET_UNKNOWN_MODEL,
            format!(
                "budget `{budget}` sends to `{}`, which is not a model",
                model.name
            ),
            model.span,
        )
        .with_label_message("no such model");
        let d = match nearest(&model.name, models.iter().copied()) {
            Some(close) => d
                .with_help(format!("did you mean `{close}`?"))
                .with_fix(model.span, close),
            None => d.with_help(format!(
                "`to` names a declared model: {}",
                super::list_names(&models)
            )),
        };
        self.report(d);
        None
    }
}
