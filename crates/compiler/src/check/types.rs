//! Expression typing: the forms and types of docs/language.md, "Expressions and types", from
//! `ast::Expr` to `hir::TExpr`.
//!
//! Typing returns `None` for an expression that has an error; the error is reported once where
//! it arises, and every enclosing expression quietly passes the `None` on, so an unknown name in
//! a signal does not also produce a type error in each of its users.
//!
//! Number literals have no type of their own: a literal takes the type the other side of its
//! comparison or arithmetic needs (`tokens(history) > 2k` is an int, `attack > 0.7` a score,
//! which must then lie in [0, 1]). So in a binary form the side that is a bare literal (or a bare
//! name that may be a label, as in `topic == math`) is typed second, with the first side's type
//! as a hint. Literals compared with a score are scores; in arithmetic they are ints or floats,
//! since `100 * attack` is a legitimate percentage.

use super::names::{nearest, Kind, Sym};
use super::{Checker, Scope};
use crate::hir::{
    ArithOp, BudgetId, ClassSet, CmpOp, ModelId, RequestField, SignalId, TExpr, TExprKind, Type,
};
use crate::vocabulary::{self, Field, Receiver, Value};
use src_dsl::ast::{BinOp, Expr, ExprKind, Ident, Number, UnaryOp};
use src_dsl::{codes, Diagnostic, Span};

/// What the context of an expression expects, for literals and labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hint {
    None,
    /// A number literal here takes this numeric type.
    Number(Type),
    /// A bare name here may be a label of this set.
    Class(ClassSet),
}

impl Hint {
    fn comparing_with(ty: Type) -> Hint {
        match ty {
            Type::Int | Type::Score | Type::Float => Hint::Number(ty),
            Type::Class(set) => Hint::Class(set),
            _ => Hint::None,
        }
    }

    fn arithmetic_with(ty: Type) -> Hint {
        match ty {
            Type::Int => Hint::Number(Type::Int),
            Type::Score | Type::Float => Hint::Number(Type::Float),
            _ => Hint::None,
        }
    }
}

/// The type of a `request.*` field (its name is in [`vocabulary::BUILTINS`]).
fn request_field_type(f: RequestField) -> Type {
    match f {
        RequestField::Tools
        | RequestField::Turns
        | RequestField::Messages
        | RequestField::ToolCalls
        | RequestField::ToolResults => Type::Int,
        RequestField::Stream | RequestField::ToolLoop | RequestField::ProviderState => Type::Bool,
    }
}

/// The names of the fields of `receiver`.
fn field_names(receiver: Receiver) -> Vec<&'static str> {
    vocabulary::fields(receiver).map(|b| b.name).collect()
}

pub(super) fn texpr(kind: TExprKind, ty: Type, span: Span) -> TExpr {
    TExpr { kind, ty, span }
}

/// A number literal, possibly negated or parenthesised: its value, integrality and text.
pub(super) fn literal_number(e: &Expr) -> Option<(f64, bool, String)> {
    match &e.kind {
        ExprKind::Number(n) => Some((n.value, n.is_int, n.text.clone())),
        ExprKind::Paren(x) => literal_number(x),
        ExprKind::Unary(UnaryOp::Neg, x) => {
            literal_number(x).map(|(v, i, t)| (-v, i, format!("-{t}")))
        }
        _ => None,
    }
}

impl Checker<'_> {
    /// Types `e`; `None` when it has an error (already reported).
    pub(super) fn expr(&mut self, e: &Expr, hint: Hint) -> Option<TExpr> {
        let span = e.span;
        match &e.kind {
            ExprKind::Bool(b) => Some(texpr(TExprKind::Bool(*b), Type::Bool, span)),
            ExprKind::Str(s) => Some(texpr(TExprKind::Str(s.clone()), Type::Text, span)),
            ExprKind::Number(n) => self.number(n, hint, span),
            ExprKind::Duration(d) => {
                self.report(
                    Diagnostic::error(
                        codes::TYPE_MISMATCH,
                        format!("a duration (`{}`) is not a value in an expression", d.text),
                        span,
                    )
                    .with_label_message("durations only appear in fields")
                    .with_help("durations are written in `ttl` and `timeout` fields; in expressions use numbers"),
                );
                None
            }
            ExprKind::List(items) => {
                for item in items {
                    let _ = self.expr(item, Hint::None);
                }
                self.report(
                    Diagnostic::error(codes::TYPE_MISMATCH, "a list is not a value here", span)
                        .with_label_message("unexpected list")
                        .with_help("lists are arguments of `contains`, `hits`, `density`, `sequence`, `similarity` and `in`"),
                );
                None
            }
            ExprKind::Name(id) => self.name(id, hint),
            ExprKind::Field(base, field) => self.field(base, field, span),
            ExprKind::Call(f, args) => self.call(f, args, span),
            ExprKind::Paren(x) => {
                let mut t = self.expr(x, hint)?;
                t.span = span;
                Some(t)
            }
            ExprKind::Unary(UnaryOp::Not, x) => {
                let t = self.expect_bool(x, "the operand of `not`")?;
                Some(texpr(TExprKind::Not(Box::new(t)), Type::Bool, span))
            }
            ExprKind::Unary(UnaryOp::Neg, x) => {
                if let Some((value, is_int, text)) = literal_number(e) {
                    let n = Number {
                        value,
                        is_int,
                        text,
                    };
                    return self.number(&n, hint, span);
                }
                let t = self.expr(x, Hint::None)?;
                if !t.ty.is_numeric() {
                    self.mismatch(x.span, "`-` needs a number", t.ty);
                    return None;
                }
                let ty = if t.ty == Type::Int {
                    Type::Int
                } else {
                    Type::Float
                };
                Some(texpr(TExprKind::Neg(Box::new(t)), ty, span))
            }
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b, span),
            ExprKind::Is(x, label) => self.is_labels(x, std::slice::from_ref(label), span),
            ExprKind::In(x, labels) => self.is_labels(x, labels, span),
        }
    }

    /// Types a condition, which must be `bool`.
    pub(super) fn expect_bool(&mut self, e: &Expr, what: &str) -> Option<TExpr> {
        let t = self.expr(e, Hint::None)?;
        if t.ty != Type::Bool {
            let help = match t.ty {
                Type::Class(_) => "test a class value with `is` or `in`: `topic is math`",
                Type::OptText | Type::Text => "test text with a builtin such as `contains(prompt, [\"...\"])`, or compare it: `x == \"...\"`",
                Type::Score | Type::Float | Type::Int => "compare it: `x > 0.5`",
                _ => "a condition is `true` or `false`",
            };
            let d = self
                .mismatch_diagnostic(e.span, &format!("{what} must be `bool`"), t.ty)
                .with_help(help);
            self.report(d);
            return None;
        }
        Some(t)
    }

    /// Reports E020: `what`, found `ty`.
    pub(super) fn mismatch(&mut self, span: Span, what: &str, ty: Type) {
        let d = self.mismatch_diagnostic(span, what, ty);
        self.report(d);
    }

    fn mismatch_diagnostic(&self, span: Span, what: &str, ty: Type) -> Diagnostic {
        let found = self.type_name(ty);
        Diagnostic::error(
            codes::TYPE_MISMATCH,
            format!("{what}, found `{found}`"),
            span,
        )
        .with_label_message(format!("this is `{found}`"))
    }

    pub(super) fn type_name(&self, ty: Type) -> String {
        ty.written(|set| self.set_name(set))
    }

    /// A number literal in the context `hint`.
    pub(super) fn number(&mut self, n: &Number, hint: Hint, span: Span) -> Option<TExpr> {
        match hint {
            Hint::Number(Type::Score) => {
                if !(0.0..=1.0).contains(&n.value) {
                    self.report(
                        Diagnostic::error(
                            codes::SCORE_RANGE,
                            format!("`{}` is compared with a score but lies outside [0, 1]", n.text),
                            span,
                        )
                        .with_label_message("scores lie in [0, 1]")
                        .with_help("a score (a guard, a similarity, a confidence) is between 0 and 1: write the threshold as a fraction, e.g. `0.8`"),
                    );
                    return None;
                }
                Some(texpr(TExprKind::Float(n.value), Type::Score, span))
            }
            Hint::Number(Type::Float) => Some(texpr(TExprKind::Float(n.value), Type::Float, span)),
            _ => match n.as_int() {
                Some(i) => Some(texpr(TExprKind::Int(i), Type::Int, span)),
                None => Some(texpr(TExprKind::Float(n.value), Type::Float, span)),
            },
        }
    }

    fn name(&mut self, id: &Ident, hint: Hint) -> Option<TExpr> {
        let span = id.span;
        let builtin = |kind, ty| Some(texpr(kind, ty, span));
        if let Some(value) = vocabulary::lookup_value(&id.name).and_then(|b| b.value()) {
            return match value {
                Value::Prompt => builtin(TExprKind::Prompt, Type::Text),
                Value::History => builtin(TExprKind::History, Type::Text),
                Value::System => builtin(TExprKind::System, Type::Text),
                Value::ApiKey => builtin(TExprKind::ApiKey, Type::OptText),
                Value::Pinned | Value::Proposed => {
                    if !self.protect_only(&id.name, span) {
                        return None;
                    }
                    let kind = if value == Value::Pinned {
                        TExprKind::Pinned
                    } else {
                        TExprKind::Proposed
                    };
                    builtin(kind, Type::Model)
                }
                Value::Request => {
                    let fields: Vec<String> = field_names(Receiver::Request)
                        .iter()
                        .map(|f| format!("request.{f}"))
                        .collect();
                    self.report(
                        Diagnostic::error(
                            codes::TYPE_MISMATCH,
                            "`request` is not a value on its own",
                            span,
                        )
                        .with_label_message("needs a field")
                        .with_help(format!(
                            "use one of its fields: {}",
                            super::list_names(&fields)
                        )),
                    );
                    None
                }
            };
        }
        if let Hint::Class(set) = hint {
            if let Some(l) = self.label_index(set, &id.name) {
                self.note_label(set, id);
                return Some(texpr(TExprKind::Label(l), Type::Class(set), span));
            }
        }
        match self.decls.value(&id.name) {
            Some(Sym {
                kind: Kind::Signal,
                index,
            }) => self.signal_ref(index, span),
            Some(Sym {
                kind: Kind::Model,
                index,
            }) => Some(texpr(
                TExprKind::Model(ModelId(index as u32)),
                Type::Model,
                span,
            )),
            Some(_) if self.decls.is_duplicated(&id.name) => None,
            Some(sym) => {
                let help = match sym.kind {
                    Kind::Encoder => {
                        format!("use it in `similarity({}, prompt, [\"...\"])`", id.name)
                    }
                    _ => format!("call it: `{}(prompt)`", id.name),
                };
                let d = Diagnostic::error(
                    codes::WRONG_KIND,
                    format!("`{}` is {}, not a value", id.name, sym.kind.article()),
                    span,
                )
                .with_label_message("not a value")
                .with_secondary(self.decls.name_of(sym).span, "declared here")
                .with_help(help);
                self.report(d);
                None
            }
            None => {
                self.unknown_value(id, hint);
                None
            }
        }
    }

    /// A use of a signal by declaration index: records the use, and its type if known.
    pub(super) fn signal_ref(&mut self, index: usize, span: Span) -> Option<TExpr> {
        if let Some(deps) = &mut self.signal_deps {
            deps.push(index);
        }
        self.uses.signals[index] = true;
        let ty = self.signal_types.get(index).copied().flatten()?;
        let id: SignalId = self.signal_ids[index];
        Some(texpr(TExprKind::Signal(id), ty, span))
    }

    fn unknown_value(&mut self, id: &Ident, hint: Hint) {
        if self.decls.is_duplicated(&id.name) {
            return;
        }
        if vocabulary::lookup_function(&id.name).is_some() {
            self.report(
                Diagnostic::error(
                    codes::WRONG_KIND,
                    format!("`{}` is a builtin function, not a value", id.name),
                    id.span,
                )
                .with_label_message("not a value")
                .with_help(format!("call it: `{}(...)`", id.name)),
            );
            return;
        }
        if let Hint::Class(set) = hint {
            self.note_label(set, id);
            self.unknown_label(set, id);
            return;
        }
        if let Some(other) = self.decls.lookup_any(&id.name) {
            let d = Diagnostic::error(
                codes::WRONG_KIND,
                format!("`{}` is {}, not a value", id.name, other.kind.article()),
                id.span,
            )
            .with_label_message("not a value")
            .with_secondary(self.decls.name_of(other).span, "declared here");
            self.report(d);
            return;
        }
        let mut candidates = self.decls.names_of(Kind::Signal);
        candidates.extend(self.decls.names_of(Kind::Model));
        candidates.extend(vocabulary::values().map(|b| b.name));
        self.unknown(id, "name", &candidates);
    }

    /// Reports E025 outside `protect`; whether the use is allowed.
    pub(super) fn protect_only(&mut self, what: &str, span: Span) -> bool {
        if self.scope == Scope::Protect {
            return true;
        }
        self.report(
            Diagnostic::error(
                codes::PROTECT_ONLY,
                format!("`{what}` is only defined inside `protect` rules"),
                span,
            )
            .with_label_message("used outside `protect`")
            .with_help("the pinned model, the proposal and outcomes exist only when a session switch is decided: use them in a `hold ... when` rule"),
        );
        false
    }

    fn field(&mut self, base: &Expr, field: &Ident, span: Span) -> Option<TExpr> {
        if let ExprKind::Name(b) = &base.kind {
            if vocabulary::lookup_value(&b.name).and_then(|v| v.value()) == Some(Value::Request) {
                return self.request_field(field, span);
            }
        }
        if let ExprKind::Call(f, args) = &base.kind {
            let function = vocabulary::lookup_function(&f.name).and_then(|b| b.function());
            if function == Some(vocabulary::Function::Outcomes) {
                return self.outcomes(f, args, field, span);
            }
            if function == Some(vocabulary::Function::Budget) {
                return self.budget_field(f, args, field, span);
            }
        }
        let t = self.expr(base, Hint::None)?;
        let receiver = match t.ty {
            Type::Class(_) => Some(Receiver::Class),
            Type::Model => Some(Receiver::Model),
            _ => None,
        };
        let found = receiver
            .and_then(|r| vocabulary::lookup_field(r, &field.name))
            .and_then(|b| b.field());
        match (found, t.ty) {
            (Some(Field::Confidence), _) => {
                Some(texpr(TExprKind::Confidence(Box::new(t)), Type::Score, span))
            }
            (Some(Field::Cost), _) => Some(texpr(TExprKind::Cost(Box::new(t)), Type::Float, span)),
            (_, ty) => {
                let has = match ty {
                    Type::Class(_) => "a class value has the field `confidence`",
                    Type::Model => "a model has the field `cost`",
                    _ => "only class values (`.confidence`), models (`.cost`), `request` and `outcomes(pinned)` have fields",
                };
                let d = Diagnostic::error(
                    codes::TYPE_MISMATCH,
                    format!("`{}` has no field `{}`", self.type_name(ty), field.name),
                    field.span,
                )
                .with_label_message("unknown field")
                .with_help(has);
                let d = match (ty, nearest(&field.name, ["confidence", "cost"])) {
                    (Type::Class(_), Some("confidence")) | (Type::Model, Some("cost")) => d
                        .with_fix(
                            field.span,
                            if ty == Type::Model {
                                "cost"
                            } else {
                                "confidence"
                            },
                        ),
                    _ => d,
                };
                self.report(d);
                None
            }
        }
    }

    fn request_field(&mut self, field: &Ident, span: Span) -> Option<TExpr> {
        let found = vocabulary::lookup_field(Receiver::Request, &field.name);
        if let Some(Field::Request(f)) = found.and_then(|b| b.field()) {
            return Some(texpr(TExprKind::Request(f), request_field_type(f), span));
        }
        self.unknown_field("request", field, &field_names(Receiver::Request));
        None
    }

    fn outcomes(&mut self, f: &Ident, args: &[Expr], field: &Ident, span: Span) -> Option<TExpr> {
        let allowed = self.protect_only("outcomes", f.span);
        let arg_ok = matches!(args, [Expr { kind: ExprKind::Name(p), .. }] if p.name == "pinned");
        if !arg_ok {
            self.report(
                Diagnostic::error(
                    codes::WRONG_ARGUMENTS,
                    "`outcomes` takes exactly the argument `pinned`",
                    args.first().map_or(f.span, |a| a.span),
                )
                .with_label_message("expected `pinned`")
                .with_help("write `outcomes(pinned).fail_rate` or `outcomes(pinned).count`"),
            );
        }
        let found = vocabulary::lookup_field(Receiver::Outcomes, &field.name);
        let (kind, ty) = match found.and_then(|b| b.field()) {
            Some(Field::FailRate) => (TExprKind::OutcomeFailRate, Type::Score),
            Some(Field::OutcomeCount) => (TExprKind::OutcomeCount, Type::Int),
            _ => {
                let fields = field_names(Receiver::Outcomes);
                self.unknown_field("outcomes(pinned)", field, &fields);
                return None;
            }
        };
        (allowed && arg_ok).then(|| texpr(kind, ty, span))
    }

    /// `budget(NAME).used` and `.remaining`; E083 when NAME is no budget.
    fn budget_field(
        &mut self,
        f: &Ident,
        args: &[Expr],
        field: &Ident,
        span: Span,
    ) -> Option<TExpr> {
        let budget = match args {
            [Expr {
                kind: ExprKind::Name(name),
                ..
            }] => self.budget_ref(name),
            _ => {
                self.report(
                    Diagnostic::error(
                        codes::WRONG_ARGUMENTS,
                        "`budget` takes exactly one argument, the name of a budget",
                        args.first().map_or(f.span, |a| a.span),
                    )
                    .with_label_message("expected a budget's name")
                    .with_help("write `budget(NAME).used` with NAME a declared `budget`"),
                );
                None
            }
        };
        let found = vocabulary::lookup_field(Receiver::Budget, &field.name);
        let (kind, ty): (fn(BudgetId) -> TExprKind, Type) = match found.and_then(|b| b.field()) {
            Some(Field::BudgetUsed) => (TExprKind::BudgetUsed, Type::Score),
            Some(Field::BudgetRemaining) => (TExprKind::BudgetRemaining, Type::Float),
            _ => {
                let fields = field_names(Receiver::Budget);
                self.unknown_field("budget(..)", field, &fields);
                return None;
            }
        };
        budget.map(|b| texpr(kind(b), ty, span))
    }

    /// The budget a name refers to; E083 (with a did-you-mean) when none is declared.
    pub(super) fn budget_ref(&mut self, name: &Ident) -> Option<BudgetId> {
        if let Some(i) = self.decls.get(super::names::Kind::Budget, &name.name) {
            return Some(BudgetId(i as u32));
        }
        let budgets = self.decls.names_of(super::names::Kind::Budget);
        let d = Diagnostic::error(
            codes::UNKNOWN_BUDGET,
            format!("no budget is named `{}`", name.name),
            name.span,
        )
        .with_label_message("not a budget");
        let d = match nearest(&name.name, budgets.iter().copied()) {
            Some(close) => d
                .with_help(format!("did you mean `{close}`?"))
                .with_fix(name.span, close),
            None if budgets.is_empty() => d.with_help(
                "declare it: `budget NAME { per = tenant  window = 1m  requests = 20 }`",
            ),
            None => d.with_help(format!("the budgets are {}", super::list_names(&budgets))),
        };
        self.report(d);
        None
    }

    /// E011 for a field `base` does not have.
    fn unknown_field(&mut self, base: &str, field: &Ident, fields: &[&str]) {
        let d = Diagnostic::error(
            codes::UNKNOWN_NAME,
            format!("`{base}` has no field `{}`", field.name),
            field.span,
        )
        .with_label_message("unknown field");
        let d = match self.with_suggestion(d, field, fields) {
            d if d.help.is_some() => d,
            d => d.with_help(format!("its fields are {}", super::list_names(fields))),
        };
        self.report(d);
    }

    fn binary(&mut self, op: BinOp, a: &Expr, b: &Expr, span: Span) -> Option<TExpr> {
        match op {
            BinOp::And | BinOp::Or => {
                let what = format!("the operands of `{}`", op.symbol());
                let ta = self.expect_bool(a, &what);
                let tb = self.expect_bool(b, &what);
                let (ta, tb) = (Box::new(ta?), Box::new(tb?));
                let kind = if op == BinOp::And {
                    TExprKind::And(ta, tb)
                } else {
                    TExprKind::Or(ta, tb)
                };
                Some(texpr(kind, Type::Bool, span))
            }
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                self.compare(op, a, b, span)
            }
            BinOp::Coalesce => {
                let ta = self.expr(a, Hint::None);
                let tb = self.expr(b, Hint::None);
                let (ta, tb) = (ta?, tb?);
                let mut ok = true;
                for (t, e) in [(&ta, a), (&tb, b)] {
                    if !t.ty.is_textual() {
                        self.mismatch(e.span, "`??` needs text on both sides", t.ty);
                        ok = false;
                    }
                }
                let ty = if tb.ty == Type::Text {
                    Type::Text
                } else {
                    Type::OptText
                };
                ok.then(|| texpr(TExprKind::Coalesce(Box::new(ta), Box::new(tb)), ty, span))
            }
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => {
                let arith = match op {
                    BinOp::Add => ArithOp::Add,
                    BinOp::Sub => ArithOp::Sub,
                    BinOp::Mul => ArithOp::Mul,
                    _ => ArithOp::Div,
                };
                self.arithmetic(arith, op.symbol(), a, b, span)
            }
        }
    }

    /// Types both sides of a binary form, the flexible side (a literal or a possible label)
    /// second with the other side's type as its hint.
    fn pair(
        &mut self,
        a: &Expr,
        b: &Expr,
        hint: fn(Type) -> Hint,
    ) -> (Option<TExpr>, Option<TExpr>) {
        if self.flexible(a) && !self.flexible(b) {
            let tb = self.expr(b, Hint::None);
            let ta = self.expr(a, tb.as_ref().map_or(Hint::None, |t| hint(t.ty)));
            (ta, tb)
        } else {
            let ta = self.expr(a, Hint::None);
            let tb = self.expr(b, ta.as_ref().map_or(Hint::None, |t| hint(t.ty)));
            (ta, tb)
        }
    }

    /// A literal, or a bare name that is no declared value (so possibly a label).
    fn flexible(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Name(id) => {
                self.decls.value(&id.name).is_none() && vocabulary::lookup_value(&id.name).is_none()
            }
            ExprKind::Paren(x) => self.flexible(x),
            _ => literal_number(e).is_some(),
        }
    }

    /// Arithmetic (`+ - * /`, `min`, `max`): int if both sides are int, else float.
    pub(super) fn arithmetic(
        &mut self,
        op: ArithOp,
        symbol: &str,
        a: &Expr,
        b: &Expr,
        span: Span,
    ) -> Option<TExpr> {
        let (ta, tb) = self.pair(a, b, Hint::arithmetic_with);
        let mut ok = true;
        for (t, e) in [(&ta, a), (&tb, b)] {
            if let Some(t) = t {
                if !t.ty.is_numeric() {
                    self.mismatch(e.span, &format!("`{symbol}` needs numbers"), t.ty);
                    ok = false;
                }
            }
        }
        let (ta, tb) = (ta?, tb?);
        let ty = if ta.ty == Type::Int && tb.ty == Type::Int {
            Type::Int
        } else {
            Type::Float
        };
        ok.then(|| texpr(TExprKind::Arith(op, Box::new(ta), Box::new(tb)), ty, span))
    }

    fn compare(&mut self, op: BinOp, a: &Expr, b: &Expr, span: Span) -> Option<TExpr> {
        let (ta, tb) = self.pair(a, b, Hint::comparing_with);
        let (ta, tb) = (ta?, tb?);
        let cmp = match op {
            BinOp::Eq => CmpOp::Eq,
            BinOp::Ne => CmpOp::Ne,
            BinOp::Lt => CmpOp::Lt,
            BinOp::Le => CmpOp::Le,
            BinOp::Gt => CmpOp::Gt,
            _ => CmpOp::Ge,
        };
        let equality = matches!(cmp, CmpOp::Eq | CmpOp::Ne);
        let ok = match (ta.ty, tb.ty) {
            (x, y) if x.is_numeric() && y.is_numeric() => true,
            (x, y) if x.is_textual() && y.is_textual() => equality,
            (Type::Class(x), Type::Class(y)) => equality && x == y,
            (Type::Bool, Type::Bool) | (Type::Model, Type::Model) => equality,
            _ => false,
        };
        if !ok {
            let (x, y) = (self.type_name(ta.ty), self.type_name(tb.ty));
            let same_kind = (ta.ty.is_textual() && tb.ty.is_textual()) || ta.ty == tb.ty;
            let d = if !equality && same_kind {
                Diagnostic::error(
                    codes::TYPE_MISMATCH,
                    format!("`{}` orders numbers only, found `{x}`", op.symbol()),
                    span,
                )
                .with_label_message(format!("`{x}` has no order"))
                .with_help("compare with `==` or `!=`")
            } else {
                let d = Diagnostic::error(
                    codes::TYPE_MISMATCH,
                    format!("cannot compare `{x}` with `{y}`"),
                    span,
                )
                .with_label_message("the two sides have different types")
                .with_secondary(ta.span, format!("this is `{x}`"))
                .with_secondary(tb.span, format!("this is `{y}`"));
                match (ta.ty, tb.ty) {
                    (Type::Class(_), Type::Text) | (Type::Text, Type::Class(_)) => d.with_help(
                        "labels are written without quotes: `topic == math` or `topic is math`",
                    ),
                    _ => d,
                }
            };
            self.report(d);
            return None;
        }
        Some(texpr(
            TExprKind::Cmp(cmp, Box::new(ta), Box::new(tb)),
            Type::Bool,
            span,
        ))
    }

    /// `e is L` and `e in [L, ...]`.
    fn is_labels(&mut self, x: &Expr, labels: &[Ident], span: Span) -> Option<TExpr> {
        let t = self.expr(x, Hint::None)?;
        let Type::Class(set) = t.ty else {
            let found = self.type_name(t.ty);
            self.report(
                Diagnostic::error(
                    codes::TYPE_MISMATCH,
                    format!("`is` and `in` test class values, found `{found}`"),
                    x.span,
                )
                .with_label_message(format!("this is `{found}`"))
                .with_help("a class value comes from a classifier call (`domain(prompt)`) or `language(...)`"),
            );
            return None;
        };
        let mut ids = Vec::with_capacity(labels.len());
        let mut ok = true;
        for l in labels {
            match self.label(set, l) {
                Some(id) => ids.push(id),
                None => ok = false,
            }
        }
        ok.then(|| texpr(TExprKind::IsLabel(Box::new(t), ids), Type::Bool, span))
    }
}
