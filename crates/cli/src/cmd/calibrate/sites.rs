//! Where a policy's thresholds are: every comparison of a non-constant `score` or `float`
//! value against a number literal inside a signal (`similarity(..) > 0.8`, `guard(prompt) >=
//! 0.7`, `topic.confidence > 0.6`, `bm25(..) > 2`, a score-valued signal against a literal), and
//! the `MIN` of every `fuzzy(t, [..], MIN)` and of `fuzzy_hits(t, [..], MIN)` compared with a
//! number literal.
//!
//! Any float-valued built-in qualifies without being listed here, so new ones are calibrated
//! as soon as the checker types them. Integer counts (`tokens(history) > 8k`) are not
//! thresholds of a model and are left alone. `fuzzy`'s threshold is inside the call, so its
//! score is not an expression of the language: it is read from the text (see [`Reading`]).

use super::fit::{Domain, Op};
use src_compiler::hir::{CheckedPolicy, CmpOp, SignalId, TExpr, TExprKind, Type};
use src_dsl::ast::visit::{walk_expr, Visitor};
use src_dsl::ast::{Expr, ExprKind};
use src_dsl::Span;

/// One threshold: `score OP literal`, the score written on the left whatever the source does.
#[derive(Debug, Clone)]
pub struct Site {
    pub signal: SignalId,
    /// `NAME` or, for a signal with several thresholds, `NAME#2` (1-based, in source order).
    pub id: String,
    pub op: Op,
    /// The literal's value and where it is written.
    pub current: f64,
    pub literal: Span,
    /// The score expression's source text, as written (for a `fuzzy` threshold, its text
    /// argument).
    pub score: String,
    pub reading: Reading,
    /// The comparison as the report shows it, the threshold written `_`.
    pub shown: String,
    pub domain: Domain,
    /// The comparison sits under an odd number of `not`s: it holding means the signal does not.
    pub negated: bool,
}

/// How a site's score is read from a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// The value of the `score` expression.
    Value,
    /// `fuzzy(score, phrases, MIN)` (`rank` 1) or `fuzzy_hits(score, phrases, MIN) >= rank`:
    /// the phrases' reach in the text `score` denotes (`FuzzySet::reach`, the highest `MIN` at
    /// which each phrase matches), its `rank`-th highest, compared `>=` with `MIN`.
    Fuzzy { phrases: Vec<String>, rank: usize },
}

/// The thresholds of `signals` (every signal when empty), in signal and source order.
pub fn find(policy: &CheckedPolicy, signals: &[SignalId]) -> Vec<Site> {
    let mut out = Vec::new();
    for (index, def) in policy.signals.iter().enumerate() {
        let id = SignalId(index as u32);
        if !signals.is_empty() && !signals.contains(&id) {
            continue;
        }
        let mut found = Vec::new();
        walk(policy, &def.expr, false, &mut found);
        let several = found.len() > 1;
        for (n, f) in found.into_iter().enumerate() {
            out.push(Site {
                signal: id,
                id: if several {
                    format!("{}#{}", def.name, n + 1)
                } else {
                    def.name.clone()
                },
                op: f.op,
                current: f.current,
                literal: f.literal,
                score: f.score,
                reading: f.reading,
                shown: f.shown,
                domain: f.domain,
                negated: f.negated,
            });
        }
    }
    out
}

/// A site before it is named.
struct Found {
    op: Op,
    current: f64,
    literal: Span,
    score: String,
    reading: Reading,
    shown: String,
    domain: Domain,
    negated: bool,
}

fn walk(policy: &CheckedPolicy, e: &TExpr, negated: bool, out: &mut Vec<Found>) {
    match &e.kind {
        TExprKind::Not(x) => return walk(policy, x, !negated, out),
        TExprKind::Fuzzy { text, phrases, min } => {
            let call = FuzzyCall {
                call: e,
                text,
                phrases,
                min: *min,
            };
            out.extend(call.site(policy, e.span, 1, negated));
            return;
        }
        TExprKind::Cmp(cmp, a, b) => {
            let found = fuzzy_hits(policy, e, *cmp, a, b, negated)
                .or_else(|| site(policy, *cmp, a, b, negated));
            if let Some(found) = found {
                out.push(found);
                return;
            }
        }
        _ => {}
    }
    let mut children = e.children();
    children.sort_by_key(|c| c.span.start);
    for c in children {
        walk(policy, c, negated, out);
    }
}

/// A `fuzzy` or `fuzzy_hits` call.
struct FuzzyCall<'a> {
    call: &'a TExpr,
    text: &'a TExpr,
    phrases: &'a [String],
    min: f64,
}

impl FuzzyCall<'_> {
    /// The site of its `MIN`, shown as the source of `shown` (the call, or the comparison
    /// around it) with the threshold as `_`.
    fn site(
        &self,
        policy: &CheckedPolicy,
        shown: Span,
        rank: usize,
        negated: bool,
    ) -> Option<Found> {
        let literal = threshold_argument(policy, self.call.span)?;
        let source = source(policy, shown)?;
        let (from, to) = (
            literal.start.checked_sub(shown.start)? as usize,
            literal.end.checked_sub(shown.start)? as usize,
        );
        let shown = format!("{}_{}", source.get(..from)?, source.get(to..)?);
        Some(Found {
            op: Op::Ge,
            current: self.min,
            literal,
            score: source_text(policy, self.text.span)?,
            reading: Reading::Fuzzy {
                phrases: self.phrases.to_vec(),
                rank,
            },
            shown,
            domain: Domain::FUZZY,
            negated,
        })
    }
}

/// `fuzzy_hits(t, [..], MIN) OP n`: at least `rank` phrases reach `MIN`, or (for `<` and `<=`)
/// not.
fn fuzzy_hits(
    policy: &CheckedPolicy,
    cmp_expr: &TExpr,
    cmp: CmpOp,
    a: &TExpr,
    b: &TExpr,
    negated: bool,
) -> Option<Found> {
    let (hits, n, op) = match (literal(b), literal(a)) {
        (Some(v), None) => (a, v, op_of(cmp)?),
        (None, Some(v)) => (b, v, flipped(op_of(cmp)?)),
        _ => return None,
    };
    let TExprKind::FuzzyHits { text, phrases, min } = &hits.kind else {
        return None;
    };
    let (rank, inverted) = match op {
        Op::Ge => (n.ceil(), false),
        Op::Gt => (n.floor() + 1.0, false),
        Op::Lt => (n.ceil(), true),
        Op::Le => (n.floor() + 1.0, true),
    };
    // `>= 0` always holds and a rank past the list never does: no threshold to fit.
    if !(1.0..=phrases.len() as f64).contains(&rank) {
        return None;
    }
    let call = FuzzyCall {
        call: hits,
        text,
        phrases,
        min: *min,
    };
    call.site(policy, cmp_expr.span, rank as usize, negated != inverted)
}

/// Where the `MIN` literal of the `fuzzy`/`fuzzy_hits` call at `call` is written: the checked
/// policy keeps the value, the syntax tree its place.
fn threshold_argument(policy: &CheckedPolicy, call: Span) -> Option<Span> {
    struct Finder {
        call: Span,
        found: Option<Span>,
    }
    impl Visitor for Finder {
        fn visit_expr(&mut self, expr: &Expr) {
            if expr.span == self.call {
                if let ExprKind::Call(_, args) = &expr.kind {
                    if let Some(min) = args
                        .get(2)
                        .filter(|a| matches!(a.kind, ExprKind::Number(_)))
                    {
                        self.found = Some(min.span);
                        return;
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    let text = &policy.sources.get(call.file)?.text;
    let parsed = src_dsl::parse(text, call.file);
    let mut finder = Finder { call, found: None };
    finder.visit_file(&parsed.file);
    finder.found
}

fn source(policy: &CheckedPolicy, span: Span) -> Option<&str> {
    policy
        .sources
        .get(span.file)
        .and_then(|f| f.text.get(span.range()))
}

fn source_text(policy: &CheckedPolicy, span: Span) -> Option<String> {
    source(policy, span).map(str::to_string)
}

fn site(policy: &CheckedPolicy, cmp: CmpOp, a: &TExpr, b: &TExpr, negated: bool) -> Option<Found> {
    let (score, literal, op) = match (literal(b), literal(a)) {
        (Some(v), None) => (a, (v, b.span), op_of(cmp)?),
        (None, Some(v)) => (b, (v, a.span), flipped(op_of(cmp)?)),
        _ => return None,
    };
    let domain = match score.ty {
        Type::Score => Domain::SCORE,
        Type::Float => Domain::FLOAT,
        _ => return None,
    };
    let text = source_text(policy, score.span)?;
    Some(Found {
        op,
        current: literal.0,
        literal: literal.1,
        shown: format!("{text} {} _", op.symbol()),
        score: text,
        reading: Reading::Value,
        domain,
        negated,
    })
}

fn literal(e: &TExpr) -> Option<f64> {
    match e.kind {
        TExprKind::Float(v) => Some(v),
        TExprKind::Int(i) => Some(i as f64),
        _ => None,
    }
}

fn op_of(cmp: CmpOp) -> Option<Op> {
    match cmp {
        CmpOp::Gt => Some(Op::Gt),
        CmpOp::Ge => Some(Op::Ge),
        CmpOp::Lt => Some(Op::Lt),
        CmpOp::Le => Some(Op::Le),
        CmpOp::Eq | CmpOp::Ne => None,
    }
}

/// `0.8 < s` is `s > 0.8`.
fn flipped(op: Op) -> Op {
    match op {
        Op::Gt => Op::Lt,
        Op::Ge => Op::Le,
        Op::Lt => Op::Gt,
        Op::Le => Op::Ge,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use src_compiler::{check, load::load_str, CheckOptions};

    fn policy(text: &str) -> CheckedPolicy {
        let out = check(load_str("p.sr", text), &CheckOptions::default());
        out.policy
            .unwrap_or_else(|| panic!("{:?}", out.diagnostics))
    }

    #[test]
    fn score_comparisons_with_literals_are_sites() {
        let p = policy(concat!(
            "backend b { url = \"http://127.0.0.1:1/v1\" }\n",
            "model m { backend = b serves = \"m\" }\n",
            "signal d = density(prompt, [\"x\"])\n",
            "signal a = 0.25 < d and not (density(prompt, [\"y\"]) >= 0.5)\n",
            "signal long = tokens(prompt) > 8k\n",
            "route r priority 1 { when a or long to m }\n",
            "route default { to m }\n",
        ));
        let sites = find(&p, &[]);
        let shown: Vec<(String, Op, f64, String, bool)> = sites
            .iter()
            .map(|s| (s.id.clone(), s.op, s.current, s.score.clone(), s.negated))
            .collect();
        assert_eq!(
            shown,
            [
                ("a#1".into(), Op::Gt, 0.25, "d".into(), false),
                (
                    "a#2".into(),
                    Op::Ge,
                    0.5,
                    "density(prompt, [\"y\"])".into(),
                    true
                ),
            ]
        );
        let text = &p.sources.get(sites[0].literal.file).unwrap().text;
        assert_eq!(&text[sites[1].literal.range()], "0.5");
        let only = p.signal_by_name("long").unwrap();
        assert!(find(&p, &[only]).is_empty());
    }

    #[test]
    fn fuzzy_thresholds_and_bm25_comparisons_are_sites() {
        let p = policy(concat!(
            "backend b { url = \"http://127.0.0.1:1/v1\" }\n",
            "model m { backend = b serves = \"m\" }\n",
            "signal u = fuzzy(prompt, [\"urgent\", \"outage\"], 0.9)\n",
            "signal h = 2 <= fuzzy_hits(history, [\"a b\", \"c\", \"d\"],  # the threshold\n  0.75)\n",
            "signal few = not (fuzzy_hits(prompt, [\"x\", \"y\"], 0.8) > 1)\n",
            "signal b = bm25(prompt, [\"code\"]) > 2\n",
            "signal never = fuzzy_hits(prompt, [\"x\"], 0.8) >= 0\n",
            "route r priority 1 { when u or h or few or b or never to m }\n",
            "route default { to m }\n",
        ));
        let sites = find(&p, &[]);
        let text = &p.sources.get(sites[0].literal.file).unwrap().text;
        let shown: Vec<(&str, f64, &str, &str, &str, bool)> = sites
            .iter()
            .map(|s| {
                (
                    s.id.as_str(),
                    s.current,
                    &text[s.literal.range()],
                    s.score.as_str(),
                    s.shown.as_str(),
                    s.negated,
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                (
                    "u",
                    0.9,
                    "0.9",
                    "prompt",
                    "fuzzy(prompt, [\"urgent\", \"outage\"], _)",
                    false
                ),
                (
                    "h",
                    0.75,
                    "0.75",
                    "history",
                    "2 <= fuzzy_hits(history, [\"a b\", \"c\", \"d\"],  # the threshold\n  _)",
                    false
                ),
                // The comparison as written, with its parentheses.
                (
                    "few",
                    0.8,
                    "0.8",
                    "prompt",
                    "(fuzzy_hits(prompt, [\"x\", \"y\"], _) > 1)",
                    true
                ),
                (
                    "b",
                    2.0,
                    "2",
                    "bm25(prompt, [\"code\"])",
                    "bm25(prompt, [\"code\"]) > _",
                    false
                ),
            ]
        );
        let ranks: Vec<Option<usize>> = sites
            .iter()
            .map(|s| match &s.reading {
                Reading::Fuzzy { rank, .. } => Some(*rank),
                Reading::Value => None,
            })
            .collect();
        assert_eq!(ranks, [Some(1), Some(2), Some(2), None]);
        assert!(sites.iter().all(|s| s.op == Op::Ge || s.id == "b"));
        assert_eq!(sites[0].domain, Domain::FUZZY);
        assert_eq!(sites[3].domain, Domain::FLOAT);
    }
}
