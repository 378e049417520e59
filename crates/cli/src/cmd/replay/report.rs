//! The replay report: one record per turn and the summary, with the continuity rules.
//!
//! - A **failure** is an answer that is not a completed step ([`super::judge`]).
//! - A **switch** is a turn answered by another model than the session's previous answered
//!   turn; a switch on a turn whose request is inside a tool loop (`request.tool_loop`) is a
//!   **violation**, and so is an `expect` key that does not hold. A turn the router reports as
//!   answered by a fallback because the session's model was lost (`x-sr-switch-reason:
//!   owner-lost`) is a switch too, whatever the previous turn.
//!
//! The model a turn is answered by is the router's logical model (`x-sr-model`) when the answer
//! carries one, else the served model the body names, so a replay against a bare backend still
//! sees switches. Unknown cached-token counts stay `null`, never 0, and are counted apart.

use super::fixture::Expect;
use serde::Serialize;

/// One sent turn.
#[derive(Debug, Clone, Serialize)]
pub struct TurnRecord {
    pub session: String,
    /// The turn's index in its session, from 0.
    pub turn: usize,
    /// The HTTP status; `null` when no answer came.
    pub status: Option<u16>,
    pub ok: bool,
    /// Why the turn failed.
    pub error: Option<String>,
    /// The served model the response body names.
    pub model: Option<String>,
    pub x_sr_model: Option<String>,
    pub route: Option<String>,
    #[serde(rename = "x-sr-session")]
    pub session_state: Option<String>,
    #[serde(rename = "x-sr-protection")]
    pub protection: Option<String>,
    /// Why the router changed models other than by routing (`owner-lost`).
    #[serde(rename = "x-sr-switch-reason")]
    pub switch_reason: Option<String>,
    pub tool_loop: bool,
    pub stream: bool,
    pub latency_ms: Option<f64>,
    /// Time to the first body bytes of a streamed answer.
    pub ttft_ms: Option<f64>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub violations: Vec<String>,
}

impl TurnRecord {
    /// The model this turn counts as answered by (see the module comment).
    pub fn answered_by(&self) -> Option<&str> {
        if !self.ok {
            return None;
        }
        self.x_sr_model.as_deref().or(self.model.as_deref())
    }

    /// Whether the router says it handed this turn to another model than the session's owner
    /// (its pinned model failed it), which is a switch even where the previous answered turn is
    /// not in this run to compare with.
    pub fn owner_lost(&self) -> bool {
        self.ok
            && self.switch_reason.as_deref()
                == Some(src_runtime::headers::switch_reason::OWNER_LOST)
    }
}

/// What the run adds up to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Always true: a run that sent nothing has no summary of this kind.
    pub verified: bool,
    pub sessions: usize,
    pub turns: usize,
    pub ok: usize,
    pub failed: usize,
    pub violations: usize,
    pub switches: usize,
    pub tool_loop_switches: usize,
    pub cached_tokens_known: usize,
    pub cached_tokens_unknown: usize,
}

impl Summary {
    /// Whether the run passes: every turn ok and nothing violated.
    pub fn passed(&self) -> bool {
        self.failed == 0 && self.violations == 0
    }
}

/// Checks one session's records in order: switches, tool-loop violations and `expect`.
/// `records[i]` answers the turn with `expects[i]`.
pub fn check_session(records: &mut [TurnRecord], expects: &[&Expect]) {
    let mut previous: Option<String> = None;
    for (record, expect) in records.iter_mut().zip(expects) {
        let Some(model) = record.answered_by().map(str::to_string) else {
            continue;
        };
        let switched = previous.as_deref().is_some_and(|p| p != model);
        if switched && record.tool_loop {
            record.violations.push(format!(
                "the model changed inside a tool loop: `{}` -> `{model}`",
                previous.as_deref().unwrap_or_default()
            ));
        } else if record.owner_lost() && record.tool_loop {
            record.violations.push(format!(
                "the session's model was lost inside a tool loop and `{model}` answered"
            ));
        }
        if let Some(route) = &expect.route {
            if record.route.as_deref() != Some(route) {
                record.violations.push(format!(
                    "expected route `{route}`, got {}",
                    shown(record.route.as_deref())
                ));
            }
        }
        if let Some(want) = &expect.model {
            if *want != model {
                record
                    .violations
                    .push(format!("expected model `{want}`, got `{model}`"));
            }
        }
        if let Some(same) = expect.same_model_as_previous {
            match &previous {
                Some(p) if (p == &model) != same => record.violations.push(if same {
                    format!("expected the model of the previous turn `{p}`, got `{model}`")
                } else {
                    format!("expected a model other than the previous turn's `{p}`")
                }),
                None if record.turn > 0 => record.violations.push(
                    "no earlier turn of the session was answered to compare the model with".into(),
                ),
                _ => {}
            }
        }
        previous = Some(model);
    }
}

fn shown(value: Option<&str>) -> String {
    value.map_or_else(|| "none".to_string(), |v| format!("`{v}`"))
}

/// Whether `record` is a switch: it was answered by another model than the session's previous
/// answered turn.
pub fn switches(records: &[TurnRecord]) -> Vec<bool> {
    let mut previous: Option<(&str, &str)> = None;
    records
        .iter()
        .map(|r| {
            let Some(model) = r.answered_by() else {
                return false;
            };
            let switched =
                r.owner_lost() || previous.is_some_and(|(s, p)| s == r.session && p != model);
            previous = Some((r.session.as_str(), model));
            switched
        })
        .collect()
}

/// Adds up checked records (in session order).
pub fn summarize(records: &[TurnRecord], sessions: usize) -> Summary {
    let switched = switches(records);
    let ok: Vec<&TurnRecord> = records.iter().filter(|r| r.ok).collect();
    Summary {
        verified: true,
        sessions,
        turns: records.len(),
        ok: ok.len(),
        failed: records.len() - ok.len(),
        violations: records.iter().map(|r| r.violations.len()).sum(),
        switches: switched.iter().filter(|s| **s).count(),
        tool_loop_switches: records
            .iter()
            .zip(&switched)
            .filter(|(r, s)| **s && r.tool_loop)
            .count(),
        cached_tokens_known: ok.iter().filter(|r| r.cached_tokens.is_some()).count(),
        cached_tokens_unknown: ok.iter().filter(|r| r.cached_tokens.is_none()).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(turn: usize, model: &str, tool_loop: bool) -> TurnRecord {
        TurnRecord {
            session: "s".into(),
            turn,
            status: Some(200),
            ok: true,
            error: None,
            model: Some(format!("served/{model}")),
            x_sr_model: Some(model.into()),
            route: Some("default".into()),
            session_state: None,
            protection: None,
            switch_reason: None,
            tool_loop,
            stream: false,
            latency_ms: Some(1.0),
            ttft_ms: None,
            prompt_tokens: Some(10),
            completion_tokens: Some(2),
            cached_tokens: None,
            violations: vec![],
        }
    }

    #[test]
    fn a_switch_inside_a_tool_loop_is_a_violation() {
        let mut records = vec![
            record(0, "small", false),
            record(1, "strong", true),
            record(2, "small", false),
        ];
        let none = Expect::default();
        check_session(&mut records, &[&none, &none, &none]);
        assert_eq!(records[1].violations.len(), 1);
        assert!(records[2].violations.is_empty());
        let summary = summarize(&records, 1);
        assert_eq!((summary.switches, summary.tool_loop_switches), (2, 1));
        assert_eq!(summary.violations, 1);
        assert_eq!(summary.cached_tokens_unknown, 3);
        assert!(!summary.passed());
    }

    #[test]
    fn expectations_are_checked() {
        let mut records = vec![record(0, "small", false), record(1, "small", false)];
        let first = Expect {
            route: Some("coding".into()),
            ..Expect::default()
        };
        let second = Expect {
            model: Some("small".into()),
            same_model_as_previous: Some(true),
            ..Expect::default()
        };
        check_session(&mut records, &[&first, &second]);
        assert_eq!(records[0].violations.len(), 1);
        assert!(records[1].violations.is_empty());
    }

    #[test]
    fn an_owner_lost_turn_is_a_switch_by_its_reason() {
        // The first turn of the run: no previous model to compare with, but the router says.
        let mut lost = record(0, "strong", true);
        lost.switch_reason = Some("owner-lost".into());
        let mut records = vec![lost, record(1, "strong", false)];
        check_session(&mut records, &[&Expect::default(), &Expect::default()]);
        assert_eq!(records[0].violations.len(), 1);
        let summary = summarize(&records, 1);
        assert_eq!((summary.switches, summary.tool_loop_switches), (1, 1));
        // Without the reason the same turns are no switch.
        let mut records = vec![record(0, "strong", true), record(1, "strong", false)];
        check_session(&mut records, &[&Expect::default(), &Expect::default()]);
        let summary = summarize(&records, 1);
        assert_eq!((summary.switches, summary.tool_loop_switches), (0, 0));
    }

    #[test]
    fn a_failed_turn_is_not_a_switch() {
        let mut failed = record(1, "strong", true);
        failed.ok = false;
        let records = vec![record(0, "small", false), failed, record(2, "small", true)];
        let summary = summarize(&records, 1);
        assert_eq!((summary.switches, summary.failed), (0, 1));
    }
}
