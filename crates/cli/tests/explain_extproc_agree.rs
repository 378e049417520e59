//! `src explain` and the Envoy front door drive the compiler's one request procedure, so they
//! must agree on every request the HTTP proxy is compared on (`agree_support`): the same block,
//! route and model. Each request goes through a real Envoy (the fail-closed configuration
//! `src manifest` writes for the policy, every backend pointed at one recording upstream) to
//! `src serve --extproc`, and on to that upstream; the decision comes back in the
//! `x-sr-*` headers Envoy adds to the answer. An external processor cannot retry, so only the
//! first model of the order to try is compared.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod agree_support;
mod envoy_support;
mod support;

use agree_support::{all_suites, explain, Case, Outcome, Tally};
use envoy_support::{backends_at, generated, send, Envoy, Recorder, Src};

fn through_envoy(envoy: &Envoy, case: &Case) -> Outcome {
    let mut headers: Vec<(&str, &str)> = vec![("content-type", "application/json")];
    headers.extend(case.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let answer = send(
        envoy.addr,
        "POST",
        "/v1/chat/completions",
        &headers,
        case.body.to_string().as_bytes(),
    );
    let header = |name: &str| answer.header(name).map(String::from).filter(|v| v != "-");
    if answer.status == 404 {
        return Outcome {
            block: None,
            route: None,
            model: None,
            tried: vec![],
            error: Some(404),
        };
    }
    let block = header("x-sr-block");
    let refused = block.is_some() && !(200..300).contains(&answer.status);
    assert!(
        (200..300).contains(&answer.status) || refused,
        "{}: Envoy answered {}: {}",
        case.name,
        answer.status,
        answer.body_text()
    );
    let model = if refused { None } else { header("x-sr-model") };
    Outcome {
        error: refused.then_some(0),
        route: if block.is_some() {
            None
        } else {
            header("x-sr-route")
        },
        tried: model.iter().cloned().collect(),
        model,
        block,
    }
}

#[test]
fn explain_and_the_envoy_front_door_decide_every_request_alike() {
    let upstream = Recorder::start();
    let mut tally = Tally::new("extproc");
    for suite in &all_suites() {
        let src = Src::start(suite.dir.path(), &["--no-watch"]);
        let config = generated(suite.dir.path(), &src, false);
        let envoy = Envoy::start(&backends_at(&config, upstream.addr));
        for case in &suite.cases {
            let mut explained = explain(suite.dir.path(), case);
            explained.tried.truncate(1);
            let served = through_envoy(&envoy, case);
            tally.compare(suite, case, &explained, &served);
        }
    }
    tally.assert_agreed();
    assert!(
        !upstream.received().is_empty(),
        "no request reached the upstream"
    );
}
