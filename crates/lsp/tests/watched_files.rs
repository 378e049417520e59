//! Files changed on disk behind the editor: the server registers watchers when the client can
//! take them, and `workspace/didChangeWatchedFiles` brings the open files' diagnostics up to
//! date with the policy files and catalogs the editor does not have open.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

mod support;

use lsp_types::{Diagnostic, DiagnosticSeverity, Position};
use serde_json::{json, Value};
use support::{uri_of, Client};

const CREATED: u32 = 1;
const CHANGED: u32 = 2;
const DELETED: u32 = 3;

const PROVIDERS: &str = r#"backend sim { url = "http://127.0.0.1:8000/v1"  simulated = true }
model small  { backend = sim  serves = "Qwen/Qwen3-0.6B" }
model strong { backend = sim  serves = "Qwen/Qwen3-8B" }
"#;

const SIGNALS: &str = "signal code_talk = contains(prompt, [\"segfault\"])\n";

const ROUTING: &str = r#"route coding priority 10 { when code_talk  to strong }
route default { to small }
"#;

fn watching_client() -> Value {
    json!({"workspace": {"didChangeWatchedFiles":
        {"dynamicRegistration": true, "relativePatternSupport": true}}})
}

fn errors(diags: &[Diagnostic]) -> Vec<&Diagnostic> {
    diags
        .iter()
        .filter(|d| d.severity == Some(DiagnosticSeverity::ERROR))
        .collect()
}

/// The watchers of a `client/registerCapability` request for watched files.
fn registered_watchers(request: &lsp_server::Request) -> Vec<Value> {
    let registration = &request.params["registrations"][0];
    assert_eq!(registration["method"], "workspace/didChangeWatchedFiles");
    registration["registerOptions"]["watchers"]
        .as_array()
        .expect("watchers")
        .clone()
}

#[test]
fn a_policy_file_changed_on_disk_updates_the_open_files_diagnostics() {
    let mut c = Client::start_with(
        &[
            ("providers.sr", PROVIDERS),
            ("signals.sr", SIGNALS),
            ("routing.sr", ROUTING),
        ],
        watching_client(),
        src_lsp::Config::default(),
    );
    let registration = c.server_request("client/registerCapability");
    let watchers = registered_watchers(&registration);
    assert!(
        watchers.contains(&json!({"globPattern": "**/*.sr"})),
        "{watchers:?}"
    );

    c.open("routing.sr", ROUTING);
    let routing = c.diagnostics("routing.sr");
    assert!(errors(&routing).is_empty(), "{routing:#?}");

    // Another tool renames the signal in a file the editor does not show.
    std::fs::write(
        c.path("signals.sr"),
        SIGNALS.replace("code_talk", "code_chat"),
    )
    .unwrap();
    c.files_changed(&[("signals.sr", CHANGED)]);
    let routing = c.diagnostics("routing.sr");
    let errs = errors(&routing);
    assert_eq!(errs.len(), 1, "{routing:#?}");
    assert!(
        errs[0].message.contains("`code_talk`"),
        "{}",
        errs[0].message
    );
    assert_eq!(errs[0].range.start.line, 0);

    // ... and back.
    std::fs::write(c.path("signals.sr"), SIGNALS).unwrap();
    c.files_changed(&[("signals.sr", CHANGED)]);
    let routing = c.diagnostics("routing.sr");
    assert!(errors(&routing).is_empty(), "{routing:#?}");

    // An open document keeps its editor text whatever its file on disk says.
    std::fs::write(c.path("routing.sr"), "route {").unwrap();
    c.files_changed(&[("routing.sr", CHANGED)]);
    let routing = c.diagnostics("routing.sr");
    assert!(errors(&routing).is_empty(), "{routing:#?}");

    // A new file with an error gets its diagnostics; deleting it clears them.
    std::fs::write(
        c.path("broken.sr"),
        "route broken priority 3 { when code_talk  to nowhere }\n",
    )
    .unwrap();
    c.files_changed(&[("broken.sr", CREATED)]);
    let broken = c.diagnostics("broken.sr");
    let errs = errors(&broken);
    assert_eq!(errs.len(), 1, "{broken:#?}");
    assert!(errs[0].message.contains("`nowhere`"), "{}", errs[0].message);
    let _ = c.diagnostics("routing.sr");

    std::fs::remove_file(c.path("broken.sr")).unwrap();
    c.files_changed(&[("broken.sr", DELETED)]);
    let broken = c.diagnostics("broken.sr");
    assert!(broken.is_empty(), "{broken:#?}");
    let _ = c.diagnostics("routing.sr");

    // A file of another directory touches no open policy: nothing is published.
    let elsewhere = tempfile::tempdir().unwrap();
    let other = elsewhere.path().join("other.sr");
    std::fs::write(&other, "route {").unwrap();
    c.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": uri_of(&other), "type": CHANGED}]}),
    );
    // Notifications are handled in order, so any publishing comes before this answer.
    let _ = c.request(
        "textDocument/hover",
        c.at("routing.sr", Position::new(0, 0)),
    );
    assert!(!c.has_diagnostics("routing.sr"), "{:?}", c.inbox);
    assert!(!c
        .inbox
        .iter()
        .any(|n| n.params["uri"] == json!(uri_of(&other))));
    c.shutdown();
}

#[test]
fn a_catalog_changed_on_disk_is_checked_again() {
    let providers = PROVIDERS.replace(
        "simulated = true",
        "simulated = true  catalog = \"catalog.json\"",
    );
    let mut c = Client::start_with(
        &[
            ("providers.sr", &providers),
            ("routing.sr", ROUTING),
            ("signals.sr", SIGNALS),
            ("catalog.json", r#"{"data": [{"id": "Qwen/Qwen3-0.6B"}]}"#),
        ],
        watching_client(),
        src_lsp::Config::default(),
    );
    let first = c.server_request("client/registerCapability");
    c.open("providers.sr", &providers);
    let diags = c.diagnostics("providers.sr");
    let errs = errors(&diags);
    assert_eq!(errs.len(), 1, "{diags:#?}");
    assert!(
        errs[0].message.contains("Qwen/Qwen3-8B"),
        "{}",
        errs[0].message
    );

    // The catalog is watched once the policy naming it is open.
    let gone = c.server_request("client/unregisterCapability");
    assert_eq!(
        gone.params["unregisterations"][0]["id"],
        first.params["registrations"][0]["id"]
    );
    let again = c.server_request("client/registerCapability");
    let watchers = registered_watchers(&again);
    let catalog =
        json!({"globPattern": {"baseUri": uri_of(c.dir.path()), "pattern": "catalog.json"}});
    assert!(watchers.contains(&catalog), "{watchers:?}");

    std::fs::write(
        c.path("catalog.json"),
        r#"{"data": [{"id": "Qwen/Qwen3-0.6B"}, {"id": "Qwen/Qwen3-8B"}]}"#,
    )
    .unwrap();
    c.files_changed(&[("catalog.json", CHANGED)]);
    let diags = c.diagnostics("providers.sr");
    assert!(errors(&diags).is_empty(), "{diags:#?}");

    std::fs::remove_file(c.path("catalog.json")).unwrap();
    c.files_changed(&[("catalog.json", DELETED)]);
    let diags = c.diagnostics("providers.sr");
    let errs = errors(&diags);
    assert_eq!(errs.len(), 1, "{diags:#?}");
    assert!(
        errs[0].message.contains("cannot be read"),
        "{}",
        errs[0].message
    );
    c.shutdown();
}

#[test]
fn no_watchers_are_registered_without_dynamic_registration() {
    let mut c = Client::start(&[("providers.sr", PROVIDERS), ("routing.sr", ROUTING)]);
    c.open("routing.sr", ROUTING);
    let _ = c.diagnostics("routing.sr");
    // The registration would be sent right after initialization, before this answer.
    let _ = c.request("workspace/symbol", json!({"query": ""}));
    assert!(c.server_requests.is_empty(), "{:?}", c.server_requests);

    // Clients that watch files on their own still send the notification: it is handled.
    std::fs::write(
        c.path("extra.sr"),
        "route extra priority 2 { when true  to nowhere }\n",
    )
    .unwrap();
    c.files_changed(&[("extra.sr", CREATED)]);
    let extra = c.diagnostics("extra.sr");
    assert_eq!(errors(&extra).len(), 1, "{extra:#?}");
    c.shutdown();
}
