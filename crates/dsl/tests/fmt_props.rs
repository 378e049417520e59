//! Property tests of the formatter over generated trees: every declaration kind, every
//! expression form, Unicode strings full of characters that need escapes.
//!
//! A generated tree may lack parentheses its printed form needs (`a - (b - c)` built without a
//! `Paren`), so the printer must add them. The properties:
//! - the printed text parses without errors, to the same tree once parentheses are set aside;
//! - a tree that came from the parser (parentheses where the text has them) survives printing
//!   and parsing exactly, spans and comments aside;
//! - printing is idempotent.

mod fmt_support;

use fmt_support::{strip_parens, strip_spans};
use proptest::prelude::*;
use src_dsl::ast::*;
use src_dsl::format::format_file;
use src_dsl::{parse, FileId, Span, Spanned};

/// Words some field values give a meaning to, which an identifier must not be either (besides
/// the grammar's keywords).
const CONTEXTUAL: &[&str] = &[
    "skip", "header", "headers", "replace", "only", "memory", "rejected",
];

fn s() -> Span {
    Span::default()
}

fn sp<T>(value: T) -> Spanned<T> {
    Spanned::new(value, s())
}

fn ident() -> impl Strategy<Value = Ident> {
    "[a-z_][a-z0-9_]{0,7}"
        .prop_filter("keyword", |w| {
            !src_dsl::keywords::KEYWORDS.contains(&w.as_str()) && !CONTEXTUAL.contains(&w.as_str())
        })
        .prop_map(|name| Ident { name, span: s() })
}

/// Any Unicode, with a bias towards the characters that need escaping or that the lexer treats
/// specially outside strings.
fn text() -> impl Strategy<Value = String> {
    let special = prop::sample::select(vec![
        '"', '\\', '\n', '\t', '\r', '\u{0}', '\u{7f}', '\u{2028}', '\u{feff}', '#', '{', '}', 'é',
        '中', '🚀', 'ß', ' ',
    ]);
    prop::collection::vec(prop_oneof![3 => any::<char>(), 2 => special], 0..10)
        .prop_map(|cs| cs.into_iter().collect())
}

/// A number literal and the value the language gives it.
fn number() -> impl Strategy<Value = Number> {
    let fraction = prop::option::of("[0-9]{1,3}");
    let suffix = prop::sample::select(vec!["", "", "k", "M"]);
    (0u64..100_000, fraction, suffix).prop_map(|(whole, fraction, suffix)| {
        let exp = match suffix {
            "k" => 3,
            "M" => 6,
            _ => 0,
        };
        let text = match &fraction {
            Some(f) => format!("{whole}.{f}{suffix}"),
            None => format!("{whole}{suffix}"),
        };
        let (value, is_int) = match (&fraction, exp) {
            (None, 0) => (whole as f64, true),
            (Some(f), 0) => (format!("{whole}.{f}").parse().unwrap_or(0.0), false),
            (f, exp) => {
                // At most three fraction digits, all kept by a scale of 10^3 or more.
                let f = f.as_deref().unwrap_or("");
                let padded = format!("{f:0<exp$}", exp = exp);
                let digits = format!("{whole}{padded}");
                (digits.parse().unwrap_or(0.0), true)
            }
        };
        Number {
            value,
            is_int,
            text,
        }
    })
}

/// A number field value, which may carry a sign.
fn signed_number() -> impl Strategy<Value = Number> {
    (number(), any::<bool>()).prop_map(|(n, negative)| {
        if negative {
            Number {
                value: -n.value,
                is_int: n.is_int,
                text: format!("-{}", n.text),
            }
        } else {
            n
        }
    })
}

fn int_number() -> impl Strategy<Value = Number> {
    (0u64..1000).prop_map(|n| Number {
        value: n as f64,
        is_int: true,
        text: n.to_string(),
    })
}

fn duration() -> impl Strategy<Value = Duration> {
    let unit = prop::sample::select(vec![
        ("ms", 1u64),
        ("s", 1_000),
        ("m", 60_000),
        ("h", 3_600_000),
        ("d", 86_400_000),
    ]);
    (0u64..10_000, unit).prop_map(|(n, (u, ms))| Duration {
        millis: n * ms,
        text: format!("{n}{u}"),
    })
}

fn e(kind: ExprKind) -> Expr {
    Expr { kind, span: s() }
}

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        any::<bool>().prop_map(|b| e(ExprKind::Bool(b))),
        number().prop_map(|n| e(ExprKind::Number(n))),
        text().prop_map(|t| e(ExprKind::Str(t))),
        duration().prop_map(|d| e(ExprKind::Duration(d))),
        ident().prop_map(|i| e(ExprKind::Name(i))),
    ]
}

fn binop() -> impl Strategy<Value = BinOp> {
    prop::sample::select(vec![
        BinOp::Or,
        BinOp::And,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
        BinOp::Coalesce,
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
    ])
}

/// Every expression form, nested, with parentheses only here and there.
fn expr() -> BoxedStrategy<Expr> {
    leaf()
        .prop_recursive(6, 64, 2, |inner| {
            let unop = prop::sample::select(vec![UnaryOp::Not, UnaryOp::Neg]);
            prop_oneof![
                1 => prop::collection::vec(inner.clone(), 0..3).prop_map(|v| e(ExprKind::List(v))),
                1 => (inner.clone(), ident()).prop_map(|(b, f)| e(ExprKind::Field(Box::new(b), f))),
                1 => (ident(), prop::collection::vec(inner.clone(), 0..3))
                    .prop_map(|(f, args)| e(ExprKind::Call(f, args))),
                1 => (unop, inner.clone()).prop_map(|(op, x)| e(ExprKind::Unary(op, Box::new(x)))),
                6 => (binop(), inner.clone(), inner.clone())
                    .prop_map(|(op, l, r)| e(ExprKind::Binary(op, Box::new(l), Box::new(r)))),
                1 => (inner.clone(), ident()).prop_map(|(x, l)| e(ExprKind::Is(Box::new(x), l))),
                1 => (inner.clone(), prop::collection::vec(ident(), 0..3))
                    .prop_map(|(x, ls)| e(ExprKind::In(Box::new(x), ls))),
                1 => inner.prop_map(|x| e(ExprKind::Paren(Box::new(x)))),
            ]
        })
        .boxed()
}

/// A `given` value: a literal or a label.
fn given_value() -> impl Strategy<Value = Expr> {
    prop_oneof![
        any::<bool>().prop_map(|b| e(ExprKind::Bool(b))),
        number().prop_map(|n| e(ExprKind::Number(n))),
        number().prop_map(|n| e(ExprKind::Unary(
            UnaryOp::Neg,
            Box::new(e(ExprKind::Number(n)))
        ))),
        text().prop_map(|t| e(ExprKind::Str(t))),
        ident().prop_map(|i| e(ExprKind::Name(i))),
    ]
}

/// `redact`'s entries: built-in types, and a detector's types, qualified or bare.
fn redact_types() -> impl Strategy<Value = Vec<RedactType>> {
    let one = prop_oneof![
        text().prop_map(|t| RedactType::Pii(sp(t))),
        (prop::option::of(ident()), ident())
            .prop_map(|(detector, entity)| RedactType::Entity { detector, entity }),
    ];
    prop::collection::vec(one, 0..3)
}

fn strings() -> impl Strategy<Value = Vec<Spanned<String>>> {
    prop::collection::vec(text().prop_map(sp), 0..3)
}

/// Header pairs with distinct names (a repeated header is an error).
fn header_sets() -> impl Strategy<Value = Vec<HeaderSet>> {
    prop::collection::vec((text(), text()), 0..3).prop_map(|pairs| {
        let mut seen = Vec::new();
        let mut out = Vec::new();
        for (name, value) in pairs {
            let key = name.to_ascii_lowercase();
            if !seen.contains(&key) {
                seen.push(key);
                out.push(HeaderSet {
                    name: sp(name),
                    value: sp(value),
                });
            }
        }
        out
    })
}

fn device() -> impl Strategy<Value = Option<Spanned<Device>>> {
    prop::option::of(
        prop::sample::select(vec![Device::Auto, Device::Cpu, Device::Cuda]).prop_map(sp),
    )
}

fn fail_mode() -> impl Strategy<Value = Option<Spanned<FailMode>>> {
    prop::option::of(prop::sample::select(vec![FailMode::Open, FailMode::Closed]).prop_map(sp))
}

fn store() -> impl Strategy<Value = Option<Spanned<Store>>> {
    prop::option::of(
        prop_oneof![
            Just(Store::Memory),
            text().prop_map(|t| Store::Redis(sp(t))),
            prop::collection::vec(text().prop_map(sp), 0..3).prop_map(|v| Store::Cluster(sp(v))),
            (
                prop::collection::vec(text().prop_map(sp), 0..3),
                prop::option::of(text().prop_map(sp))
            )
                .prop_map(|(v, master)| Store::Sentinel {
                    sentinels: sp(v),
                    master
                }),
            (text(), prop::collection::vec((ident(), text()), 0..2)).prop_map(|(url, options)| {
                Store::Milvus {
                    url: sp(url),
                    options: options.into_iter().map(|(n, v)| (n, sp(v))).collect(),
                }
            }),
        ]
        .prop_map(sp),
    )
}

fn opt_text() -> impl Strategy<Value = Option<Spanned<String>>> {
    prop::option::of(text().prop_map(sp))
}

fn backend() -> impl Strategy<Value = ItemKind> {
    (
        ident(),
        text(),
        opt_text(),
        prop::option::of(text()),
        prop::option::of(duration().prop_map(sp)),
        prop::option::of(any::<bool>().prop_map(sp)),
        prop::option::of(
            prop::sample::select(vec![ClientAuth::Forward, ClientAuth::Drop]).prop_map(sp),
        ),
        prop::option::of(
            prop_oneof![Just(BackendApi::OpenAi), Just(BackendApi::Anthropic)].prop_map(sp),
        ),
    )
        .prop_map(
            |(name, url, catalog, key, timeout, simulated, client_auth, api)| {
                ItemKind::Backend(Backend {
                    name,
                    url: Some(sp(url)),
                    catalog,
                    api_key: key.map(|k| EnvRef {
                        var: sp(k),
                        span: s(),
                    }),
                    timeout,
                    simulated,
                    client_auth,
                    api,
                })
            },
        )
}

fn model() -> impl Strategy<Value = ItemKind> {
    (
        (ident(), ident(), text()),
        prop::option::of(strings().prop_map(sp)),
        prop::option::of(signed_number().prop_map(sp)),
        prop::option::of(number().prop_map(sp)),
        opt_text(),
    )
        .prop_map(
            |((name, backend, serves), aliases, cost, context, tokenizer)| {
                ItemKind::Model(Model {
                    name,
                    backend: Some(backend),
                    serves: Some(sp(serves)),
                    aliases,
                    cost,
                    context,
                    tokenizer,
                })
            },
        )
}

fn classifier() -> impl Strategy<Value = ItemKind> {
    (
        ident(),
        text(),
        prop::collection::vec(ident(), 0..4),
        device(),
        windows(),
    )
        .prop_map(|(name, path, labels, device, (window, windows))| {
            ItemKind::Classifier(Classifier {
                name,
                path: Some(sp(path)),
                labels: Some(sp(labels)),
                device,
                windows,
                window,
            })
        })
}

fn guard() -> impl Strategy<Value = ItemKind> {
    (
        ident(),
        text(),
        prop::option::of(ident()),
        device(),
        windows(),
    )
        .prop_map(|(name, path, positive, device, (window, windows))| {
            ItemKind::Guard(Guard {
                name,
                path: Some(sp(path)),
                positive,
                device,
                windows,
                window,
            })
        })
}

fn detector() -> impl Strategy<Value = ItemKind> {
    (
        ident(),
        text(),
        prop::collection::vec(ident(), 0..4),
        prop::option::of(number().prop_map(sp)),
        device(),
        windows(),
    )
        .prop_map(
            |(name, path, entities, threshold, device, (window, windows))| {
                ItemKind::Detector(Detector {
                    name,
                    path: Some(sp(path)),
                    entities: Some(sp(entities)),
                    threshold,
                    device,
                    windows,
                    window,
                })
            },
        )
}

fn encoder() -> impl Strategy<Value = ItemKind> {
    (ident(), text(), device(), windows()).prop_map(|(name, path, device, (window, windows))| {
        ItemKind::Encoder(Encoder {
            name,
            path: Some(sp(path)),
            device,
            windows,
            window,
        })
    })
}

/// A model declaration's optional `window` and `windows`.
type Windows = (Option<Spanned<Number>>, Option<Spanned<Number>>);

fn windows() -> impl Strategy<Value = Windows> {
    (
        prop::option::of(int_number().prop_map(sp)),
        prop::option::of(int_number().prop_map(sp)),
    )
}

fn signal() -> impl Strategy<Value = ItemKind> {
    (ident(), expr()).prop_map(|(name, expr)| ItemKind::Signal(Signal { name, expr }))
}

fn block() -> impl Strategy<Value = ItemKind> {
    let action = prop_oneof![
        (prop::option::of(signed_number().prop_map(sp)), opt_text())
            .prop_map(|(status, message)| BlockAction::Refuse { status, message }),
        ident().prop_map(|model| BlockAction::Redirect { model }),
    ];
    (
        ident(),
        expr(),
        action,
        prop::option::of(redact_types().prop_map(sp)),
    )
        .prop_map(|(name, when, action, redact)| {
            ItemKind::Block(Block {
                name,
                when: Some(when),
                action,
                redact,
            })
        })
}

fn route() -> impl Strategy<Value = ItemKind> {
    let reasoning = prop::sample::select(vec![
        Reasoning::Off,
        Reasoning::Low,
        Reasoning::Medium,
        Reasoning::High,
    ]);
    let tools = prop_oneof![
        Just(Tools::Keep),
        Just(Tools::None),
        strings().prop_map(Tools::Only),
    ];
    (
        (
            ident(),
            prop::option::of(int_number().prop_map(sp)),
            prop::option::of(expr()),
        ),
        (ident(), prop::collection::vec(ident(), 0..3)),
        prop::option::of((text(), any::<bool>())),
        prop::option::of(header_sets()),
        prop::option::of(reasoning.prop_map(sp)),
        prop::option::of(tools.prop_map(sp)),
        (
            prop::option::of(any::<bool>().prop_map(sp)),
            prop::option::of(redact_types().prop_map(sp)),
        ),
    )
        .prop_map(
            |(
                (name, priority, when),
                (to, fallbacks),
                prompt,
                headers,
                reasoning,
                tools,
                (cache, redact),
            )| {
                ItemKind::Route(Route {
                    name,
                    priority,
                    when,
                    to: Some(to),
                    fallbacks,
                    system_prompt: prompt.map(|(t, replace)| SystemPrompt {
                        text: sp(t),
                        replace,
                        span: s(),
                    }),
                    headers: headers.map(sp),
                    reasoning,
                    tools,
                    cache,
                    redact,
                })
            },
        )
}

fn cache() -> impl Strategy<Value = ItemKind> {
    (
        ident(),
        number(),
        prop::option::of(duration().prop_map(sp)),
        store(),
        prop::option::of(number().prop_map(sp)),
        prop::option::of(number().prop_map(sp)),
        prop::option::of(expr()),
    )
        .prop_map(
            |(encoder, threshold, ttl, store, max_entries, max_bytes, skip_when)| {
                ItemKind::Cache(Cache {
                    encoder: Some(encoder),
                    threshold: Some(sp(threshold)),
                    ttl,
                    store,
                    max_entries,
                    max_bytes,
                    skip_when,
                })
            },
        )
}

fn session() -> impl Strategy<Value = ItemKind> {
    let missing = prop::sample::select(vec![Missing::Route, Missing::Reject]);
    let outcomes = prop::sample::select(vec![Outcomes::Any, Outcomes::Admin, Outcomes::Keys]);
    (
        prop::option::of(expr()),
        prop::option::of(expr()),
        prop::option::of(duration().prop_map(sp)),
        store(),
        prop::option::of(missing.prop_map(sp)),
        prop::option::of(outcomes.prop_map(sp)),
    )
        .prop_map(|(id, tenant, ttl, store, missing, outcomes)| {
            ItemKind::Session(Session {
                id,
                tenant,
                ttl,
                store,
                missing,
                outcomes,
            })
        })
}

fn protect() -> impl Strategy<Value = ItemKind> {
    let mode = prop::sample::select(vec![ProtectMode::Observe, ProtectMode::Enforce]);
    let hold = (text(), expr()).prop_map(|(name, when)| Hold {
        name: sp(name),
        when,
        span: s(),
    });
    let owner_lost =
        prop::sample::select(vec![OwnerLost::Fail, OwnerLost::Fallback, OwnerLost::Move]);
    (
        prop::option::of(mode.prop_map(sp)),
        prop::collection::vec(hold, 0..3),
        prop::option::of(owner_lost.prop_map(sp)),
    )
        .prop_map(|(mode, holds, owner_lost)| {
            ItemKind::Protect(Protect {
                mode,
                holds,
                owner_lost,
            })
        })
}

fn failure() -> impl Strategy<Value = ItemKind> {
    (
        fail_mode(),
        fail_mode(),
        fail_mode(),
        prop::option::of(number().prop_map(sp)),
        prop::option::of(duration().prop_map(sp)),
    )
        .prop_map(|(classifier, store, backend, cooldown_after, cooldown)| {
            ItemKind::Failure(Failure {
                classifier,
                store,
                backend,
                cooldown_after,
                cooldown,
            })
        })
}

fn router() -> impl Strategy<Value = ItemKind> {
    let anonymous = prop::option::of(
        prop_oneof![Just(Anonymous::Isolate), Just(Anonymous::Share)].prop_map(sp),
    );
    (
        prop::option::of(strings().prop_map(sp)),
        opt_text(),
        anonymous,
    )
        .prop_map(|(names, tokenizer, anonymous)| {
            ItemKind::Router(Router {
                names,
                tokenizer,
                anonymous,
            })
        })
}

fn test_item() -> impl Strategy<Value = ItemKind> {
    let input = prop_oneof![
        text().prop_map(|t| TestInput::Prompt(sp(t))),
        text().prop_map(|t| TestInput::Messages(sp(t))),
    ];
    let expectation = prop_oneof![
        (ident(), prop::option::of(ident()))
            .prop_map(|(route, model)| Expectation::Route { route, model }),
        (ident(), prop::option::of(ident()))
            .prop_map(|(block, model)| Expectation::Blocked { block, model }),
        ident().prop_map(|budget| Expectation::Rejected { budget }),
    ];
    let givens = prop::collection::vec((ident(), given_value()), 0..4).prop_map(|pairs| {
        // A signal given twice is an error; keep the first.
        let mut out: Vec<Given> = Vec::new();
        for (signal, value) in pairs {
            if !out.iter().any(|g| g.signal.name == signal.name) {
                out.push(Given { signal, value });
            }
        }
        out
    });
    (
        ident(),
        input,
        opt_text(),
        header_sets(),
        givens,
        expectation,
    )
        .prop_map(|(name, input, system, headers, givens, expect)| {
            ItemKind::Test(Test {
                name,
                input: Some(input),
                system,
                headers,
                givens,
                expect: Some(sp(expect)),
            })
        })
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        1 => backend(),
        1 => model(),
        1 => classifier(),
        1 => guard(),
        1 => encoder(),
        1 => detector(),
        3 => signal(),
        1 => block(),
        2 => route(),
        1 => cache(),
        1 => session(),
        1 => protect(),
        1 => failure(),
        1 => router(),
        1 => test_item(),
    ]
    .prop_map(|kind| Item { kind, span: s() })
}

fn file() -> impl Strategy<Value = File> {
    prop::collection::vec(item(), 0..6).prop_map(|items| File {
        items,
        comments: Vec::new(),
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn printing_keeps_the_tree(file in file()) {
        let text = format_file(&file, "");
        let parsed = parse(&text, FileId(0));
        prop_assert!(
            !parsed.has_errors(),
            "printed text does not parse:\n{}\n{:#?}",
            text,
            parsed.diagnostics
        );
        prop_assert_eq!(strip_parens(&parsed.file), strip_parens(&file));
    }

    #[test]
    fn parsed_trees_survive_printing_exactly(file in file()) {
        let canonical = strip_spans(&parse(&format_file(&file, ""), FileId(0)).file);
        let again = parse(&format_file(&canonical, ""), FileId(0));
        prop_assert_eq!(strip_spans(&again.file), canonical);
    }

    #[test]
    fn printing_is_idempotent(file in file()) {
        let once = format_file(&file, "");
        let twice = format_file(&parse(&once, FileId(0)).file, &once);
        prop_assert_eq!(twice, once);
    }
}

/// Comment texts of a parse, sorted, as the formatter prints them (without trailing spaces).
fn comment_texts(file: &File) -> Vec<String> {
    let mut texts: Vec<String> = file
        .comments
        .iter()
        .map(|c| c.text.trim_end().to_string())
        .collect();
    texts.sort();
    texts
}

/// `text` with comments added: for each line, by `spots[i]`, nothing, a comment at its end (if
/// it has code), a comment on its own line before it, or both.
fn sprinkle(text: &str, spots: &[u8]) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let spot = spots.get(i).copied().unwrap_or(0) % 4;
        if spot >= 2 {
            out.push_str(&format!("# own {i}\n"));
        }
        out.push_str(line);
        if spot % 2 == 1 && !line.trim().is_empty() {
            out.push_str(&format!("   # end {i} ü"));
        }
        out.push('\n');
    }
    if spots.last().is_some_and(|s| s % 3 == 0) {
        out.push_str("# last\n");
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn comments_survive_and_settle(
        file in file(),
        spots in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let commented = sprinkle(&format_file(&file, ""), &spots);
        let parsed = parse(&commented, FileId(0));
        prop_assert!(!parsed.has_errors(), "{}\n{:#?}", commented, parsed.diagnostics);
        let once = format_file(&parsed.file, &commented);
        let reparsed = parse(&once, FileId(0));
        prop_assert_eq!(comment_texts(&reparsed.file), comment_texts(&parsed.file));
        prop_assert_eq!(strip_spans(&reparsed.file), strip_spans(&parsed.file));
        let twice = format_file(&reparsed.file, &once);
        prop_assert_eq!(&twice, &once);
        // Every line was one statement, so every comment keeps its kind of place.
        for line in once.lines() {
            if let Some(at) = line.find("# end ") {
                prop_assert!(!line[..at].trim().is_empty(), "moved off its line:\n{}", once);
            }
            if let Some(at) = line.find("# own ") {
                prop_assert!(line[..at].trim().is_empty(), "joined to code:\n{}", once);
            }
        }
    }
}
