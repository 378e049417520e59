//! `Program::listing`: a stable, readable text form of the IR.
//!
//! It is what `src build --emit ir` prints and what snapshot tests pin, so its format changes
//! only on purpose: the slot table (kind, cost class, what fills the slot), then each scan's
//! conditions as instruction lists. A condition lists only the nodes it is the first in its
//! scan to need; later conditions refer to earlier nodes by number, as the engines reuse them.

use super::{
    Atom, CmpTy, Cond, CondOwner, Const, CostClass, Inst, NodeId, NumTy, Program, SlotKind,
    SlotSource, TextExpr, ValTy,
};
use crate::hir::{ArithOp, ClassSet, CmpOp, RequestField};
use std::fmt::Write;

impl Program {
    pub fn listing(&self) -> String {
        let mut out = String::new();
        out.push_str("slots\n");
        for (i, slot) in self.slots.iter().enumerate() {
            let (cost, source) = match slot.source {
                SlotSource::Atom(a) => match self.atom(a) {
                    Some(def) => (cost_name(def.cost), self.atom_text(&def.atom)),
                    None => ("?", String::new()),
                },
                SlotSource::Confidence(a) => match self.atom(a) {
                    Some(def) => (
                        cost_name(def.cost),
                        format!("{}.confidence", self.atom_text(&def.atom)),
                    ),
                    None => ("?", String::new()),
                },
                SlotSource::Given(s) => ("given", self.signal_name(s.index()).to_string()),
                SlotSource::GivenConfidence(s) => (
                    "given",
                    format!("{}.confidence", self.signal_name(s.index())),
                ),
            };
            let _ = writeln!(
                out,
                "  s{i:<4} {:<18} {cost:<8} {source}",
                self.kind_name(slot.kind)
            );
        }
        let sections: [(&str, std::ops::Range<usize>); 3] = [
            ("decide", self.decide_conds()),
            ("hold", self.hold_conds()),
            (
                "cache",
                self.cache_skip().map_or(0..0, |c| c.index()..c.index() + 1),
            ),
        ];
        for (title, range) in sections {
            if range.is_empty() {
                continue;
            }
            let _ = writeln!(out, "{title}");
            for ci in range {
                if let Some(cond) = self.conds.get(ci) {
                    self.list_cond(&mut out, ci, cond);
                }
            }
        }
        out
    }

    fn list_cond(&self, out: &mut String, ci: usize, cond: &Cond) {
        let head = match cond.owner {
            CondOwner::Block(b) => format!("block {}", self.name(&self.names.blocks, b.index())),
            CondOwner::Route(r) => format!("route {}", self.name(&self.names.routes, r.index())),
            CondOwner::Hold(h) => format!("hold {:?}", self.name(&self.names.holds, h)),
            CondOwner::CacheSkip => "skip".to_string(),
        };
        let _ = writeln!(out, "  c{ci} {head}");
        for &n in &cond.fresh {
            let _ = writeln!(out, "    n{} = {}", n.0, self.inst_text(n));
        }
        let _ = writeln!(out, "    when n{}", cond.root.0);
    }

    fn name<'a>(&self, list: &'a [String], i: usize) -> &'a str {
        list.get(i).map_or("?", String::as_str)
    }

    fn signal_name(&self, i: usize) -> &str {
        self.name(&self.names.signals, i)
    }

    fn kind_name(&self, kind: SlotKind) -> String {
        match kind {
            SlotKind::Bool => "bool".into(),
            SlotKind::Int => "int".into(),
            SlotKind::Float => "float".into(),
            SlotKind::Model => "model".into(),
            SlotKind::Label(set) => format!("label<{}>", self.set_name(set)),
        }
    }

    fn set_name(&self, set: ClassSet) -> &str {
        match set {
            ClassSet::Classifier(c) => self.name(&self.names.classifiers, c.index()),
            ClassSet::Language => "language",
        }
    }

    fn inst_text(&self, n: NodeId) -> String {
        let Some(def) = self.nodes.get(n.index()) else {
            return "?".into();
        };
        let ty = ty_name(def.ty);
        match &def.inst {
            Inst::Const(c) => match c {
                Const::Bool(b) => format!("const {b}"),
                Const::Int(i) => format!("const {i}"),
                Const::Float(bits) => format!("const {:?}", f64::from_bits(*bits)),
                Const::Label(set, l) => format!("label {}", self.names.label(*set, *l)),
                Const::Model(m) => {
                    format!("model {}", self.name(&self.names.models, *m as usize))
                }
            },
            Inst::Load(s) => format!("load.{ty} s{}", s.0),
            Inst::Given { slot, inner } => format!("given.{ty} s{} else n{}", slot.0, inner.0),
            Inst::Not(a) => format!("not n{}", a.0),
            Inst::And(a, b) => format!("and n{}, n{}", a.0, b.0),
            Inst::Or(a, b) => format!("or n{}, n{}", a.0, b.0),
            Inst::Neg(t, a) => format!("neg.{} n{}", num_name(*t), a.0),
            Inst::Arith(op, t, a, b) => {
                format!("{}.{} n{}, n{}", arith_name(*op), num_name(*t), a.0, b.0)
            }
            Inst::ToFloat(a) => format!("to_float n{}", a.0),
            Inst::Cmp(op, t, a, b) => {
                let t = match t {
                    CmpTy::Int => "int",
                    CmpTy::Float => "float",
                    CmpTy::Bits => "bits",
                };
                format!("{}.{t} n{}, n{}", cmp_name(*op), a.0, b.0)
            }
            Inst::IsLabel(a, set, labels) => {
                let names: Vec<&str> = labels.iter().map(|l| self.names.label(*set, l.0)).collect();
                format!("is n{} [{}]", a.0, names.join(", "))
            }
            Inst::ModelCost(a) => format!("cost n{}", a.0),
        }
    }

    /// The atom as policy source would write it.
    pub fn atom_text(&self, atom: &Atom) -> String {
        let t = |e: &TextExpr| self.text_expr(e);
        let list = |l: &[String]| {
            let items: Vec<String> = l.iter().map(|s| format!("{s:?}")).collect();
            format!("[{}]", items.join(", "))
        };
        match atom {
            Atom::Request(f) => format!("request.{}", field_name(*f)),
            Atom::TextCmp(op, a, b) => format!("{} {} {}", t(a), cmp_symbol(*op), t(b)),
            Atom::Contains(x, l) => format!("contains({}, {})", t(x), list(l)),
            Atom::Hits(x, l) => format!("hits({}, {})", t(x), list(l)),
            Atom::Density(x, l) => format!("density({}, {})", t(x), list(l)),
            Atom::Sequence(x, l) => format!("sequence({}, {})", t(x), list(l)),
            Atom::Fuzzy(x, l, m) => {
                format!("fuzzy({}, {}, {})", t(x), list(l), f64::from_bits(*m))
            }
            Atom::FuzzyHits(x, l, m) => {
                format!("fuzzy_hits({}, {}, {})", t(x), list(l), f64::from_bits(*m))
            }
            Atom::Bm25(x, l) => format!("bm25({}, {})", t(x), list(l)),
            Atom::Count(x, r) => format!("count({}, {r:?})", t(x)),
            Atom::Matches(x, r) => format!("matches({}, {r:?})", t(x)),
            Atom::Pii(x, types) => {
                let names: Vec<String> = types.iter().map(|t| format!("{:?}", t.name())).collect();
                format!("pii({}, [{}])", t(x), names.join(", "))
            }
            Atom::Words(x) => format!("words({})", t(x)),
            Atom::Tokens(x) => format!("tokens({})", t(x)),
            Atom::Language(x) => format!("language({})", t(x)),
            Atom::Classify(c, x) => {
                format!(
                    "{}({})",
                    self.name(&self.names.classifiers, c.index()),
                    t(x)
                )
            }
            Atom::Guard(g, x) => format!("{}({})", self.name(&self.names.guards, g.index()), t(x)),
            Atom::Detect(d, x, l) => format!(
                "{}({}, [{}])",
                self.name(&self.names.detectors, d.index()),
                t(x),
                l.join(", ")
            ),
            Atom::Similarity(e, x, l) => format!(
                "similarity({}, {}, {})",
                self.name(&self.names.encoders, e.index()),
                t(x),
                list(l)
            ),
            Atom::Pinned => "pinned".into(),
            Atom::Proposed => "proposed".into(),
            Atom::OutcomeFailRate => "outcomes(pinned).fail_rate".into(),
            Atom::OutcomeCount => "outcomes(pinned).count".into(),
            Atom::BudgetUsed(b) => {
                format!("budget({}).used", self.name(&self.names.budgets, b.index()))
            }
            Atom::BudgetRemaining(b) => {
                format!(
                    "budget({}).remaining",
                    self.name(&self.names.budgets, b.index())
                )
            }
        }
    }

    fn text_expr(&self, e: &TextExpr) -> String {
        match e {
            TextExpr::Lit(s) => format!("{s:?}"),
            TextExpr::Prompt => "prompt".into(),
            TextExpr::History => "history".into(),
            TextExpr::System => "system".into(),
            TextExpr::ApiKey => "api_key".into(),
            TextExpr::Header(h) => format!("header({h:?})"),
            TextExpr::Body(p) => format!("body({p:?})"),
            TextExpr::Coalesce(a, b) => format!("{} ?? {}", self.text_expr(a), self.text_expr(b)),
            TextExpr::Signal(s, _) => self.signal_name(s.index()).to_string(),
        }
    }
}

fn cost_name(c: CostClass) -> &'static str {
    match c {
        CostClass::Fact => "fact",
        CostClass::Scan => "scan",
        CostClass::Approximate => "approximate",
        CostClass::Analyze => "analyze",
        CostClass::Model => "model",
    }
}

fn ty_name(t: ValTy) -> &'static str {
    match t {
        ValTy::Bool => "bool",
        ValTy::Int => "int",
        ValTy::Float => "float",
        ValTy::Label => "label",
        ValTy::Model => "model",
    }
}

fn num_name(t: NumTy) -> &'static str {
    match t {
        NumTy::Int => "int",
        NumTy::Float => "float",
    }
}

fn arith_name(op: ArithOp) -> &'static str {
    match op {
        ArithOp::Add => "add",
        ArithOp::Sub => "sub",
        ArithOp::Mul => "mul",
        ArithOp::Div => "div",
        ArithOp::Min => "min",
        ArithOp::Max => "max",
    }
}

fn cmp_name(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "eq",
        CmpOp::Ne => "ne",
        CmpOp::Lt => "lt",
        CmpOp::Le => "le",
        CmpOp::Gt => "gt",
        CmpOp::Ge => "ge",
    }
}

fn cmp_symbol(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "==",
        CmpOp::Ne => "!=",
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    }
}

fn field_name(f: RequestField) -> &'static str {
    match f {
        RequestField::Tools => "tools",
        RequestField::Turns => "turns",
        RequestField::Messages => "messages",
        RequestField::ToolCalls => "tool_calls",
        RequestField::ToolResults => "tool_results",
        RequestField::Stream => "stream",
        RequestField::ToolLoop => "tool_loop",
        RequestField::ProviderState => "provider_state",
    }
}
