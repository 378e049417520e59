//! Computing atoms that need no model: request facts, text comparisons, phrase, fuzzy phrase,
//! BM25 and regex scans, word and token counts, language detection — and evaluating the text expressions that
//! atoms (and model calls) read.

use super::Evaluation;
use crate::compiled::Matcher;
use crate::hir::{CmpOp, RequestField};
use crate::ir::{Atom, AtomId, Slot, TextExpr};
use crate::{language, text};

/// What computing an atom gave: its value slot and, for `language`, its confidence slot.
pub(super) enum Computed {
    Value(Slot, Option<Slot>),
    /// The request cannot supply it (a `protect` input outside `hold_step`, or a model atom).
    Absent,
}

impl<'a> Evaluation<'a> {
    /// The text an expression denotes for this request; `None` for an absent `text?`.
    pub(super) fn text<'s>(&'s self, e: &'s TextExpr) -> Option<&'s str> {
        match e {
            TextExpr::Lit(s) => Some(s),
            TextExpr::Prompt => Some(&self.req.prompt),
            TextExpr::History => Some(&self.req.history),
            TextExpr::System => Some(&self.req.system),
            TextExpr::ApiKey => self.req.api_key.as_deref(),
            TextExpr::Header(name) => self.req.header(name),
            TextExpr::Body(path) => self.req.body_field(path),
            TextExpr::Coalesce(a, b) => self.text(a).or_else(|| self.text(b)),
            TextExpr::Signal(s, inner) => match self.text_givens.get(s.index()) {
                Some(Some(given)) => given.as_deref(),
                _ => self.text(inner),
            },
        }
    }

    /// Computes a cheap atom from the request.
    pub(super) fn compute<'s>(&'s self, id: AtomId) -> Computed {
        let Some(def) = self.policy.program.atom(id) else {
            return Computed::Absent;
        };
        let matcher = self
            .policy
            .matchers
            .get(id.index())
            .unwrap_or(&Matcher::None);
        // Builtins that take text read an absent `text?` as empty: nothing occurs in it.
        let text = |t: &'s TextExpr| self.text(t).unwrap_or("");
        let bool = |b: bool| Computed::Value(Slot::known(u64::from(b)), None);
        let int = |i: i64| Computed::Value(Slot::known(i as u64), None);
        let float = |f: f64| Computed::Value(Slot::known(f.to_bits()), None);
        let phrases = |f: &dyn Fn(&text::PhraseSet) -> Computed| match matcher {
            Matcher::Phrases(p) => f(p),
            _ => Computed::Absent,
        };
        let fuzzy = |f: &dyn Fn(&text::FuzzySet) -> Computed| match matcher {
            Matcher::Fuzzy(p) => f(p),
            _ => Computed::Absent,
        };
        let regex = |f: &dyn Fn(&regex::Regex) -> Computed| match matcher {
            Matcher::Regex(r) => f(r),
            _ => Computed::Absent,
        };
        let req = self.req;
        match &def.atom {
            Atom::Request(field) => match field {
                RequestField::Tools => int(req.tools),
                RequestField::Turns => int(req.turns),
                RequestField::Messages => int(req.messages),
                RequestField::ToolCalls => int(req.tool_calls),
                RequestField::ToolResults => int(req.tool_results),
                RequestField::Stream => bool(req.stream),
                RequestField::ToolLoop => bool(req.tool_loop),
                RequestField::ProviderState => bool(req.provider_state),
            },
            Atom::TextCmp(op, a, b) => bool(compare_texts(*op, self.text(a), self.text(b))),
            Atom::Contains(t, _) => phrases(&|p| bool(p.contains(text(t)))),
            Atom::Hits(t, _) => phrases(&|p| int(p.hits(text(t)))),
            Atom::Density(t, _) => phrases(&|p| float(p.density(text(t)))),
            Atom::Sequence(t, _) => phrases(&|p| bool(p.sequence(text(t)))),
            Atom::Fuzzy(t, ..) => fuzzy(&|p| bool(p.any(text(t)))),
            Atom::FuzzyHits(t, ..) => fuzzy(&|p| int(p.hits(text(t)))),
            Atom::Bm25(t, _) => phrases(&|p| float(p.bm25(text(t)))),
            Atom::Count(t, _) => regex(&|r| int(text::count(r, text(t)))),
            Atom::Matches(t, _) => regex(&|r| bool(text::matches(r, text(t)))),
            Atom::Pii(t, _) => match matcher {
                Matcher::Pii(r) => bool(r.any(text(t))),
                _ => Computed::Absent,
            },
            Atom::Words(t) => int(text::words(text(t))),
            Atom::Tokens(t) => {
                let t = text(t);
                int(match &self.policy.tokens {
                    Some(count) => count(t),
                    None => text::tokens_estimate(t),
                })
            }
            Atom::Language(t) => {
                let (label, confidence) = language::detect_scored(text(t));
                Computed::Value(
                    Slot::known(label as u64),
                    Some(Slot::known(confidence.to_bits())),
                )
            }
            Atom::Classify(..)
            | Atom::Guard(..)
            | Atom::Detect(..)
            | Atom::Similarity(..)
            | Atom::Pinned
            | Atom::Proposed
            | Atom::OutcomeFailRate
            | Atom::OutcomeCount
            | Atom::BudgetUsed(_)
            | Atom::BudgetRemaining(_) => Computed::Absent,
        }
    }
}

/// Text comparison: an absent text equals only another absent one; ordering with an absent
/// side is false.
fn compare_texts(op: CmpOp, a: Option<&str>, b: Option<&str>) -> bool {
    match (op, a, b) {
        (CmpOp::Eq, a, b) => a == b,
        (CmpOp::Ne, a, b) => a != b,
        (_, Some(a), Some(b)) => match op {
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Eq | CmpOp::Ne => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::compare_texts;
    use crate::hir::CmpOp;

    #[test]
    fn absent_text_equals_no_string() {
        assert!(!compare_texts(CmpOp::Eq, None, Some("gold")));
        assert!(compare_texts(CmpOp::Ne, None, Some("gold")));
        assert!(compare_texts(CmpOp::Eq, None, None));
        assert!(!compare_texts(CmpOp::Lt, None, Some("a")));
        assert!(compare_texts(CmpOp::Lt, Some("a"), Some("b")));
    }
}
