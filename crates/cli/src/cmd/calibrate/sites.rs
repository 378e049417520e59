//! Where a policy's thresholds are: every comparison of a non-constant `score` or `float`
//! value against a number literal inside a signal (`similarity(..) > 0.8`, `guard(prompt) >=
//! 0.7`, `topic.confidence > 0.6`, `bm25(..) > 2`, a score-valued signal against a literal).
//!
//! Any float-valued built-in qualifies without being listed here, so new ones are calibrated
//! as soon as the checker types them. Integer counts (`tokens(history) > 8k`) are not
//! thresholds of a model and are left alone.

use super::fit::{Domain, Op};
use src_compiler::hir::{CheckedPolicy, CmpOp, SignalId, TExpr, TExprKind, Type};
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
    /// The score expression's source text, as written.
    pub score: String,
    pub domain: Domain,
    /// The comparison sits under an odd number of `not`s: it holding means the signal does not.
    pub negated: bool,
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
        for (n, (op, current, literal, score, domain, negated)) in found.into_iter().enumerate() {
            out.push(Site {
                signal: id,
                id: if several {
                    format!("{}#{}", def.name, n + 1)
                } else {
                    def.name.clone()
                },
                op,
                current,
                literal,
                score,
                domain,
                negated,
            });
        }
    }
    out
}

type Found = (Op, f64, Span, String, Domain, bool);

fn walk(policy: &CheckedPolicy, e: &TExpr, negated: bool, out: &mut Vec<Found>) {
    match &e.kind {
        TExprKind::Not(x) => return walk(policy, x, !negated, out),
        TExprKind::Cmp(cmp, a, b) => {
            if let Some(found) = site(policy, *cmp, a, b, negated) {
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
    let text = policy
        .sources
        .get(score.span.file)
        .and_then(|f| f.text.get(score.span.range()))?
        .to_string();
    Some((op, literal.0, literal.1, text, domain, negated))
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
}
