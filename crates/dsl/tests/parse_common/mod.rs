//! Span invariants of a parse result, and a readable dump of it ([`dump`]), shared by the
//! corpus and property tests.
//!
//! Every span must lie inside the text on character boundaries, and the spans that name
//! something must cover exactly that thing: an identifier's span is its name, a comment's span
//! starts with `#`, a child expression lies inside its parent. Checking this on every corpus file
//! and on random input catches offset arithmetic bugs that snapshots (which abbreviate spans)
//! would miss.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the helpers"
)]

pub mod dump;

use src_dsl::ast::*;
use src_dsl::{Parsed, Span, Spanned};

pub struct SpanCheck<'t> {
    text: &'t str,
    pub problems: Vec<String>,
    pub count: usize,
}

impl<'t> SpanCheck<'t> {
    pub fn new(text: &'t str) -> Self {
        SpanCheck {
            text,
            problems: Vec::new(),
            count: 0,
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

    fn plain<T>(&mut self, v: &Spanned<T>, outer: Span, what: &str) {
        self.slice(v.span, what);
        self.within(v.span, outer, what);
    }

    pub fn expr(&mut self, e: &Expr, outer: Span) {
        let Some(t) = self.slice(e.span, "expression") else {
            return;
        };
        self.within(e.span, outer, "expression");
        let span = e.span;
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
            ExprKind::Paren(inner) => {
                if !(t.starts_with('(') && t.ends_with(')')) {
                    self.problems
                        .push(format!("parenthesis has span text `{t}`"));
                }
                self.expr(inner, span);
            }
            ExprKind::List(items) => {
                if !(t.starts_with('[') && t.ends_with(']')) {
                    self.problems.push(format!("list has span text `{t}`"));
                }
                for i in items {
                    self.expr(i, span);
                }
            }
            ExprKind::Name(id) => self.ident(id, span),
            ExprKind::Field(base, field) => {
                self.expr(base, span);
                self.ident(field, span);
            }
            ExprKind::Call(f, args) => {
                self.ident(f, span);
                for a in args {
                    self.expr(a, span);
                }
            }
            ExprKind::Unary(_, inner) => self.expr(inner, span),
            ExprKind::Binary(_, l, r) => {
                self.expr(l, span);
                self.expr(r, span);
            }
            ExprKind::Is(inner, label) => {
                self.expr(inner, span);
                self.ident(label, span);
            }
            ExprKind::In(inner, labels) => {
                self.expr(inner, span);
                for l in labels {
                    self.ident(l, span);
                }
            }
            _ => {}
        }
    }

    fn header(&mut self, h: &HeaderSet, outer: Span) {
        self.string(&h.name, outer);
        self.string(&h.value, outer);
    }

    fn item(&mut self, item: &Item) {
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
        if let Some(name) = item.kind.name() {
            self.ident(name, outer);
        }
        match &item.kind {
            ItemKind::Backend(b) => {
                for s in [&b.url, &b.catalog].into_iter().flatten() {
                    self.string(s, outer);
                }
                if let Some(k) = &b.api_key {
                    self.string(&k.var, k.span);
                    self.slice(k.span, "env");
                    self.within(k.span, outer, "env");
                }
                if let Some(t) = &b.timeout {
                    self.plain(t, outer, "timeout");
                }
                if let Some(s) = &b.simulated {
                    self.plain(s, outer, "simulated");
                }
            }
            ItemKind::Model(m) => {
                if let Some(b) = &m.backend {
                    self.ident(b, outer);
                }
                for s in [&m.serves, &m.tokenizer].into_iter().flatten() {
                    self.string(s, outer);
                }
                if let Some(a) = &m.aliases {
                    self.plain(a, outer, "aliases");
                    for s in &a.value {
                        self.string(s, a.span);
                    }
                }
                for n in [&m.cost, &m.context].into_iter().flatten() {
                    self.plain(n, outer, "number");
                }
            }
            ItemKind::Classifier(c) => {
                if let Some(p) = &c.path {
                    self.string(p, outer);
                }
                if let Some(l) = &c.labels {
                    self.plain(l, outer, "labels");
                    for id in &l.value {
                        self.ident(id, l.span);
                    }
                }
                if let Some(d) = &c.device {
                    self.plain(d, outer, "device");
                }
            }
            ItemKind::Guard(g) => {
                if let Some(p) = &g.path {
                    self.string(p, outer);
                }
                if let Some(p) = &g.positive {
                    self.ident(p, outer);
                }
                if let Some(d) = &g.device {
                    self.plain(d, outer, "device");
                }
            }
            ItemKind::Encoder(e) => {
                if let Some(p) = &e.path {
                    self.string(p, outer);
                }
                if let Some(d) = &e.device {
                    self.plain(d, outer, "device");
                }
            }
            ItemKind::Signal(s) => self.expr(&s.expr, outer),
            ItemKind::Block(b) => {
                if let Some(w) = &b.when {
                    self.expr(w, outer);
                }
                match &b.action {
                    BlockAction::Refuse { status, message } => {
                        if let Some(s) = status {
                            self.plain(s, outer, "status");
                        }
                        if let Some(m) = message {
                            self.string(m, outer);
                        }
                    }
                    BlockAction::Redirect { model } => self.ident(model, outer),
                }
            }
            ItemKind::Route(r) => {
                if let Some(p) = &r.priority {
                    self.plain(p, outer, "priority");
                }
                if let Some(w) = &r.when {
                    self.expr(w, outer);
                }
                for m in r.to.iter().chain(&r.fallbacks) {
                    self.ident(m, outer);
                }
                if let Some(sp) = &r.system_prompt {
                    self.slice(sp.span, "system_prompt");
                    self.within(sp.span, outer, "system_prompt");
                    self.string(&sp.text, sp.span);
                }
                if let Some(h) = &r.headers {
                    self.plain(h, outer, "headers");
                    for set in &h.value {
                        self.header(set, h.span);
                    }
                }
                if let Some(x) = &r.reasoning {
                    self.plain(x, outer, "reasoning");
                }
                if let Some(t) = &r.tools {
                    self.plain(t, outer, "tools");
                    if let Tools::Only(names) = &t.value {
                        for n in names {
                            self.string(n, t.span);
                        }
                    }
                }
                if let Some(c) = &r.cache {
                    self.plain(c, outer, "cache");
                }
            }
            ItemKind::Cache(c) => {
                if let Some(e) = &c.encoder {
                    self.ident(e, outer);
                }
                if let Some(t) = &c.threshold {
                    self.plain(t, outer, "threshold");
                }
                if let Some(t) = &c.ttl {
                    self.plain(t, outer, "ttl");
                }
                if let Some(s) = &c.store {
                    self.store(s, outer);
                }
                if let Some(w) = &c.skip_when {
                    self.expr(w, outer);
                }
            }
            ItemKind::Session(s) => {
                for e in [&s.id, &s.tenant].into_iter().flatten() {
                    self.expr(e, outer);
                }
                if let Some(t) = &s.ttl {
                    self.plain(t, outer, "ttl");
                }
                if let Some(st) = &s.store {
                    self.store(st, outer);
                }
                if let Some(m) = &s.missing {
                    self.plain(m, outer, "missing");
                }
            }
            ItemKind::Protect(p) => {
                if let Some(m) = &p.mode {
                    self.plain(m, outer, "mode");
                }
                for h in &p.holds {
                    self.slice(h.span, "hold");
                    self.within(h.span, outer, "hold");
                    self.string(&h.name, h.span);
                    self.expr(&h.when, h.span);
                }
            }
            ItemKind::Failure(f) => {
                for m in [&f.classifier, &f.store, &f.backend].into_iter().flatten() {
                    self.plain(m, outer, "failure mode");
                }
            }
            ItemKind::Router(r) => {
                if let Some(n) = &r.names {
                    self.plain(n, outer, "names");
                    for s in &n.value {
                        self.string(s, n.span);
                    }
                }
                if let Some(t) = &r.tokenizer {
                    self.string(t, outer);
                }
            }
            ItemKind::Test(t) => {
                match &t.input {
                    Some(TestInput::Prompt(s)) | Some(TestInput::Messages(s)) => {
                        self.string(s, outer)
                    }
                    None => {}
                }
                if let Some(s) = &t.system {
                    self.string(s, outer);
                }
                for h in &t.headers {
                    self.header(h, outer);
                }
                for g in &t.givens {
                    self.ident(&g.signal, outer);
                    self.expr(&g.value, outer);
                }
                if let Some(e) = &t.expect {
                    self.plain(e, outer, "expect");
                    let (target, model) = match &e.value {
                        Expectation::Route { route, model } => (route, model),
                        Expectation::Blocked { block, model } => (block, model),
                    };
                    self.ident(target, e.span);
                    if let Some(m) = model {
                        self.ident(m, e.span);
                    }
                }
            }
        }
    }

    fn store(&mut self, s: &Spanned<Store>, outer: Span) {
        self.plain(s, outer, "store");
        if let Store::Redis(url) = &s.value {
            self.string(url, s.span);
        }
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
            self.item(item);
        }
        for c in &parsed.file.comments {
            if let Some(t) = self.slice(c.span, "comment") {
                if t.strip_prefix('#') != Some(c.text.as_str()) {
                    self.problems
                        .push(format!("comment {:?} has span text `{t}`", c.text));
                }
            }
        }
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

/// All span problems of a parse result of `text` (empty when it is sound).
pub fn span_problems(text: &str, parsed: &Parsed) -> Vec<String> {
    let mut check = SpanCheck::new(text);
    check.parsed(parsed);
    check.problems
}
