//! The labelled file: one JSON object a line, a request (`prompt` or a chat/responses body under
//! `request`) with what it should get (`route`, and/or `signals` with a bool per signal).
//!
//! Only the shape is read here; whether the named routes and signals exist is the policy's
//! business (see `mod.rs`), so every error still names its line.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value as Json;
use src_compiler::request::RequestView;
use std::collections::BTreeMap;
use std::path::Path;

/// One labelled request.
#[derive(Debug, Clone)]
pub struct Labelled {
    /// 1-based line in the file.
    pub line: usize,
    pub request: RequestView,
    /// The route the request should take.
    pub route: Option<String>,
    /// The value each named signal should have.
    pub signals: BTreeMap<String, bool>,
}

/// Reads every non-blank line of `path`.
pub fn read(path: &Path) -> Result<Vec<Labelled>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    let rows = parse(&text).with_context(|| format!("`{}`", path.display()))?;
    if rows.is_empty() {
        bail!("`{}` holds no labelled requests", path.display());
    }
    Ok(rows)
}

/// Parses the text of a labelled file.
pub fn parse(text: &str) -> Result<Vec<Labelled>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            parse_line(l)
                .with_context(|| format!("line {}", i + 1))
                .map(|mut row| {
                    row.line = i + 1;
                    row
                })
        })
        .collect()
}

fn parse_line(line: &str) -> Result<Labelled> {
    let value: Json = serde_json::from_str(line).map_err(|e| anyhow!("not JSON: {e}"))?;
    let Json::Object(map) = value else {
        bail!("expected a JSON object");
    };
    if let Some(key) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "prompt" | "request" | "route" | "signals"))
    {
        bail!("unknown key `{key}` (expected `prompt` or `request`, `route`, `signals`)");
    }
    let request = match (map.get("prompt"), map.get("request")) {
        (Some(_), Some(_)) => bail!("give `prompt` or `request`, not both"),
        (Some(Json::String(p)), None) => RequestView::from_prompt(p, None, &[]),
        (Some(_), None) => bail!("`prompt` must be a string"),
        (None, Some(body)) => {
            src_compiler::explain::read_body(body, &[], None)
                .map_err(|e| anyhow!("`request` is not a valid request: {e}"))?
                .0
        }
        (None, None) => bail!("a labelled request needs `prompt` or `request`"),
    };
    let route = match map.get("route") {
        None => None,
        Some(Json::String(r)) if !r.is_empty() => Some(r.clone()),
        Some(_) => bail!("`route` must be a route name"),
    };
    let mut signals = BTreeMap::new();
    match map.get("signals") {
        None => {}
        Some(Json::Object(s)) => {
            for (name, v) in s {
                let Json::Bool(b) = v else {
                    bail!("`signals.{name}` must be true or false");
                };
                signals.insert(name.clone(), *b);
            }
        }
        Some(_) => bail!("`signals` must be an object of signal names to true or false"),
    }
    if route.is_none() && signals.is_empty() {
        bail!("a labelled request needs `route` or `signals`");
    }
    Ok(Labelled {
        line: 0,
        request,
        route,
        signals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_requests_and_labels_are_read() {
        let rows = parse(concat!(
            "{\"prompt\": \"hi\", \"route\": \"chat\"}\n",
            "\n",
            "{\"request\": {\"messages\": [{\"role\": \"user\", \"content\": \"fix it\"}]}, ",
            "\"signals\": {\"code\": true}}\n",
        ))
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].route.as_deref(), Some("chat"));
        assert_eq!(rows[1].line, 3);
        assert_eq!(rows[1].request.prompt, "fix it");
        assert_eq!(rows[1].signals.get("code"), Some(&true));
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, needle) in [
            ("{\"prompt\": \"x\"}", "needs `route` or `signals`"),
            ("{\"prompt\": 3, \"route\": \"a\"}", "must be a string"),
            ("{\"route\": \"a\"}", "needs `prompt` or `request`"),
            ("not json", "not JSON"),
            (
                "{\"prompt\": \"x\", \"signals\": {\"a\": 1}}",
                "true or false",
            ),
            ("{\"prompt\": \"x\", \"rout\": \"a\"}", "unknown key `rout`"),
        ] {
            let err = parse(&format!(
                "{{\"prompt\": \"ok\", \"route\": \"a\"}}\n{text}\n"
            ))
            .unwrap_err();
            let shown = format!("{err:#}");
            assert!(shown.starts_with("line 2: "), "{shown}");
            assert!(shown.contains(needle), "{shown}");
        }
    }
}
