//! A readable dump of a parsed file, for snapshots and for comparing two parses.
//!
//! Expressions are printed fully parenthesised (`(and (is topic code) x)`), numbers with their
//! value and integrality (`2k{2000 int}`), durations with their milliseconds, strings decoded.
//! Spans appear only as `@line:col-line:col` of each declaration.

use src_dsl::ast::*;
use src_dsl::span::line_col;
use src_dsl::{Parsed, Span};
use std::fmt::Write as _;

pub fn at(text: &str, span: Span) -> String {
    let (l1, c1) = line_col(text, span.start as usize);
    let (l2, c2) = line_col(text, span.end as usize);
    format!("{l1}:{c1}-{l2}:{c2}")
}

fn number(n: &Number) -> String {
    format!(
        "{}{{{} {}}}",
        n.text,
        n.value,
        if n.is_int { "int" } else { "float" }
    )
}

fn duration(d: &Duration) -> String {
    format!("{}{{{}ms}}", d.text, d.millis)
}

fn expr(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Number(n) => number(n),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Duration(d) => duration(d),
        ExprKind::List(items) => format!("[{}]", exprs(items)),
        ExprKind::Name(id) => id.name.clone(),
        ExprKind::Field(base, field) => format!("(. {} {})", expr(base), field.name),
        ExprKind::Call(f, args) if args.is_empty() => format!("(call {})", f.name),
        ExprKind::Call(f, args) => format!("(call {} {})", f.name, exprs(args)),
        ExprKind::Unary(UnaryOp::Not, inner) => format!("(not {})", expr(inner)),
        ExprKind::Unary(UnaryOp::Neg, inner) => format!("(neg {})", expr(inner)),
        ExprKind::Binary(op, l, r) => format!("({} {} {})", op.symbol(), expr(l), expr(r)),
        ExprKind::Is(inner, label) => format!("(is {} {})", expr(inner), label.name),
        ExprKind::In(inner, labels) => format!("(in {} [{}])", expr(inner), names(labels)),
        ExprKind::Paren(inner) => format!("(paren {})", expr(inner)),
    }
}

fn exprs(items: &[Expr]) -> String {
    items.iter().map(expr).collect::<Vec<_>>().join(" ")
}

fn names(ids: &[Ident]) -> String {
    ids.iter()
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn strings(items: &[src_dsl::Spanned<String>]) -> String {
    items
        .iter()
        .map(|s| format!("{:?}", s.value))
        .collect::<Vec<_>>()
        .join(" ")
}

fn store(s: &Store) -> String {
    match s {
        Store::Memory => "memory".to_string(),
        Store::Redis(url) => format!("redis({:?})", url.value),
    }
}

/// Writes `key = value` when the field is set.
fn field(out: &mut String, key: &str, value: Option<String>) {
    if let Some(v) = value {
        let _ = writeln!(out, "  {key} = {v}");
    }
}

pub fn dump(text: &str, parsed: &Parsed) -> String {
    let mut out = String::new();
    for item in &parsed.file.items {
        let kw = item.kind.keyword();
        let head = match item.kind.name() {
            Some(n) => format!("{kw} {}", n.name),
            None => kw.to_string(),
        };
        let _ = writeln!(out, "{head} @{}", at(text, item.span));
        let o = &mut out;
        match &item.kind {
            ItemKind::Backend(b) => {
                field(o, "url", b.url.as_ref().map(|s| format!("{:?}", s.value)));
                field(
                    o,
                    "catalog",
                    b.catalog.as_ref().map(|s| format!("{:?}", s.value)),
                );
                field(
                    o,
                    "api_key",
                    b.api_key
                        .as_ref()
                        .map(|k| format!("env({:?})", k.var.value)),
                );
                field(o, "timeout", b.timeout.as_ref().map(|d| duration(&d.value)));
                field(
                    o,
                    "simulated",
                    b.simulated.as_ref().map(|s| s.value.to_string()),
                );
            }
            ItemKind::Model(m) => {
                field(o, "backend", m.backend.as_ref().map(|i| i.name.clone()));
                field(
                    o,
                    "serves",
                    m.serves.as_ref().map(|s| format!("{:?}", s.value)),
                );
                field(
                    o,
                    "aliases",
                    m.aliases
                        .as_ref()
                        .map(|a| format!("[{}]", strings(&a.value))),
                );
                field(o, "cost", m.cost.as_ref().map(|n| number(&n.value)));
                field(o, "context", m.context.as_ref().map(|n| number(&n.value)));
                field(
                    o,
                    "tokenizer",
                    m.tokenizer.as_ref().map(|s| format!("{:?}", s.value)),
                );
            }
            ItemKind::Classifier(c) => {
                field(o, "path", c.path.as_ref().map(|s| format!("{:?}", s.value)));
                field(
                    o,
                    "labels",
                    c.labels.as_ref().map(|l| format!("[{}]", names(&l.value))),
                );
                field(
                    o,
                    "device",
                    c.device.as_ref().map(|d| format!("{:?}", d.value)),
                );
            }
            ItemKind::Guard(g) => {
                field(o, "path", g.path.as_ref().map(|s| format!("{:?}", s.value)));
                field(o, "positive", g.positive.as_ref().map(|i| i.name.clone()));
                field(
                    o,
                    "device",
                    g.device.as_ref().map(|d| format!("{:?}", d.value)),
                );
            }
            ItemKind::Encoder(e) => {
                field(o, "path", e.path.as_ref().map(|s| format!("{:?}", s.value)));
                field(
                    o,
                    "device",
                    e.device.as_ref().map(|d| format!("{:?}", d.value)),
                );
            }
            ItemKind::Signal(s) => {
                let _ = writeln!(o, "  = {}", expr(&s.expr));
            }
            ItemKind::Block(b) => {
                field(o, "when", b.when.as_ref().map(expr));
                match &b.action {
                    BlockAction::Refuse { status, message } => {
                        let _ = writeln!(o, "  refuse");
                        field(o, "status", status.as_ref().map(|n| number(&n.value)));
                        field(
                            o,
                            "message",
                            message.as_ref().map(|s| format!("{:?}", s.value)),
                        );
                    }
                    BlockAction::Redirect { model } => {
                        let _ = writeln!(o, "  redirect to {}", model.name);
                    }
                }
            }
            ItemKind::Route(r) => {
                field(o, "priority", r.priority.as_ref().map(|n| number(&n.value)));
                field(o, "when", r.when.as_ref().map(expr));
                field(o, "to", r.to.as_ref().map(|i| i.name.clone()));
                if !r.fallbacks.is_empty() {
                    field(o, "else", Some(names(&r.fallbacks)));
                }
                field(
                    o,
                    "system_prompt",
                    r.system_prompt.as_ref().map(|p| {
                        let verb = if p.replace { "replace " } else { "" };
                        format!("{verb}{:?}", p.text.value)
                    }),
                );
                if let Some(h) = &r.headers {
                    for set in &h.value {
                        let _ =
                            writeln!(o, "  header {:?} = {:?}", set.name.value, set.value.value);
                    }
                }
                field(
                    o,
                    "reasoning",
                    r.reasoning.as_ref().map(|x| format!("{:?}", x.value)),
                );
                field(
                    o,
                    "tools",
                    r.tools.as_ref().map(|t| match &t.value {
                        Tools::Keep => "keep".to_string(),
                        Tools::None => "none".to_string(),
                        Tools::Only(names) => format!("only [{}]", strings(names)),
                    }),
                );
                field(o, "cache", r.cache.as_ref().map(|c| c.value.to_string()));
            }
            ItemKind::Cache(c) => {
                field(o, "encoder", c.encoder.as_ref().map(|i| i.name.clone()));
                field(
                    o,
                    "threshold",
                    c.threshold.as_ref().map(|n| number(&n.value)),
                );
                field(o, "ttl", c.ttl.as_ref().map(|d| duration(&d.value)));
                field(o, "store", c.store.as_ref().map(|s| store(&s.value)));
                field(o, "skip when", c.skip_when.as_ref().map(expr));
            }
            ItemKind::Session(s) => {
                field(o, "id", s.id.as_ref().map(expr));
                field(o, "tenant", s.tenant.as_ref().map(expr));
                field(o, "ttl", s.ttl.as_ref().map(|d| duration(&d.value)));
                field(o, "store", s.store.as_ref().map(|st| store(&st.value)));
                field(
                    o,
                    "missing",
                    s.missing.as_ref().map(|m| format!("{:?}", m.value)),
                );
            }
            ItemKind::Protect(p) => {
                field(o, "mode", p.mode.as_ref().map(|m| format!("{:?}", m.value)));
                for h in &p.holds {
                    let _ = writeln!(o, "  hold {:?} when {}", h.name.value, expr(&h.when));
                }
            }
            ItemKind::Failure(f) => {
                field(
                    o,
                    "classifier",
                    f.classifier.as_ref().map(|m| format!("{:?}", m.value)),
                );
                field(
                    o,
                    "store",
                    f.store.as_ref().map(|m| format!("{:?}", m.value)),
                );
                field(
                    o,
                    "backend",
                    f.backend.as_ref().map(|m| format!("{:?}", m.value)),
                );
            }
            ItemKind::Router(r) => {
                field(
                    o,
                    "names",
                    r.names.as_ref().map(|n| format!("[{}]", strings(&n.value))),
                );
                field(
                    o,
                    "tokenizer",
                    r.tokenizer.as_ref().map(|s| format!("{:?}", s.value)),
                );
            }
            ItemKind::Test(t) => {
                match &t.input {
                    Some(TestInput::Prompt(p)) => {
                        field(o, "prompt", Some(format!("{:?}", p.value)))
                    }
                    Some(TestInput::Messages(m)) => {
                        field(o, "messages", Some(format!("{:?}", m.value)))
                    }
                    None => {}
                }
                field(
                    o,
                    "system",
                    t.system.as_ref().map(|s| format!("{:?}", s.value)),
                );
                for h in &t.headers {
                    let _ = writeln!(o, "  header {:?} = {:?}", h.name.value, h.value.value);
                }
                for g in &t.givens {
                    let _ = writeln!(o, "  given {} = {}", g.signal.name, expr(&g.value));
                }
                if let Some(e) = &t.expect {
                    let line = match &e.value {
                        Expectation::Route { route, .. } => format!("route {}", route.name),
                        Expectation::Blocked { block, .. } => format!("blocked {}", block.name),
                    };
                    let model = match &e.value {
                        Expectation::Route { model, .. } | Expectation::Blocked { model, .. } => {
                            model.as_ref().map(|m| format!(" model {}", m.name))
                        }
                    };
                    let _ = writeln!(o, "  expect {line}{}", model.unwrap_or_default());
                }
            }
        }
    }
    let _ = writeln!(out, "comments: {}", parsed.file.comments.len());
    out
}
