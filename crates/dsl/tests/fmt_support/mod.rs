//! Normalising trees for comparison: the formatter moves text around, so two parses of "the
//! same" policy differ in every span. `strip_spans` sets every span to the default and drops the
//! comments; `strip_parens` also removes `Paren` nodes, for trees built by a program that may
//! lack the parentheses the printer has to add.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the helpers"
)]

use src_dsl::ast::*;
use src_dsl::{Span, Spanned};

/// The tree with every span zeroed and no comments.
pub fn strip_spans(file: &File) -> File {
    let mut f = file.clone();
    f.comments.clear();
    for item in &mut f.items {
        item_(item, false);
    }
    f
}

/// As [`strip_spans`], and every `Paren` replaced by what it holds.
pub fn strip_parens(file: &File) -> File {
    let mut f = strip_spans(file);
    for item in &mut f.items {
        item_(item, true);
    }
    f
}

fn z(s: &mut Span) {
    *s = Span::default();
}

fn id(i: &mut Ident) {
    z(&mut i.span);
}

fn sp<T>(s: &mut Spanned<T>) {
    z(&mut s.span);
}

fn opt<T>(o: &mut Option<Spanned<T>>) {
    if let Some(s) = o {
        sp(s);
    }
}

fn strings(o: &mut Option<Spanned<Vec<Spanned<String>>>>) {
    if let Some(list) = o {
        sp(list);
        list.value.iter_mut().for_each(sp);
    }
}

fn header(h: &mut HeaderSet) {
    sp(&mut h.name);
    sp(&mut h.value);
}

fn item_(item: &mut Item, unparen: bool) {
    z(&mut item.span);
    let e = |x: &mut Expr| expr(x, unparen);
    match &mut item.kind {
        ItemKind::Backend(d) => {
            id(&mut d.name);
            opt(&mut d.url);
            opt(&mut d.catalog);
            if let Some(k) = &mut d.api_key {
                z(&mut k.span);
                sp(&mut k.var);
            }
            opt(&mut d.timeout);
            opt(&mut d.simulated);
        }
        ItemKind::Model(d) => {
            id(&mut d.name);
            d.backend.as_mut().map(id);
            opt(&mut d.serves);
            strings(&mut d.aliases);
            opt(&mut d.cost);
            opt(&mut d.context);
            opt(&mut d.tokenizer);
        }
        ItemKind::Classifier(d) => {
            id(&mut d.name);
            opt(&mut d.path);
            if let Some(l) = &mut d.labels {
                sp(l);
                l.value.iter_mut().for_each(id);
            }
            opt(&mut d.device);
        }
        ItemKind::Guard(d) => {
            id(&mut d.name);
            opt(&mut d.path);
            d.positive.as_mut().map(id);
            opt(&mut d.device);
        }
        ItemKind::Encoder(d) => {
            id(&mut d.name);
            opt(&mut d.path);
            opt(&mut d.device);
        }
        ItemKind::Signal(d) => {
            id(&mut d.name);
            e(&mut d.expr);
        }
        ItemKind::Block(d) => {
            id(&mut d.name);
            d.when.as_mut().map(e);
            match &mut d.action {
                BlockAction::Refuse { status, message } => {
                    opt(status);
                    opt(message);
                }
                BlockAction::Redirect { model } => id(model),
            }
        }
        ItemKind::Route(d) => {
            id(&mut d.name);
            opt(&mut d.priority);
            d.when.as_mut().map(e);
            d.to.as_mut().map(id);
            d.fallbacks.iter_mut().for_each(id);
            if let Some(s) = &mut d.system_prompt {
                z(&mut s.span);
                sp(&mut s.text);
            }
            if let Some(h) = &mut d.headers {
                sp(h);
                h.value.iter_mut().for_each(header);
            }
            opt(&mut d.reasoning);
            if let Some(t) = &mut d.tools {
                sp(t);
                if let Tools::Only(names) = &mut t.value {
                    names.iter_mut().for_each(sp);
                }
            }
            opt(&mut d.cache);
        }
        ItemKind::Cache(d) => {
            d.encoder.as_mut().map(id);
            opt(&mut d.threshold);
            opt(&mut d.ttl);
            store(&mut d.store);
            d.skip_when.as_mut().map(e);
        }
        ItemKind::Session(d) => {
            d.id.as_mut().map(e);
            d.tenant.as_mut().map(e);
            opt(&mut d.ttl);
            store(&mut d.store);
            opt(&mut d.missing);
        }
        ItemKind::Protect(d) => {
            opt(&mut d.mode);
            for h in &mut d.holds {
                z(&mut h.span);
                sp(&mut h.name);
                e(&mut h.when);
            }
        }
        ItemKind::Failure(d) => {
            opt(&mut d.classifier);
            opt(&mut d.store);
            opt(&mut d.backend);
        }
        ItemKind::Router(d) => {
            strings(&mut d.names);
            opt(&mut d.tokenizer);
        }
        ItemKind::Test(d) => {
            id(&mut d.name);
            match &mut d.input {
                Some(TestInput::Prompt(p)) | Some(TestInput::Messages(p)) => sp(p),
                None => {}
            }
            opt(&mut d.system);
            d.headers.iter_mut().for_each(header);
            for g in &mut d.givens {
                id(&mut g.signal);
                e(&mut g.value);
            }
            if let Some(x) = &mut d.expect {
                sp(x);
                match &mut x.value {
                    Expectation::Route { route: n, model }
                    | Expectation::Blocked { block: n, model } => {
                        id(n);
                        model.as_mut().map(id);
                    }
                }
            }
        }
    }
}

fn store(s: &mut Option<Spanned<Store>>) {
    if let Some(s) = s {
        sp(s);
        if let Store::Redis(url) = &mut s.value {
            sp(url);
        }
    }
}

fn expr(e: &mut Expr, unparen: bool) {
    if unparen {
        while let ExprKind::Paren(inner) = &mut e.kind {
            let inner = std::mem::replace(inner.as_mut(), placeholder());
            *e = inner;
        }
    }
    z(&mut e.span);
    match &mut e.kind {
        ExprKind::Bool(_) | ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Duration(_) => {}
        ExprKind::List(items) => items.iter_mut().for_each(|x| expr(x, unparen)),
        ExprKind::Name(i) => id(i),
        ExprKind::Field(base, f) => {
            expr(base, unparen);
            id(f);
        }
        ExprKind::Call(f, args) => {
            id(f);
            args.iter_mut().for_each(|x| expr(x, unparen));
        }
        ExprKind::Unary(_, x) => expr(x, unparen),
        ExprKind::Binary(_, l, r) => {
            expr(l, unparen);
            expr(r, unparen);
        }
        ExprKind::Is(x, l) => {
            expr(x, unparen);
            id(l);
        }
        ExprKind::In(x, ls) => {
            expr(x, unparen);
            ls.iter_mut().for_each(id);
        }
        ExprKind::Paren(x) => expr(x, unparen),
    }
}

fn placeholder() -> Expr {
    Expr {
        kind: ExprKind::Bool(false),
        span: Span::default(),
    }
}
