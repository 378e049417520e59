//! Properties of `parse` on generated input.
//!
//! - It never panics, on arbitrary bytes or on "token soup" (random sequences of the language's
//!   own tokens, which reach much deeper into the grammar than random bytes do), and every span
//!   it returns lies inside the text on character boundaries and covers what it names.
//! - Precedence: a random expression tree, printed with only the parentheses the precedence
//!   table requires, parses back to the same tree.
//! - Line endings and a byte-order mark do not change what a corpus file means.
//! - The deepest nesting the parser accepts parses on a thread with a 2 MiB stack (the size of
//!   Rust's spawned threads), and one level more is refused with an error, not a crash.

mod parse_common;

use proptest::prelude::*;
use src_dsl::ast::{BinOp, Expr, ExprKind, ItemKind, UnaryOp};
use src_dsl::{parse, FileId};

fn assert_sound(text: &str) -> Result<(), TestCaseError> {
    let parsed = parse(text, FileId(3));
    let problems = parse_common::span_problems(text, &parsed);
    prop_assert!(problems.is_empty(), "{problems:#?}\nin {text:?}");
    for d in &parsed.diagnostics {
        prop_assert!(!d.message.is_empty());
        prop_assert!(
            !d.message.ends_with('.'),
            "message ends with a period: {}",
            d.message
        );
        prop_assert!(d.labels.iter().all(|l| l.span.file == FileId(3)));
    }
    Ok(())
}

/// The language's tokens, valid and broken, for token soup.
fn token() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(
        src_dsl::keywords::KEYWORDS
            .iter()
            .copied()
            .chain([
                "header",
                "headers",
                "replace",
                "only",
                "keep",
                "none",
                "memory",
                "redis",
                "env",
                "skip",
                "url",
                "serves",
                "labels",
                "device",
                "cuda",
                "status",
                "message",
                "prompt",
                "request",
                "tools",
                "prompt",
                "{",
                "}",
                "(",
                ")",
                "[",
                "]",
                "=",
                "==",
                "!=",
                "<",
                "<=",
                ">",
                ">=",
                "??",
                "+",
                "-",
                "*",
                "/",
                ".",
                ",",
                "\n",
                "\n",
                " ",
                "\t",
                "# comment",
                "#",
                "\"",
                "\\",
                "\"\\u{",
                "é",
                "中",
                "🙂",
                "\r\n",
                "\u{FEFF}",
            ])
            .collect::<Vec<_>>(),
    )
    .prop_map(str::to_string);
    prop_oneof![
        4 => fixed,
        1 => "[a-z_][a-z0-9_]{0,6}",
        1 => "[0-9]{1,4}(\\.[0-9]{1,3})?(k|M|ms|s|m|h|d|x|K)?",
        1 => "\"([a-z ]|\\\\[nt\"\\\\qu]|\\\\u\\{[0-9a-fz]{0,7}\\}?|中){0,8}\"?",
        1 => "#[^\n]{0,10}\n",
    ]
}

proptest! {
    // 256 cases by default; `PROPTEST_CASES=100000` for a longer search.
    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        assert_sound(&text)?;
    }

    #[test]
    fn never_panics_on_token_soup(tokens in prop::collection::vec(token(), 0..120)) {
        assert_sound(&tokens.join(" "))?;
        assert_sound(&tokens.concat())?;
    }

    #[test]
    fn never_panics_on_damaged_policies(cut in 0usize..2000, insert in token()) {
        // Damaging a realistic file at a random place exercises recovery paths in context.
        let base = include_str!("../../../tests/corpus/parse/ok/routes.sr");
        let mut at = cut.min(base.len());
        while !base.is_char_boundary(at) {
            at -= 1;
        }
        assert_sound(&base[..at])?;
        assert_sound(&format!("{}{insert}{}", &base[..at], &base[at..]))?;
    }

    #[test]
    fn minimal_parentheses_parse_back_to_the_same_tree(tree in expr_tree()) {
        let text = format!("signal s = {}", print(&tree, 0));
        let parsed = parse(&text, FileId(0));
        prop_assert!(parsed.diagnostics.is_empty(), "{:?}\n{text}", parsed.diagnostics);
        let Some(ItemKind::Signal(signal)) = parsed.file.items.first().map(|i| &i.kind) else {
            return Err(TestCaseError::fail(format!("no signal in {text}")));
        };
        prop_assert_eq!(shape(&signal.expr), tree, "{}", text);
    }
}

/// An expression tree without spans, for comparing what was printed with what was parsed.
#[derive(Debug, Clone, PartialEq)]
enum Tree {
    Leaf(String),
    Not(Box<Tree>),
    Neg(Box<Tree>),
    Bin(BinOp, Box<Tree>, Box<Tree>),
    Is(Box<Tree>, String),
    Field(Box<Tree>, String),
    Call(String, Vec<Tree>),
}

fn shape(e: &Expr) -> Tree {
    match &e.kind {
        ExprKind::Paren(inner) => shape(inner),
        ExprKind::Name(id) => Tree::Leaf(id.name.clone()),
        ExprKind::Number(n) => Tree::Leaf(n.text.clone()),
        ExprKind::Bool(b) => Tree::Leaf(b.to_string()),
        ExprKind::Unary(UnaryOp::Not, i) => Tree::Not(Box::new(shape(i))),
        ExprKind::Unary(UnaryOp::Neg, i) => Tree::Neg(Box::new(shape(i))),
        ExprKind::Binary(op, l, r) => Tree::Bin(*op, Box::new(shape(l)), Box::new(shape(r))),
        ExprKind::Is(i, label) => Tree::Is(Box::new(shape(i)), label.name.clone()),
        ExprKind::Field(i, f) => Tree::Field(Box::new(shape(i)), f.name.clone()),
        ExprKind::Call(f, args) => Tree::Call(f.name.clone(), args.iter().map(shape).collect()),
        other => Tree::Leaf(format!("{other:?}")),
    }
}

const NOT: u8 = 3;
const COMPARISON: u8 = 4;
const NEG: u8 = 8;
const POSTFIX: u8 = 9;

fn level(t: &Tree) -> u8 {
    match t {
        Tree::Leaf(_) | Tree::Call(..) | Tree::Field(..) => POSTFIX,
        Tree::Neg(_) => NEG,
        Tree::Not(_) => NOT,
        Tree::Is(..) => COMPARISON,
        Tree::Bin(op, ..) => op.precedence(),
    }
}

/// Prints `t` where the context needs at least binding strength `min`, with parentheses only
/// where the precedence table requires them.
fn print(t: &Tree, min: u8) -> String {
    let s = match t {
        Tree::Leaf(s) => s.clone(),
        Tree::Call(f, args) => {
            format!(
                "{f}({})",
                args.iter()
                    .map(|a| print(a, 0))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        Tree::Field(base, f) => format!("{}.{f}", print(base, POSTFIX)),
        Tree::Neg(i) => format!("-{}", print(i, NEG)),
        Tree::Not(i) => format!("not {}", print(i, NOT + 1)),
        Tree::Is(i, label) => format!("{} is {label}", print(i, COMPARISON + 1)),
        Tree::Bin(op, l, r) => {
            let p = op.precedence();
            // Comparisons do not chain, so neither side may be a bare comparison.
            let left_min = if p == COMPARISON { p + 1 } else { p };
            format!("{} {} {}", print(l, left_min), op.symbol(), print(r, p + 1))
        }
    };
    // A prefix `not` or `-` as the left operand needs no parentheses in a Pratt reading, but
    // the printer adds them whenever the level is too low, which is always correct.
    if level(t) < min {
        format!("({s})")
    } else {
        s
    }
}

fn expr_tree() -> impl Strategy<Value = Tree> {
    let leaf = prop_oneof![prop::sample::select(vec![
        "a", "b", "topic", "prompt", "1", "0.5", "2k", "true"
    ])
    .prop_map(|s| Tree::Leaf(s.to_string())),];
    leaf.prop_recursive(6, 48, 3, |inner| {
        let ops = prop::sample::select(vec![
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
        ]);
        prop_oneof![
            4 => (ops, inner.clone(), inner.clone())
                .prop_map(|(op, l, r)| Tree::Bin(op, Box::new(l), Box::new(r))),
            1 => inner.clone().prop_map(|i| Tree::Not(Box::new(i))),
            1 => inner.clone().prop_map(|i| Tree::Neg(Box::new(i))),
            1 => inner.clone().prop_map(|i| Tree::Is(Box::new(i), "code".to_string())),
            1 => inner.clone().prop_map(|i| Tree::Field(Box::new(i), "cost".to_string())),
            1 => prop::collection::vec(inner, 0..3).prop_map(|a| Tree::Call("f".to_string(), a)),
        ]
    })
}

/// Runs `parse` on a thread with the default spawned-thread stack and returns its error count.
fn errors_on_small_stack(text: String) -> usize {
    let handle = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || parse(&text, FileId(0)).diagnostics.len());
    match handle.map(|h| h.join()) {
        Ok(Ok(n)) => n,
        other => panic!("parser thread failed: {other:?}"),
    }
}

#[test]
fn deepest_accepted_nesting_parses_on_a_small_stack() {
    let depth = 128;
    // (opening text, closing text, nesting levels each repetition adds)
    for (open, close, levels) in [
        ("(", ")", 1),
        ("[", "]", 1),
        ("f(", ")", 1),
        ("[(", ")]", 2),
    ] {
        let text = format!(
            "signal s = {}x{}",
            open.repeat(depth / levels),
            close.repeat(depth / levels)
        );
        assert_eq!(errors_on_small_stack(text), 0, "{open} nested {depth} deep");
        let text = format!(
            "signal s = {}x{}",
            open.repeat(depth / levels + 1),
            close.repeat(depth / levels + 1)
        );
        assert_eq!(
            errors_on_small_stack(text),
            1,
            "{open} nested deeper than {depth}"
        );
    }
}

#[test]
fn long_flat_chains_are_refused_before_they_grow_deep() {
    for op in ["+", "and", "??", "*"] {
        let text = format!("signal s = {}", vec!["a"; 5000].join(&format!(" {op} ")));
        assert_eq!(errors_on_small_stack(text), 1, "{op}");
    }
    let text = format!("signal s = a{}", ".b".repeat(5000));
    assert_eq!(errors_on_small_stack(text), 1, "field chain");
    for prefix in ["not ", "-", "not -"] {
        let text = format!("signal s = {}x", prefix.repeat(5000));
        assert_eq!(errors_on_small_stack(text), 1, "{prefix:?}");
    }
    let text = format!("signal s = {}", vec!["a"; 200].join(" + "));
    assert_eq!(errors_on_small_stack(text), 0);
}

/// The `ok` corpus files with their text.
fn ok_corpus() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/parse/ok");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "sr"))
                .filter_map(|p| Some((p.display().to_string(), std::fs::read_to_string(&p).ok()?)))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    assert!(
        files.len() >= 12,
        "ok corpus not found under {}",
        dir.display()
    );
    files
}

#[test]
fn line_endings_and_a_byte_order_mark_do_not_change_the_tree() {
    for (path, text) in ok_corpus() {
        let want = parse_common::dump::dump(&text, &parse(&text, FileId(0)));
        // Every corpus file starts with a comment line, so no column on a declaration's line
        // moves when a byte-order mark is put in front.
        assert!(
            text.trim_start_matches('\u{FEFF}').starts_with('#'),
            "{path} should start with a comment"
        );
        for variant in [text.replace('\n', "\r\n"), format!("\u{FEFF}{text}")] {
            let parsed = parse(&variant, FileId(0));
            assert!(
                parsed.diagnostics.is_empty(),
                "{path}: {:?}",
                parsed.diagnostics
            );
            let problems = parse_common::span_problems(&variant, &parsed);
            assert!(problems.is_empty(), "{path}: {problems:?}");
            assert_eq!(parse_common::dump::dump(&variant, &parsed), want, "{path}");
            let comments: Vec<&str> = parsed
                .file
                .comments
                .iter()
                .map(|c| c.text.as_str())
                .collect();
            assert!(
                comments.iter().all(|c| !c.contains('\r')),
                "{path}: {comments:?}"
            );
        }
    }
}
