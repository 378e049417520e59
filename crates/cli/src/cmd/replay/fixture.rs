//! Session fixtures (docs/replay.md): agent sessions, each a list of turns whose `request` is a
//! whole chat completion (or `/v1/responses`) body, with the optional `difficulty` that
//! `src eval` reads and the `expect` assertions that `src replay` checks.
//!
//! A fixture is read strictly: an unknown key, a wrong type or a request body the router could
//! not read is refused with the JSON path of the offending value, because a fixture that
//! silently drops a turn or an assertion would report a pass it never checked. Request bodies
//! are read with the router's own reader ([`RequestView`]), so a fixture's idea of "inside a
//! tool loop" is the policy's `request.tool_loop`.

use serde_json::{Map, Value};
use src_compiler::request::RequestView;
use std::collections::HashMap;
use std::path::Path;

/// The fixture format version this reader understands.
pub const VERSION: u64 = 1;

/// A whole fixture.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub sessions: Vec<Session>,
}

/// One agent session: turns sent in order under one session identity.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    /// Extra request headers for every turn (names lowercased).
    pub headers: Vec<(String, String)>,
    pub turns: Vec<Turn>,
}

/// Which OpenAI API a turn's body is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Chat,
    Responses,
}

impl Api {
    /// The path under the base URL.
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/chat/completions",
            Api::Responses => "/responses",
        }
    }
}

/// How hard a turn is, for the simulated quality model of `src eval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Difficulty {
    #[default]
    Easy,
    Hard,
}

impl Difficulty {
    pub fn as_str(self) -> &'static str {
        match self {
            Difficulty::Easy => "easy",
            Difficulty::Hard => "hard",
        }
    }
}

/// What must hold of a turn's answer; every key is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expect {
    /// The deciding route (`x-sr-route`).
    pub route: Option<String>,
    /// The logical model (`x-sr-model`; the body's served model when the answer has no
    /// routing headers).
    pub model: Option<String>,
    /// Whether the turn is answered by the model of the turn before it.
    pub same_model_as_previous: Option<bool>,
}

/// One call of a session.
#[derive(Debug, Clone)]
pub struct Turn {
    pub api: Api,
    /// The request body, sent as it is.
    pub request: Value,
    /// The facts the router reads from this body.
    pub view: RequestView,
    pub difficulty: Difficulty,
    pub expect: Expect,
}

impl Turn {
    /// Whether the request is inside a tool loop (`request.tool_loop`).
    pub fn tool_loop(&self) -> bool {
        self.view.tool_loop
    }

    /// Whether the request asks for a streamed answer.
    pub fn stream(&self) -> bool {
        self.view.stream
    }
}

/// Why a fixture was refused: the JSON path of the offending value and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FixtureError {
    pub path: String,
    pub message: String,
}

fn error(path: &str, message: impl Into<String>) -> FixtureError {
    FixtureError {
        path: if path.is_empty() {
            "$".into()
        } else {
            path.into()
        },
        message: message.into(),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, FixtureError> {
    value
        .as_object()
        .ok_or_else(|| error(path, format!("must be an object, found {}", kind(value))))
}

/// Refuses keys outside `allowed`: a misspelt `expect` key must not pass unchecked.
fn known_keys(obj: &Map<String, Value>, path: &str, allowed: &[&str]) -> Result<(), FixtureError> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(error(
            &join(path, key),
            format!("unknown key; expected one of {}", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

fn string(value: &Value, path: &str) -> Result<String, FixtureError> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| error(path, format!("must be a string, found {}", kind(value))))
}

fn optional_string(
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<String>, FixtureError> {
    obj.get(key)
        .map(|v| string(v, &join(path, key)))
        .transpose()
}

/// Reads the fixture file at `path`.
pub fn read(path: &Path) -> Result<Fixture, FixtureError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| error("$", format!("cannot read `{}`: {e}", path.display())))?;
    parse(&text)
}

/// Reads a fixture from its JSON text.
pub fn parse(text: &str) -> Result<Fixture, FixtureError> {
    let root: Value = serde_json::from_str(text).map_err(|e| {
        error(
            "$",
            format!(
                "not valid JSON (line {}, column {}): {e}",
                e.line(),
                e.column()
            ),
        )
    })?;
    let obj = object(&root, "")?;
    known_keys(obj, "", &["version", "sessions"])?;
    match obj.get("version") {
        None => return Err(error("version", "is missing")),
        Some(v) if v.as_u64() == Some(VERSION) => {}
        Some(v) => return Err(error("version", format!("must be {VERSION}, found {}", v))),
    }
    let sessions = match obj.get("sessions") {
        None => return Err(error("sessions", "is missing")),
        Some(Value::Array(s)) => s,
        Some(other) => {
            return Err(error(
                "sessions",
                format!("must be an array, found {}", kind(other)),
            ))
        }
    };
    if sessions.is_empty() {
        return Err(error("sessions", "must list at least one session"));
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::with_capacity(sessions.len());
    for (i, session) in sessions.iter().enumerate() {
        let path = format!("sessions[{i}]");
        let session = read_session(session, &path)?;
        if let Some(first) = seen.insert(session.id.clone(), i) {
            return Err(error(
                &join(&path, "id"),
                format!("`{}` is also the id of sessions[{first}]", session.id),
            ));
        }
        out.push(session);
    }
    Ok(Fixture { sessions: out })
}

fn read_session(value: &Value, path: &str) -> Result<Session, FixtureError> {
    let obj = object(value, path)?;
    known_keys(obj, path, &["id", "headers", "turns"])?;
    let id = match obj.get("id") {
        None => return Err(error(&join(path, "id"), "is missing")),
        Some(v) => string(v, &join(path, "id"))?,
    };
    if id.is_empty() {
        return Err(error(&join(path, "id"), "must not be empty"));
    }
    let mut headers = Vec::new();
    if let Some(h) = obj.get("headers") {
        let hpath = join(path, "headers");
        for (name, value) in object(h, &hpath)? {
            let vpath = join(&hpath, name);
            let value = string(value, &vpath)?;
            if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(error(&vpath, "is not a valid header name"));
            }
            if hyper::header::HeaderValue::from_str(&value).is_err() {
                return Err(error(&vpath, "is not a valid header value"));
            }
            headers.push((name.to_ascii_lowercase(), value));
        }
    }
    let tpath = join(path, "turns");
    let turns = match obj.get("turns") {
        None => return Err(error(&tpath, "is missing")),
        Some(Value::Array(t)) => t,
        Some(other) => {
            return Err(error(
                &tpath,
                format!("must be an array, found {}", kind(other)),
            ))
        }
    };
    if turns.is_empty() {
        return Err(error(&tpath, "must list at least one turn"));
    }
    let turns = turns
        .iter()
        .enumerate()
        .map(|(i, t)| read_turn(t, &format!("{tpath}[{i}]"), &headers))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Session { id, headers, turns })
}

fn read_turn(
    value: &Value,
    path: &str,
    headers: &[(String, String)],
) -> Result<Turn, FixtureError> {
    let obj = object(value, path)?;
    known_keys(obj, path, &["request", "api", "difficulty", "expect"])?;
    let api = match optional_string(obj, "api", path)?.as_deref() {
        None | Some("chat") => Api::Chat,
        Some("responses") => Api::Responses,
        Some(other) => {
            return Err(error(
                &join(path, "api"),
                format!("must be `chat` or `responses`, found `{other}`"),
            ))
        }
    };
    let difficulty = match optional_string(obj, "difficulty", path)?.as_deref() {
        None | Some("easy") => Difficulty::Easy,
        Some("hard") => Difficulty::Hard,
        Some(other) => {
            return Err(error(
                &join(path, "difficulty"),
                format!("must be `easy` or `hard`, found `{other}`"),
            ))
        }
    };
    let rpath = join(path, "request");
    let request = obj
        .get("request")
        .ok_or_else(|| error(&rpath, "is missing"))?
        .clone();
    object(&request, &rpath)?;
    let view = match api {
        Api::Chat => RequestView::from_chat(&request, headers),
        Api::Responses => RequestView::from_responses(&request, headers),
    }
    .map_err(|e| match e.path() {
        Some(inner) => error(&join(&rpath, inner), e.to_string()),
        None => error(&rpath, e.to_string()),
    })?;
    let expect = match obj.get("expect") {
        None => Expect::default(),
        Some(e) => read_expect(e, &join(path, "expect"))?,
    };
    Ok(Turn {
        api,
        request,
        view,
        difficulty,
        expect,
    })
}

fn read_expect(value: &Value, path: &str) -> Result<Expect, FixtureError> {
    let obj = object(value, path)?;
    known_keys(obj, path, &["route", "model", "same_model_as_previous"])?;
    let same = match obj.get("same_model_as_previous") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            return Err(error(
                &join(path, "same_model_as_previous"),
                format!("must be a boolean, found {}", kind(other)),
            ))
        }
    };
    Ok(Expect {
        route: optional_string(obj, "route", path)?,
        model: optional_string(obj, "model", path)?,
        same_model_as_previous: same,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        match parse(text) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.path,
        }
    }

    const TURN: &str =
        r#"{"request": {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}}"#;

    #[test]
    fn a_good_fixture_reads_with_its_tool_loops() {
        let text = r#"{"version": 1, "sessions": [{"id": "a", "headers": {"X-Tenant": "acme"},
            "turns": [
              {"request": {"model": "auto", "messages": [{"role": "user", "content": "fix it"}]},
               "difficulty": "hard", "expect": {"route": "coding", "same_model_as_previous": true}},
              {"request": {"model": "auto", "messages": [
                 {"role": "user", "content": "fix it"},
                 {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                   "function": {"name": "run", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}}]}]}"#;
        let fixture = parse(text).unwrap();
        let session = &fixture.sessions[0];
        assert_eq!(session.headers, vec![("x-tenant".into(), "acme".into())]);
        assert_eq!(session.turns[0].difficulty, Difficulty::Hard);
        assert_eq!(session.turns[0].expect.route.as_deref(), Some("coding"));
        assert!(!session.turns[0].tool_loop());
        assert!(session.turns[1].tool_loop());
        assert_eq!(session.turns[1].difficulty, Difficulty::Easy);
    }

    #[test]
    fn malformed_fixtures_name_the_json_path() {
        assert_eq!(refused("[1]"), "$");
        assert_eq!(refused(r#"{"sessions": []}"#), "version");
        assert_eq!(refused(r#"{"version": 2, "sessions": []}"#), "version");
        assert_eq!(refused(r#"{"version": 1, "sessions": []}"#), "sessions");
        assert_eq!(
            refused(&format!(
                r#"{{"version": 1, "sessions": [{{"id": "a", "turns": [{TURN}, {{"request": {{"model": "auto", "messages": [{{"role": 7}}]}}}}]}}]}}"#
            )),
            "sessions[0].turns[1].request.messages[0].role"
        );
        assert_eq!(
            refused(&format!(
                r#"{{"version": 1, "sessions": [{{"id": "a", "turns": [{TURN}]}}, {{"id": "b", "turns": [{{"request": {{"model": "auto", "messages": [{{"role": "user", "content": "hi"}}]}}, "expect": {{"modle": "x"}}}}]}}]}}"#
            )),
            "sessions[1].turns[0].expect.modle"
        );
        assert_eq!(
            refused(&format!(
                r#"{{"version": 1, "sessions": [{{"id": "a", "turns": [{TURN}]}}, {{"id": "a", "turns": [{TURN}]}}]}}"#
            )),
            "sessions[1].id"
        );
        assert_eq!(
            refused(
                r#"{"version": 1, "sessions": [{"id": "a", "turns": [{"request": {"messages": [{"role": "user", "content": "hi"}]}, "difficulty": "medium"}]}]}"#
            ),
            "sessions[0].turns[0].difficulty"
        );
    }
}
