//! Whether an answer is a completed step: HTTP 200 is not evidence that a step was correct, so
//! a turn is ok only when its body is what the API promises.
//!
//! - non-streaming chat: a `chat.completion` object with at least one choice, each with a
//!   `message`; `/v1/responses`: a `response` object whose `status` is `completed`;
//! - streaming chat: every event is JSON (a `chat.completion.chunk`, no `error`) and the stream
//!   ends with `data: [DONE]`; streaming responses: a `response.completed` event arrives;
//! - any body that broke off is a failure, whatever came before.
//!
//! Token counts come from the answer's `usage` ([`Usage`]); what the answer does not say stays
//! `None`, never 0.

use super::fixture::Api;
use super::send::Answer;
use serde_json::Value;
use src_runtime::openai::{Usage, UsageScanner};

/// The verdict on one answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// Why the answer is not a completed step; `None` when it is one.
    pub failure: Option<String>,
    /// The served model the body names.
    pub model: Option<String>,
    pub usage: Usage,
}

/// Judges `answer` to a request of `api` that did (`stream`) or did not ask for a stream.
pub fn judge(api: Api, stream: bool, answer: &Answer) -> Verdict {
    let mut verdict = if stream {
        judge_stream(api, &answer.body)
    } else {
        judge_whole(api, &answer.body)
    };
    if !(200..300).contains(&answer.status) {
        let detail = serde_json::from_slice::<Value>(&answer.body)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string));
        verdict.failure = Some(match detail {
            Some(message) => format!("HTTP {}: {message}", answer.status),
            None => format!("HTTP {}", answer.status),
        });
    } else if let Some(broken) = &answer.broken {
        verdict.failure = Some(broken.clone());
    }
    verdict
}

fn judge_whole(api: Api, body: &[u8]) -> Verdict {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return failed(format!("the body is not JSON: {e}")),
    };
    let model = value["model"].as_str().map(str::to_string);
    let usage = Usage::from_answer(&value).unwrap_or_default();
    let failure = match api {
        Api::Chat => chat_completion_problem(&value),
        Api::Responses => response_problem(&value),
    };
    Verdict {
        failure,
        model,
        usage,
    }
}

fn chat_completion_problem(value: &Value) -> Option<String> {
    if value["object"] != "chat.completion" {
        return Some(format!(
            "the body is not a chat completion (`object` is {})",
            value["object"]
        ));
    }
    let Some(choices) = value["choices"].as_array().filter(|c| !c.is_empty()) else {
        return Some("the chat completion has no choices".into());
    };
    if let Some(i) = choices.iter().position(|c| !c["message"].is_object()) {
        return Some(format!("choice {i} of the chat completion has no message"));
    }
    None
}

fn response_problem(value: &Value) -> Option<String> {
    if value["object"] != "response" {
        return Some(format!(
            "the body is not a Responses object (`object` is {})",
            value["object"]
        ));
    }
    if value["status"] != "completed" {
        return Some(format!("the response's status is {}", value["status"]));
    }
    if !value["output"].is_array() {
        return Some("the response has no `output`".into());
    }
    None
}

fn judge_stream(api: Api, body: &[u8]) -> Verdict {
    let mut scanner = UsageScanner::new();
    scanner.feed(body);
    scanner.finish();
    let mut model = None;
    let mut failure = None;
    let mut completed = false;
    for data in data_fields(body) {
        if data == "[DONE]" {
            continue;
        }
        let Ok(event) = serde_json::from_str::<Value>(&data) else {
            continue; // counted by the scanner as malformed
        };
        if event.get("error").is_some() || event["type"] == "error" {
            failure.get_or_insert_with(|| "the stream carried an error event".to_string());
        }
        match api {
            Api::Chat => {
                if event["object"] != "chat.completion.chunk" && failure.is_none() {
                    failure = Some(format!(
                        "a stream event is not a chat completion chunk (`object` is {})",
                        event["object"]
                    ));
                }
                if model.is_none() {
                    model = event["model"].as_str().map(str::to_string);
                }
            }
            Api::Responses => {
                if event["type"] == "response.completed" {
                    completed = true;
                    model = event["response"]["model"].as_str().map(str::to_string);
                }
            }
        }
    }
    if scanner.malformed_events() > 0 {
        failure = Some(format!(
            "{} stream event(s) are not JSON",
            scanner.malformed_events()
        ));
    }
    if failure.is_none() {
        failure = match api {
            Api::Chat if !scanner.saw_done() => {
                Some("the stream did not end with `data: [DONE]`".into())
            }
            Api::Responses if !completed => {
                Some("the stream has no `response.completed` event".into())
            }
            _ => None,
        };
    }
    Verdict {
        failure,
        model,
        usage: scanner.usage().unwrap_or_default(),
    }
}

/// The `data:` payloads of a server-sent-events body, multi-line fields joined.
fn data_fields(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    let mut events = Vec::new();
    let mut current: Option<String> = None;
    for line in text.split('\n').map(|l| l.trim_end_matches('\r')) {
        if line.is_empty() {
            events.extend(current.take());
        } else if let Some(data) = line.strip_prefix("data:") {
            let data = data.strip_prefix(' ').unwrap_or(data);
            match &mut current {
                Some(c) => {
                    c.push('\n');
                    c.push_str(data);
                }
                None => current = Some(data.to_string()),
            }
        }
    }
    events.extend(current);
    events
}

fn failed(why: String) -> Verdict {
    Verdict {
        failure: Some(why),
        ..Verdict::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> Answer {
        Answer {
            status,
            headers: vec![],
            body: bytes::Bytes::from(body.to_string()),
            broken: None,
            latency_ms: 1.0,
            first_byte_ms: Some(1.0),
        }
    }

    const CHAT: &str = r#"{"object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}"#;

    #[test]
    fn a_whole_chat_completion_is_ok_with_its_usage() {
        let v = judge(Api::Chat, false, &answer(200, CHAT));
        assert_eq!(v.failure, None);
        assert_eq!(v.model.as_deref(), Some("m"));
        assert_eq!(v.usage.cached_tokens, Some(4));
    }

    #[test]
    fn truncated_malformed_and_non_2xx_bodies_fail() {
        assert!(judge(Api::Chat, false, &answer(200, &CHAT[..40]))
            .failure
            .is_some());
        assert!(judge(
            Api::Chat,
            false,
            &answer(200, r#"{"object":"chat.completion","choices":[]}"#)
        )
        .failure
        .is_some());
        assert!(judge(Api::Chat, false, &answer(200, "{}"))
            .failure
            .is_some());
        let v = judge(
            Api::Chat,
            false,
            &answer(503, r#"{"error":{"message":"busy"}}"#),
        );
        assert_eq!(v.failure.as_deref(), Some("HTTP 503: busy"));
        let mut broken = answer(200, CHAT);
        broken.broken = Some("the answer broke off".into());
        assert!(judge(Api::Chat, false, &broken).failure.is_some());
    }

    #[test]
    fn missing_cached_tokens_stay_unknown() {
        let body = r#"{"object":"chat.completion","model":"m","choices":[{"message":{}}],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#;
        let v = judge(Api::Chat, false, &answer(200, body));
        assert_eq!(v.failure, None);
        assert_eq!(
            (v.usage.prompt_tokens, v.usage.cached_tokens),
            (Some(5), None)
        );
    }

    #[test]
    fn a_stream_must_end_with_done() {
        let chunk = r#"data: {"object":"chat.completion.chunk","model":"m","choices":[{"delta":{"content":"a"}}]}"#;
        let whole = format!("{chunk}\n\ndata: [DONE]\n\n");
        let v = judge(Api::Chat, true, &answer(200, &whole));
        assert_eq!((v.failure, v.model.as_deref()), (None, Some("m")));
        let cut = format!("{chunk}\n\n");
        assert!(judge(Api::Chat, true, &answer(200, &cut)).failure.is_some());
        let junk = format!("{chunk}\n\ndata: {{oops\n\ndata: [DONE]\n\n");
        assert!(judge(Api::Chat, true, &answer(200, &junk))
            .failure
            .is_some());
    }

    #[test]
    fn responses_need_a_completed_status() {
        let ok = r#"{"object":"response","status":"completed","model":"m","output":[]}"#;
        assert_eq!(judge(Api::Responses, false, &answer(200, ok)).failure, None);
        let partial = r#"{"object":"response","status":"incomplete","model":"m","output":[]}"#;
        assert!(judge(Api::Responses, false, &answer(200, partial))
            .failure
            .is_some());
    }
}
