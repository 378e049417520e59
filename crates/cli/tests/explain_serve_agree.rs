//! `src explain` and `src serve` drive the compiler's one request procedure, so they must agree
//! on every request: the same block, route, model and order of models to try.
//!
//! Each request is written in the API of each HTTP door (chat, Responses, Anthropic Messages,
//! as the test kit's `Door::body` translates it), explained from that body as the door's client
//! sends it (`src explain --request --format json`, which tells the API from the body and the
//! `anthropic-version` header), and sent twice to that door of a real `src serve` on the
//! built-in simulator: once as it is (the block, route and model answer in `x-sr-block`,
//! `x-sr-route`, `x-sr-model`), and once with `x-sim-fault: error=503`, so that every model
//! fails and `x-sr-fallbacks` lists the whole order tried. A body a door refuses (a chat tool
//! message has no Messages form) must be refused by explain too. The requests are every `test`
//! case of the decision corpus that serve can answer and a generated set (`agree_support`);
//! `explain_extproc_agree.rs` sends the same ones through Envoy.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod agree_support;
mod support;

use agree_support::{all_suites, explain, Case, Outcome, Tally};
use src_testkit::doors::Door;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::Server;

/// `case` as `door`'s client writes it.
fn through(case: &Case, door: Door, client_headers: &[(&str, &str)]) -> Case {
    let mut headers = case.headers.clone();
    headers.extend(
        client_headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    Case {
        name: format!("{} ({})", case.name, door.name()),
        body: door.body(&case.body),
        headers,
    }
}

/// What the differential test asks of a running `src serve`.
trait Asks {
    fn send(&self, door: Door, case: &Case, extra: &[(&str, &str)])
        -> (u16, Vec<(String, String)>);
    fn outcome(&self, door: Door, case: &Case) -> Outcome;
}

impl Asks for Server {
    /// Sends one request through `door`; answers the status and the response headers.
    fn send(
        &self,
        door: Door,
        case: &Case,
        extra: &[(&str, &str)],
    ) -> (u16, Vec<(String, String)>) {
        let body = case.body.to_string();
        let mut request = format!(
            "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n",
            door.path(),
            self.addr,
            body.len()
        );
        for (k, v) in case
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(extra.iter().copied())
        {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(&body);
        let mut stream = TcpStream::connect(self.addr).expect("connects");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        stream.write_all(request.as_bytes()).expect("sends");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("reads the answer");
        let answer = String::from_utf8_lossy(&answer);
        let head = answer.split("\r\n\r\n").next().unwrap_or_default();
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        (status, headers)
    }

    fn outcome(&self, door: Door, case: &Case) -> Outcome {
        let header = |headers: &[(String, String)], name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .filter(|v| v != "-")
        };
        let (status, headers) = self.send(door, case, &[]);
        let block = header(&headers, "x-sr-block");
        let refused = block.is_some() && !(200..300).contains(&status);
        if status == 404 || (status == 400 && block.is_none()) {
            return Outcome {
                block: None,
                route: None,
                model: None,
                tried: vec![],
                error: Some(status),
            };
        }
        assert!(
            (200..300).contains(&status) || refused,
            "{}: src serve answered {status}",
            case.name
        );
        let (_, failed) = self.send(door, case, &[("x-sim-fault", "error=503")]);
        let tried = if refused {
            vec![]
        } else {
            header(&failed, "x-sr-fallbacks")
                // `model:why` for each model that failed, in the order tried.
                .map(|v| {
                    v.split(',')
                        .map(|f| f.split(':').next().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default()
        };
        Outcome {
            error: refused.then_some(0),
            route: if block.is_some() {
                None
            } else {
                header(&headers, "x-sr-route")
            },
            model: if refused {
                None
            } else {
                header(&headers, "x-sr-model")
            },
            block,
            tried,
        }
    }
}

/// Explains and serves every request through `door`; fails on any disagreement.
fn agree_through(door: Door, client_headers: &[(&str, &str)]) {
    let mut tally = Tally::new("serve");
    let mut decided = 0;
    let mut fallbacks_seen = 0;
    for suite in &all_suites() {
        let server = Server::start(suite.dir.path());
        for case in &suite.cases {
            let case = through(case, door, client_headers);
            let explained = explain(suite.dir.path(), &case);
            let served = server.outcome(door, &case);
            if explained.tried.len() > 1 {
                fallbacks_seen += 1;
            }
            if explained.error.is_none() {
                decided += 1;
            }
            tally.compare(suite, &case, &explained, &served);
        }
    }
    tally.assert_agreed();
    assert!(decided >= 40, "only {decided} requests decided");
    assert!(fallbacks_seen > 0, "no request had models to fall back on");
}

#[test]
fn explain_and_serve_decide_every_chat_request_alike() {
    agree_through(Door::Chat, &[]);
}

#[test]
fn explain_and_serve_decide_every_responses_request_alike() {
    agree_through(Door::Responses, &[]);
}

/// The official Anthropic client sends `anthropic-version`; explain tells the API by it.
#[test]
fn explain_and_serve_decide_every_messages_request_alike() {
    agree_through(Door::Messages, &[("anthropic-version", "2023-06-01")]);
}
