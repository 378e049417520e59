//! `src replay FIXTURE --base-url URL`: send recorded agent sessions to any OpenAI-compatible
//! endpoint and report whether each step completed and continuity held (docs/replay.md).
//!
//! - [`fixture`]: the session fixture format and its strict reader.
//! - [`send`]: one request over the router's HTTP client, timed.
//! - [`judge`]: whether an answer is a completed step.
//! - [`report`]: per-turn records, switches, violations and the summary.
//!
//! Each session's turns go in order under one identity, `--session-header: PREFIX + id`; the
//! prefix is random per run unless given, so a rerun never lands on the pins of the last one.
//! Exit status: 0 when every turn is ok and nothing is violated, 1 otherwise, 2 for bad usage or
//! a bad fixture.

pub mod fixture;
pub mod judge;
pub mod report;
pub mod send;

use crate::output::Closed;
use crate::Outcome;
use anyhow::{anyhow, Context, Result};
use fixture::{Fixture, Session};
use report::{check_session, summarize, TurnRecord};
use send::{Answer, Sender};
use serde_json::json;
use std::path::PathBuf;

/// The session header `src serve` reads first by default.
pub const DEFAULT_SESSION_HEADER: &str = "x-model-affinity";

#[derive(clap::Args)]
pub struct Args {
    /// The session fixture (JSON, see docs/replay.md).
    fixture: PathBuf,
    /// The endpoint's base URL, up to the API version (`http://127.0.0.1:8801/v1`).
    #[arg(long, value_name = "URL", required_unless_present = "dry_run")]
    base_url: Option<String>,
    /// A header sent with every turn, `NAME=VALUE` (repeatable).
    #[arg(long = "header", value_name = "K=V")]
    headers: Vec<String>,
    /// The header that carries each session's identity.
    #[arg(long, default_value = DEFAULT_SESSION_HEADER, value_name = "NAME")]
    session_header: String,
    /// Prefix of every session identity (random per run when not given).
    #[arg(long, value_name = "P")]
    session_prefix: Option<String>,
    /// Also write the JSON report here.
    #[arg(long, value_name = "REPORT.json")]
    out: Option<PathBuf>,
    /// Send nothing: print what would be sent.
    #[arg(long)]
    dry_run: bool,
}

/// How each session is named on the wire.
#[derive(Debug, Clone)]
pub struct Identity {
    pub header: String,
    pub prefix: String,
    /// Headers for every turn, after the session's own.
    pub extra: Vec<(String, String)>,
}

impl Identity {
    /// The headers of one session's turns: the fixture's, the run's, then the identity.
    pub fn headers(&self, session: &Session) -> Vec<(String, String)> {
        let mut headers = session.headers.clone();
        headers.extend(self.extra.iter().cloned());
        headers.push((
            self.header.clone(),
            format!("{}{}", self.prefix, session.id),
        ));
        headers
    }
}

pub fn run(args: Args) -> Result<Outcome> {
    let fixture = fixture::read(&args.fixture)
        .map_err(|e| anyhow!("`{}` is not a session fixture: {e}", args.fixture.display()))?;
    let header = args.session_header.to_ascii_lowercase();
    hyper::header::HeaderName::from_bytes(header.as_bytes())
        .map_err(|_| anyhow!("--session-header `{header}` is not a header name"))?;
    let extra = args
        .headers
        .iter()
        .map(|h| {
            h.split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
                .ok_or_else(|| anyhow!("--header expects NAME=VALUE, got `{h}`"))
        })
        .collect::<Result<Vec<_>>>()?;
    let prefix = args
        .session_prefix
        .clone()
        .unwrap_or_else(|| format!("replay-{:012x}-", rand::random::<u64>() >> 16));
    let identity = Identity {
        header,
        prefix,
        extra,
    };
    let report = if args.dry_run {
        let plan = dry_run(&fixture, &identity);
        outln!("{}", plan_text(&fixture, &identity))?;
        plan
    } else {
        let base = args
            .base_url
            .as_deref()
            .ok_or_else(|| anyhow!("give --base-url (or --dry-run)"))?;
        let sender = Sender::new(base).map_err(|e| anyhow!("--base-url: {e}"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        let records = runtime.block_on(replay(&sender, &fixture, &identity));
        let summary = summarize(&records, fixture.sessions.len());
        print_human(&records, &summary)?;
        let passed = summary.passed();
        let report = json!({"turns": records, "summary": summary});
        write_report(args.out.as_ref(), &report)?;
        return Ok(if passed {
            Outcome::Success
        } else {
            Outcome::Failure
        });
    };
    write_report(args.out.as_ref(), &report)?;
    Ok(Outcome::Success)
}

fn write_report(out: Option<&PathBuf>, report: &serde_json::Value) -> Result<()> {
    if let Some(path) = out {
        let text = serde_json::to_string_pretty(report).context("cannot render the report")?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    Ok(())
}

/// Sends every session's turns in order (one session after another) and checks them.
pub async fn replay(sender: &Sender, fixture: &Fixture, identity: &Identity) -> Vec<TurnRecord> {
    replay_answers(sender, fixture, identity)
        .await
        .into_iter()
        .map(|(record, _)| record)
        .collect()
}

/// [`replay`], keeping each turn's raw answer (`None` when nothing answered) for callers that
/// read more of it (`src eval` reads the simulator's timing headers).
pub async fn replay_answers(
    sender: &Sender,
    fixture: &Fixture,
    identity: &Identity,
) -> Vec<(TurnRecord, Option<Answer>)> {
    let mut all = Vec::new();
    for session in &fixture.sessions {
        let headers = identity.headers(session);
        let mut records = Vec::with_capacity(session.turns.len());
        let mut answers = Vec::with_capacity(session.turns.len());
        for index in 0..session.turns.len() {
            let (record, answer) = send_turn(sender, session, index, &headers).await;
            records.push(record);
            answers.push(answer);
        }
        let expects: Vec<_> = session.turns.iter().map(|t| &t.expect).collect();
        check_session(&mut records, &expects);
        all.extend(records.into_iter().zip(answers));
    }
    all
}

async fn send_turn(
    sender: &Sender,
    session: &Session,
    index: usize,
    headers: &[(String, String)],
) -> (TurnRecord, Option<Answer>) {
    let turn = &session.turns[index];
    let mut record = TurnRecord {
        session: session.id.clone(),
        turn: index,
        status: None,
        ok: false,
        error: None,
        model: None,
        x_sr_model: None,
        route: None,
        session_state: None,
        protection: None,
        switch_reason: None,
        tool_loop: turn.tool_loop(),
        stream: turn.stream(),
        latency_ms: None,
        ttft_ms: None,
        prompt_tokens: None,
        completion_tokens: None,
        cached_tokens: None,
        violations: Vec::new(),
    };
    let answer = match sender.post(turn.api.path(), &turn.request, headers).await {
        Ok(answer) => answer,
        Err(e) => {
            record.error = Some(e.to_string());
            return (record, None);
        }
    };
    let verdict = judge::judge(turn.api, turn.stream(), &answer);
    let named = |name: &str| {
        answer
            .header(name)
            .filter(|v| *v != src_runtime::headers::NONE_VALUE)
            .map(str::to_string)
    };
    record.status = Some(answer.status);
    record.ok = verdict.failure.is_none();
    record.error = verdict.failure;
    record.model = verdict.model;
    record.x_sr_model = named(src_runtime::headers::SR_MODEL);
    record.route = named(src_runtime::headers::SR_ROUTE);
    record.session_state = named(src_runtime::headers::SR_SESSION);
    record.protection = named(src_runtime::headers::SR_PROTECTION);
    record.switch_reason = named(src_runtime::headers::SR_SWITCH_REASON);
    record.latency_ms = Some(round3(answer.latency_ms));
    record.ttft_ms = if turn.stream() {
        answer.first_byte_ms.map(round3)
    } else {
        None
    };
    record.prompt_tokens = verdict.usage.prompt_tokens;
    record.completion_tokens = verdict.usage.completion_tokens;
    record.cached_tokens = verdict.usage.cached_tokens;
    (record, Some(answer))
}

fn round3(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// The report of a run that sent nothing: the plan, and a summary that claims nothing.
fn dry_run(fixture: &Fixture, identity: &Identity) -> serde_json::Value {
    let turns: Vec<_> = fixture
        .sessions
        .iter()
        .flat_map(|s| {
            let value = format!("{}{}", identity.prefix, s.id);
            s.turns.iter().enumerate().map(move |(i, t)| {
                json!({
                    "session": s.id,
                    "turn": i,
                    "path": t.api.path(),
                    "identity": value,
                    "stream": t.stream(),
                    "tool_loop": t.tool_loop(),
                    "difficulty": t.difficulty.as_str(),
                    "sent": false,
                })
            })
        })
        .collect();
    json!({
        "turns": turns,
        "summary": {
            "verified": false,
            "note": "dry run: nothing was sent, so nothing about answers or continuity was verified",
            "sessions": fixture.sessions.len(),
            "planned_turns": turns.len(),
            "ok": null,
            "failed": null,
            "violations": null,
            "switches": null,
            "tool_loop_switches": null,
        }
    })
}

fn plan_text(fixture: &Fixture, identity: &Identity) -> String {
    let mut out = String::from("dry run: nothing is sent and nothing is verified\n");
    for s in &fixture.sessions {
        out.push_str(&format!(
            "session `{}` ({}: {}{}), {} turn(s)\n",
            s.id,
            identity.header,
            identity.prefix,
            s.id,
            s.turns.len()
        ));
        for (i, t) in s.turns.iter().enumerate() {
            let mut notes = Vec::new();
            if t.stream() {
                notes.push("stream");
            }
            if t.tool_loop() {
                notes.push("inside a tool loop");
            }
            out.push_str(&format!(
                "  {i}: POST {}{}\n",
                t.api.path(),
                if notes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", notes.join(", "))
                }
            ));
        }
    }
    out.trim_end().to_string()
}

fn print_human(records: &[TurnRecord], summary: &report::Summary) -> Result<(), Closed> {
    for r in records {
        let model = r
            .x_sr_model
            .as_deref()
            .or(r.model.as_deref())
            .unwrap_or("-");
        let state = if r.ok { "ok" } else { "FAILED" };
        outln!(
            "{} #{}: {state} {model}{}{}",
            r.session,
            r.turn,
            r.error
                .as_ref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default(),
            if r.tool_loop { " [tool loop]" } else { "" },
        )?;
        for v in &r.violations {
            outln!("    violation: {v}")?;
        }
    }
    outln!(
        "{} turn(s): {} ok, {} failed; {} violation(s); {} switch(es), {} inside a tool loop; \
         cached tokens known for {}, unknown for {}",
        summary.turns,
        summary.ok,
        summary.failed,
        summary.violations,
        summary.switches,
        summary.tool_loop_switches,
        summary.cached_tokens_known,
        summary.cached_tokens_unknown
    )?;
    Ok(())
}
