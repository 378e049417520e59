//! `src import` as users run it: each fixture (a LiteLLM config, vLLM Semantic Router recipes)
//! becomes a policy that `src check`, `src test` (both engines) and `src fmt --check` accept,
//! with what was not translated in MIGRATION.md by file and line, secrets left as environment
//! references, and bad input refused with a clear message and exit code.

#![allow(
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

mod support;

use assert_cmd::assert::OutputAssertExt;
use predicates::str::contains;
use std::path::{Path, PathBuf};
use support::src;

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(path)
}

/// Every file under `dir`, with its text.
fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the output") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            let text = std::fs::read_to_string(&path).expect("read an output file");
            out.push((path, text));
        }
    }
    out
}

/// Imports `args` into a fresh directory, expecting `code`; returns the directory and stderr.
fn import(args: &[&str], code: i32) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    let assert = src()
        .arg("import")
        .args(args)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(code);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    (dir, stderr)
}

/// `src import KIND INPUT --out OUT` is refused (exit code 2) with `reason` on stderr.
fn refused(kind: &str, input: &Path, out: &Path, reason: &str) {
    src()
        .args(["import", kind])
        .arg(input)
        .arg("--out")
        .arg(out)
        .assert()
        .code(2)
        .stderr(contains(reason));
}

/// The output checks, its tests pass on both engines (and there are some), and it is formatted.
fn verified(out: &Path, tests: usize) {
    src().arg("check").arg(out).assert().success();
    src()
        .arg("test")
        .arg(out)
        .assert()
        .success()
        .stdout(contains(format!("{} passed, 0 failed", tests * 2)));
    src().args(["fmt", "--check"]).arg(out).assert().success();
}

#[test]
fn a_litellm_config_becomes_a_checked_policy_whose_tests_pass() {
    let config = fixture("litellm/config.yaml");
    let (dir, stderr) = import(&["litellm", config.to_str().expect("utf-8 path")], 0);
    let out = dir.path().join("out");
    // One test per model name and per alias: fast-chat, smart, gpt-4, claude, local.
    verified(&out, 5);
    let policy = std::fs::read_to_string(out.join("policy.sr")).expect("policy.sr");
    // Deployments of one name: the first, then the others and the fallback names, in order.
    assert!(
        policy.contains(
            "to qwen_qwen3_0_6b else qwen_qwen3_0_6b_2, gpt_4o, claude_3_5_sonnet_20241022"
        ),
        "{policy}"
    );
    assert!(policy.contains("when body(\"model\") == \"smart\" or body(\"model\") == \"gpt-4\""));
    assert!(
        policy.contains("url = \"http://127.0.0.1:11434/v1\""),
        "ollama gets its /v1"
    );
    assert!(policy.contains("api = anthropic"));
    assert!(policy.contains("cooldown_after = 2"));
    assert!(policy.contains("cooldown = 45s"));
    assert!(policy.contains("context = 32000"));
    assert!(policy.contains("timeout = 90s"));
    // Keys are environment references: named ones as written, the provider's default when
    // none is given, and a made-up name for a literal key.
    assert!(policy.contains("api_key = env(\"VLLM_KEY\")"));
    assert!(policy.contains("api_key = env(\"OPENAI_API_KEY\")"));
    assert!(policy.contains("api_key = env(\"CLAUDE_API_KEY\")"));
    let migration = std::fs::read_to_string(out.join("MIGRATION.md")).expect("MIGRATION.md");
    for (line, what) in [
        (8, "litellm_params.rpm"),
        (27, "api_key"),
        (34, "bedrock-claude"),
        (40, "embedder"),
        (41, "openai/*"),
        (46, "missing-group"),
        (49, "num_retries"),
        (53, "routing_strategy"),
        (57, "redis_password"),
        (60, "master_key"),
        (62, "environment_variables"),
    ] {
        let at = format!("config.yaml:{line}");
        let row = migration
            .lines()
            .find(|l| l.contains(&at) && l.contains(what))
            .unwrap_or_else(|| panic!("no `{what}` at {at} in MIGRATION.md:\n{migration}"));
        assert!(stderr.contains(&at), "{at} not on stderr: {stderr}");
        assert!(
            row.split('|').count() >= 4,
            "a table row with a reason: {row}"
        );
    }
    assert!(migration.contains("10 passed, 0 failed"), "{migration}");
}

#[test]
fn secrets_never_appear_as_values() {
    let config = fixture("litellm/config.yaml");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    let assert = src()
        .args(["import", "litellm"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let output = assert.get_output();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let written = files(&out);
    assert!(written.len() >= 3, "policy, report and request files");
    // Every literal secret of the fixture is marked `never-copy`.
    let source = std::fs::read_to_string(&config).expect("the fixture");
    let secrets: Vec<&str> = source
        .split_whitespace()
        .filter(|w| w.contains("never-copy"))
        .collect();
    assert_eq!(secrets.len(), 5, "the fixture holds five literal secrets");
    for secret in secrets {
        assert!(!said.contains(secret), "`{secret}` printed");
        for (path, text) in &written {
            assert!(!text.contains(secret), "`{secret}` in {}", path.display());
        }
    }
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("missing.yaml");
    let no_list = dir.path().join("no_list.yaml");
    std::fs::write(&no_list, "router_settings:\n  num_retries: 2\n").expect("write");
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "model_list: [\n").expect("write");
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "model_list: []\n").expect("write");
    let nameless = dir.path().join("nameless.yaml");
    std::fs::write(
        &nameless,
        "model_list:\n  - litellm_params:\n      model: openai/gpt-4o\n",
    )
    .expect("write");
    for (file, message) in [
        (&missing, "cannot read"),
        (&no_list, "no `model_list`"),
        (&broken, "is not valid YAML"),
        (&empty, "empty.yaml:1: `model_list` is empty"),
        (
            &nameless,
            "nameless.yaml:2: a `model_list` entry has no `model_name`",
        ),
    ] {
        refused("litellm", file, &dir.path().join("out"), message);
    }
    // An output directory that holds files is not overwritten without --force.
    let full = dir.path().join("full");
    std::fs::create_dir(&full).expect("mkdir");
    std::fs::write(full.join("keep.txt"), "mine").expect("write");
    let config = fixture("litellm/config.yaml");
    refused("litellm", &config, &full, "is not empty");
    src()
        .args(["import", "litellm"])
        .arg(&config)
        .arg("--out")
        .arg(&full)
        .arg("--force")
        .assert()
        .success();
    assert!(full.join("keep.txt").exists() && full.join("policy.sr").exists());
}

#[test]
fn a_vsr_recipe_becomes_a_checked_policy_with_its_probes_as_tests() {
    let recipe = fixture("vsr/support");
    let (dir, stderr) = import(&["vsr", recipe.to_str().expect("utf-8 path")], 0);
    let out = dir.path().join("out");
    // Thirteen probes and one of the recipe's own TEST entries translate.
    verified(&out, 14);
    let policy = std::fs::read_to_string(out.join("policy.sr")).expect("policy.sr");
    for expected in [
        // keyword methods, operators and case
        r#"signal injection_markers = contains(prompt, ["ignore previous instructions", "reveal the system prompt"])"#,
        r#"signal refund_and_invoice = contains(prompt, ["refund"]) and contains(prompt, ["invoice"])"#,
        r#"signal no_thanks = not (contains(prompt, ["thanks"]))"#,
        r#"signal case_acronym = matches(prompt, "\\bSLA\\b")"#,
        r#"signal ticket_ids = matches(prompt, "[A-Z]{3}-[0-9]{4}")"#,
        r#"signal api_docs = bm25(prompt, ["endpoint", "api", "sdk"]) > 0.5"#,
        r#"signal deploy_words = fuzzy(prompt, ["deployment"], 0.75)"#,
        r#"signal urgent_typos = fuzzy(prompt, ["urgent", "outage"], 0.8)"#,
        // counts, language, shapes, headers
        "signal long_context = tokens(history) >= 8000 and tokens(history) <= 256000",
        "signal zh = language(prompt) is zh",
        r#"signal many_questions = count(prompt, "[?]") >= 3"#,
        r#"signal override_dense = density(prompt, ["ignore", "override"]) > 0.2"#,
        r#"signal steps = sequence(prompt, ["first", "then"])"#,
        "signal has_tools = request.tools > 0",
        r#"header("x-authz-user-id") == "alice""#,
        r#"signal gold_tenant = header("x-tenant-tier") == "gold""#,
        // model-backed signals onto declarations with placeholder paths
        "classifier domain_classifier {",
        "labels = [math, computer_science, other]",
        "signal math = domain is math",
        "guard jailbreak_guard {",
        "signal jb_guard = jailbreak_guard(prompt) >= 0.7",
        "encoder embedder {",
        r#"similarity(embedder, prompt, ["How do I update my card?", "Why was I charged twice?"]) >= 0.8"#,
        r#"signal pii_any = pii(prompt, ["email", "phone", "credit_card", "iban", "us_ssn"])"#,
        // decisions: priorities, trees, fallbacks, plugins, default, models
        "route injection priority 400 {",
        "when code_terms and not smalltalk or many_questions or steps",
        "to local_coder else cloud_strong",
        r#"tools = only ["run_tests", "search_code"]"#,
        "tools = none",
        r#"system_prompt = "Answer from the product documentation.""#,
        "reasoning = high",
        "route default {",
        r#"aliases = ["local/small"]"#,
        r#"serves = "Qwen/Qwen3-0.6B""#,
        r#"names = ["auto", "support/auto"]"#,
        "given domain = math",
        // a knowledge base's best match onto a classifier over its labels
        "classifier support_kb_classifier {",
        "labels = [billing, shipping]",
        "signal best_billing = support_kb is billing",
        "given domain = other, support_kb = billing",
        "# DECIDE:",
    ] {
        assert!(
            policy.contains(expected),
            "missing `{expected}` in:\n{policy}"
        );
    }
    // Untranslated decisions take their probes with them; nothing is expected of them.
    assert!(!policy.contains("route vision") && !policy.contains("route scored"));
    assert!(policy.contains("api_key = env(\"ANTHROPIC_API_KEY\")"));
    // A repeated query (a long input) goes into a request file.
    let long = std::fs::read_to_string(out.join("requests/long_long_paste.json")).expect("request");
    assert_eq!(
        long.matches("Please read this long log line.").count(),
        1100
    );
    assert!(policy.contains("api_key = env(\"CLOUD_STRONG_API_KEY\")"));
    let migration = std::fs::read_to_string(out.join("MIGRATION.md")).expect("MIGRATION.md");
    for (at, what) in [
        ("config.yaml:23", "api key of `cloud/strong`"),
        ("recipe.dsl:86", "SIGNAL conversation has_images"),
        ("recipe.dsl:113", "SIGNAL complexity hard_task"),
        ("recipe.dsl:119", "PROJECTION score risk_score"),
        ("recipe.dsl:126", "ROUTE vision"),
        ("recipe.dsl:147", "PLUGIN router_replay"),
        ("recipe.dsl:165", "ALGORITHM confidence"),
        ("recipe.dsl:206", "ROUTE scored"),
        ("recipe.dsl:224", "TEST `hello there`"),
        ("probes.yaml:83", "probe `risky/roleplay`"),
        ("probes.yaml:91", "probe `vision/picture`"),
    ] {
        let row = migration
            .lines()
            .find(|l| l.contains(at) && l.contains(what))
            .unwrap_or_else(|| panic!("no `{what}` at {at} in MIGRATION.md:\n{migration}"));
        assert!(stderr.contains(at), "{at} not on stderr");
        assert!(row.starts_with('|'), "a table row: {row}");
    }
    // A probe reaching a model-backed signal it states nothing about is listed, not guessed.
    let risky = migration
        .lines()
        .find(|l| l.contains("risky/roleplay"))
        .expect("the risky probe is listed");
    assert!(
        risky.contains("reaches") && risky.contains("states no value"),
        "{risky}"
    );
    // The literal key never appears.
    for (path, text) in files(&out) {
        assert!(
            !text.contains("never-copy"),
            "a secret in {}",
            path.display()
        );
    }
    assert!(!stderr.contains("never-copy"));
}

#[test]
fn a_recipe_file_is_read_with_the_files_beside_it() {
    let dsl = fixture("vsr/support/recipe.dsl");
    let (dir, _) = import(&["vsr", dsl.to_str().expect("utf-8 path")], 0);
    verified(&dir.path().join("out"), 14);
}

#[test]
fn a_probe_the_translation_disagrees_with_fails_the_import() {
    let recipe = fixture("vsr/mismatch");
    let (dir, stderr) = import(&["vsr", recipe.to_str().expect("utf-8 path")], 1);
    assert!(stderr.contains("FAIL `code_no_code_words`"), "{stderr}");
    let out = dir.path().join("out");
    let migration = std::fs::read_to_string(out.join("MIGRATION.md")).expect("MIGRATION.md");
    assert!(migration.contains("0 passed, 2 failed"), "{migration}");
    assert!(migration.contains("FAIL `code_no_code_words`"));
    src().arg("test").arg(&out).assert().code(1);
}

#[test]
fn a_bad_recipe_is_refused_with_its_line() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    refused("vsr", dir.path(), &dir.path().join("out"), "no recipe");
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).expect("mkdir");
    std::fs::write(
        broken.join("recipe.dsl"),
        "MODEL m { }\nROUTE r {\n  PRIORITY high\n}\n",
    )
    .expect("write");
    refused(
        "vsr",
        &broken,
        &dir.path().join("out2"),
        "recipe.dsl:3: expected a number after PRIORITY",
    );
}

#[test]
fn projection_bands_route_as_the_weighted_score_does_on_every_combination() {
    let recipe = fixture("vsr/projection");
    let (dir, stderr) = import(&["vsr", recipe.to_str().expect("utf-8 path")], 0);
    let out = dir.path().join("out");
    // The four probes translate and pass.
    verified(&out, 4);
    let policy_file = out.join("policy.sr");
    let policy = std::fs::read_to_string(&policy_file).expect("policy.sr");
    for band in [
        "signal calm = ",
        "signal elevated = ",
        "signal urgent = ",
        // a keyword rule's confidence is 1 where it matches
        "signal escalate = escalation\n",
        "signal hot = escalation and angry\n",
        "when escalate and not calm",
        "\"X-Desk-Lane\" = \"urgent\"",
        // conversation shapes
        "signal in_tool_loop = request.tool_loop",
        "signal chatty = (request.messages - request.turns) > 4",
        // the one decision that caches: the policy's cache, which the others turn off
        "cache {\n  encoder = cache_encoder\n  threshold = 0.9\n  ttl = 600s\n}",
        "route tool_loop_lane priority 50 {\n  when in_tool_loop or chatty\n  to desk_mid\n}",
        "route urgent_lane priority 300 {",
    ] {
        assert!(policy.contains(band), "missing `{band}` in:\n{policy}");
    }
    // A padded probe goes into a request file, the filler before the query.
    let padded = std::fs::read_to_string(out.join("requests/calm_default_polite_question.json"))
        .expect("request file");
    assert_eq!(padded.matches("Some background about the shop.").count(), 3);
    assert!(
        padded.contains("shop. Could you please tell me the opening hours?"),
        "{padded}"
    );
    // A band a confidence anywhere in [0, 1] decides is reported with the combination where it
    // does, and so is the route that reads it.
    let migration = std::fs::read_to_string(out.join("MIGRATION.md")).expect("MIGRATION.md");
    assert_eq!(
        policy.matches("cache = off").count(),
        5,
        "every route but the caching one: {policy}"
    );
    // `ROUTING { strategy: priority }` is how routes are tried already.
    assert!(!stderr.contains("ROUTING"), "{stderr}");
    for (at, what, why) in [
        ("recipe.dsl:71", "band questioning", "[0.0000, 1.0000]"),
        (
            "recipe.dsl:133",
            "SIGNAL complexity hard_desk",
            "difficulty",
        ),
        (
            "recipe.dsl:140",
            "PROJECTION partition desk_partition",
            "softmax",
        ),
        (
            "recipe.dsl:109",
            "ROUTE question_lane",
            "projection(\"questioning\")",
        ),
    ] {
        let row = migration
            .lines()
            .find(|l| l.contains(at) && l.contains(what))
            .unwrap_or_else(|| panic!("no `{what}` at {at} in MIGRATION.md:\n{migration}"));
        assert!(row.contains(why), "{row}");
        assert!(stderr.contains(at), "{at} not on stderr");
    }
    // Every combination of the inputs, given: each case expects the decision the recipe's
    // weighted sums and bands make, computed here as vLLM Semantic Router computes them.
    let inputs = [
        "angry",
        "long_input",
        "many_questions",
        "polite",
        "has_tools",
        "escalation",
    ];
    let mut cases = String::new();
    let mut seen = std::collections::BTreeMap::new();
    for mask in 0..1u32 << inputs.len() {
        let on = |j: usize| mask >> j & 1 == 1;
        let b = |j: usize| if on(j) { 1.0 } else { 0.0 };
        // urgency_score, in the recipe's order; `polite` misses with -0.25, `has_tools` matches 2.
        let mut urgency = 0.0;
        urgency += 0.3 * b(0);
        urgency += 0.2 * b(1);
        urgency += 0.25 * b(2);
        urgency += -0.2 * if on(3) { 1.0 } else { -0.25 };
        urgency += 0.1 * if on(4) { 2.0 } else { 0.0 };
        // escalation_score: a keyword rule's confidence is 1 where it matches.
        let mut escalation = 0.0;
        escalation += 0.6 * b(5);
        escalation += 0.2 * b(0);
        let (calm, elevated, urgent) =
            (urgency < 0.3, (0.3..0.5).contains(&urgency), urgency >= 0.5);
        let (escalate, hot) = (escalation >= 0.4, escalation >= 0.7);
        let expected = if urgent {
            "urgent_lane"
        } else if escalate && !calm {
            "escalation_lane"
        } else if elevated {
            "elevated_lane"
        } else if hot {
            "hot_lane"
        } else {
            "default"
        };
        *seen.entry(expected).or_insert(0) += 1;
        let givens: Vec<String> = inputs
            .iter()
            .enumerate()
            .map(|(j, name)| format!("{name} = {}", on(j)))
            .collect();
        cases.push_str(&format!(
            "\ntest combination_{mask} {{\n  prompt = \"x\"\n  given {}\n  expect {expected}\n}}\n",
            givens.join(", ")
        ));
    }
    assert_eq!(seen.len(), 5, "every route is reached: {seen:?}");
    std::fs::write(&policy_file, format!("{policy}{cases}")).expect("write the cases");
    src()
        .arg("test")
        .arg(&out)
        .assert()
        .success()
        .stdout(contains(format!("{} passed, 0 failed", (4 + 64) * 2)));
}

#[test]
fn a_config_yaml_alone_is_translated_from_its_yaml_routing() {
    let config = fixture("vsr/yaml-only/config.yaml");
    let (dir, stderr) = import(&["vsr", config.to_str().expect("utf-8 path")], 0);
    let out = dir.path().join("out");
    // Four probes translate; the one that reaches the feedback classifier without stating its
    // value is listed.
    verified(&out, 4);
    let policy = std::fs::read_to_string(out.join("policy.sr")).expect("policy.sr");
    for expected in [
        // models from `models[].connections`, names from the entrypoint
        r#"serves = "Qwen/Qwen3-0.6B""#,
        r#"serves = "gpt-4o""#,
        r#"api_key = env("LAB_DEEP_API_KEY")"#,
        r#"names = ["auto", "lab/auto"]"#,
        // signals by kind, domains onto one classifier
        r#"signal stack_trace = contains(prompt, ["traceback", "stack trace"])"#,
        "labels = [computer_science, other]",
        "signal long_context = tokens(history) >= 4000 and tokens(history) <= 128000",
        // a projection band, and rule trees with NOT
        "signal needs_repair = stack_trace and (retry_words or long_context)",
        "when needs_repair and not thanks",
        "when stack_trace or computer_science",
        // assignments: models, reasoning, plugins
        "to lab_deep else lab_fast",
        "reasoning = high",
        r#"system_prompt = "Find the faulty assumption first.""#,
        r#""X-Lab-Lane" = "repair""#,
        "route default {\n  to lab_fast",
        "given domain = computer_science",
        // the feedback detector onto a classifier with its labels
        "labels = [satisfied, need_clarification, wrong_answer, want_different]",
        "signal wrong_answer = feedback is wrong_answer",
        "when wrong_answer",
        "given feedback = wrong_answer, domain = other",
    ] {
        assert!(
            policy.contains(expected),
            "missing `{expected}` in:\n{policy}"
        );
    }
    assert!(!policy.contains("odd_not"));
    let migration = std::fs::read_to_string(out.join("MIGRATION.md")).expect("MIGRATION.md");
    for (at, what) in [
        ("config.yaml:17", "api key of `lab/deep`"),
        ("config.yaml:106", "PLUGIN response_cache"),
        ("config.yaml:117", "decision odd_not"),
        ("config.yaml:130", "RECIPE night"),
        ("config.yaml:155", "ENTRYPOINT for recipe `night`"),
        ("probes.yaml:32", "probe `lab_default/hello`"),
        ("probes.yaml:39", "the recipe has no decision `ghost`"),
    ] {
        let row = migration
            .lines()
            .find(|l| l.contains(at) && l.contains(what))
            .unwrap_or_else(|| panic!("no `{what}` at {at} in MIGRATION.md:\n{migration}"));
        assert!(stderr.contains(at), "{at} not on stderr");
        assert!(row.split('|').count() >= 4, "a row with a reason: {row}");
    }
    for (path, text) in files(&out) {
        assert!(
            !text.contains("never-copy"),
            "a secret in {}",
            path.display()
        );
    }
    assert!(!stderr.contains("never-copy"));
    // The directory holding only the config imports the same.
    let (dir2, _) = import(
        &[
            "vsr",
            fixture("vsr/yaml-only").to_str().expect("utf-8 path"),
        ],
        0,
    );
    let again = std::fs::read_to_string(dir2.path().join("out/policy.sr")).expect("policy.sr");
    assert_eq!(again, policy);
    // The earlier layout: models under `providers`, the routing under `routing`.
    let old = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(
        old.path().join("config.yaml"),
        "version: v0.3\nproviders:\n  defaults:\n    default_model: m/small\n  models:\n  \
         - name: m/small\n    provider_model_id: small\n    backend_refs:\n    \
         - endpoint: 127.0.0.1:8000/v1\nrouting:\n  signals:\n    keywords:\n    \
         - name: hi\n      operator: OR\n      keywords: [hello]\n  decisions:\n  \
         - name: greet\n    priority: 5\n    rules:\n      operator: AND\n      conditions:\n      \
         - type: keyword\n        name: hi\n    modelRefs:\n    - model: m/small\n",
    )
    .expect("write");
    let (dir3, _) = import(&["vsr", old.path().to_str().expect("utf-8 path")], 0);
    let v03 = std::fs::read_to_string(dir3.path().join("out/policy.sr")).expect("policy.sr");
    assert!(
        v03.contains("route greet priority 5 {\n  when hi\n  to m_small"),
        "{v03}"
    );
    assert!(v03.contains("url = \"http://127.0.0.1:8000/v1\""), "{v03}");
    // Decisions that name no model go to the config's first model, and the report says so.
    let bare_models = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(
        bare_models.path().join("config.yaml"),
        "models:\n- name: m/a\n  connections:\n  - endpoint: http://127.0.0.1:8000/v1\n    \
         model: a\nsignals:\n  keywords:\n  - name: hi\n    operator: OR\n    \
         keywords: [hello]\ndecisions:\n- name: greet\n  priority: 5\n  rules:\n    \
         type: keyword\n    name: hi\n",
    )
    .expect("write");
    let (dir4, _) = import(
        &["vsr", bare_models.path().to_str().expect("utf-8 path")],
        0,
    );
    let greet = std::fs::read_to_string(dir4.path().join("out/policy.sr")).expect("policy.sr");
    assert!(
        greet.contains("route greet priority 5 {\n  when hi\n  to m_a\n}"),
        "{greet}"
    );
    let report = std::fs::read_to_string(dir4.path().join("out/MIGRATION.md")).expect("report");
    assert!(
        report.contains("decision `greet` names no model"),
        "{report}"
    );
    // A config with neither routing nor a recipe beside it is refused.
    let bare = tempfile::tempdir().expect("a temporary directory");
    let only_models = bare.path().join("config.yaml");
    std::fs::write(&only_models, "models:\n- name: m\n").expect("write");
    refused("vsr", &only_models, &bare.path().join("out"), "no routing");
}

#[test]
fn a_recipe_of_several_is_chosen_by_name() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(
        dir.path().join("recipe.dsl"),
        r#"MODEL "m/small" { description: "small" }
MODEL "m/big" { description: "big" }
ENTRYPOINT { model_names: ["team/fast"] recipe: "fast" }
ENTRYPOINT { model_names: ["team/careful"] recipe: "careful" }
RECIPE fast {
  SIGNAL keyword hurry { operator: "OR" keywords: ["asap"] }
  ROUTE rush { PRIORITY 20 WHEN keyword("hurry") MODEL "m/small" }
  ROUTE fast_default { MODEL "m/small" }
}
RECIPE careful {
  SIGNAL keyword proof { operator: "OR" keywords: ["prove"] }
  ROUTE rigor { PRIORITY 20 WHEN keyword("proof") MODEL "m/big" }
  ROUTE careful_default { MODEL "m/small" }
}
"#,
    )
    .expect("write");
    std::fs::write(
        dir.path().join("probes.yaml"),
        "decisions:\n- id: rigor\n  expected_recipe: careful\n  expected_decision: rigor\n  \
         variants:\n  - id: proof\n    query: please prove it\n- id: rush\n  \
         expected_recipe: fast\n  expected_decision: rush\n  variants:\n  - id: asap\n    \
         query: asap please\n",
    )
    .expect("write");
    let recipe = dir.path().to_str().expect("utf-8 path");
    let (out_dir, stderr) = import(&["vsr", recipe, "--recipe", "careful"], 0);
    verified(&out_dir.path().join("out"), 1);
    assert!(
        stderr.contains(
            "probe `rush/asap` (it probes recipe `fast`: import that one with `--recipe fast`)"
        ),
        "{stderr}"
    );
    let policy = std::fs::read_to_string(out_dir.path().join("out/policy.sr")).expect("policy");
    assert!(policy.contains("route rigor priority 20"), "{policy}");
    assert!(policy.contains(r#"signal proof = contains(prompt, ["prove"])"#));
    assert!(
        policy.contains(r#"names = ["auto", "team/careful"]"#),
        "{policy}"
    );
    assert!(
        !policy.contains("rush") && !policy.contains("hurry"),
        "{policy}"
    );
    assert!(
        stderr.contains("recipe.dsl:5: RECIPE fast (a policy is one recipe: import this one with `--recipe fast`)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("recipe.dsl:3: ENTRYPOINT for recipe `fast`"),
        "{stderr}"
    );
    // Without a name, the first; an unknown name is refused with the names there are.
    let (first, _) = import(&["vsr", recipe], 0);
    let policy = std::fs::read_to_string(first.path().join("out/policy.sr")).expect("policy");
    assert!(policy.contains("route rush priority 20"), "{policy}");
    src()
        .args(["import", "vsr", recipe, "--recipe", "nightly", "--out"])
        .arg(dir.path().join("out"))
        .assert()
        .code(2)
        .stderr(contains(
            "no RECIPE `nightly` (the file has `fast`, `careful`)",
        ));
}
