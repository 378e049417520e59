//! The simulator's answers in OpenAI's published shapes, as the official clients' stream
//! accumulators read them: the Responses event sequence, tool calls a `tool_choice` forces (chat
//! and Responses, whole and streamed), chat's `n` and `stop`, and ids that never repeat, across
//! restarts too.

use serde_json::{json, Value};
use src_testkit::sim::*;

/// The events of a streamed answer to `body` at `path`, as JSON.
async fn streamed(http: &Http, path: &str, body: &Value) -> TestResult<Vec<Value>> {
    let response = http.send("POST", path, &[], body.to_string()).await?;
    let (frames, error) = frames(response).await;
    assert!(error.is_none(), "{error:?}");
    let raw = frames.concat();
    Ok(sse_data(&raw)
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d))
        .collect::<Result<_, _>>()?)
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

#[tokio::test]
async fn a_responses_stream_is_the_published_sequence() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let body = json!({"model": SMALL, "input": "what is 2+2?", "stream": true});
    let events = streamed(&http, "/v1/responses", &body).await?;
    let names = types(&events);
    let deltas = names
        .iter()
        .filter(|n| **n == "response.output_text.delta")
        .count();
    assert!(deltas > 0, "{names:?}");
    let mut expected = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    expected.extend(std::iter::repeat_n("response.output_text.delta", deltas));
    expected.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(names, expected);
    for (n, event) in events.iter().enumerate() {
        assert_eq!(event["sequence_number"], n, "{event}");
    }
    let item = &events[2]["item"];
    assert_eq!(
        (&item["type"], &item["status"], &item["content"]),
        (&json!("message"), &json!("in_progress"), &json!([]))
    );
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| {
            assert_eq!(
                (&e["item_id"], &e["output_index"]),
                (&item["id"], &json!(0))
            );
            e["delta"].as_str().unwrap_or_default()
        })
        .collect();
    let done = &events[deltas + 4];
    assert_eq!(done["text"], text.as_str());
    let completed = &events[events.len() - 1]["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["output"][0]["content"][0]["text"], text.as_str());
    assert_eq!(events[events.len() - 2]["item"], completed["output"][0]);

    // Cut by `max_output_tokens`, the answer is incomplete, as OpenAI reports it.
    let mut short = body.clone();
    short["max_output_tokens"] = json!(2);
    let events = streamed(&http, "/v1/responses", &short).await?;
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(
        last["response"]["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    Ok(())
}

const WEATHER: &str = r#"{"type": "object", "required": ["city"],
    "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}"#;

#[tokio::test]
async fn a_forced_tool_call_is_answered_whole_and_streamed() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let schema: Value = serde_json::from_str(WEATHER)?;
    let mut chat = chat_body(SMALL, "weather in Paris?");
    chat["tools"] =
        json!([{"type": "function", "function": {"name": "weather", "parameters": schema}}]);
    chat["tool_choice"] = json!("required");
    let whole = http.chat(&chat).await?.json()?;
    let choice = &whole["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(
        (
            &choice["message"]["content"],
            &call["type"],
            &call["function"]["name"]
        ),
        (&Value::Null, &json!("function"), &json!("weather"))
    );
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or_default())?;
    assert!(arguments["city"].is_string(), "{arguments}");

    chat["stream"] = json!(true);
    let events = streamed(&http, "/v1/chat/completions", &chat).await?;
    let first = &events[0]["choices"][0]["delta"];
    assert_eq!(
        first["tool_calls"][0]["function"],
        json!({"name": "weather", "arguments": ""})
    );
    assert!(first["tool_calls"][0]["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("call_")));
    let streamed_arguments: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        Some(streamed_arguments.as_str()),
        call["function"]["arguments"].as_str()
    );
    let finish: Vec<&Value> = events
        .iter()
        .map(|e| &e["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, [&json!("tool_calls")]);

    // Responses names the function in `tool_choice` itself.
    let schema: Value = serde_json::from_str(WEATHER)?;
    let body = json!({"model": SMALL, "input": "weather?", "stream": true,
        "tools": [{"type": "function", "name": "weather", "parameters": schema}],
        "tool_choice": {"type": "function", "name": "weather"}});
    let events = streamed(&http, "/v1/responses", &body).await?;
    let names = types(&events);
    assert_eq!(
        names[..3],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added"
        ]
    );
    assert!(
        names.contains(&"response.function_call_arguments.delta"),
        "{names:?}"
    );
    let tail = &names[names.len() - 3..];
    assert_eq!(
        tail,
        [
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let item = &events[events.len() - 1]["response"]["output"][0];
    assert_eq!(
        (&item["type"], &item["name"]),
        (&json!("function_call"), &json!("weather"))
    );
    assert!(item["call_id"]
        .as_str()
        .is_some_and(|id| id.starts_with("call_")));

    // Naming a function `tools` does not have is the client's mistake.
    let mut unknown = chat_body(SMALL, "x");
    unknown["tool_choice"] = json!({"type": "function", "function": {"name": "nope"}});
    let refused = http.chat(&unknown).await?;
    assert_eq!(refused.status, 400, "{}", refused.text());
    Ok(())
}

#[tokio::test]
async fn n_answers_with_that_many_choices_and_stop_ends_the_text() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let mut body = chat_body(SMALL, "name some words");
    body["n"] = json!(3);
    let whole = http.chat(&body).await?.json()?;
    let choices = whole["choices"].as_array().cloned().unwrap_or_default();
    assert_eq!(choices.len(), 3, "{whole}");
    for (i, choice) in choices.iter().enumerate() {
        assert_eq!(choice["index"], i);
    }
    let total: usize = choices
        .iter()
        .map(|c| {
            c["message"]["content"]
                .as_str()
                .unwrap_or("")
                .split(' ')
                .count()
        })
        .sum();
    assert_eq!(whole["usage"]["completion_tokens"], total);

    body["stream"] = json!(true);
    let events = streamed(&http, "/v1/chat/completions", &body).await?;
    for (i, choice) in choices.iter().enumerate() {
        let text: String = events
            .iter()
            .filter_map(|e| e["choices"].as_array()?.first().cloned())
            .filter(|c| c["index"] == i)
            .filter_map(|c| c["delta"]["content"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(Some(text.as_str()), choice["message"]["content"].as_str());
    }

    // `stop` ends the text before the sequence, which is not sent.
    let plain = http
        .chat(&chat_body(SMALL, "name some words"))
        .await?
        .json()?;
    let text = plain["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let word = text
        .split(' ')
        .nth(1)
        .ok_or("a one-word answer")?
        .to_owned();
    let mut stopped = chat_body(SMALL, "name some words");
    stopped["stop"] = json!([format!(" {word}")]);
    let stopped = http.chat(&stopped).await?.json()?;
    let choice = &stopped["choices"][0];
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(
        choice["message"]["content"],
        text.split(' ').next().unwrap_or("")
    );
    Ok(())
}

#[tokio::test]
async fn ids_never_repeat_across_restarts() -> TestResult {
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (sim, http) = sim(config()).await?;
        for _ in 0..2 {
            let body = json!({"model": SMALL, "input": "hello"});
            let answer = http
                .call("POST", "/v1/responses", &[], body.to_string())
                .await?;
            ids.push(answer.json()?["id"].as_str().unwrap_or_default().to_owned());
        }
        sim.shutdown().await?;
    }
    let distinct: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "{ids:?}");
    assert!(ids.iter().all(|id| id.starts_with("resp_")), "{ids:?}");
    Ok(())
}
