//! A readable dump of a parsed file, for snapshots and for comparing two parses.
//!
//! Expressions are printed fully parenthesised (`(and (is topic code) x)`), numbers with their
//! value and integrality (`2k{2000 int}`), durations with their milliseconds, strings decoded.
//! Spans appear only as `@line:col-line:col` of each declaration.
//!
//! Both levels are [`Visitor`]s: [`Dump`] prints a line per declaration field in the order the
//! walk meets them, and [`Sexpr`] prints an expression as the walk descends into it.

use src_dsl::ast::visit::*;
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
    let mut printer = Sexpr {
        out: String::new(),
        fresh: true,
    };
    printer.visit_expr(e);
    printer.out
}

/// Prints an expression as an S-expression: each node opens its group, the walk writes the
/// children, each after a space unless it is the first thing in a `[..]` list.
struct Sexpr {
    out: String,
    /// Nothing written yet in the current `[` group (or at all): no space before the next atom.
    fresh: bool,
}

impl Sexpr {
    fn atom(&mut self, text: &str) {
        if !self.fresh {
            self.out.push(' ');
        }
        self.out.push_str(text);
        self.fresh = false;
    }

    /// `(head children...)`.
    fn group(&mut self, head: &str, e: &Expr) {
        self.atom(&format!("({head}"));
        walk_expr(self, e);
        self.out.push(')');
    }
}

impl Visitor for Sexpr {
    fn visit_expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Bool(b) => self.atom(&b.to_string()),
            ExprKind::Number(n) => self.atom(&number(n)),
            ExprKind::Str(s) => self.atom(&format!("{s:?}")),
            ExprKind::Duration(d) => self.atom(&duration(d)),
            ExprKind::List(_) => {
                self.atom("[");
                self.fresh = true;
                walk_expr(self, e);
                self.out.push(']');
                self.fresh = false;
            }
            ExprKind::Name(_) => walk_expr(self, e),
            ExprKind::Field(..) => self.group(".", e),
            ExprKind::Call(..) => self.group("call", e),
            ExprKind::Unary(UnaryOp::Not, _) => self.group("not", e),
            ExprKind::Unary(UnaryOp::Neg, _) => self.group("neg", e),
            ExprKind::Binary(op, ..) => self.group(op.symbol(), e),
            ExprKind::Is(..) => self.group("is", e),
            ExprKind::In(inner, labels) => {
                // The labels are one bracketed list, not separate children.
                self.atom("(in");
                self.visit_expr(inner);
                self.atom(&format!("[{}])", names(labels)));
            }
            ExprKind::Paren(_) => self.group("paren", e),
        }
    }

    fn visit_ident(&mut self, ident: &Ident) {
        self.atom(&ident.name);
    }
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
        Store::Cluster(nodes) => format!("redis_cluster[{}]", strings(&nodes.value)),
        Store::Sentinel { sentinels, master } => format!(
            "redis_sentinel[{}] master={:?}",
            strings(&sentinels.value),
            master.as_ref().map(|m| &m.value)
        ),
        Store::Milvus { url, options } => format!(
            "milvus({:?}{})",
            url.value,
            options
                .iter()
                .map(|(n, v)| format!(" {}={:?}", n.name, v.value))
                .collect::<String>()
        ),
    }
}

/// A field's value as the dump shows it after `key = `.
fn value(v: &FieldValue<'_>) -> String {
    match v {
        FieldValue::Name(i) => i.name.clone(),
        FieldValue::Names(ids) => names(ids),
        FieldValue::Labels(l) => format!("[{}]", names(&l.value)),
        FieldValue::Str(s) => format!("{:?}", s.value),
        FieldValue::Strings(a) => format!("[{}]", strings(&a.value)),
        FieldValue::Redact(a) => format!(
            "[{}]",
            a.value
                .iter()
                .map(|t| match t {
                    src_dsl::ast::RedactType::Pii(s) => format!("{:?}", s.value),
                    src_dsl::ast::RedactType::Entity { detector, entity } => match detector {
                        Some(d) => format!("{}.{}", d.name, entity.name),
                        None => entity.name.clone(),
                    },
                })
                .collect::<Vec<_>>()
                .join(" ")
        ),
        FieldValue::Number(n) => number(&n.value),
        FieldValue::Duration(d) => duration(&d.value),
        FieldValue::Bool(b) => b.value.to_string(),
        FieldValue::Env(k) => format!("env({:?})", k.var.value),
        FieldValue::Device(d) => format!("{:?}", d.value),
        FieldValue::BackendApi(a) => format!("{:?}", a.value),
        FieldValue::Reasoning(x) => format!("{:?}", x.value),
        FieldValue::Missing(m) => format!("{:?}", m.value),
        FieldValue::ClientAuth(m) => format!("{:?}", m.value),
        FieldValue::Outcomes(m) => format!("{:?}", m.value),
        FieldValue::Mode(m) => format!("{:?}", m.value),
        FieldValue::OwnerLost(m) => format!("{:?}", m.value),
        FieldValue::FailMode(m) => format!("{:?}", m.value),
        FieldValue::Anonymous(m) => format!("{:?}", m.value),
        FieldValue::Exceeded(m) => match &m.value {
            src_dsl::ast::Exceeded::To(model) => format!("to {}", model.name),
            other => format!("{other:?}"),
        },
        FieldValue::Store(s) => store(&s.value),
        FieldValue::Tools(t) => match &t.value {
            Tools::Keep => "keep".to_string(),
            Tools::None => "none".to_string(),
            Tools::Only(names) => format!("only [{}]", strings(names)),
        },
        FieldValue::Headers(h) => format!("{} headers", h.value.len()),
        FieldValue::SystemPrompt(p) => {
            let verb = if p.replace { "replace " } else { "" };
            format!("{verb}{:?}", p.text.value)
        }
        FieldValue::Expr(e) => expr(e),
        FieldValue::Expect(e) => format!("{:?}", e.value),
    }
}

/// Prints each declaration's head, then a line per field, hold, given and header.
struct Dump<'t> {
    text: &'t str,
    out: String,
}

impl Dump<'_> {
    fn line(&mut self, line: std::fmt::Arguments<'_>) {
        let _ = writeln!(self.out, "  {line}");
    }
}

impl Visitor for Dump<'_> {
    fn visit_item(&mut self, item: &Item) {
        let kw = item.kind.keyword();
        let head = match item.kind.name() {
            Some(n) => format!("{kw} {}", n.name),
            None => kw.to_string(),
        };
        let _ = writeln!(self.out, "{head} @{}", at(self.text, item.span));
        walk_item(self, item);
    }

    fn visit_signal(&mut self, s: &Signal) {
        self.line(format_args!("= {}", expr(&s.expr)));
    }

    fn visit_block_action(&mut self, action: &BlockAction) {
        match action {
            BlockAction::Refuse { .. } => {
                self.line(format_args!("refuse"));
                walk_block_action(self, action);
            }
            BlockAction::Redirect { model } => {
                self.line(format_args!("redirect to {}", model.name));
            }
        }
    }

    fn visit_field(&mut self, field: Field<'_>) {
        match &field.value {
            FieldValue::Headers(_) => walk_field(self, field),
            FieldValue::Expect(e) => {
                let (line, model) = match &e.value {
                    Expectation::Route { route, model } => (format!("route {}", route.name), model),
                    Expectation::Blocked { block, model } => {
                        (format!("blocked {}", block.name), model)
                    }
                    Expectation::Rejected { budget } => {
                        (format!("rejected {}", budget.name), &None)
                    }
                };
                let model = model.as_ref().map(|m| format!(" model {}", m.name));
                self.line(format_args!("expect {line}{}", model.unwrap_or_default()));
            }
            v => {
                let key = if field.key == "skip" {
                    "skip when"
                } else {
                    field.key
                };
                let v = value(v);
                self.line(format_args!("{key} = {v}"));
            }
        }
    }

    fn visit_header(&mut self, h: &HeaderSet) {
        self.line(format_args!(
            "header {:?} = {:?}",
            h.name.value, h.value.value
        ));
    }

    fn visit_given(&mut self, g: &Given) {
        self.line(format_args!("given {} = {}", g.signal.name, expr(&g.value)));
    }

    fn visit_hold(&mut self, h: &Hold) {
        self.line(format_args!(
            "hold {:?} when {}",
            h.name.value,
            expr(&h.when)
        ));
    }
}

pub fn dump(text: &str, parsed: &Parsed) -> String {
    let mut dump = Dump {
        text,
        out: String::new(),
    };
    dump.visit_file(&parsed.file);
    let mut out = dump.out;
    let _ = writeln!(out, "comments: {}", parsed.file.comments.len());
    out
}
