//! Shape equality of AST nodes: two trees are the same shape when they differ at most in their
//! spans.
//!
//! `PartialEq` on the tree compares spans too, so two parses of one policy written differently
//! (the formatter's input and output, a file and its copy with other line endings) are never
//! equal. [`EqShape`] compares everything else: names, literals with their text, operators,
//! field values, the order of lists, `Paren` nodes and comment texts. Struct impls destructure
//! every field, so a field added to the tree does not compile until it is compared here or
//! named as a span to skip.

use super::*;
use crate::span::Spanned;

/// Equality that ignores spans.
pub trait EqShape {
    /// Whether `self` and `other` are equal once every span is disregarded.
    fn eq_shape(&self, other: &Self) -> bool;
}

impl<T: EqShape + ?Sized> EqShape for &T {
    fn eq_shape(&self, other: &Self) -> bool {
        (**self).eq_shape(*other)
    }
}

impl<T: EqShape + ?Sized> EqShape for Box<T> {
    fn eq_shape(&self, other: &Self) -> bool {
        (**self).eq_shape(other)
    }
}

impl<T: EqShape> EqShape for Option<T> {
    fn eq_shape(&self, other: &Self) -> bool {
        match (self, other) {
            (Some(a), Some(b)) => a.eq_shape(b),
            (None, None) => true,
            _ => false,
        }
    }
}

impl<T: EqShape> EqShape for [T] {
    fn eq_shape(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a.eq_shape(b))
    }
}

impl<T: EqShape> EqShape for Vec<T> {
    fn eq_shape(&self, other: &Self) -> bool {
        self.as_slice().eq_shape(other.as_slice())
    }
}

impl<T: EqShape> EqShape for Spanned<T> {
    fn eq_shape(&self, other: &Self) -> bool {
        let Spanned { value, span: _ } = self;
        value.eq_shape(&other.value)
    }
}

/// Values without spans inside: shape equality is plain equality.
macro_rules! by_eq {
    ($($ty:ty),* $(,)?) => {$(
        impl EqShape for $ty {
            fn eq_shape(&self, other: &Self) -> bool {
                self == other
            }
        }
    )*};
}

by_eq!(
    bool,
    u64,
    String,
    str,
    Device,
    BackendApi,
    Reasoning,
    Missing,
    ClientAuth,
    Outcomes,
    ProtectMode,
    OwnerLost,
    FailMode,
    Anonymous,
    UnaryOp,
    BinOp
);

/// Structs: every field compared but the listed spans.
macro_rules! by_fields {
    ($($ty:ident { $($field:ident),* $(; skip $($span:ident),*)? })*) => {$(
        impl EqShape for $ty {
            fn eq_shape(&self, other: &Self) -> bool {
                let $ty { $($field,)* $($($span: _,)*)? } = self;
                true $(&& $field.eq_shape(&other.$field))*
            }
        }
    )*};
}

by_fields! {
    Ident { name; skip span }
    File { items, comments }
    Comment { text; skip span }
    Item { kind; skip span }
    EnvRef { var; skip span }
    Backend { name, url, catalog, api_key, timeout, simulated, client_auth, api }
    Model { name, backend, serves, aliases, cost, context, tokenizer }
    Classifier { name, path, labels, device, window, windows }
    Guard { name, path, positive, device, window, windows }
    Encoder { name, path, device, window, windows }
    Detector { name, path, entities, threshold, device, window, windows }
    Signal { name, expr }
    Block { name, when, action, redact }
    SystemPrompt { text, replace; skip span }
    HeaderSet { name, value }
    Route { name, priority, when, to, fallbacks, system_prompt, headers, reasoning, tools, cache, redact }
    Cache { encoder, threshold, ttl, store, max_entries, max_bytes, skip_when }
    Session { id, tenant, ttl, store, missing, outcomes }
    Hold { name, when; skip span }
    Protect { mode, holds, owner_lost }
    Failure { classifier, store, backend, cooldown_after, cooldown }
    Router { names, tokenizer, anonymous }
    Given { signal, value }
    Test { name, input, system, headers, givens, expect }
    Budget { name, per, window, requests, tokens, cost, exceeded }
    Duration { millis, text }
    Expr { kind; skip span }
}

impl EqShape for Number {
    fn eq_shape(&self, other: &Self) -> bool {
        let Number {
            value,
            is_int,
            text,
        } = self;
        // A literal's value is what it is, NaN included: compare bits, not IEEE equality.
        value.to_bits() == other.value.to_bits() && *is_int == other.is_int && *text == other.text
    }
}

// Enums: a match on `self` that names every variant, so that a new variant must be handled.

impl EqShape for ItemKind {
    fn eq_shape(&self, other: &Self) -> bool {
        match self {
            ItemKind::Backend(a) => matches!(other, ItemKind::Backend(b) if a.eq_shape(b)),
            ItemKind::Model(a) => matches!(other, ItemKind::Model(b) if a.eq_shape(b)),
            ItemKind::Classifier(a) => matches!(other, ItemKind::Classifier(b) if a.eq_shape(b)),
            ItemKind::Guard(a) => matches!(other, ItemKind::Guard(b) if a.eq_shape(b)),
            ItemKind::Encoder(a) => matches!(other, ItemKind::Encoder(b) if a.eq_shape(b)),
            ItemKind::Detector(a) => matches!(other, ItemKind::Detector(b) if a.eq_shape(b)),
            ItemKind::Signal(a) => matches!(other, ItemKind::Signal(b) if a.eq_shape(b)),
            ItemKind::Block(a) => matches!(other, ItemKind::Block(b) if a.eq_shape(b)),
            ItemKind::Route(a) => matches!(other, ItemKind::Route(b) if a.eq_shape(b)),
            ItemKind::Cache(a) => matches!(other, ItemKind::Cache(b) if a.eq_shape(b)),
            ItemKind::Session(a) => matches!(other, ItemKind::Session(b) if a.eq_shape(b)),
            ItemKind::Protect(a) => matches!(other, ItemKind::Protect(b) if a.eq_shape(b)),
            ItemKind::Failure(a) => matches!(other, ItemKind::Failure(b) if a.eq_shape(b)),
            ItemKind::Router(a) => matches!(other, ItemKind::Router(b) if a.eq_shape(b)),
            ItemKind::Test(a) => matches!(other, ItemKind::Test(b) if a.eq_shape(b)),
            ItemKind::Budget(a) => matches!(other, ItemKind::Budget(b) if a.eq_shape(b)),
        }
    }
}

impl EqShape for BudgetPer {
    fn eq_shape(&self, other: &Self) -> bool {
        match self {
            BudgetPer::Tenant(_) => matches!(other, BudgetPer::Tenant(_)),
            BudgetPer::Expr(a) => matches!(other, BudgetPer::Expr(b) if a.eq_shape(b)),
        }
    }
}

impl EqShape for Exceeded {
    fn eq_shape(&self, other: &Self) -> bool {
        match self {
            Exceeded::Reject => matches!(other, Exceeded::Reject),
            Exceeded::Observe => matches!(other, Exceeded::Observe),
            Exceeded::To(a) => matches!(other, Exceeded::To(b) if a.eq_shape(b)),
        }
    }
}

impl EqShape for RedactType {
    fn eq_shape(&self, other: &Self) -> bool {
        match self {
            RedactType::Pii(a) => matches!(other, RedactType::Pii(b) if a.eq_shape(b)),
            RedactType::Entity { detector, entity } => matches!(
                other,
                RedactType::Entity { detector: d, entity: e }
                    if detector.eq_shape(d) && entity.eq_shape(e)
            ),
        }
    }
}

impl EqShape for BlockAction {
    fn eq_shape(&self, other: &Self) -> bool {
        match self {
            BlockAction::Refuse { status, message } => matches!(
                other,
                BlockAction::Refuse { status: s, message: m }
                    if status.eq_shape(s) && message.eq_shape(m)
            ),
            BlockAction::Redirect { model } => {
                matches!(other, BlockAction::Redirect { model: m } if model.eq_shape(m))
            }
        }
    }
}

impl EqShape for Tools {
    fn eq_shape(&self, other: &Self) -> bool {
        match self {
            Tools::Keep => matches!(other, Tools::Keep),
            Tools::None => matches!(other, Tools::None),
            Tools::Only(a) => matches!(other, Tools::Only(b) if a.eq_shape(b)),
        }
    }
}

impl EqShape for Store {
    fn eq_shape(&self, other: &Self) -> bool {
        match self {
            Store::Memory => matches!(other, Store::Memory),
            Store::Redis(a) => matches!(other, Store::Redis(b) if a.eq_shape(b)),
            Store::Cluster(a) => matches!(other, Store::Cluster(b) if a.eq_shape(b)),
            Store::Sentinel { sentinels, master } => matches!(
                other,
                Store::Sentinel { sentinels: s, master: m }
                    if sentinels.eq_shape(s) && master.eq_shape(m)
            ),
            Store::Milvus { url, options } => matches!(
                other,
                Store::Milvus { url: u, options: o }
                    if url.eq_shape(u)
                        && options.len() == o.len()
                        && options
                            .iter()
                            .zip(o)
                            .all(|((n, v), (m, w))| n.eq_shape(m) && v.eq_shape(w))
            ),
        }
    }
}

impl EqShape for TestInput {
    fn eq_shape(&self, other: &Self) -> bool {
        match self {
            TestInput::Prompt(a) => matches!(other, TestInput::Prompt(b) if a.eq_shape(b)),
            TestInput::Messages(a) => matches!(other, TestInput::Messages(b) if a.eq_shape(b)),
        }
    }
}

impl EqShape for Expectation {
    fn eq_shape(&self, other: &Self) -> bool {
        match self {
            Expectation::Route { route, model } => matches!(
                other,
                Expectation::Route { route: r, model: m } if route.eq_shape(r) && model.eq_shape(m)
            ),
            Expectation::Blocked { block, model } => matches!(
                other,
                Expectation::Blocked { block: b, model: m } if block.eq_shape(b) && model.eq_shape(m)
            ),
            Expectation::Rejected { budget } => matches!(
                other,
                Expectation::Rejected { budget: b } if budget.eq_shape(b)
            ),
        }
    }
}

impl EqShape for ExprKind {
    fn eq_shape(&self, other: &Self) -> bool {
        use ExprKind as K;
        match self {
            K::Bool(a) => matches!(other, K::Bool(b) if a == b),
            K::Number(a) => matches!(other, K::Number(b) if a.eq_shape(b)),
            K::Str(a) => matches!(other, K::Str(b) if a == b),
            K::Duration(a) => matches!(other, K::Duration(b) if a.eq_shape(b)),
            K::List(a) => matches!(other, K::List(b) if a.eq_shape(b)),
            K::Name(a) => matches!(other, K::Name(b) if a.eq_shape(b)),
            K::Field(a, f) => matches!(other, K::Field(b, g) if a.eq_shape(b) && f.eq_shape(g)),
            K::Call(f, a) => matches!(other, K::Call(g, b) if f.eq_shape(g) && a.eq_shape(b)),
            K::Unary(op, a) => matches!(other, K::Unary(p, b) if op == p && a.eq_shape(b)),
            K::Binary(op, l, r) => matches!(
                other,
                K::Binary(p, m, s) if op == p && l.eq_shape(m) && r.eq_shape(s)
            ),
            K::Is(a, l) => matches!(other, K::Is(b, m) if a.eq_shape(b) && l.eq_shape(m)),
            K::In(a, l) => matches!(other, K::In(b, m) if a.eq_shape(b) && l.eq_shape(m)),
            K::Paren(a) => matches!(other, K::Paren(b) if a.eq_shape(b)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;
    use crate::span::FileId;

    fn file(text: &str) -> File {
        let parsed = parse(text, FileId(0));
        assert!(parsed.diagnostics.is_empty(), "{:#?}", parsed.diagnostics);
        parsed.file
    }

    const POLICY: &str = "backend local { url = \"http://127.0.0.1:8000/v1\" }\n\
        model small { backend = local serves = \"small\" cost = 8k }\n\
        signal long = tokens(prompt) > 2k and not contains(prompt, [\"hi\"])\n\
        route big priority 10 { when long to small else small }\n";

    #[test]
    fn spans_and_layout_do_not_count() {
        let moved = "# a comment\n\n\nbackend   local {\n  url = \"http://127.0.0.1:8000/v1\"\n}\n\
            model small {\n cost = 8k\n serves = \"small\"\n backend = local\n}\n\
            signal long =\n  tokens(prompt) > 2k\n  and not contains(prompt, [\"hi\"])\n\
            route big priority 10 {\n  to small else small\n  when long\n}\n";
        let (a, b) = (file(POLICY), file(moved));
        assert_ne!(
            a.items, b.items,
            "the spans differ, so `==` must see a difference"
        );
        assert!(a.items.eq_shape(&b.items));
        assert!(!a.eq_shape(&b), "the comment is content of the file");
    }

    /// Each edit changes one thing: a value, a name, an operator, an order, a grouping.
    #[test]
    fn any_other_difference_counts() {
        let base = file(POLICY);
        for (from, to) in [
            ("cost = 8k", "cost = 8000"),
            ("\"small\" cost", "\"smal\" cost"),
            ("model small", "model smaller"),
            ("> 2k", ">= 2k"),
            ("and not", "or not"),
            ("[\"hi\"]", "[\"hi\", \"yo\"]"),
            ("priority 10", "priority 11"),
            ("else small", "else small, small"),
            ("tokens(prompt) > 2k and", "(tokens(prompt) > 2k) and"),
        ] {
            assert!(POLICY.contains(from), "{from}");
            let changed = POLICY.replacen(from, to, 1);
            let parsed = parse(&changed, FileId(0));
            assert!(
                !base.eq_shape(&parsed.file),
                "`{from}` -> `{to}` went unnoticed"
            );
        }
        let mut swapped = base.clone();
        swapped.items.swap(0, 1);
        assert!(!base.eq_shape(&swapped), "item order went unnoticed");
    }

    #[test]
    fn comments_compare_by_text() {
        let a = file("# one\nsignal s = true\n");
        let b = file("signal s = true # one\n");
        let c = file("signal s = true # two\n");
        assert!(a.eq_shape(&b));
        assert!(!a.eq_shape(&c));
    }
}
