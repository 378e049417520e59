//! Reading chat-completions and responses requests into the few facts the simulator uses: the
//! rendered prompt, streaming and usage, the token limit, and what shapes the answer as a real
//! server's would be shaped (chat's `n` and `stop`; a `tool_choice` that forces a call).
//!
//! The prompt is rendered so that earlier messages render identically whatever follows them:
//! a conversation that grows by a turn keeps its rendered prefix, which is what makes the prefix
//! cache hit on multi-turn traffic, as a real backend's would.

use serde_json::Value;

use crate::openai::ApiError;

/// Which endpoint a request came to, and so which dialect its answer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    ChatCompletions,
    Responses,
}

/// What the simulator needs from a generation request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GenerateRequest {
    pub api: Api,
    pub model: String,
    pub prompt: String,
    pub stream: bool,
    pub include_usage: bool,
    pub max_tokens: Option<u32>,
    /// Choices to answer with (chat's `n`; 1 otherwise).
    pub n: u32,
    /// Sequences a text answer ends before (chat's `stop`).
    pub stop: Vec<String>,
    /// The function the model must call: `tool_choice` `required` (the first function of
    /// `tools`) or a named function.
    pub call: Option<ForcedCall>,
}

/// A function the request makes the model call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ForcedCall {
    pub name: String,
    /// Its JSON Schema, which the call's arguments fit.
    pub parameters: Value,
}

/// The most choices one request may ask for, as OpenAI's API allows.
const MAX_CHOICES: u64 = 128;
/// The most stop sequences, as OpenAI's API allows.
const MAX_STOPS: usize = 4;

impl GenerateRequest {
    pub(crate) fn parse(api: Api, body: &[u8]) -> Result<GenerateRequest, ApiError> {
        let value: Value = serde_json::from_slice(body).map_err(ApiError::invalid_json)?;
        if !value.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        let model = match value.get("model") {
            Some(Value::String(model)) => model.clone(),
            Some(_) => {
                return Err(ApiError::bad_request("`model` must be a string").with_param("model"))
            }
            None => return Err(ApiError::bad_request("`model` is required").with_param("model")),
        };
        let stream = flag(&value, "stream")?;
        let (prompt, max_tokens, include_usage) = match api {
            Api::ChatCompletions => {
                let prompt = render_messages(value.get("messages"))?;
                let max_tokens = token_limit(&value, &["max_completion_tokens", "max_tokens"])?;
                let include_usage = value
                    .get("stream_options")
                    .and_then(|o| o.get("include_usage"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                (prompt, max_tokens, include_usage)
            }
            // The responses API always reports usage in `response.completed`.
            Api::Responses => (
                render_input(&value)?,
                token_limit(&value, &["max_output_tokens"])?,
                true,
            ),
        };
        let (n, stop) = match api {
            Api::ChatCompletions => (choices(&value)?, stops(&value)?),
            Api::Responses => (1, Vec::new()),
        };
        Ok(GenerateRequest {
            api,
            model,
            prompt,
            stream,
            include_usage,
            max_tokens,
            n,
            stop,
            call: forced_call(api, &value)?,
        })
    }

    /// A one-message request for `model` with nothing else set.
    #[cfg(test)]
    pub(crate) fn of_prompt(model: &str, prompt: &str, max_tokens: Option<u32>) -> Self {
        GenerateRequest {
            api: Api::ChatCompletions,
            model: model.to_owned(),
            prompt: prompt.to_owned(),
            stream: false,
            include_usage: false,
            max_tokens,
            n: 1,
            stop: Vec::new(),
            call: None,
        }
    }
}

/// Chat's `n`: 1 to [`MAX_CHOICES`], 1 when absent.
fn choices(value: &Value) -> Result<u32, ApiError> {
    match value.get("n") {
        None | Some(Value::Null) => Ok(1),
        Some(n) => match n.as_u64().filter(|n| (1..=MAX_CHOICES).contains(n)) {
            Some(n) => Ok(u32::try_from(n).unwrap_or(1)),
            None => Err(ApiError::bad_request(format!(
                "`n` must be an integer from 1 to {MAX_CHOICES}"
            ))
            .with_param("n")),
        },
    }
}

/// Chat's `stop`: a string or up to [`MAX_STOPS`] strings.
fn stops(value: &Value) -> Result<Vec<String>, ApiError> {
    let wrong = || {
        ApiError::bad_request(format!(
            "`stop` must be a string or an array of up to {MAX_STOPS} strings"
        ))
        .with_param("stop")
    };
    match value.get("stop") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(stop)) => Ok(vec![stop.clone()]),
        Some(Value::Array(stops)) if stops.len() <= MAX_STOPS => stops
            .iter()
            .map(|s| s.as_str().map(str::to_owned).ok_or_else(wrong))
            .collect(),
        Some(_) => Err(wrong()),
    }
}

/// The call `tool_choice` forces: `required` calls the first function of `tools`, a named
/// function that one (chat names it in `function.name`, Responses in `name`); `auto`, `none`
/// or no choice let the model answer in text, which the simulator always does.
fn forced_call(api: Api, value: &Value) -> Result<Option<ForcedCall>, ApiError> {
    let functions: Vec<(&str, &Value)> = value
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| t.get("type").and_then(Value::as_str) == Some("function"))
        .filter_map(|t| {
            let function = match api {
                Api::ChatCompletions => t.get("function")?,
                Api::Responses => t,
            };
            let name = function.get("name")?.as_str()?;
            Some((name, function.get("parameters").unwrap_or(&Value::Null)))
        })
        .collect();
    let wanted = match value.get("tool_choice") {
        Some(Value::String(mode)) if mode == "required" => None,
        Some(Value::Object(choice))
            if choice.get("type").and_then(Value::as_str) == Some("function") =>
        {
            let name = match api {
                Api::ChatCompletions => choice.get("function").and_then(|f| f.get("name")),
                Api::Responses => choice.get("name"),
            };
            match name.and_then(Value::as_str) {
                Some(name) => Some(name),
                None => {
                    return Err(
                        ApiError::bad_request("`tool_choice` must name its function")
                            .with_param("tool_choice"),
                    )
                }
            }
        }
        _ => return Ok(None),
    };
    let found = match wanted {
        None => functions.first(),
        Some(name) => functions.iter().find(|(n, _)| *n == name),
    };
    match found {
        Some((name, parameters)) => Ok(Some(ForcedCall {
            name: (*name).to_owned(),
            parameters: (*parameters).clone(),
        })),
        None => Err(ApiError::bad_request(match wanted {
            Some(name) => {
                format!("`tool_choice` names the function `{name}`, which `tools` does not have")
            }
            None => "`tool_choice` is `required`, but `tools` has no function".to_owned(),
        })
        .with_param("tool_choice")),
    }
}

fn flag(value: &Value, name: &str) -> Result<bool, ApiError> {
    match value.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(flag)) => Ok(*flag),
        Some(_) => {
            Err(ApiError::bad_request(format!("`{name}` must be a boolean")).with_param(name))
        }
    }
}

fn token_limit(value: &Value, names: &[&str]) -> Result<Option<u32>, ApiError> {
    for name in names {
        match value.get(*name) {
            None | Some(Value::Null) => continue,
            Some(limit) => {
                return match limit.as_u64().and_then(|n| u32::try_from(n).ok()) {
                    Some(n) if n >= 1 => Ok(Some(n)),
                    _ => Err(ApiError::bad_request(format!(
                        "`{name}` must be an integer of at least 1"
                    ))
                    .with_param(*name)),
                };
            }
        }
    }
    Ok(None)
}

fn render_messages(messages: Option<&Value>) -> Result<String, ApiError> {
    let messages = match messages {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        Some(Value::Array(_)) => {
            return Err(ApiError::bad_request("`messages` must not be empty").with_param("messages"))
        }
        Some(_) => {
            return Err(ApiError::bad_request("`messages` must be an array").with_param("messages"))
        }
        None => return Err(ApiError::bad_request("`messages` is required").with_param("messages")),
    };
    let mut prompt = String::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).ok_or_else(|| {
            ApiError::bad_request(format!("`messages[{index}].role` must be a string"))
                .with_param(format!("messages[{index}].role"))
        })?;
        render_turn(&mut prompt, role, message.get("content"));
    }
    Ok(prompt)
}

fn render_input(value: &Value) -> Result<String, ApiError> {
    let mut prompt = String::new();
    if let Some(instructions) = value.get("instructions").and_then(Value::as_str) {
        render_turn(
            &mut prompt,
            "system",
            Some(&Value::String(instructions.to_owned())),
        );
    }
    match value.get("input") {
        Some(Value::String(text)) => {
            render_turn(&mut prompt, "user", Some(&Value::String(text.clone())))
        }
        Some(Value::Array(items)) => {
            for item in items {
                let role = item.get("role").and_then(Value::as_str).unwrap_or("user");
                render_turn(&mut prompt, role, item.get("content"));
            }
        }
        Some(_) => {
            return Err(
                ApiError::bad_request("`input` must be a string or an array").with_param("input"),
            )
        }
        None => return Err(ApiError::bad_request("`input` is required").with_param("input")),
    }
    Ok(prompt)
}

/// ChatML-like framing; content parts contribute their text, other parts a fixed marker.
fn render_turn(prompt: &mut String, role: &str, content: Option<&Value>) {
    prompt.push_str("<|im_start|>");
    prompt.push_str(role);
    prompt.push('\n');
    match content {
        Some(Value::String(text)) => prompt.push_str(text),
        Some(Value::Array(parts)) => {
            for part in parts {
                match part.get("text").and_then(Value::as_str) {
                    Some(text) => prompt.push_str(text),
                    None => prompt.push_str("<|part|>"),
                }
            }
        }
        _ => {}
    }
    prompt.push_str("<|im_end|>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_request_fields() -> Result<(), ApiError> {
        let body = br#"{"model":"m","stream":true,"stream_options":{"include_usage":true},
            "max_tokens":5,"messages":[{"role":"system","content":"be brief"},
            {"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url"}]}]}"#;
        let request = GenerateRequest::parse(Api::ChatCompletions, body)?;
        assert_eq!(request.model, "m");
        assert!(request.stream && request.include_usage);
        assert_eq!(request.max_tokens, Some(5));
        assert_eq!(
            request.prompt,
            "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|part|><|im_end|>\n"
        );
        Ok(())
    }

    #[test]
    fn a_longer_conversation_extends_the_rendered_prefix() -> Result<(), ApiError> {
        let one = br#"{"model":"m","messages":[{"role":"user","content":"a"}]}"#;
        let two = br#"{"model":"m","messages":[{"role":"user","content":"a"},
            {"role":"assistant","content":"b"}]}"#;
        let one = GenerateRequest::parse(Api::ChatCompletions, one)?.prompt;
        let two = GenerateRequest::parse(Api::ChatCompletions, two)?.prompt;
        assert!(two.starts_with(&one) && two.len() > one.len());
        Ok(())
    }

    #[test]
    fn responses_input_forms() -> Result<(), ApiError> {
        let text = GenerateRequest::parse(
            Api::Responses,
            br#"{"model":"m","input":"hi","instructions":"x","max_output_tokens":3}"#,
        )?;
        assert_eq!(text.max_tokens, Some(3));
        assert!(text.include_usage && !text.stream);
        let items = GenerateRequest::parse(Api::Responses, br#"{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}"#)?;
        assert!(text.prompt.ends_with(&items.prompt));
        Ok(())
    }

    #[test]
    fn choices_stops_and_forced_calls() -> Result<(), ApiError> {
        let chat = GenerateRequest::parse(
            Api::ChatCompletions,
            br#"{"model":"m","n":3,"stop":"zulu","messages":[{"role":"user","content":"hi"}],
            "tools":[{"type":"function","function":{"name":"a"}},
                     {"type":"function","function":{"name":"b","parameters":{"type":"object"}}}],
            "tool_choice":{"type":"function","function":{"name":"b"}}}"#,
        )?;
        assert_eq!(
            (chat.n, chat.stop.as_slice()),
            (3, &["zulu".to_owned()][..])
        );
        assert_eq!(chat.call.map(|c| c.name).as_deref(), Some("b"));
        let responses = GenerateRequest::parse(
            Api::Responses,
            br#"{"model":"m","input":"hi","tools":[{"type":"function","name":"w"}],"tool_choice":"required"}"#,
        )?;
        assert_eq!(responses.call.map(|c| c.name).as_deref(), Some("w"));
        let auto = GenerateRequest::parse(
            Api::Responses,
            br#"{"model":"m","input":"hi","tools":[{"type":"function","name":"w"}],"tool_choice":"auto"}"#,
        )?;
        assert_eq!(auto.call, None);
        Ok(())
    }

    #[test]
    fn malformed_requests_name_the_field() {
        let param = |api, body: &[u8]| {
            GenerateRequest::parse(api, body)
                .err()
                .and_then(|e| e.body.error.param)
        };
        let chat = Api::ChatCompletions;
        assert_eq!(param(chat, br#"{"messages":[]}"#).as_deref(), Some("model"));
        assert_eq!(param(chat, br#"{"model":1}"#).as_deref(), Some("model"));
        assert_eq!(
            param(chat, br#"{"model":"m"}"#).as_deref(),
            Some("messages")
        );
        assert_eq!(
            param(chat, br#"{"model":"m","messages":[]}"#).as_deref(),
            Some("messages")
        );
        assert_eq!(
            param(chat, br#"{"model":"m","messages":[{"content":"x"}]}"#).as_deref(),
            Some("messages[0].role")
        );
        assert_eq!(
            param(
                chat,
                br#"{"model":"m","max_tokens":0,"messages":[{"role":"user"}]}"#
            )
            .as_deref(),
            Some("max_tokens")
        );
        assert_eq!(
            param(
                chat,
                br#"{"model":"m","stream":"yes","messages":[{"role":"user"}]}"#
            )
            .as_deref(),
            Some("stream")
        );
        assert_eq!(
            param(Api::Responses, br#"{"model":"m"}"#).as_deref(),
            Some("input")
        );
        let base = r#""model":"m","messages":[{"role":"user","content":"x"}]"#;
        for (extra, field) in [
            (r#""n":0"#, "n"),
            (r#""stop":[1]"#, "stop"),
            (r#""stop":["a","b","c","d","e"]"#, "stop"),
            (r#""tool_choice":"required""#, "tool_choice"),
            (
                r#""tools":[],"tool_choice":{"type":"function","function":{"name":"f"}}"#,
                "tool_choice",
            ),
        ] {
            let body = format!("{{{base},{extra}}}");
            assert_eq!(
                param(chat, body.as_bytes()).as_deref(),
                Some(field),
                "{extra}"
            );
        }
        let not_json = GenerateRequest::parse(chat, b"{oops").err();
        assert_eq!(
            not_json.and_then(|e| e.body.error.code).as_deref(),
            Some("invalid_json")
        );
    }
}
