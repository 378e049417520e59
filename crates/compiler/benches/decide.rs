//! `decide` on generated policies of 10, 100 and 1,000 routes, interpreter against JIT,
//! `unknown_slots`, a whole staged evaluation and the request procedure around it on the same
//! policies, and the cost of lowering + JIT-compiling the 1,000-route policy.
//!
//! Route `i` (of `n`, by descending priority) is
//! `tokens(history) >= (n - i) * 100 and (topic is L(i) or attack < 0.5) or request.tools > 100 + i`
//! over four shared signals, and two blocks come first. Two fully known rows are measured:
//! `middle`, where route `n / 2` is the first to hold, and `default`, where no route holds and
//! every condition is evaluated (the worst case).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use src_compiler::eval::{ModelKind, ModelResult, Step};
use src_compiler::fixture::*;
use src_compiler::hir::{CheckedPolicy, ClassSet, CmpOp, LabelId, RequestField, RouteId, Type};
use src_compiler::interp;
use src_compiler::ir::{lower, Atom, Outcome, Program, Row, TextExpr, Verdict};
use src_compiler::jit::JitPolicy;
use src_compiler::procedure::SessionAnswer;
use src_compiler::request::RequestView;
use src_compiler::{EngineKind, Next, Procedure};
use std::hint::black_box;
use std::time::Duration;

fn policy(n: usize) -> CheckedPolicy {
    let mut pb = PolicyBuilder::new();
    let topic = pb.signal("topic", classify(prompt()));
    let attack = pb.signal("attack", guard(prompt()));
    let long = pb.signal("long", tokens(history()));
    let code_talk = pb.signal(
        "code_talk",
        contains(prompt(), &["segfault", "stack trace"]),
    );
    let domain = Type::Class(ClassSet::Classifier(DOMAIN));
    let tools = || request(RequestField::Tools);
    pb.block(
        "jailbreak",
        cmp(CmpOp::Gt, sig(attack, Type::Score), float(0.95)),
    )
    .block(
        "abuse",
        and(
            cmp(CmpOp::Gt, tools(), int(500)),
            sig(code_talk, Type::Bool),
        ),
    );
    for i in 0..n {
        let label = is(sig(topic, domain), &[LabelId((i % 4) as u32)]);
        let longer = cmp(CmpOp::Ge, sig(long, Type::Int), int(((n - i) * 100) as i64));
        let safe = cmp(CmpOp::Lt, sig(attack, Type::Score), float(0.5));
        let busy = cmp(CmpOp::Gt, tools(), int(100 + i as i64));
        let when = or(and(longer, or(label, safe)), busy);
        pb.route(&format!("r{i}"), Some(when), SMALL);
    }
    pb.route("default", None, SMALL);
    pb.build()
}

fn lowered(n: usize) -> Program {
    lower(&policy(n)).unwrap_or_else(|e| panic!("lowering failed: {e}"))
}

/// A fully known row: `tokens` picks the first route to hold (0 for none), the classifier says
/// `other`, the guard says 0.1, and no tools are offered.
fn row(program: &Program, tokens: i64) -> Row {
    let mut row = program.new_row();
    let slot = |a: &Atom| program.atom_slot(a);
    let classify = Atom::Classify(DOMAIN, TextExpr::Prompt);
    if let Some(def) = program.atoms().iter().find(|d| d.atom == classify) {
        row.set_label(def.slot, LabelId(3));
        if let Some(c) = def.confidence {
            row.set_float(c, 0.9);
        }
    }
    if let Some(s) = slot(&Atom::Guard(GUARD, TextExpr::Prompt)) {
        row.set_float(s, 0.1);
    }
    if let Some(s) = slot(&Atom::Tokens(TextExpr::History)) {
        row.set_int(s, tokens);
    }
    if let Some(s) = slot(&Atom::Request(RequestField::Tools)) {
        row.set_int(s, 0);
    }
    for def in program.atoms() {
        if !row.is_known(def.slot) {
            row.set_bool(def.slot, false);
        }
    }
    row
}

fn bench_decide(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    for n in [10usize, 100, 1000] {
        let program = lowered(n);
        let jit = match JitPolicy::compile(&program) {
            Ok(j) => j,
            Err(e) => panic!("jit failed: {e}"),
        };
        let middle = row(&program, (n as i64 / 2) * 100 + 50);
        let default = row(&program, 0);
        let expect_default = Outcome::Decided(Verdict::Route(RouteId(n as u32)));
        assert_eq!(interp::decide(&program, &default), expect_default);
        assert_eq!(jit.decide(&default), expect_default);
        assert_eq!(jit.decide(&middle), interp::decide(&program, &middle));
        for (case, r) in [("middle", &middle), ("default", &default)] {
            group.bench_with_input(BenchmarkId::new(format!("interp/{case}"), n), r, |b, r| {
                b.iter(|| interp::decide(&program, black_box(r)))
            });
            group.bench_with_input(BenchmarkId::new(format!("jit/{case}"), n), r, |b, r| {
                b.iter(|| jit.decide(black_box(r)))
            });
        }
    }
    group.finish();
}

/// `unknown_slots` of route `n / 2` on the `middle` row with the model answers (classifier,
/// guard) not known yet: what the staged evaluator asks before each round of model calls.
fn bench_unknown_slots(c: &mut Criterion) {
    let mut group = c.benchmark_group("unknown_slots");
    for n in [10usize, 100, 1000] {
        let program = lowered(n);
        let mut row = row(&program, (n as i64 / 2) * 100 + 50);
        for def in program.atoms() {
            if matches!(def.atom, Atom::Classify(..) | Atom::Guard(..)) {
                row.clear(def.slot);
            }
        }
        let cond = program.route_cond(RouteId((n / 2) as u32));
        assert_eq!(program.unknown_slots(cond, &row).len(), 2);
        group.bench_with_input(BenchmarkId::from_parameter(n), &row, |b, r| {
            b.iter(|| program.unknown_slots(cond, black_box(r)))
        });
    }
    group.finish();
}

/// A whole staged evaluation with model answers supplied instantly: what the policy costs a
/// request besides inference (phrase scan, token estimate, scans of the engine).
fn bench_evaluate(c: &mut Criterion) {
    let mut group = c.benchmark_group("evaluate");
    let prompt = "please explain this stack trace from my build ".repeat(10);
    let req = RequestView::from_prompt(&prompt, None, &[]);
    for n in [10usize, 100, 1000] {
        let compiled = match src_compiler::compile(policy(n), EngineKind::Jit) {
            Ok(c) => c,
            Err(e) => panic!("compile failed: {e}"),
        };
        group.bench_function(BenchmarkId::new("jit", n), |b| {
            b.iter(|| {
                let mut ev = compiled.evaluate(black_box(&req));
                loop {
                    match ev.step() {
                        Step::Decided(v) => break Some(v),
                        Step::Failed(_) => break None,
                        Step::NeedModels(calls) => {
                            for call in calls {
                                if ev.supply(&call, answer(call.model)).is_err() {
                                    return None;
                                }
                            }
                        }
                    }
                }
            })
        });
        // The same evaluation driven by the request procedure, as `src serve` runs it: the
        // request names a router name, the session answers "keep".
        let mut routed = req.clone();
        routed.model = Some("auto".into());
        group.bench_function(BenchmarkId::new("procedure", n), |b| {
            b.iter(|| {
                let mut procedure = Procedure::new(&compiled, black_box(&routed));
                loop {
                    match procedure.advance() {
                        Ok(Next::Done(decision)) => break Some(decision),
                        Ok(Next::Models(calls)) => {
                            for call in &calls {
                                if procedure.supply(call, answer(call.model)).is_err() {
                                    return None;
                                }
                            }
                        }
                        Ok(Next::Cache(_)) => procedure.cache_answered(false),
                        Ok(Next::Budgets(_)) => procedure.budgets_answered(&[]),
                        Ok(Next::Session(_)) => procedure.session_answered(SessionAnswer::Keep),
                        Err(_) => break None,
                    }
                }
            })
        });
    }
    group.finish();
}

/// The instant model answers of the `evaluate` group.
fn answer(model: ModelKind) -> ModelResult {
    match model {
        ModelKind::Classifier(_) => ModelResult::Class {
            label: LabelId(3),
            confidence: 0.9,
        },
        _ => ModelResult::Score(0.1),
    }
}

fn bench_compile(c: &mut Criterion) {
    let policy = policy(1000);
    let mut group = c.benchmark_group("compile");
    group.sample_size(10);
    group.bench_function("lower/1000", |b| {
        b.iter(|| lower(black_box(&policy)).is_ok())
    });
    if let Ok(program) = lower(&policy) {
        group.bench_function("jit/1000", |b| {
            b.iter(|| JitPolicy::compile(black_box(&program)).is_ok())
        });
    }
    group.bench_function("lower+jit/1000", |b| {
        b.iter(|| {
            let program = lower(black_box(&policy)).ok();
            program.map(|p| JitPolicy::compile(&p).is_ok())
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench_decide, bench_unknown_slots, bench_evaluate, bench_compile
}
criterion_main!(benches);
