//! Span invariants of a parse result, and a readable dump of it ([`dump`]), shared by the
//! corpus and property tests.
//!
//! Every span must lie inside the text on character boundaries, and the spans that name
//! something must cover exactly that thing: an identifier's span is its name, a comment's span
//! starts with `#`, a child expression lies inside its parent. Checking this on every corpus file
//! and on random input catches offset arithmetic bugs that snapshots (which abbreviate spans)
//! would miss. The check is a [`Visitor`]: it reaches every node the tree has without spelling
//! the tree out here.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the helpers"
)]

pub mod dump;

use src_dsl::ast::visit::*;
use src_dsl::ast::*;
use src_dsl::{Parsed, Span, Spanned};

pub struct SpanCheck<'t> {
    text: &'t str,
    pub problems: Vec<String>,
    pub count: usize,
    /// Spans of the nodes being visited, innermost last.
    outer: Vec<Span>,
}

impl<'t> SpanCheck<'t> {
    pub fn new(text: &'t str) -> Self {
        SpanCheck {
            text,
            problems: Vec::new(),
            count: 0,
            outer: Vec::new(),
        }
    }

    /// The text under `span`, or a recorded problem.
    fn slice(&mut self, span: Span, what: &str) -> Option<&'t str> {
        self.count += 1;
        let (s, e) = (span.start as usize, span.end as usize);
        if s > e || e > self.text.len() {
            self.problems.push(format!(
                "{what}: span {s}..{e} outside text of {} bytes",
                self.text.len()
            ));
            return None;
        }
        if !self.text.is_char_boundary(s) || !self.text.is_char_boundary(e) {
            self.problems
                .push(format!("{what}: span {s}..{e} not on character boundaries"));
            return None;
        }
        Some(&self.text[s..e])
    }

    fn within(&mut self, inner: Span, outer: Span, what: &str) {
        if inner.start < outer.start || inner.end > outer.end {
            self.problems.push(format!(
                "{what}: {}..{} not inside {}..{}",
                inner.start, inner.end, outer.start, outer.end
            ));
        }
    }

    fn ident(&mut self, id: &Ident, outer: Span) {
        if let Some(s) = self.slice(id.span, "identifier") {
            if s != id.name {
                self.problems
                    .push(format!("identifier `{}` has span text `{s}`", id.name));
            }
        }
        self.within(id.span, outer, &format!("identifier `{}`", id.name));
    }

    fn string(&mut self, s: &Spanned<String>, outer: Span) {
        if let Some(t) = self.slice(s.span, "string") {
            if !(t.len() >= 2 && t.starts_with('"') && t.ends_with('"')) {
                self.problems
                    .push(format!("string {:?} has span text `{t}`", s.value));
            }
        }
        self.within(s.span, outer, "string");
    }

    fn plain(&mut self, span: Span, outer: Span, what: &str) {
        self.slice(span, what);
        self.within(span, outer, what);
    }

    /// The span children must lie inside: the innermost node being visited.
    fn outer(&self) -> Span {
        self.outer.last().copied().unwrap_or_default()
    }

    /// Visits what `walk` reaches with `span` as the span its nodes must lie inside.
    fn inside(&mut self, span: Span, walk: impl FnOnce(&mut Self)) {
        self.outer.push(span);
        walk(self);
        self.outer.pop();
    }

    pub fn expr(&mut self, e: &Expr, outer: Span) {
        self.inside(outer, |c| c.visit_expr(e));
    }

    /// Checks every span of a parse result; items must also come in order without overlapping.
    pub fn parsed(&mut self, parsed: &Parsed) {
        let mut last_end = 0;
        for item in &parsed.file.items {
            if (item.span.start as usize) < last_end {
                self.problems.push(format!(
                    "item at {} overlaps the previous one",
                    item.span.start
                ));
            }
            last_end = item.span.end as usize;
        }
        self.visit_file(&parsed.file);
        for d in &parsed.diagnostics {
            for l in &d.labels {
                self.slice(l.span, &format!("{} label", d.code));
            }
            if let Some(fix) = &d.fix {
                self.slice(fix.span, &format!("{} fix", d.code));
            }
        }
    }
}

/// Each node is checked against the span of the node it sits in (kept on a stack as the walk
/// descends), with the checks of its kind: an identifier covers its name, a string its quotes.
impl Visitor for SpanCheck<'_> {
    fn visit_item(&mut self, item: &Item) {
        let outer = item.span;
        if let Some(t) = self.slice(outer, "item") {
            if !t.starts_with(item.kind.keyword()) {
                self.problems
                    .push(format!("{} item span starts `{t}`", item.kind.keyword()));
            }
            if t.ends_with(char::is_whitespace) {
                self.problems.push(format!(
                    "{} item span ends in whitespace",
                    item.kind.keyword()
                ));
            }
        }
        self.inside(outer, |c| walk_item(c, item));
    }

    fn visit_ident(&mut self, id: &Ident) {
        let outer = self.outer();
        self.ident(id, outer);
    }

    fn visit_string(&mut self, s: &Spanned<String>) {
        let outer = self.outer();
        self.string(s, outer);
    }

    fn visit_field(&mut self, field: Field<'_>) {
        match (&field.value, field.value.span()) {
            // Nodes of their own: they check their span when visited.
            (
                FieldValue::Name(_)
                | FieldValue::Str(_)
                | FieldValue::Expr(_)
                | FieldValue::Env(_)
                | FieldValue::SystemPrompt(_),
                _,
            )
            | (_, None) => walk_field(self, field),
            (_, Some(span)) => {
                let outer = self.outer();
                self.plain(span, outer, field.key);
                self.inside(span, |c| walk_field(c, field));
            }
        }
    }

    fn visit_env_ref(&mut self, k: &EnvRef) {
        let outer = self.outer();
        self.plain(k.span, outer, "env");
        self.inside(k.span, |c| walk_env_ref(c, k));
    }

    fn visit_system_prompt(&mut self, sp: &SystemPrompt) {
        let outer = self.outer();
        self.plain(sp.span, outer, "system_prompt");
        self.inside(sp.span, |c| walk_system_prompt(c, sp));
    }

    fn visit_hold(&mut self, h: &Hold) {
        let outer = self.outer();
        self.plain(h.span, outer, "hold");
        self.inside(h.span, |c| walk_hold(c, h));
    }

    fn visit_expr(&mut self, e: &Expr) {
        let Some(t) = self.slice(e.span, "expression") else {
            return;
        };
        let outer = self.outer();
        self.within(e.span, outer, "expression");
        match &e.kind {
            ExprKind::Number(n) if t != n.text => self
                .problems
                .push(format!("number `{}` has span text `{t}`", n.text)),
            ExprKind::Duration(d) if t != d.text => self
                .problems
                .push(format!("duration `{}` has span text `{t}`", d.text)),
            ExprKind::Str(_) if !(t.starts_with('"') && t.ends_with('"')) => {
                self.problems.push(format!("string has span text `{t}`"))
            }
            ExprKind::Bool(b) if t != b.to_string() => {
                self.problems.push(format!("boolean has span text `{t}`"))
            }
            ExprKind::Paren(_) if !(t.starts_with('(') && t.ends_with(')')) => self
                .problems
                .push(format!("parenthesis has span text `{t}`")),
            ExprKind::List(_) if !(t.starts_with('[') && t.ends_with(']')) => {
                self.problems.push(format!("list has span text `{t}`"))
            }
            _ => {}
        }
        self.inside(e.span, |c| walk_expr(c, e));
    }

    fn visit_comment(&mut self, c: &Comment) {
        if let Some(t) = self.slice(c.span, "comment") {
            if t.strip_prefix('#') != Some(c.text.as_str()) {
                self.problems
                    .push(format!("comment {:?} has span text `{t}`", c.text));
            }
        }
    }
}

/// All span problems of a parse result of `text` (empty when it is sound).
pub fn span_problems(text: &str, parsed: &Parsed) -> Vec<String> {
    let mut check = SpanCheck::new(text);
    check.parsed(parsed);
    check.problems
}
