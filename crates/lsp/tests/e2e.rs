//! The language server end to end over `Connection::memory()`: a policy directory on disk, a
//! client that opens, edits and asks, and the answers checked against the policy's text.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

mod support;

use lsp_types::{Position, TextEdit};
use serde_json::{json, Value};
use support::{caret, utf16_position, Client};

const PROVIDERS: &str = r#"backend sim { url = "http://127.0.0.1:8000/v1"  simulated = true }
model small  { backend = sim  serves = "Qwen/Qwen3-0.6B"  cost = 0.1 }
model strong { backend = sim  serves = "Qwen/Qwen3-8B"  cost = 1.0 }
"#;

const ROUTING: &str = r#"# routing: é中😀
classifier domain { path = "models/domain"  labels = [math, code, law, other] }
signal topic = domain(prompt)
signal code_talk = contains(prompt, ["segfault"])
route coding priority 10 { when topic is code or code_talk  to strong else small }
route default { to small }
test crash { prompt = "segfault"  given topic = code  expect coding model strong }
"#;

fn start() -> Client {
    Client::start(&[("providers.sr", PROVIDERS), ("routing.sr", ROUTING)])
}

fn errors(diags: &[lsp_types::Diagnostic]) -> Vec<&lsp_types::Diagnostic> {
    diags
        .iter()
        .filter(|d| d.severity == Some(lsp_types::DiagnosticSeverity::ERROR))
        .collect()
}

fn code(d: &lsp_types::Diagnostic) -> String {
    match &d.code {
        Some(lsp_types::NumberOrString::String(s)) => s.clone(),
        other => panic!("unexpected code {other:?}"),
    }
}

#[test]
fn diagnostics_arrive_with_exact_utf16_ranges_and_clear_when_fixed() {
    let mut c = start();
    // Non-ASCII text (2-, 3- and 4-byte characters) before the error on the same line.
    let broken = ROUTING.replace(
        "when topic is code or code_talk  to strong",
        "when contains(prompt, [\"é中😀\"]) or code_talk  to strnog",
    );
    c.open("routing.sr", &broken);
    let diags = c.diagnostics("routing.sr");
    let errs = errors(&diags);
    assert_eq!(errs.len(), 1, "{diags:#?}");
    let d = errs[0];
    assert_eq!(code(d), "E011");
    assert!(d.message.contains("`strnog`"), "{}", d.message);
    let at = broken.find("strnog").unwrap();
    assert_eq!(d.range.start, utf16_position(&broken, at));
    assert_eq!(d.range.end, utf16_position(&broken, at + "strnog".len()));
    // The help (did you mean) travels as related information.
    let related = d
        .related_information
        .as_ref()
        .expect("help as related info");
    assert!(related.iter().any(|r| r.message.contains("`strong`")));

    // A quick fix replaces the typo with the suggestion.
    let actions = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": c.uri("routing.sr")}, "range": d.range,
               "context": {"diagnostics": []}}),
    );
    let edit = &actions[0]["edit"]["changes"][c.uri("routing.sr").as_str()][0];
    assert_eq!(edit["newText"], "strong");
    assert_eq!(edit["range"], json!(d.range));

    // Fixing the text clears the error.
    c.change("routing.sr", 2, ROUTING);
    let diags = c.diagnostics("routing.sr");
    assert!(errors(&diags).is_empty(), "{diags:#?}");
    c.shutdown();
}

#[test]
fn an_error_in_a_sibling_file_is_published_on_that_file() {
    let mut c = Client::start(&[
        (
            "providers.sr",
            &PROVIDERS.replace(
                "backend = sim  serves = \"Qwen/Qwen3-8B\"",
                "backend = simm  serves = \"Qwen/Qwen3-8B\"",
            ),
        ),
        ("routing.sr", ROUTING),
    ]);
    c.open("routing.sr", ROUTING);
    let providers = c.diagnostics("providers.sr");
    let errs = errors(&providers);
    assert_eq!(errs.len(), 1, "{providers:#?}");
    assert_eq!(code(errs[0]), "E011");
    assert_eq!(errs[0].range.start.line, 2);
    let routing = c.diagnostics("routing.sr");
    assert!(errors(&routing).is_empty(), "{routing:#?}");
    c.shutdown();
}

#[test]
fn hover_describes_signals_models_builtins_and_routes() {
    let mut c = start();
    c.open("routing.sr", ROUTING);
    // Hovers one character into the `nth` match of `needle` (after any leading `is `).
    let hover = |c: &mut Client, needle: &str, nth: usize| -> String {
        let skip = if needle.starts_with("is ") { 3 } else { 0 };
        let at = ROUTING.match_indices(needle).nth(nth).unwrap().0 + skip + 1;
        let r = c.request(
            "textDocument/hover",
            c.at("routing.sr", utf16_position(ROUTING, at)),
        );
        r["contents"]["value"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let topic = hover(&mut c, "topic", 1);
    assert!(topic.contains("class<domain>"), "{topic}");
    assert!(
        topic.contains("`math`") && topic.contains("`other`"),
        "{topic}"
    );
    assert!(topic.contains("domain(prompt)"), "{topic}");
    let strong = hover(&mut c, "strong", 0);
    assert!(
        strong.contains("Qwen/Qwen3-8B") && strong.contains("cost: 1.0"),
        "{strong}"
    );
    assert!(strong.contains("`sim`"), "{strong}");
    let contains = hover(&mut c, "contains", 0);
    assert!(contains.contains("-> bool"), "{contains}");
    let route = hover(&mut c, "coding", 0);
    assert!(
        route.contains("priority 10") && route.contains("else `small`"),
        "{route}"
    );
    let label = hover(&mut c, "is code", 0);
    assert!(
        label.contains("label `code` of classifier `domain`"),
        "{label}"
    );
    c.shutdown();
}

#[test]
fn definition_references_and_rename_span_the_policy() {
    let mut c = start();
    c.open("routing.sr", ROUTING);
    let strong = ROUTING.find("to strong").unwrap() + 4;
    let def = c.request(
        "textDocument/definition",
        c.at("routing.sr", utf16_position(ROUTING, strong)),
    );
    assert_eq!(def["uri"], json!(c.uri("providers.sr")));
    let decl = PROVIDERS.find("strong").unwrap();
    assert_eq!(
        def["range"]["start"],
        json!(utf16_position(PROVIDERS, decl))
    );

    let topic = ROUTING.find("topic").unwrap();
    let mut params = c.at("routing.sr", utf16_position(ROUTING, topic));
    params["context"] = json!({"includeDeclaration": true});
    let refs = c.request("textDocument/references", params);
    let starts: Vec<Value> = refs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["range"]["start"].clone())
        .collect();
    let expected: Vec<Value> = ROUTING
        .match_indices("topic")
        .map(|(i, _)| json!(utf16_position(ROUTING, i)))
        .collect();
    assert_eq!(starts, expected);

    let mut params = c.at("routing.sr", utf16_position(ROUTING, topic));
    params["newName"] = json!("subject");
    let edit = c.request("textDocument/rename", params);
    let edits: Vec<TextEdit> =
        serde_json::from_value(edit["changes"][c.uri("routing.sr").as_str()].clone()).unwrap();
    assert_eq!(edits.len(), 3);
    assert!(edits.iter().all(|e| e.new_text == "subject"));

    // Keywords and non-identifiers are refused.
    for bad in ["route", "9lives", "a-b", "contains"] {
        let mut params = c.at("routing.sr", utf16_position(ROUTING, topic));
        params["newName"] = json!(bad);
        let r = c.request_raw("textDocument/rename", params);
        assert!(r.response_result.is_err(), "renaming to {bad} was accepted");
    }

    // Renaming a model from its use edits the other file too.
    let mut params = c.at("routing.sr", utf16_position(ROUTING, strong));
    params["newName"] = json!("big");
    let edit = c.request("textDocument/rename", params);
    assert_eq!(
        edit["changes"][c.uri("providers.sr").as_str()]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        edit["changes"][c.uri("routing.sr").as_str()]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    c.shutdown();
}

fn complete(c: &mut Client, marked: &str) -> Vec<String> {
    let (text, position) = caret(marked);
    c.change("routing.sr", 9, &text);
    let r = c.request("textDocument/completion", c.at("routing.sr", position));
    let mut labels: Vec<String> = r
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["label"].as_str().unwrap().to_string())
        .collect();
    labels.sort();
    labels
}

#[test]
fn completion_fits_the_context_even_in_half_typed_text() {
    let mut c = start();
    c.open("routing.sr", ROUTING);
    let base = ROUTING.to_string();
    // Labels of that classifier only, after `is` (the text does not parse).
    let labels = complete(
        &mut c,
        &format!("{base}route r priority 5 {{ when topic is |caret|"),
    );
    assert_eq!(labels, ["code", "law", "math", "other"]);
    let labels = complete(
        &mut c,
        &format!("{base}route r priority 5 {{ when topic in [math, |caret|"),
    );
    assert_eq!(labels, ["code", "law", "math", "other"]);
    // Models after `to` / `else`, filtered by the typed prefix.
    let models = complete(
        &mut c,
        &format!("{base}route r priority 5 {{ when code_talk to |caret|"),
    );
    assert_eq!(models, ["small", "strong"]);
    let models = complete(
        &mut c,
        &format!("{base}route r priority 5 {{ when code_talk to small else st|caret|"),
    );
    assert_eq!(models, ["strong"]);
    // Block fields inside a body.
    let fields = complete(&mut c, &format!("{base}backend b {{\n  |caret|\n}}"));
    assert_eq!(
        fields,
        [
            "api",
            "api_key",
            "catalog",
            "client_auth",
            "simulated",
            "timeout",
            "url"
        ]
    );
    // The fixed values of a field.
    let apis = complete(&mut c, &format!("{base}backend b {{\n  api = |caret|\n}}"));
    assert_eq!(apis, ["anthropic", "openai"]);
    // Signals and builtins in an expression.
    let expr = complete(&mut c, &format!("{base}signal s = co|caret|"));
    assert!(
        expr.contains(&"code_talk".to_string()) && expr.contains(&"contains".to_string()),
        "{expr:?}"
    );
    assert!(
        expr.contains(&"count".to_string()) && !expr.contains(&"topic".to_string()),
        "{expr:?}"
    );
    // Declarations at top level.
    let decls = complete(&mut c, &format!("{base}ro|caret|"));
    assert_eq!(decls, ["route", "router"]);
    // A test's outcomes: `rejected` offers the budgets, and only them.
    let budgets = format!("{base}budget per_key {{ window = 1m  requests = 5 }}\n");
    let outcomes = complete(
        &mut c,
        &format!("{budgets}test t {{ prompt = \"hi\"  expect re|caret|"),
    );
    assert_eq!(outcomes, ["rejected"]);
    let rejected = complete(
        &mut c,
        &format!("{budgets}test t {{ prompt = \"hi\"  expect rejected |caret|"),
    );
    assert_eq!(rejected, ["per_key"]);
    c.shutdown();
}

#[test]
fn formatting_rewrites_a_messy_file_and_leaves_a_broken_one_alone() {
    let mut c = start();
    let messy = "signal   a=true\nroute default {to small}\n";
    c.open("routing.sr", messy);
    let edits: Vec<TextEdit> = serde_json::from_value(c.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": c.uri("routing.sr")}, "options": {"tabSize": 2, "insertSpaces": true}}),
    ))
    .unwrap();
    assert_eq!(edits.len(), 1);
    assert_eq!(
        edits[0].new_text,
        "signal a = true\n\nroute default {\n  to small\n}\n"
    );
    assert_eq!(edits[0].range.start, Position::new(0, 0));
    assert_eq!(edits[0].range.end, Position::new(2, 0));

    c.change("routing.sr", 2, "signal a = \nroute {");
    let r = c.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": c.uri("routing.sr")}, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    assert_eq!(r, json!([]));
    c.shutdown();
}

#[test]
fn code_lenses_run_the_tests_on_both_engines() {
    let mut c = start();
    let failing = format!("{ROUTING}test wrong {{ prompt = \"hi\"  expect coding }}\n");
    c.open("routing.sr", &failing);
    let lenses = c.request(
        "textDocument/codeLens",
        json!({"textDocument": {"uri": c.uri("routing.sr")}}),
    );
    let lenses = lenses.as_array().unwrap();
    assert_eq!(lenses.len(), 3, "{lenses:#?}");
    let crash = ROUTING.find("crash").unwrap();
    assert_eq!(
        lenses[1]["range"]["start"],
        json!(utf16_position(ROUTING, crash))
    );
    let command = &lenses[1]["command"];
    assert_eq!(command["command"], "src.runTests");

    let one = c.request(
        "workspace/executeCommand",
        json!({"command": "src.runTests", "arguments": command["arguments"]}),
    );
    assert_eq!(
        (one["passed"].as_u64(), one["failed"].as_u64()),
        (Some(2), Some(0)),
        "{one}"
    );
    let engines: Vec<&str> = one["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["engine"].as_str().unwrap())
        .collect();
    assert_eq!(engines.len(), 2);
    assert_ne!(engines[0], engines[1]);

    let all = c.request(
        "workspace/executeCommand",
        json!({"command": "src.runTests", "arguments": lenses[0]["command"]["arguments"]}),
    );
    assert_eq!(
        (all["passed"].as_u64(), all["failed"].as_u64()),
        (Some(2), Some(2)),
        "{all}"
    );
    let shown = c
        .inbox
        .iter()
        .filter(|n| n.method == "window/showMessage")
        .filter_map(|n| n.params["message"].as_str())
        .next_back()
        .unwrap_or_default()
        .to_string();
    assert!(
        shown.contains("2 passed, 2 failed") && shown.contains("wrong"),
        "{shown}"
    );
    c.shutdown();
}

#[test]
fn symbols_outline_the_file_and_search_the_workspace() {
    let mut c = start();
    c.open("routing.sr", ROUTING);
    let outline = c.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": c.uri("routing.sr")}}),
    );
    let names: Vec<&str> = outline
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["domain", "topic", "code_talk", "coding", "default", "crash"]
    );
    assert_eq!(outline[0]["children"].as_array().unwrap().len(), 4);
    let found = c.request("workspace/symbol", json!({"query": "STR"}));
    let found = found.as_array().unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["name"], "strong");
    assert_eq!(found[0]["location"]["uri"], json!(c.uri("providers.sr")));
    c.shutdown();
}

#[test]
fn requests_about_unknown_files_and_odd_positions_are_answered() {
    let mut c = start();
    let ghost = json!({"textDocument": {"uri": "file:///nowhere/ghost.sr"}, "position": {"line": 99, "character": 99}});
    assert_eq!(c.request("textDocument/hover", ghost.clone()), Value::Null);
    assert_eq!(
        c.request("textDocument/definition", ghost.clone()),
        Value::Null
    );
    c.open("routing.sr", ROUTING);
    let far = c.at("routing.sr", Position::new(1000, 1000));
    assert_eq!(c.request("textDocument/hover", far), Value::Null);
    // Column 19 falls inside the emoji's surrogate pair on line 0.
    let mid = c.at("routing.sr", Position::new(0, 19));
    let _ = c.request("textDocument/completion", mid);
    let r = c.request_raw("textDocument/unknownThing", json!({}));
    assert!(r.response_result.is_err());
    c.shutdown();
}
