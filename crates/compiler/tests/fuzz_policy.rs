//! Fuzzing `.sr` text through parse, check and format (the property is in
//! `fuzz_support/policy.rs`), on:
//!
//! - every `.sr` file of the repository (policies, examples, the test corpora) and every input
//!   the coverage-guided fuzz target kept (`fuzz/corpus/policy/`);
//! - random policies built from the language's own tables (declaration keywords and their
//!   fields, fixed choices, builtins), which get past the parser into name resolution, typing,
//!   lowering and the `test` runner;
//! - repository files damaged at random places.
//!
//! `PROPTEST_CASES` raises the case count for a long search.

mod fuzz_support;

use fuzz_support::corpus;
use fuzz_support::policy::check_text;
use proptest::prelude::*;
use src_compiler::vocabulary::{Builtin, Meaning, BUILTINS};
use src_dsl::keywords::{self, DECLARATIONS};

/// Names that declarations, labels and references share, so that references often resolve.
const NAMES: &[&str] = &[
    "sim", "small", "strong", "topic", "code", "chat", "x", "en", "zh", "safe", "unsafe",
];

/// A base that later declarations can refer to, so routes and blocks are not all unresolved.
const BASE: &str = "backend sim {\n  url = \"http://127.0.0.1:8000/v1\"\n  simulated = true\n}\n\
    model small {\n  backend = sim\n  serves = \"s\"\n  cost = 0.1\n}\n\
    model strong {\n  backend = sim\n  serves = \"t\"\n  cost = 1\n}\n";

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(NAMES).prop_map(str::to_string),
        1 => "[a-z_][a-z0-9_]{0,5}",
    ]
}

fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        60 => prop::sample::select(vec![
            "\"\"",
            "\"hi\"",
            "\"x-tenant\"",
            "\"authorization\"",
            "\"stack trace\"",
            "\"a\\\"b\"",
            "\"\\u{1F600}\\n\"",
            "\"中文\"",
            "\"(a|b\"",
            "\"[0-9]+\"",
            "\"http://127.0.0.1:1/v1\"",
            "\"redis://127.0.0.1:6379\"",
            "\"models/x\"",
        ])
        .prop_map(str::to_string),
        20 => "\"[ -!#-\\[\\]-~é中]{0,8}\"",
        // Escapes the parser refuses.
        1 => prop::sample::select(vec!["\"\\q\"", "\"\\u{110000}\"", "\"\\u{d800}\""])
            .prop_map(str::to_string),
    ]
}

/// A number without a unit, for fields that take a plain number.
fn plain_number() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["0", "1", "0.5", "0.95", "2k", "1M", "200", "429"])
            .prop_map(str::to_string),
        (0u32..100_000).prop_map(|n| n.to_string()),
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "1",
            "2",
            "10",
            "0.5",
            "0.95",
            "2k",
            "8k",
            "1M",
            "10m",
            "30s",
            "500ms",
            "1h",
            "7d",
            "99999999999999999999",
            "1.5k",
            "0.0001",
        ])
        .prop_map(str::to_string),
        (0u32..100_000).prop_map(|n| n.to_string()),
    ]
}

/// Builtin values and request fields, as written in an expression.
fn value_name() -> impl Strategy<Value = String> {
    let written: Vec<String> = BUILTINS
        .iter()
        .filter(|b| !matches!(b.meaning, Meaning::Function(_)))
        .map(Builtin::written)
        .filter(|w| !w.starts_with('.'))
        .collect();
    prop::sample::select(written)
}

fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => name(),
        3 => value_name(),
        2 => number(),
        2 => string(),
        1 => prop::sample::select(vec!["true", "false"]).prop_map(str::to_string),
    ]
}

/// Expressions over the language's builtins, mostly of the right arity.
fn expr() -> BoxedStrategy<String> {
    let functions: Vec<(&'static str, usize)> = BUILTINS
        .iter()
        .filter(|b| matches!(b.meaning, Meaning::Function(_)))
        .map(|b| (b.name, b.arity))
        .collect();
    let ops = prop::sample::select(vec![
        "or", "and", "==", "!=", "<", "<=", ">", ">=", "??", "+", "-", "*", "/",
    ]);
    let fields = prop::sample::select(vec!["cost", "confidence", "fail_rate", "count", "tools"]);
    leaf()
        .prop_recursive(5, 40, 4, move |inner| {
            prop_oneof![
                // Parenthesized mostly: comparisons do not chain without parentheses.
                6 => (ops.clone(), inner.clone(), inner.clone(), any::<u8>()).prop_map(
                    |(op, l, r, bare)| {
                        if bare % 4 == 0 {
                            format!("{l} {op} {r}")
                        } else {
                            format!("({l} {op} {r})")
                        }
                    }
                ),
                1 => inner.clone().prop_map(|e| format!("not {e}")),
                1 => inner.clone().prop_map(|e| format!("-{e}")),
                1 => inner.clone().prop_map(|e| format!("({e})")),
                3 => (
                    prop::sample::select(functions.clone()),
                    prop::collection::vec(inner.clone(), 0..4),
                    any::<bool>(),
                )
                    .prop_map(|((f, arity), args, exact)| {
                        let args = if exact {
                            args.into_iter().cycle().take(arity).collect()
                        } else {
                            args
                        };
                        format!("{f}({})", args.join(", "))
                    }),
                1 => prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|items| format!("[{}]", items.join(", "))),
                1 => (inner.clone(), fields.clone()).prop_map(|(e, f)| format!("({e}).{f}")),
                1 => (name(), fields.clone()).prop_map(|(e, f)| format!("{e}.{f}")),
                1 => (inner.clone(), name()).prop_map(|(e, l)| format!("({e}) is {l}")),
                1 => (inner, prop::collection::vec(name(), 0..3))
                    .prop_map(|(e, ls)| format!("({e}) in [{}]", ls.join(", "))),
            ]
        })
        .boxed()
}

/// A value for `field` of a `keyword` declaration: one of its fixed choices when it has them,
/// else a value of some shape (often the right one, sometimes not).
fn field_value(keyword: &'static str, field: &'static str) -> BoxedStrategy<String> {
    let choices = keywords::choices(keyword, field);
    let any_value = prop_oneof![
        3 => string(),
        2 => number(),
        2 => name(),
        1 => prop::collection::vec(name(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
        1 => prop::collection::vec(string(), 0..3).prop_map(|v| format!("[{}]", v.join(", "))),
        1 => string().prop_map(|s| format!("replace {s}")),
        1 => string().prop_map(|s| format!("env({s})")),
        1 => expr(),
    ];
    if choices.is_empty() {
        any_value.boxed()
    } else {
        let choice = prop::sample::select(choices).prop_map(str::to_string);
        prop_oneof![4 => choice, 1 => any_value].boxed()
    }
}

/// A value of the type `field` takes in a `keyword` declaration, where the parser checks it.
fn typed_value(keyword: &'static str, field: &'static str) -> BoxedStrategy<String> {
    let strings =
        || prop::collection::vec(string(), 0..3).prop_map(|v| format!("[{}]", v.join(", ")));
    let duration = || {
        prop::sample::select(vec!["0s", "500ms", "30s", "10m", "1h", "7d"]).prop_map(str::to_string)
    };
    match (keyword, field) {
        (
            _,
            "url" | "serves" | "path" | "tokenizer" | "message" | "prompt" | "system" | "catalog",
        ) => string().boxed(),
        ("test", "messages") => prop::sample::select(vec![
            "\"[]\"",
            "\"[{\\\"role\\\": \\\"user\\\", \\\"content\\\": \\\"hi\\\"}]\"",
            "\"x.json\"",
        ])
        .prop_map(str::to_string)
        .boxed(),
        (_, "api_key") => string().prop_map(|s| format!("env({s})")).boxed(),
        (_, "timeout" | "ttl" | "cooldown") => duration().boxed(),
        (_, "aliases" | "names" | "redact") => strings().boxed(),
        ("route", "tools") => prop_oneof![
            prop::sample::select(vec!["keep", "none"]).prop_map(str::to_string),
            strings().prop_map(|l| format!("only {l}")),
        ]
        .boxed(),
        (_, "labels" | "entities") => prop::collection::vec(name(), 0..4)
            .prop_map(|v| format!("[{}]", v.join(", ")))
            .boxed(),
        (
            _,
            "cost" | "context" | "threshold" | "status" | "cooldown_after" | "window" | "windows",
        ) => plain_number().boxed(),
        (_, "backend" | "positive" | "encoder") if keyword != "failure" => name().boxed(),
        ("route", "system_prompt") => {
            prop_oneof![string(), string().prop_map(|s| format!("replace {s}")),].boxed()
        }
        _ if !keywords::choices(keyword, field).is_empty() => {
            prop::sample::select(keywords::choices(keyword, field))
                .prop_map(str::to_string)
                .boxed()
        }
        _ => field_value(keyword, field),
    }
}

/// Fields a declaration is written with always, so that it parses.
fn required(keyword: &str) -> &'static [&'static str] {
    match keyword {
        "backend" => &["url"],
        "model" => &["backend", "serves"],
        "classifier" => &["path", "labels"],
        "detector" => &["path", "entities"],
        "guard" | "encoder" => &["path"],
        "block" => &["when"],
        "route" => &["to"],
        "cache" => &["encoder", "threshold"],
        "test" => &["prompt", "expect"],
        _ => &[],
    }
}

/// One statement or field of a declaration body.
fn entry(keyword: &'static str, field: &'static str) -> BoxedStrategy<String> {
    match field {
        "when" => expr().prop_map(|e| format!("when {e}")).boxed(),
        "to" if keyword == "block" => name().prop_map(|to| format!("to {to}")).boxed(),
        "to" => (name(), prop::collection::vec(name(), 0..3))
            .prop_map(|(to, fallbacks)| {
                if fallbacks.is_empty() {
                    format!("to {to}")
                } else {
                    format!("to {to} else {}", fallbacks.join(", "))
                }
            })
            .boxed(),
        "hold" => (string(), expr())
            .prop_map(|(s, e)| format!("hold {s} when {e}"))
            .boxed(),
        "given" => prop::collection::vec((name(), leaf()), 1..3)
            .prop_map(|pairs| {
                let pairs: Vec<String> = pairs.iter().map(|(n, v)| format!("{n} = {v}")).collect();
                format!("given {}", pairs.join(", "))
            })
            .boxed(),
        "expect" => (any::<bool>(), name(), prop::option::of(name()))
            .prop_map(|(blocked, n, model)| {
                let blocked = if blocked { "blocked " } else { "" };
                let model = model.map(|m| format!(" model {m}")).unwrap_or_default();
                format!("expect {blocked}{n}{model}")
            })
            .boxed(),
        "header" => (string(), string())
            .prop_map(|(n, v)| format!("header {n} = {v}"))
            .boxed(),
        "headers" => prop::collection::vec((string(), string()), 0..3)
            .prop_map(|pairs| {
                let pairs: Vec<String> = pairs.iter().map(|(n, v)| format!("{n} = {v}")).collect();
                format!("headers {{ {} }}", pairs.join(", "))
            })
            .boxed(),
        "skip" => expr().prop_map(|e| format!("skip when {e}")).boxed(),
        _ if keywords::takes_expression(keyword, field) => {
            expr().prop_map(move |e| format!("{field} = {e}")).boxed()
        }
        _ => typed_value(keyword, field)
            .prop_map(move |v| format!("{field} = {v}"))
            .boxed(),
    }
}

/// Whether a declaration is written with a name (`route r {`, not `cache {`).
fn named(keyword: &str) -> bool {
    !matches!(
        keyword,
        "cache" | "session" | "protect" | "failure" | "router"
    )
}

/// One top-level declaration of any kind, with fields from its own table.
fn declaration() -> BoxedStrategy<String> {
    let kinds: Vec<BoxedStrategy<String>> = DECLARATIONS
        .iter()
        .map(|d| {
            let keyword = d.keyword;
            if keyword == "signal" {
                return (name(), expr())
                    .prop_map(|(n, e)| format!("signal {n} = {e}"))
                    .boxed();
            }
            let any_entry: Vec<BoxedStrategy<String>> = d
                .fields
                .iter()
                .map(|field| entry(keyword, field))
                .chain([field_value(keyword, "unknown")
                    .prop_map(|v| format!("unknown = {v}"))
                    .boxed()])
                .collect();
            // Mostly each field once, the required ones always, so the parser accepts it; now
            // and then (one declaration in twenty: with a dozen fields to a declaration, a wild
            // one repeats a field more often than not) any fields in any number, for its
            // diagnostics.
            let fields = d.fields;
            let well_formed = prop::sample::subsequence(fields, 0..=fields.len()).prop_flat_map(
                move |mut chosen| {
                    // Fields that exclude each other: a test's two inputs, a block's two actions.
                    if keyword == "test" {
                        chosen.retain(|f| *f != "messages");
                    }
                    if keyword == "block" && chosen.contains(&"to") {
                        chosen.retain(|f| !matches!(*f, "status" | "message"));
                    }
                    for r in required(keyword) {
                        if !chosen.contains(r) {
                            chosen.push(r);
                        }
                    }
                    chosen
                        .into_iter()
                        .map(|f| entry(keyword, f))
                        .collect::<Vec<_>>()
                },
            );
            let wild = prop::collection::vec(prop::strategy::Union::new(any_entry), 0..7);
            let entries = prop_oneof![19 => well_formed, 1 => wild];
            let priority = prop::option::of(0u32..30);
            (name(), priority, entries)
                .prop_map(move |(n, priority, entries)| {
                    let mut head = keyword.to_string();
                    if named(keyword) {
                        head.push(' ');
                        head.push_str(&n);
                    }
                    if let Some(p) = priority.filter(|_| keyword == "route") {
                        head.push_str(&format!(" priority {p}"));
                    }
                    let body: String = entries.iter().map(|e| format!("  {e}\n")).collect();
                    format!("{head} {{\n{body}}}")
                })
                .boxed()
        })
        .collect();
    prop::strategy::Union::new(kinds).boxed()
}

/// A condition that type-checks: builtins compared with literals of their type, joined.
fn condition() -> impl Strategy<Value = String> {
    let atom = prop::sample::select(vec![
        "tokens(prompt) > 2k",
        "words(history) >= 3",
        "contains(prompt, [\"stack trace\", \"panic\"])",
        "hits(prompt, [\"a\"]) == 2",
        "matches(prompt, \"[0-9]+\")",
        "request.stream",
        "request.tool_loop",
        "request.tools > 0",
        "header(\"x-tenant\") == \"acme\"",
        "api_key == \"sk-test\"",
        "system != \"\"",
        "language(prompt) is en",
        "language(prompt) in [en, zh]",
        "min(request.turns, 3) < max(1, request.messages)",
        "density(prompt, [\"x\"]) > 0.5",
        "sequence(history, [\"a\", \"b\"])",
    ])
    .prop_map(str::to_string);
    atom.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("{l} and {r}")),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("({l} or {r})")),
            inner.prop_map(|c| format!("not ({c})")),
        ]
    })
}

/// A policy that checks: the base, routes to its models under type-correct conditions, and a
/// test; it reaches lowering, both engines' input and the `test` runner.
fn checking_policy() -> impl Strategy<Value = String> {
    prop::collection::vec((condition(), 1u32..50, any::<bool>()), 0..5).prop_map(|routes| {
        let mut text = BASE.to_string();
        for (i, (when, priority, strong)) in routes.iter().enumerate() {
            let (to, fallback) = if *strong { ("strong", "small") } else { ("small", "strong") };
            text.push_str(&format!(
                "signal s{i} = {when}\nroute r{i} priority {priority} {{\n  when s{i}\n  to {to} else {fallback}\n}}\n"
            ));
        }
        text.push_str("route default {\n  to small\n}\ntest t {\n  prompt = \"hi\"\n  expect default\n}\n");
        text
    })
}

/// A policy: a handful of declarations, on the base or alone, with comments here and there.
fn policy() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop::collection::vec((declaration(), any::<u8>()), 1..10),
    )
        .prop_map(|(with_base, items)| {
            let mut text = if with_base {
                BASE.to_string()
            } else {
                String::new()
            };
            for (item, spacing) in items {
                match spacing % 8 {
                    0 => text.push_str("# a comment\n"),
                    1 => text.push('\n'),
                    _ => {}
                }
                text.push_str(&item);
                text.push_str(if spacing % 5 == 0 { " # end\n" } else { "\n" });
            }
            text
        })
}

/// Every `.sr` file of the repository, read once.
fn seeds() -> &'static [(std::path::PathBuf, String)] {
    static SEEDS: std::sync::OnceLock<Vec<(std::path::PathBuf, String)>> =
        std::sync::OnceLock::new();
    SEEDS.get_or_init(read_seeds)
}

fn read_seeds() -> Vec<(std::path::PathBuf, String)> {
    let root = corpus::root();
    let mut seeds: Vec<(std::path::PathBuf, String)> = ["policies", "examples", "tests/corpus"]
        .iter()
        .flat_map(|dir| corpus::files(&root.join(dir), Some("sr")))
        .filter_map(|(path, bytes)| Some((path, String::from_utf8(bytes).ok()?)))
        .collect();
    seeds.sort();
    seeds
}

#[test]
fn every_repository_policy_holds_the_property() {
    let seeds = seeds();
    assert!(seeds.len() > 100, "only {} .sr files found", seeds.len());
    let failures: Vec<String> = seeds
        .iter()
        .filter_map(|(path, text)| {
            check_text(text)
                .err()
                .map(|e| format!("{}: {e}", path.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_kept_fuzz_input_holds_the_property() {
    let inputs = corpus::of_target("policy");
    assert!(!inputs.is_empty(), "fuzz/corpus/policy is empty");
    let failures: Vec<String> = inputs
        .iter()
        // The fuzz target reads only UTF-8 input, as `src` does.
        .filter_map(|(path, bytes)| Some((path, std::str::from_utf8(bytes).ok()?)))
        .filter_map(|(path, text)| {
            check_text(text)
                .err()
                .map(|e| format!("{}: {e}", path.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_generator_reaches_the_checker() {
    // Generated policies must mostly parse, or the property test would only exercise the
    // parser's error recovery; a few must check, or it would never reach lowering.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = prop_oneof![3 => policy(), 1 => checking_policy()];
    let (mut parsed, mut checked) = (0, 0);
    let mut refusals: std::collections::BTreeMap<String, usize> = Default::default();
    for _ in 0..200 {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        let text = tree.current();
        let syntax = src_dsl::parse(&text, src_dsl::FileId(0));
        for d in syntax.diagnostics.iter().filter(|d| d.is_error()) {
            *refusals.entry(d.message.clone()).or_default() += 1;
        }
        if !syntax.has_errors() {
            parsed += 1;
            let source = src_compiler::load::load_str("p.sr", &text);
            let outcome = src_compiler::check(source, &Default::default());
            checked += usize::from(outcome.policy.is_some());
        }
    }
    assert!(
        parsed >= 100,
        "{parsed} of 200 generated policies parse; syntax errors: {refusals:#?}"
    );
    assert!(checked >= 20, "{checked} of 200 generated policies check");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(corpus::cases(300)))]

    #[test]
    fn generated_policies_hold_the_property(
        text in prop_oneof![3 => policy(), 1 => checking_policy()],
    ) {
        if let Err(e) = check_text(&text) {
            return Err(TestCaseError::fail(format!("{e}\n--- in\n{text}")));
        }
    }

    #[test]
    fn damaged_repository_policies_hold_the_property(
        pick in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
        len in 0usize..40,
        insert in prop_oneof![declaration(), expr(), string(), Just(String::new())],
    ) {
        // Cutting a real file and splicing generated text into it exercises recovery and the
        // checker in realistic context.
        let seeds = seeds();
        let (_, base) = pick.get(seeds);
        let mut at = cut.index(base.len() + 1);
        while !base.is_char_boundary(at) {
            at -= 1;
        }
        let mut end = (at + len).min(base.len());
        while !base.is_char_boundary(end) {
            end -= 1;
        }
        let text = format!("{}{insert}{}", &base[..at], &base[end..]);
        if let Err(e) = check_text(&text) {
            return Err(TestCaseError::fail(format!("{e}\n--- in\n{text}")));
        }
    }
}
