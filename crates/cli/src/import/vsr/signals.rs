//! A recipe's `SIGNAL`s as `.sr` signals. Cheap ones become expressions over the request
//! (keyword methods onto `contains`/`matches`/`fuzzy`/`bm25`, context onto `tokens`, language,
//! structure and conversation shapes, authz onto `header`, PII onto the built-in recognizers);
//! model-backed ones become declarations whose model paths are placeholders (`domain` → one
//! `classifier` with every domain as a label, a knowledge base's best match → a `classifier`
//! over its labels, `jailbreak` → a `guard`, `embedding` → one `encoder` and `similarity` over
//! the candidates). The rest is reported.

use super::syntax::{get, Signal, Val};
use crate::import::emit::{comment, float, quote, quote_list, Names};
use crate::import::Translation;
use std::collections::HashMap;
use std::fmt::Write as _;

/// What one recipe signal became.
#[derive(Debug, Clone)]
pub struct Sig {
    /// The `.sr` signal (a bool).
    pub ident: String,
    /// For a model-backed signal, the `given` that makes it hold: (signal, value).
    pub given: Option<(String, String)>,
}

#[derive(Debug, Default)]
pub struct Signals {
    /// (type, name) as the recipe refers to them → the translation.
    pub map: HashMap<(String, String), Sig>,
    /// The declarations, in `.sr`.
    pub text: String,
    /// The sentence encoder the embedding signals use, when there are some.
    pub encoder: Option<String>,
}

/// The recognizers of `pii(..)`, by the names vLLM Semantic Router's PII model uses.
const PII_TYPES: &[(&str, &str)] = &[
    ("EMAIL_ADDRESS", "email"),
    ("PHONE_NUMBER", "phone"),
    ("CREDIT_CARD", "credit_card"),
    ("IBAN_CODE", "iban"),
    ("US_SSN", "us_ssn"),
    ("IP_ADDRESS", "ip_address"),
];

pub fn translate(
    file: &str,
    signals: &[Signal],
    names: &mut Names,
    out: &mut Translation,
) -> Signals {
    let mut s = Signals::default();
    let mut models = String::new();
    let domains: Vec<&Signal> = signals.iter().filter(|g| g.kind == "domain").collect();
    let domain = if domains.is_empty() {
        None
    } else {
        let classifier = names.fresh("domain_classifier");
        let signal = names.fresh("domain");
        let labels: Vec<String> = domains
            .iter()
            .map(|d| crate::import::emit::ident(&d.name))
            .collect();
        models.push_str(&comment(
            "",
            "DECIDE: a classifier over the recipe's domains (its `config.json` labels must be\n\
             these); build or fetch one and put it at this path (docs/models.md).",
        ));
        let _ = writeln!(
            models,
            "classifier {classifier} {{ path = \"models/domain\"  labels = [{}] }}",
            labels.join(", ")
        );
        let _ = writeln!(models, "signal {signal} = {classifier}(prompt)\n");
        Some(signal)
    };
    let kbs = knowledge_bases(signals, names, &mut models);
    // The router's feedback and fact-check detectors are classifiers over one turn: each is a
    // classifier with the detector's labels, and a signal per label the recipe names.
    let feedback = labelled(
        signals,
        "user_feedback",
        ("feedback_classifier", "feedback", "models/feedback"),
        &[
            "satisfied",
            "need_clarification",
            "wrong_answer",
            "want_different",
        ],
        names,
        &mut models,
    );
    let fact_check = labelled(
        signals,
        "fact_check",
        ("fact_check_classifier", "fact_check", "models/fact_check"),
        &[FACT_CHECK_NEEDED, "no_fact_check_needed"],
        names,
        &mut models,
    );
    let mut guard: Option<String> = None;
    let mut encoder: Option<String> = None;
    let mut body = String::new();
    for g in signals {
        let line = g.decl.line;
        let f = &g.decl.fields;
        let key = (g.kind.clone(), g.name.clone());
        let mut skip = |why: &str| {
            out.skip(file, line, format!("SIGNAL {} {}", g.kind, g.name), why);
        };
        let expr: Option<(String, Option<String>)> = match g.kind.as_str() {
            "keyword" => keyword(f).map_err(|why| skip(&why)).ok(),
            "context" => context(f),
            "language" => {
                let code = g.name.split(['-', '_']).next().unwrap_or("").to_lowercase();
                if code.len() == 2 && code.chars().all(|c| c.is_ascii_lowercase()) {
                    let mut e = format!("language(prompt) is {code}");
                    if let Some(t) = get(f, "threshold").and_then(Val::as_num) {
                        let _ = write!(e, " and language(prompt).confidence >= {}", float(t));
                    }
                    Some((e, None))
                } else {
                    skip("not an ISO 639-1 language code, which `language()` answers with");
                    None
                }
            }
            "structure" => structure(f).map_err(|why| skip(&why)).ok(),
            "conversation" => conversation(f).map_err(|why| skip(&why)).ok(),
            "authz" => authz(f).map_err(|why| skip(&why)).ok(),
            "metadata" => metadata(f).map_err(|why| skip(&why)).ok(),
            "pii" => {
                let allowed = get(f, "pii_types_allowed")
                    .map(Val::strings)
                    .unwrap_or_default();
                let types: Vec<&str> = PII_TYPES
                    .iter()
                    .filter(|(vsr, _)| !allowed.iter().any(|a| a == vsr))
                    .map(|(_, sr)| *sr)
                    .collect();
                let text = if get(f, "include_history") == Some(&Val::Bool(true)) {
                    "history"
                } else {
                    "prompt"
                };
                Some((
                    format!("pii({text}, {})", quote_list(&types)),
                    Some(
                        "DECIDE: the recipe ran a PII model; here the built-in recognizers find \
                         emails, phone numbers, cards, IBANs, US SSNs and IP addresses (not \
                         names or street addresses)."
                            .to_string(),
                    ),
                ))
            }
            "domain" => domain.as_ref().map(|d| {
                (
                    format!("{d} is {}", crate::import::emit::ident(&g.name)),
                    None,
                )
            }),
            "user_feedback" => feedback.as_ref().map(|c| {
                (
                    format!("{c} is {}", crate::import::emit::ident(&g.name)),
                    None,
                )
            }),
            "fact_check" => fact_check
                .as_ref()
                .map(|c| (format!("{c} is {FACT_CHECK_NEEDED}"), None)),
            "kb" => match kb_label(f) {
                Some(label) => {
                    let kb = get(f, "kb").and_then(Val::as_str).unwrap_or_default();
                    kbs.get(kb)
                        .map(|(_, signal)| (format!("{signal} is {label}"), None))
                }
                None => {
                    skip("only a knowledge base's best match (`match: \"best\"`) has a counterpart: a classifier's top label");
                    None
                }
            },
            "jailbreak" => {
                let guard = guard.get_or_insert_with(|| {
                    let name = names.fresh("jailbreak_guard");
                    models.push_str(&comment(
                        "",
                        "DECIDE: a prompt-injection guard; put its files at this path (docs/models.md).",
                    ));
                    let _ = writeln!(models, "guard {name} {{ path = \"models/jailbreak\" }}\n");
                    name
                });
                let t = get(f, "threshold").and_then(Val::as_num).unwrap_or(0.5);
                let text = if get(f, "include_history") == Some(&Val::Bool(true)) {
                    "history"
                } else {
                    "prompt"
                };
                let method = get(f, "method")
                    .and_then(Val::as_str)
                    .unwrap_or("classifier");
                let note = (method != "classifier").then(|| {
                    format!("DECIDE: the recipe detected jailbreaks by `{method}`; here a guard model scores them.")
                });
                Some((format!("{guard}({text}) >= {}", float(t)), note))
            }
            "embedding" => {
                let encoder = encoder.get_or_insert_with(|| {
                    let name = names.fresh("embedder");
                    models.push_str(&comment(
                        "",
                        "DECIDE: the sentence encoder the recipe's embedding signals used; put its\n\
                         files at this path (docs/models.md) and recalibrate the thresholds\n\
                         (`src calibrate`), which belong to the encoder they were chosen on.",
                    ));
                    let _ = writeln!(models, "encoder {name} {{ path = \"models/embedding\" }}\n");
                    name
                });
                let candidates = get(f, "candidates").map(Val::strings).unwrap_or_default();
                if candidates.is_empty() {
                    skip("an embedding signal without candidates");
                    None
                } else {
                    let t = get(f, "threshold").and_then(Val::as_num).unwrap_or(0.8);
                    let aggregation = get(f, "aggregation_method")
                        .and_then(Val::as_str)
                        .unwrap_or("max");
                    let note = (aggregation != "max").then(|| {
                        format!("DECIDE: the recipe aggregated by `{aggregation}`; `similarity` takes the best candidate.")
                    });
                    Some((
                        format!(
                            "similarity({encoder}, prompt, {}) >= {}",
                            quote_list(&candidates),
                            float(t)
                        ),
                        note,
                    ))
                }
            }
            other => {
                skip(&unsupported(other));
                None
            }
        };
        let Some((expr, note)) = expr else { continue };
        let ident = names.fresh(&g.name);
        if let Some(note) = note {
            body.push_str(&comment("", &note));
        }
        let _ = writeln!(body, "signal {ident} = {expr}");
        let given = match g.kind.as_str() {
            "domain" => domain
                .as_ref()
                .map(|d| (d.clone(), crate::import::emit::ident(&g.name))),
            "kb" => {
                let kb = get(f, "kb").and_then(Val::as_str).unwrap_or_default();
                kbs.get(kb)
                    .zip(kb_label(f))
                    .map(|((_, signal), label)| (signal.clone(), label))
            }
            "user_feedback" => feedback
                .as_ref()
                .map(|c| (c.clone(), crate::import::emit::ident(&g.name))),
            "fact_check" => fact_check
                .as_ref()
                .map(|c| (c.clone(), FACT_CHECK_NEEDED.to_string())),
            "jailbreak" | "embedding" => Some((ident.clone(), "true".to_string())),
            _ => None,
        };
        s.map.insert(key, Sig { ident, given });
    }
    s.text = format!("{models}{body}");
    s.encoder = encoder;
    s
}

/// Why a kind of signal has no counterpart.
fn unsupported(kind: &str) -> String {
    match kind {
        "reask" => "it compares the current user turn with the earlier ones (similarity over \
                    `lookback_turns`); a policy's signals compare the request's text with fixed \
                    examples, never turns with each other"
            .into(),
        "complexity" => "it scores difficulty between its `hard` and `easy` candidates with a \
                         model and calibration of the router's own; no built-in reads that scale"
            .into(),
        "preference" => "it matches a durable preference across the conversation with a model of \
                         the router's own"
            .into(),
        "modality" => "it classifies the requested output modality (text, image, audio); \
                       the router routes text requests only"
            .into(),
        "session_metric" | "event" => "it reads the router's own session history and events".into(),
        other => format!(
            "`{other}` signals have no counterpart (the router's signals are text, request \
             shape, headers, classifiers, guards and encoders)"
        ),
    }
}

/// The fact-check classifier's label for a request whose claims need checking.
const FACT_CHECK_NEEDED: &str = "fact_check_needed";

/// One classifier for every signal of `kind`, its labels the detector's `base` labels and any
/// other name the recipe gives: (classifier, signal, path) names. Returns the signal holding
/// its top label, when the recipe has such signals.
fn labelled(
    signals: &[Signal],
    kind: &str,
    (classifier, signal, path): (&str, &str, &str),
    base: &[&str],
    names: &mut Names,
    models: &mut String,
) -> Option<String> {
    let used: Vec<&Signal> = signals.iter().filter(|g| g.kind == kind).collect();
    if used.is_empty() {
        return None;
    }
    let mut labels: Vec<String> = base.iter().map(|l| l.to_string()).collect();
    if kind != "fact_check" {
        for g in &used {
            let l = crate::import::emit::ident(&g.name);
            if !labels.contains(&l) {
                labels.push(l);
            }
        }
    }
    let classifier = names.fresh(classifier);
    let signal = names.fresh(signal);
    models.push_str(&comment(
        "",
        &format!(
            "DECIDE: the recipe's `{kind}` signals read a detector model; a classifier with its\n\
             labels stands in for it: put the model at this path (docs/models.md)."
        ),
    ));
    let _ = writeln!(
        models,
        "classifier {classifier} {{ path = {}  labels = [{}] }}",
        quote(path),
        labels.join(", ")
    );
    let _ = writeln!(models, "signal {signal} = {classifier}(prompt)\n");
    Some(signal)
}

/// The label a `kb` signal's best match must be (`target.value`), when it reads the best match.
fn kb_label(f: &[(String, Val)]) -> Option<String> {
    let best = get(f, "match").and_then(Val::as_str).unwrap_or("best") == "best";
    let value = get(f, "target")?.get("value")?.as_str()?;
    best.then(|| crate::import::emit::ident(value))
}

/// One classifier per knowledge base the recipe's `kb` signals read, its labels their targets:
/// kb name → (classifier, the signal holding its top label).
fn knowledge_bases(
    signals: &[Signal],
    names: &mut Names,
    models: &mut String,
) -> HashMap<String, (String, String)> {
    let mut labels: Vec<(String, Vec<String>)> = Vec::new();
    for g in signals.iter().filter(|g| g.kind == "kb") {
        let (Some(kb), Some(label)) = (
            get(&g.decl.fields, "kb").and_then(Val::as_str),
            kb_label(&g.decl.fields),
        ) else {
            continue;
        };
        match labels.iter_mut().find(|(k, _)| k == kb) {
            Some((_, l)) if !l.contains(&label) => l.push(label),
            Some(_) => {}
            None => labels.push((kb.to_string(), vec![label])),
        }
    }
    let mut out = HashMap::new();
    for (kb, labels) in labels {
        let classifier = names.fresh(&format!("{kb}_classifier"));
        let signal = names.fresh(&kb);
        models.push_str(&comment(
            "",
            &format!(
                "DECIDE: the knowledge base `{kb}` answered with its best-matching label; a\n\
                 classifier over the same labels stands in for it (docs/models.md). Labels the\n\
                 recipe never names are missing here: add them as the model has them."
            ),
        ));
        let _ = writeln!(
            models,
            "classifier {classifier} {{ path = \"models/{}\"  labels = [{}] }}",
            crate::import::emit::ident(&kb),
            labels.join(", ")
        );
        let _ = writeln!(models, "signal {signal} = {classifier}(prompt)\n");
        out.insert(kb, (classifier, signal));
    }
    out
}

type Out = Result<(String, Option<String>), String>;

/// A regex matching `phrase` as written (case included), on word boundaries where its ends are
/// word characters.
fn literal(phrase: &str) -> String {
    let mut r = String::new();
    if phrase.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
        r.push_str("\\b");
    }
    for c in phrase.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            r.push('\\');
        }
        r.push(c);
    }
    if phrase.ends_with(|c: char| c.is_alphanumeric() || c == '_') {
        r.push_str("\\b");
    }
    r
}

fn keyword(f: &[(String, Val)]) -> Out {
    let words = get(f, "keywords").map(Val::strings).unwrap_or_default();
    if words.is_empty() {
        return Err("a keyword signal without keywords".into());
    }
    let operator = get(f, "operator")
        .and_then(Val::as_str)
        .unwrap_or("OR")
        .to_uppercase();
    let case_sensitive = get(f, "case_sensitive") == Some(&Val::Bool(true));
    let method = get(f, "method")
        .and_then(Val::as_str)
        .unwrap_or("")
        .to_lowercase();
    let fuzzy = method == "fuzzy" || get(f, "fuzzy_match") == Some(&Val::Bool(true));
    let mut note = None;
    // One test per keyword, joined by the operator (AND and NOR need each on its own).
    let one = |w: &str| -> String {
        if method == "regex" {
            let w = if case_sensitive {
                w.to_string()
            } else {
                format!("(?i){w}")
            };
            format!("matches(prompt, {})", quote(&w))
        } else if case_sensitive {
            format!("matches(prompt, {})", quote(&literal(w)))
        } else {
            format!("contains(prompt, [{}])", quote(w))
        }
    };
    let expr = if method == "bm25" {
        let t = get(f, "bm25_threshold")
            .and_then(Val::as_num)
            .unwrap_or(0.0);
        note = Some("DECIDE: BM25 scores depend on the implementation's parameters; check the threshold (src calibrate).".to_string());
        format!("bm25(prompt, {}) > {}", quote_list(&words), float(t))
    } else if method == "ngram" || fuzzy {
        let min = if method == "ngram" {
            get(f, "ngram_threshold")
                .and_then(Val::as_num)
                .unwrap_or(0.8)
        } else {
            0.8
        };
        let min = min.clamp(0.05, 1.0);
        note = Some(format!(
            "DECIDE: the recipe matched `{}` by {}; `fuzzy` compares word by word at this similarity.",
            words.first().map_or("", String::as_str),
            if method == "ngram" { "n-gram similarity" } else { "edit distance" }
        ));
        format!("fuzzy(prompt, {}, {})", quote_list(&words), float(min))
    } else if operator == "AND" {
        words
            .iter()
            .map(|w| one(w))
            .collect::<Vec<_>>()
            .join(" and ")
    } else if method == "regex" || case_sensitive {
        words
            .iter()
            .map(|w| one(w))
            .collect::<Vec<_>>()
            .join(" or ")
    } else {
        format!("contains(prompt, {})", quote_list(&words))
    };
    match operator.as_str() {
        "OR" | "AND" => Ok((expr, note)),
        "NOR" => Ok((format!("not ({expr})"), note)),
        other => Err(format!("operator `{other}` is not OR, AND or NOR")),
    }
}

/// `"8K"` → 8000.
fn tokens(v: &Val) -> Option<u64> {
    let raw = match v {
        Val::Num(n) => return Some(*n as u64),
        other => other.as_str()?.trim().to_uppercase(),
    };
    let (digits, scale) = match raw.chars().last()? {
        'K' => (&raw[..raw.len() - 1], 1_000.0),
        'M' => (&raw[..raw.len() - 1], 1_000_000.0),
        _ => (raw.as_str(), 1.0),
    };
    digits
        .trim()
        .parse::<f64>()
        .ok()
        .map(|n| (n * scale) as u64)
}

fn context(f: &[(String, Val)]) -> Option<(String, Option<String>)> {
    let mut parts = Vec::new();
    if let Some(min) = get(f, "min_tokens").and_then(tokens).filter(|m| *m > 0) {
        parts.push(format!("tokens(history) >= {min}"));
    }
    if let Some(max) = get(f, "max_tokens").and_then(tokens) {
        parts.push(format!("tokens(history) <= {max}"));
    }
    if parts.is_empty() {
        parts.push("true".to_string());
    }
    Some((parts.join(" and "), None))
}

/// `predicate: { gte: 4 }` applied to `value`.
fn predicate(value: &str, p: Option<&Val>, default: &str) -> Result<String, String> {
    let Some(p) = p else {
        return Ok(format!("{value} {default}"));
    };
    let mut parts = Vec::new();
    for (key, op) in [
        ("gt", ">"),
        ("gte", ">="),
        ("lt", "<"),
        ("lte", "<="),
        ("eq", "=="),
    ] {
        if let Some(n) = p.get(key).and_then(Val::as_num) {
            let n = if value.starts_with("density") {
                float(n)
            } else {
                format!("{}", n as i64)
            };
            parts.push(format!("{value} {op} {n}"));
        }
    }
    if parts.is_empty() {
        return Err("a predicate other than gt, gte, lt, lte or eq".into());
    }
    Ok(parts.join(" and "))
}

fn structure(f: &[(String, Val)]) -> Out {
    let feature = get(f, "feature").ok_or("a structure signal without `feature`")?;
    let kind = feature.get("type").and_then(Val::as_str).unwrap_or("");
    let source = feature.get("source").ok_or("a feature without `source`")?;
    let pred = get(f, "predicate");
    let expr = match (kind, source.get("type").and_then(Val::as_str).unwrap_or("")) {
        ("exists", "regex") => format!("matches(prompt, {})", quote(pattern(source)?)),
        ("count", "regex") => predicate(
            &format!("count(prompt, {})", quote(pattern(source)?)),
            pred,
            "> 0",
        )?,
        ("exists", "keyword_set") => format!(
            "contains(prompt, {})",
            quote_list(&source.get("keywords").map(Val::strings).unwrap_or_default())
        ),
        ("density", "keyword_set") => predicate(
            &format!(
                "density(prompt, {})",
                quote_list(&source.get("keywords").map(Val::strings).unwrap_or_default())
            ),
            pred,
            "> 0.0",
        )?,
        ("sequence", "sequence") => {
            let seqs: Vec<String> = source
                .get("sequences")
                .map(Val::as_list)
                .unwrap_or_default()
                .iter()
                .map(|s| format!("sequence(prompt, {})", quote_list(&s.strings())))
                .collect();
            if seqs.is_empty() {
                return Err("a sequence feature without sequences".into());
            }
            seqs.join(" or ")
        }
        (k, s) => {
            return Err(format!(
                "a `{k}` feature over a `{s}` source has no counterpart"
            ))
        }
    };
    Ok((expr, None))
}

fn pattern(source: &Val) -> Result<&str, String> {
    source
        .get("pattern")
        .and_then(Val::as_str)
        .ok_or_else(|| "a regex source without `pattern`".to_string())
}

fn conversation(f: &[(String, Val)]) -> Out {
    let feature = get(f, "feature").ok_or("a conversation signal without `feature`")?;
    let kind = feature
        .get("type")
        .and_then(Val::as_str)
        .unwrap_or("exists");
    let source = feature.get("source");
    let source_type = source
        .and_then(|s| s.get("type"))
        .and_then(Val::as_str)
        .unwrap_or("");
    let role = source
        .and_then(|s| s.get("role"))
        .and_then(Val::as_str)
        .unwrap_or("any");
    let value = match (source_type, role) {
        ("tools" | "tool_definitions" | "tool_definition", _) => "request.tools",
        ("tool_calls" | "assistant_tool_call", _) => "request.tool_calls",
        ("tool_results" | "tool_messages", _) => "request.tool_results",
        ("turns" | "user_turns" | "user_messages", _) | ("message", "user") => "request.turns",
        ("messages", _) | ("message", "any" | "all") => "request.messages",
        // Messages of every role but the user's.
        ("message", "non_user") => "(request.messages - request.turns)",
        ("active_tool_loop", _) if kind == "exists" => return Ok(("request.tool_loop".into(), None)),
        ("image_content", _) => {
            return Err(
                "images are read by no text signal; the router has no signal for media".into(),
            )
        }
        ("message", other) => {
            return Err(format!(
                "messages of role `{other}` are not counted apart (the router counts user turns and all messages)"
            ))
        }
        (other, _) => {
            return Err(format!(
                "a `{other}` conversation source has no counterpart"
            ))
        }
    };
    let expr = if kind == "exists" {
        format!("{value} > 0")
    } else {
        predicate(value, get(f, "predicate"), "> 0")?
    };
    Ok((expr, None))
}

fn authz(f: &[(String, Val)]) -> Out {
    let subjects = get(f, "subjects").map(Val::as_list).unwrap_or_default();
    let mut parts = Vec::new();
    for s in subjects {
        let name = s
            .get("name")
            .and_then(Val::as_str)
            .ok_or("a subject without `name`")?;
        match s.get("kind").and_then(Val::as_str).unwrap_or("User") {
            "Group" => parts.push(format!(
                "matches(header(\"x-authz-user-groups\") ?? \"\", {})",
                quote(&format!(
                    "(^|,)\\s*{}\\s*(,|$)",
                    literal(name)
                        .trim_start_matches("\\b")
                        .trim_end_matches("\\b")
                ))
            )),
            _ => parts.push(format!("header(\"x-authz-user-id\") == {}", quote(name))),
        }
    }
    if parts.is_empty() {
        return Err("an authz signal without subjects".into());
    }
    Ok((
        parts.join(" or "),
        Some("DECIDE: the user and group headers your authentication layer sets.".to_string()),
    ))
}

fn metadata(f: &[(String, Val)]) -> Out {
    let header = get(f, "header")
        .or_else(|| get(f, "key"))
        .and_then(Val::as_str)
        .ok_or("a metadata signal without `header` (or `key`)")?;
    let values = get(f, "values").map(Val::strings).unwrap_or_else(|| {
        get(f, "value")
            .and_then(Val::as_str)
            .map(|v| vec![v.to_string()])
            .unwrap_or_default()
    });
    let read = format!("header({})", quote(header));
    if values.is_empty() {
        return Ok((format!("({read} ?? \"\") != \"\""), None));
    }
    let parts: Vec<String> = values
        .iter()
        .map(|v| format!("{read} == {}", quote(v)))
        .collect();
    Ok((parts.join(" or "), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str) -> Vec<(String, Val)> {
        let recipe = super::super::syntax::parse("t", &format!("SIGNAL x y {{ {text} }}"), None)
            .expect("parses");
        recipe.signals[0].decl.fields.clone()
    }

    #[test]
    fn keyword_methods_map_onto_phrase_builtins() {
        let e = |t: &str| keyword(&fields(t)).expect("translates").0;
        assert_eq!(
            e(r#"operator: "OR" keywords: ["a b", "c"]"#),
            r#"contains(prompt, ["a b", "c"])"#
        );
        assert_eq!(
            e(r#"operator: "AND" keywords: ["a", "c"]"#),
            r#"contains(prompt, ["a"]) and contains(prompt, ["c"])"#
        );
        assert_eq!(
            e(r#"keywords: ["C++"] case_sensitive: true"#),
            r#"matches(prompt, "\\bC\\+\\+")"#
        );
        assert_eq!(
            e(r#"method: "regex" keywords: ["\\d+"]"#),
            r#"matches(prompt, "(?i)\\d+")"#
        );
        assert_eq!(
            e(r#"method: "bm25" keywords: ["a"] bm25_threshold: 0.5"#),
            r#"bm25(prompt, ["a"]) > 0.5"#
        );
        assert_eq!(
            e(r#"method: "fuzzy" keywords: ["urgent"]"#),
            r#"fuzzy(prompt, ["urgent"], 0.8)"#
        );
        assert_eq!(
            e(r#"operator: "NOR" keywords: ["a"]"#),
            r#"not (contains(prompt, ["a"]))"#
        );
    }

    #[test]
    fn counts_and_shapes_are_expressions() {
        assert_eq!(tokens(&Val::Str("8K".into())), Some(8000));
        assert_eq!(tokens(&Val::Str("1.5M".into())), Some(1_500_000));
        let c = context(&fields(r#"min_tokens: "1K" max_tokens: "7999""#))
            .expect("context")
            .0;
        assert_eq!(c, "tokens(history) >= 1000 and tokens(history) <= 7999");
        let s = structure(&fields(
            r#"feature: { type: "count", source: { type: "regex", pattern: "[?]" } } predicate: { gte: 4 }"#,
        ))
        .expect("structure")
        .0;
        assert_eq!(s, r#"count(prompt, "[?]") >= 4"#);
        assert!(conversation(&fields(
            r#"feature: { type: "exists", source: { type: "image_content" } }"#
        ))
        .is_err());
    }
}
