//! Diagnostics for CI systems: GitHub Actions workflow commands (`src check --format github`,
//! which GitHub shows as annotations on the pull request) and SARIF 2.1.0 logs
//! (`--format sarif`, for code scanning uploads and any SARIF viewer).
//!
//! Both are built from [`Finding`]s, a diagnostic with its position resolved against the
//! policy's sources (1-based lines, columns counted in characters), because `check` renders each
//! policy with its own source map and SARIF needs all of them in one document.

use serde::Serialize;
use src_dsl::{codes, Diagnostic, Severity, SourceMap, Span};
use std::path::Path;

/// The documentation of every code, relative to the repository root.
const DIAGNOSTICS_DOC: &str = "docs/diagnostics.md";

/// Where a diagnostic points, resolved against its sources.
#[derive(Debug, Clone, PartialEq)]
pub struct Position {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
}

/// One diagnostic, ready to render without its source map; or a policy that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// `None` for a policy that could not be read, which has no diagnostic code.
    pub code: Option<&'static str>,
    pub severity: Severity,
    pub message: String,
    pub help: Option<String>,
    pub position: Option<Position>,
    /// Secondary labels: where and what.
    pub related: Vec<(Position, String)>,
}

impl Finding {
    pub fn new(d: &Diagnostic, sources: &SourceMap) -> Finding {
        let related = d
            .labels
            .iter()
            .filter(|l| !l.primary)
            .filter_map(|l| Some((position(l.span, sources)?, l.message.clone())))
            .collect();
        Finding {
            code: Some(d.code.as_str()),
            severity: d.severity,
            message: d.message.clone(),
            help: d.help.clone(),
            position: position(d.primary_span(), sources),
            related,
        }
    }

    /// A path that could not be read as a policy (missing, unreadable, not UTF-8, or without
    /// `.sr` files), as an error on the path itself, so that CI shows it like any other.
    pub fn unreadable(path: &Path, why: &str) -> Finding {
        Finding {
            code: None,
            severity: Severity::Error,
            message: why.to_string(),
            help: None,
            position: Some(Position {
                file: path.display().to_string(),
                line: 1,
                column: 1,
                end_line: 1,
                end_column: 1,
            }),
            related: Vec::new(),
        }
    }

    /// The message with its help, as one text.
    fn text(&self) -> String {
        match &self.help {
            Some(help) => format!("{}\nhelp: {help}", self.message),
            None => self.message.clone(),
        }
    }
}

fn position(span: Span, sources: &SourceMap) -> Option<Position> {
    let file = sources.get(span.file)?.path.display().to_string();
    let (line, column) = sources.line_col(span.file, span.start as usize);
    let (end_line, end_column) = sources.line_col(span.file, span.end.max(span.start) as usize);
    Some(Position {
        file,
        line,
        column,
        end_line,
        end_column,
    })
}

// ---------------------------------------------------------------- GitHub workflow commands

/// `::error file=F,line=L,col=C,endLine=..,endColumn=..,title=CODE::message`, one line.
pub fn github_command(f: &Finding) -> String {
    let command = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let mut properties = Vec::new();
    if let Some(p) = &f.position {
        properties.push(format!("file={}", escape_property(&p.file)));
        properties.push(format!("line={}", p.line));
        properties.push(format!("col={}", p.column));
        properties.push(format!("endLine={}", p.end_line));
        properties.push(format!("endColumn={}", p.end_column));
    }
    if let Some(code) = f.code {
        properties.push(format!("title={}", escape_property(code)));
    }
    let text = escape_data(&f.text());
    if properties.is_empty() {
        format!("::{command}::{text}")
    } else {
        format!("::{command} {}::{text}", properties.join(","))
    }
}

/// The escaping of a workflow command's message (GitHub's `escapeData`).
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// The escaping of a workflow command's property value (GitHub's `escapeProperty`): a `:` or
/// `,` would end the value.
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

// ---------------------------------------------------------------- SARIF 2.1.0

#[derive(Serialize)]
pub struct SarifLog {
    #[serde(rename = "$schema")]
    schema: &'static str,
    version: &'static str,
    runs: Vec<Run>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run {
    tool: Tool,
    /// Columns count characters, as everywhere outside the language server.
    column_kind: &'static str,
    results: Vec<SarifResult>,
}

#[derive(Serialize)]
struct Tool {
    driver: Driver,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Driver {
    name: &'static str,
    version: &'static str,
    rules: Vec<Rule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    id: &'static str,
    short_description: Text,
    help: Help,
    default_configuration: Configuration,
}

#[derive(Serialize)]
struct Text {
    text: String,
}

#[derive(Serialize)]
struct Help {
    text: String,
    markdown: String,
}

#[derive(Serialize)]
struct Configuration {
    level: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SarifResult {
    #[serde(skip_serializing_if = "Option::is_none")]
    rule_id: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule_index: Option<usize>,
    level: &'static str,
    message: Text,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    locations: Vec<Location>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    related_locations: Vec<Location>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Location {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<usize>,
    physical_location: PhysicalLocation,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<Text>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PhysicalLocation {
    artifact_location: ArtifactLocation,
    region: Region,
}

#[derive(Serialize)]
struct ArtifactLocation {
    uri: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    start_line: usize,
    start_column: usize,
    end_line: usize,
    end_column: usize,
}

/// A SARIF log of one run of `src check`: every diagnostic code as a rule, each finding a
/// result.
pub fn sarif(findings: &[Finding]) -> SarifLog {
    let rules: Vec<Rule> = codes::ALL
        .iter()
        .map(|(code, title)| {
            let link = format!("{DIAGNOSTICS_DOC}#{}", doc_anchor(code.as_str(), title));
            Rule {
                id: code.as_str(),
                short_description: Text {
                    text: (*title).to_string(),
                },
                help: Help {
                    text: format!("A failing example and its fix: {link}"),
                    markdown: format!("A failing example and its fix: [{link}]({link})"),
                },
                default_configuration: Configuration {
                    level: level_of_code(code.as_str()),
                },
            }
        })
        .collect();
    let results = findings
        .iter()
        .map(|f| SarifResult {
            rule_id: f.code,
            rule_index: codes::ALL
                .iter()
                .position(|(c, _)| Some(c.as_str()) == f.code),
            level: match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            },
            message: Text { text: f.text() },
            locations: f.position.iter().map(|p| location(p, None, None)).collect(),
            related_locations: f
                .related
                .iter()
                .enumerate()
                .map(|(i, (p, message))| location(p, Some(i), Some(message)))
                .collect(),
        })
        .collect();
    SarifLog {
        schema: "https://json.schemastore.org/sarif-2.1.0.json",
        version: "2.1.0",
        runs: vec![Run {
            tool: Tool {
                driver: Driver {
                    name: "src",
                    version: env!("CARGO_PKG_VERSION"),
                    rules,
                },
            },
            column_kind: "unicodeCodePoints",
            results,
        }],
    }
}

fn location(p: &Position, id: Option<usize>, message: Option<&String>) -> Location {
    Location {
        id,
        physical_location: PhysicalLocation {
            artifact_location: ArtifactLocation { uri: uri(&p.file) },
            region: Region {
                start_line: p.line,
                start_column: p.column,
                end_line: p.end_line,
                end_column: p.end_column,
            },
        },
        message: message
            .filter(|m| !m.is_empty())
            .map(|m| Text { text: m.clone() }),
    }
}

/// Codes starting with `W` are warnings; everything else is an error.
fn level_of_code(code: &str) -> &'static str {
    if code.starts_with('W') {
        "warning"
    } else {
        "error"
    }
}

/// A file path as a URI reference: absolute paths as `file:` URIs, relative ones (relative to
/// where `src check` ran, normally the repository root) with `/` separators and percent-encoding.
fn uri(path: &str) -> String {
    let p = Path::new(path);
    if p.is_absolute() {
        if let Ok(url) = url::Url::from_file_path(p) {
            return url.to_string();
        }
    }
    let mut out = String::with_capacity(path.len());
    for b in path.replace('\\', "/").bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The anchor GitHub gives the heading `## CODE title` of docs/diagnostics.md: lowercase, every
/// character but letters, digits, `-`, `_` and spaces dropped, spaces turned into `-`.
pub fn doc_anchor(code: &str, title: &str) -> String {
    heading_anchor(&format!("{code} {title}"))
}

pub fn heading_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(message: &str, file: &str) -> Finding {
        Finding {
            code: Some("E027"),
            severity: Severity::Error,
            message: message.into(),
            help: Some("write `0.8`".into()),
            position: Some(Position {
                file: file.into(),
                line: 3,
                column: 5,
                end_line: 3,
                end_column: 9,
            }),
            related: Vec::new(),
        }
    }

    #[test]
    fn github_command_escapes_data_and_properties() {
        let f = finding("100% wrong: a\r\nb", "dir,a/b:c.sr");
        assert_eq!(
            github_command(&f),
            "::error file=dir%2Ca/b%3Ac.sr,line=3,col=5,endLine=3,endColumn=9,title=E027\
             ::100%25 wrong: a%0D%0Ab%0Ahelp: write `0.8`"
        );
        let mut w = finding("unused", "a.sr");
        w.severity = Severity::Warning;
        w.help = None;
        w.position = None;
        assert_eq!(github_command(&w), "::warning title=E027::unused");
        w.code = None;
        assert_eq!(github_command(&w), "::warning::unused");
    }

    #[test]
    fn an_unreadable_policy_is_an_error_on_its_path() {
        let f = Finding::unreadable(Path::new("policies/x"), "`policies/x` is not UTF-8 text");
        assert_eq!(
            github_command(&f),
            "::error file=policies/x,line=1,col=1,endLine=1,endColumn=1\
             ::`policies/x` is not UTF-8 text"
        );
        let log = serde_json::to_value(sarif(&[f])).unwrap();
        let result = &log["runs"][0]["results"][0];
        assert_eq!(result["level"], "error");
        assert!(result.get("ruleId").is_none(), "{result}");
        assert_eq!(
            result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "policies/x"
        );
    }

    #[test]
    fn anchors_follow_github_headings() {
        assert_eq!(
            doc_anchor(
                "E027",
                "`fuzzy` threshold that is not a number literal in (0, 1]"
            ),
            "e027-fuzzy-threshold-that-is-not-a-number-literal-in-0-1"
        );
        assert_eq!(
            heading_anchor("W021 model signals can outlast the gateway's message timeout"),
            "w021-model-signals-can-outlast-the-gateways-message-timeout"
        );
    }

    #[test]
    fn every_rule_links_to_a_heading_of_the_diagnostics_doc() {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/diagnostics.md"),
        )
        .unwrap_or_default();
        let anchors: Vec<String> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("## "))
            .map(heading_anchor)
            .collect();
        assert!(!anchors.is_empty(), "docs/diagnostics.md has headings");
        for (code, title) in codes::ALL {
            let anchor = doc_anchor(code.as_str(), title);
            assert!(anchors.contains(&anchor), "no heading for #{anchor}");
        }
    }

    #[test]
    fn uris_are_references() {
        assert_eq!(uri("policies/a b/main.sr"), "policies/a%20b/main.sr");
        assert_eq!(uri("/tmp/x y.sr"), "file:///tmp/x%20y.sr");
        assert_eq!(uri("ünï.sr"), "%C3%BCn%C3%AF.sr");
    }
}
