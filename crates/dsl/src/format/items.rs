//! Laying out one declaration as output lines, fields in canonical order.
//!
//! Each line remembers the stretch of source it came from (its extent), so that comments can be
//! put back next to the code they were written next to even after fields have been reordered.
//! Extents come from the AST's spans; the braces of a body have no span of their own and are
//! found by scanning the source, skipping comments. When the source does not match the tree (a
//! tree built by a program), extents are simply absent and only comment placement suffers.

use super::expr::{expr, ident_list, number, string, string_list};
use super::Line;
use crate::ast::*;
use crate::span::{Span, Spanned};
use std::ops::Range;

const INDENT: usize = 1;

/// The output lines of one item.
pub(super) fn item_lines(item: &Item, extent: Range<usize>, src: &str) -> Vec<Line> {
    let mut b = Builder {
        src,
        lines: Vec::new(),
    };
    let Range { start, end } = extent;
    match &item.kind {
        ItemKind::Signal(s) => {
            let text = format!("signal {} = {}", s.name.name, expr(&s.expr));
            b.stmt(0, text, Some(start..end));
        }
        ItemKind::Backend(d) => {
            b.open(
                0,
                format!("backend {}", d.name.name),
                start,
                d.name.span.end,
            );
            backend(&mut b, d);
            b.close(0, end);
        }
        ItemKind::Model(d) => {
            b.open(0, format!("model {}", d.name.name), start, d.name.span.end);
            model(&mut b, d);
            b.close(0, end);
        }
        ItemKind::Classifier(d) => {
            b.open(
                0,
                format!("classifier {}", d.name.name),
                start,
                d.name.span.end,
            );
            b.field_str("path", &d.path);
            if let Some(l) = &d.labels {
                b.stmt(
                    INDENT,
                    format!("labels = {}", ident_list(&l.value)),
                    cover(&[l.span]),
                );
            }
            b.device(&d.device);
            b.field_number("window", &d.window);
            b.field_number("windows", &d.windows);
            b.close(0, end);
        }
        ItemKind::Guard(d) => {
            b.open(0, format!("guard {}", d.name.name), start, d.name.span.end);
            b.field_str("path", &d.path);
            if let Some(p) = &d.positive {
                b.stmt(INDENT, format!("positive = {}", p.name), cover(&[p.span]));
            }
            b.device(&d.device);
            b.field_number("window", &d.window);
            b.field_number("windows", &d.windows);
            b.close(0, end);
        }
        ItemKind::Encoder(d) => {
            b.open(
                0,
                format!("encoder {}", d.name.name),
                start,
                d.name.span.end,
            );
            b.field_str("path", &d.path);
            b.device(&d.device);
            b.field_number("window", &d.window);
            b.field_number("windows", &d.windows);
            b.close(0, end);
        }
        ItemKind::Detector(d) => {
            b.open(
                0,
                format!("detector {}", d.name.name),
                start,
                d.name.span.end,
            );
            b.field_str("path", &d.path);
            if let Some(l) = &d.entities {
                b.stmt(
                    INDENT,
                    format!("entities = {}", ident_list(&l.value)),
                    cover(&[l.span]),
                );
            }
            b.field_number("threshold", &d.threshold);
            b.device(&d.device);
            b.field_number("window", &d.window);
            b.field_number("windows", &d.windows);
            b.close(0, end);
        }
        ItemKind::Block(d) => {
            b.open(0, format!("block {}", d.name.name), start, d.name.span.end);
            block(&mut b, d);
            b.close(0, end);
        }
        ItemKind::Route(d) => {
            let mut head = format!("route {}", d.name.name);
            let mut after = d.name.span.end;
            if let Some(p) = &d.priority {
                head.push_str(" priority ");
                head.push_str(&number(&p.value));
                after = after.max(p.span.end);
            }
            b.open(0, head, start, after);
            route(&mut b, d);
            b.close(0, end);
        }
        ItemKind::Cache(d) => {
            b.open(0, "cache".into(), start, item.span.start + 5);
            cache(&mut b, d);
            b.close(0, end);
        }
        ItemKind::Session(d) => {
            b.open(0, "session".into(), start, item.span.start + 7);
            session(&mut b, d);
            b.close(0, end);
        }
        ItemKind::Protect(d) => {
            b.open(0, "protect".into(), start, item.span.start + 7);
            b.field_word("mode", &d.mode, |v| match v {
                ProtectMode::Observe => "observe",
                ProtectMode::Enforce => "enforce",
            });
            b.field_word("owner_lost", &d.owner_lost, |v| match v {
                OwnerLost::Fail => "fail",
                OwnerLost::Fallback => "fallback",
                OwnerLost::Move => "move",
            });
            for h in &d.holds {
                let text = format!("hold {} when {}", string(&h.name.value), expr(&h.when));
                b.stmt(INDENT, text, cover(&[h.span, h.name.span, h.when.span]));
            }
            b.close(0, end);
        }
        ItemKind::Failure(d) => {
            b.open(0, "failure".into(), start, item.span.start + 7);
            for (name, mode) in [
                ("classifier", &d.classifier),
                ("store", &d.store),
                ("backend", &d.backend),
            ] {
                if let Some(m) = mode {
                    let v = match m.value {
                        FailMode::Open => "open",
                        FailMode::Closed => "closed",
                    };
                    b.stmt(INDENT, format!("{name} = {v}"), cover(&[m.span]));
                }
            }
            b.field_number("cooldown_after", &d.cooldown_after);
            b.field_duration("cooldown", &d.cooldown);
            b.close(0, end);
        }
        ItemKind::Router(d) => {
            b.open(0, "router".into(), start, item.span.start + 6);
            if let Some(n) = &d.names {
                let list = string_list(n.value.iter().map(|s| &s.value));
                b.stmt(INDENT, format!("names = {list}"), cover(&[n.span]));
            }
            b.field_str("tokenizer", &d.tokenizer);
            b.field_word("anonymous", &d.anonymous, |v| match v {
                Anonymous::Isolate => "isolate",
                Anonymous::Share => "share",
            });
            b.close(0, end);
        }
        ItemKind::Test(d) => {
            b.open(0, format!("test {}", d.name.name), start, d.name.span.end);
            test(&mut b, d);
            b.close(0, end);
        }
        ItemKind::Budget(d) => {
            b.open(0, format!("budget {}", d.name.name), start, d.name.span.end);
            budget(&mut b, d);
            b.close(0, end);
        }
    }
    b.lines
}

fn backend(b: &mut Builder, d: &Backend) {
    b.field_str("url", &d.url);
    b.field_str("catalog", &d.catalog);
    if let Some(k) = &d.api_key {
        let text = format!("api_key = env({})", string(&k.var.value));
        b.stmt(INDENT, text, cover(&[k.span, k.var.span]));
    }
    b.field_duration("timeout", &d.timeout);
    b.field_bool("simulated", &d.simulated, "true", "false");
    b.field_word("client_auth", &d.client_auth, |v| match v {
        ClientAuth::Forward => "forward",
        ClientAuth::Drop => "drop",
    });
    if let Some(v) = &d.api {
        let word = match v.value {
            BackendApi::OpenAi => "openai",
            BackendApi::Anthropic => "anthropic",
        };
        b.stmt(INDENT, format!("api = {word}"), cover(&[v.span]));
    }
}

fn model(b: &mut Builder, d: &Model) {
    if let Some(be) = &d.backend {
        b.stmt(INDENT, format!("backend = {}", be.name), cover(&[be.span]));
    }
    b.field_str("serves", &d.serves);
    if let Some(a) = &d.aliases {
        let list = string_list(a.value.iter().map(|s| &s.value));
        b.stmt(INDENT, format!("aliases = {list}"), cover(&[a.span]));
    }
    b.field_number("cost", &d.cost);
    b.field_number("context", &d.context);
    b.field_str("tokenizer", &d.tokenizer);
}

fn block(b: &mut Builder, d: &Block) {
    if let Some(w) = &d.when {
        b.stmt(INDENT, format!("when {}", expr(w)), cover(&[w.span]));
    }
    match &d.action {
        BlockAction::Refuse { status, message } => {
            b.field_number("status", status);
            b.field_str("message", message);
        }
        BlockAction::Redirect { model } => {
            b.stmt(INDENT, format!("to {}", model.name), cover(&[model.span]));
        }
    }
    redact(b, &d.redact);
}

fn redact(b: &mut Builder, types: &Option<Spanned<Vec<RedactType>>>) {
    if let Some(t) = types {
        let items: Vec<String> = t
            .value
            .iter()
            .map(|item| match item {
                RedactType::Pii(name) => string(&name.value),
                RedactType::Entity {
                    detector: Some(d),
                    entity,
                } => format!("{}.{}", d.name, entity.name),
                RedactType::Entity {
                    detector: None,
                    entity,
                } => entity.name.clone(),
            })
            .collect();
        b.stmt(
            INDENT,
            format!("redact = [{}]", items.join(", ")),
            cover(&[t.span]),
        );
    }
}

fn route(b: &mut Builder, d: &Route) {
    if let Some(w) = &d.when {
        b.stmt(INDENT, format!("when {}", expr(w)), cover(&[w.span]));
    }
    if let Some(to) = &d.to {
        let mut text = format!("to {}", to.name);
        let mut spans = vec![to.span];
        if !d.fallbacks.is_empty() {
            let names: Vec<&str> = d.fallbacks.iter().map(|f| f.name.as_str()).collect();
            text.push_str(" else ");
            text.push_str(&names.join(", "));
            spans.extend(d.fallbacks.iter().map(|f| f.span));
        }
        b.stmt(INDENT, text, cover(&spans));
    }
    if let Some(sp) = &d.system_prompt {
        let replace = if sp.replace { "replace " } else { "" };
        let text = format!("system_prompt = {replace}{}", string(&sp.text.value));
        b.stmt(INDENT, text, cover(&[sp.span, sp.text.span]));
    }
    if let Some(h) = &d.headers {
        let start = h.span.start as usize;
        b.open(INDENT, "headers".into(), start, h.span.start);
        for set in &h.value {
            b.header_set(2 * INDENT, "", set);
        }
        b.close(INDENT, h.span.end as usize);
    }
    b.field_word("reasoning", &d.reasoning, |v| match v {
        Reasoning::Off => "off",
        Reasoning::Low => "low",
        Reasoning::Medium => "medium",
        Reasoning::High => "high",
    });
    if let Some(t) = &d.tools {
        let v = match &t.value {
            Tools::Keep => "keep".to_string(),
            Tools::None => "none".to_string(),
            Tools::Only(names) => format!("only {}", string_list(names.iter().map(|s| &s.value))),
        };
        b.stmt(INDENT, format!("tools = {v}"), cover(&[t.span]));
    }
    b.field_bool("cache", &d.cache, "on", "off");
    redact(b, &d.redact);
}

fn store(s: &Store) -> String {
    match s {
        Store::Memory => "memory".to_string(),
        Store::Redis(url) => format!("redis({})", string(&url.value)),
        Store::Cluster(nodes) => {
            format!(
                "redis_cluster({})",
                string_list(nodes.value.iter().map(|s| &s.value))
            )
        }
        Store::Sentinel { sentinels, master } => {
            let list = string_list(sentinels.value.iter().map(|s| &s.value));
            match master {
                Some(m) => format!("redis_sentinel({list}, master = {})", string(&m.value)),
                None => format!("redis_sentinel({list})"),
            }
        }
        Store::Milvus { url, options } => {
            let mut out = format!("milvus({}", string(&url.value));
            for (name, value) in options {
                out.push_str(&format!(", {} = {}", name.name, string(&value.value)));
            }
            out.push(')');
            out
        }
    }
}

fn cache(b: &mut Builder, d: &Cache) {
    if let Some(e) = &d.encoder {
        b.stmt(INDENT, format!("encoder = {}", e.name), cover(&[e.span]));
    }
    b.field_number("threshold", &d.threshold);
    b.field_duration("ttl", &d.ttl);
    if let Some(s) = &d.store {
        b.stmt(
            INDENT,
            format!("store = {}", store(&s.value)),
            cover(&[s.span]),
        );
    }
    b.field_number("max_entries", &d.max_entries);
    b.field_number("max_bytes", &d.max_bytes);
    if let Some(w) = &d.skip_when {
        b.stmt(INDENT, format!("skip when {}", expr(w)), cover(&[w.span]));
    }
}

fn session(b: &mut Builder, d: &Session) {
    for (name, e) in [("id", &d.id), ("tenant", &d.tenant)] {
        if let Some(e) = e {
            b.stmt(INDENT, format!("{name} = {}", expr(e)), cover(&[e.span]));
        }
    }
    b.field_duration("ttl", &d.ttl);
    if let Some(s) = &d.store {
        b.stmt(
            INDENT,
            format!("store = {}", store(&s.value)),
            cover(&[s.span]),
        );
    }
    b.field_word("missing", &d.missing, |v| match v {
        Missing::Route => "route",
        Missing::Reject => "reject",
    });
    b.field_word("outcomes", &d.outcomes, |v| match v {
        Outcomes::Any => "any",
        Outcomes::Admin => "admin",
        Outcomes::Keys => "keys",
    });
}

fn budget(b: &mut Builder, d: &Budget) {
    match &d.per {
        Some(BudgetPer::Tenant(span)) => b.stmt(INDENT, "per = tenant".into(), cover(&[*span])),
        Some(BudgetPer::Expr(e)) => {
            b.stmt(INDENT, format!("per = {}", expr(e)), cover(&[e.span]));
        }
        None => {}
    }
    b.field_duration("window", &d.window);
    b.field_number("requests", &d.requests);
    b.field_number("tokens", &d.tokens);
    b.field_number("cost", &d.cost);
    if let Some(x) = &d.exceeded {
        let v = match &x.value {
            Exceeded::Reject => "reject".to_string(),
            Exceeded::Observe => "observe".to_string(),
            Exceeded::To(model) => format!("to {}", model.name),
        };
        b.stmt(INDENT, format!("exceeded = {v}"), cover(&[x.span]));
    }
}

fn test(b: &mut Builder, d: &Test) {
    match &d.input {
        Some(TestInput::Prompt(p)) => b.field_str("prompt", &Some(p.clone())),
        Some(TestInput::Messages(m)) => b.field_str("messages", &Some(m.clone())),
        None => {}
    }
    b.field_str("system", &d.system);
    for h in &d.headers {
        b.header_set(INDENT, "header ", h);
    }
    if !d.givens.is_empty() {
        let parts: Vec<String> = d
            .givens
            .iter()
            .map(|g| format!("{} = {}", g.signal.name, expr(&g.value)))
            .collect();
        let spans: Vec<Span> = d
            .givens
            .iter()
            .flat_map(|g| [g.signal.span, g.value.span])
            .collect();
        b.stmt(INDENT, format!("given {}", parts.join(", ")), cover(&spans));
    }
    if let Some(x) = &d.expect {
        let (blocked, name, model) = match &x.value {
            Expectation::Route { route, model } => ("", route, model),
            Expectation::Blocked { block, model } => ("blocked ", block, model),
            Expectation::Rejected { budget } => ("rejected ", budget, &None),
        };
        let mut text = format!("expect {blocked}{}", name.name);
        let mut spans = vec![x.span, name.span];
        if let Some(m) = model {
            text.push_str(" model ");
            text.push_str(&m.name);
            spans.push(m.span);
        }
        b.stmt(INDENT, text, cover(&spans));
    }
}

/// The smallest source range covering every span.
fn cover(spans: &[Span]) -> Option<Range<usize>> {
    let start = spans.iter().map(|s| s.start as usize).min()?;
    let end = spans.iter().map(|s| s.end as usize).max()?;
    Some(start..end.max(start))
}

struct Builder<'s> {
    src: &'s str,
    lines: Vec<Line>,
}

impl Builder<'_> {
    fn stmt(&mut self, indent: usize, text: String, extent: Option<Range<usize>>) {
        self.lines.push(Line::new(indent, text, extent, indent));
    }

    /// `HEAD {`: its extent runs from `start` to the opening brace found after `after`.
    fn open(&mut self, indent: usize, head: String, start: usize, after: u32) {
        let extent = find_open_brace(self.src, after as usize).map(|b| start..b + 1);
        self.lines
            .push(Line::new(indent, format!("{head} {{"), extent, indent));
    }

    /// `}`: comments placed before it stay inside the body, one level deeper.
    fn close(&mut self, indent: usize, end: usize) {
        let extent =
            (end > 0 && self.src.as_bytes().get(end - 1) == Some(&b'}')).then(|| end - 1..end);
        self.lines
            .push(Line::new(indent, "}".into(), extent, indent + INDENT));
    }

    fn field_str(&mut self, name: &str, v: &Option<Spanned<String>>) {
        if let Some(v) = v {
            self.stmt(
                INDENT,
                format!("{name} = {}", string(&v.value)),
                cover(&[v.span]),
            );
        }
    }

    fn field_number(&mut self, name: &str, v: &Option<Spanned<Number>>) {
        if let Some(v) = v {
            self.stmt(
                INDENT,
                format!("{name} = {}", number(&v.value)),
                cover(&[v.span]),
            );
        }
    }

    fn field_duration(&mut self, name: &str, v: &Option<Spanned<Duration>>) {
        if let Some(v) = v {
            let text = if v.value.text.is_empty() {
                format!("{}ms", v.value.millis)
            } else {
                v.value.text.clone()
            };
            self.stmt(INDENT, format!("{name} = {text}"), cover(&[v.span]));
        }
    }

    /// `NAME = WORD`, the value being one of a closed set of keywords.
    fn field_word<T>(&mut self, name: &str, v: &Option<Spanned<T>>, word: impl Fn(&T) -> &str) {
        if let Some(v) = v {
            self.stmt(
                INDENT,
                format!("{name} = {}", word(&v.value)),
                cover(&[v.span]),
            );
        }
    }

    fn field_bool(&mut self, name: &str, v: &Option<Spanned<bool>>, yes: &str, no: &str) {
        if let Some(v) = v {
            let word = if v.value { yes } else { no };
            self.stmt(INDENT, format!("{name} = {word}"), cover(&[v.span]));
        }
    }

    fn device(&mut self, v: &Option<Spanned<Device>>) {
        if let Some(v) = v {
            let word = match v.value {
                Device::Auto => "auto",
                Device::Cpu => "cpu",
                Device::Cuda => "cuda",
            };
            self.stmt(INDENT, format!("device = {word}"), cover(&[v.span]));
        }
    }

    fn header_set(&mut self, indent: usize, keyword: &str, h: &HeaderSet) {
        let text = format!(
            "{keyword}{} = {}",
            string(&h.name.value),
            string(&h.value.value)
        );
        self.stmt(indent, text, cover(&[h.name.span, h.value.span]));
    }
}

/// The byte offset of the first `{` at or after `from` that is not inside a comment.
fn find_open_brace(src: &str, from: usize) -> Option<usize> {
    let rest = src.get(from..)?;
    let mut in_comment = false;
    for (i, c) in rest.char_indices() {
        match c {
            '\n' => in_comment = false,
            '#' => in_comment = true,
            '{' if !in_comment => return Some(from + i),
            '"' if !in_comment => return None,
            _ => {}
        }
    }
    None
}
