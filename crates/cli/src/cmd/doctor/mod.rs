//! `src doctor POLICY`: the integration contract between a policy and its backends, checked
//! live, in three phases that each build on the last:
//!
//! 1. **catalog**: each backend's `GET {url}/models`; every model a request can reach
//!    ([`plan::selectable_models`]) must be listed under its `serves` id;
//! 2. **direct**: one `max_tokens: 1` chat completion to each model's served id must succeed;
//! 3. **routed**: per route, its representative `test` case is decided locally by the compiler's
//!    request procedure (as `src test` decides it) and sent to the chosen model's backend; the
//!    answer's `model` must be that model's served id;
//! 4. **store**: each Redis store the policy names (`redis`, `redis_cluster`, `redis_sentinel`)
//!    is asked what it is made of ([`src_runtime::store::survey`]): its masters, replicas and,
//!    for a cluster, the slots covered. A store that cannot serve every key is a violation. A
//!    Milvus cache store must answer, and its collection must hold vectors as long as the
//!    cache's encoder makes (or be absent and creatable: the store makes it on first use).
//!
//! A check whose precondition failed is skipped, not retried, so one missing model gives one
//! violation rather than three. Exit codes: 0 every check passed, 1 any violation, 2 the input
//! is unusable (the policy does not check, a file is missing, a flag is wrong).

mod plan;
mod probe;
mod report;
mod stores;

use super::policy::load_checked;
use crate::output::Color;
use crate::Outcome;
use anyhow::{anyhow, Context, Result};
use report::{Check, Phase, Report};
use serde_json::json;
use src_compiler::hir::{BackendDef, CheckedPolicy, ModelDef, ModelId, RouteId};
use src_compiler::testing::{chat_body, run_case, Actual};
use src_compiler::{compile, CompiledPolicy, EngineKind};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

/// Time allowed to each request when neither `--timeout` nor the backend's `timeout` says.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a `simulated = true` backend is not checked.
const SIMULATED: &str = "simulated: served by the built-in simulator inside `src serve`";

/// How the report is printed.
#[derive(Clone, Copy, Debug, Default, clap::ValueEnum, PartialEq, Eq)]
pub enum Format {
    #[default]
    Table,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    /// The policy directory or file.
    policy: PathBuf,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Extra certificate authorities (a PEM bundle) trusted for `https` backends, as
    /// `src serve --backend-ca`.
    #[arg(long, value_name = "FILE")]
    backend_ca: Option<PathBuf>,
    /// Time allowed to each request (`500ms`, `10s`); default: the backend's `timeout`, else 30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    #[arg(long, value_enum, default_value_t)]
    color: Color,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    src_dsl::parse::duration_millis(text).map(Duration::from_millis)
}

pub fn run(args: Args) -> Result<Outcome> {
    if !args.policy.exists() {
        return Err(anyhow!("`{}` does not exist", args.policy.display()));
    }
    let checked =
        load_checked(&args.policy, args.color.enabled_for_stderr())?.ok_or_else(|| {
            anyhow!(
                "`{}` does not check, so its contract cannot be tested",
                args.policy.display()
            )
        })?;
    let probe = probe::Probe::new(args.backend_ca.as_deref())?;
    let policy = compile(checked, EngineKind::Interp).context("cannot compile the policy")?;
    let keys = api_keys(&policy.checked);
    let checks = Doctor {
        policy: &policy,
        probe: &probe,
        timeout: args.timeout,
        keys: &keys,
    }
    .run();
    let secrets: Vec<String> = keys.values().filter_map(|k| k.clone().ok()).collect();
    let report = Report::new(args.policy.display().to_string(), checks, &secrets);
    match args.format {
        Format::Table => out!("{}", report.table())?,
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&report).context("cannot write the report")?
        )?,
    }
    Ok(if report.ok {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}

/// Each backend's API key from its `api_key = env(..)`; `Err` names the unset variable.
type Keys = HashMap<String, Result<String, String>>;

fn api_keys(checked: &CheckedPolicy) -> Keys {
    checked
        .backends
        .iter()
        .filter_map(|b| {
            let var = b.api_key_env.as_ref()?;
            let key = std::env::var(var).map_err(|_| {
                format!("`{var}` (the backend's `api_key`) is not set in the environment")
            });
            Some((b.name.clone(), key))
        })
        .collect()
}

struct Doctor<'a> {
    policy: &'a CompiledPolicy,
    probe: &'a probe::Probe,
    timeout: Option<Duration>,
    keys: &'a Keys,
}

impl Doctor<'_> {
    fn checked(&self) -> &CheckedPolicy {
        &self.policy.checked
    }

    fn run(&self) -> Vec<Check> {
        let mut checks = Vec::new();
        let served = self.catalogs(&mut checks);
        let answered = self.direct(&served, &mut checks);
        self.routed(&answered, &mut checks);
        stores::survey(self.checked(), self.timeout, &mut checks);
        checks
    }

    fn timeout_of(&self, backend: &BackendDef) -> Duration {
        self.timeout
            .or(backend.timeout_ms.map(Duration::from_millis))
            .unwrap_or(DEFAULT_TIMEOUT)
    }

    fn key_of(&self, backend: &BackendDef) -> Option<&str> {
        self.keys
            .get(&backend.name)
            .and_then(|k| k.as_ref().ok())
            .map(String::as_str)
    }

    fn backend_of(&self, model: &ModelDef) -> &BackendDef {
        &self.checked().backends[model.backend.index()]
    }

    /// Phase 1. Returns the models found served.
    fn catalogs(&self, checks: &mut Vec<Check>) -> HashSet<ModelId> {
        let checked = self.checked();
        let selectable = plan::selectable_models(checked);
        let mut served = HashSet::new();
        for (i, backend) in checked.backends.iter().enumerate() {
            let on_backend: Vec<_> = selectable
                .iter()
                .filter(|s| checked.models[s.model.index()].backend.index() == i)
                .collect();
            if on_backend.is_empty() {
                continue;
            }
            let head = Check::new(Phase::Catalog, &backend.name);
            let catalog = if backend.simulated {
                checks.push(head.skip(SIMULATED));
                None
            } else if let Some(Err(why)) = self.keys.get(&backend.name) {
                checks.push(head.fail(why.clone()));
                None
            } else {
                match self.probe.catalog(
                    &backend.url,
                    self.key_of(backend),
                    self.timeout_of(backend),
                ) {
                    Ok(ids) => {
                        checks.push(head.ok(format!(
                            "`{}/models` lists {} model(s)",
                            backend.url.trim_end_matches('/'),
                            ids.len()
                        )));
                        Some(ids)
                    }
                    Err(why) => {
                        checks.push(
                            head.fail(format!("backend `{}` is unusable: {why}", backend.name)),
                        );
                        None
                    }
                }
            };
            for s in on_backend {
                let model = &checked.models[s.model.index()];
                let row =
                    Check::new(Phase::Catalog, &backend.name).model(&model.name, &model.serves);
                let Some(ids) = &catalog else {
                    checks.push(row.skip(if backend.simulated {
                        SIMULATED
                    } else {
                        "the backend's catalog could not be read"
                    }));
                    continue;
                };
                if ids.iter().any(|id| id == &model.serves) {
                    served.insert(s.model);
                    checks.push(row.ok(format!("served ({})", s.why.join(", "))));
                } else {
                    checks.push(row.fail(format!(
                        "`{}` is not served by backend `{}` ({}); it serves: {}",
                        model.serves,
                        backend.name,
                        s.why.join(", "),
                        listing(ids)
                    )));
                }
            }
        }
        served
    }

    /// Phase 2. Returns the models that answered.
    fn direct(&self, served: &HashSet<ModelId>, checks: &mut Vec<Check>) -> HashSet<ModelId> {
        let checked = self.checked();
        let mut answered = HashSet::new();
        for (i, model) in checked.models.iter().enumerate() {
            let id = ModelId(i as u32);
            let backend = self.backend_of(model);
            let row = Check::new(Phase::Direct, &backend.name).model(&model.name, &model.serves);
            if backend.simulated {
                checks.push(row.skip(SIMULATED));
                continue;
            }
            if !served.contains(&id) {
                checks.push(row.skip("not served: not sent"));
                continue;
            }
            let body = json!({
                "model": model.serves,
                "messages": [{"role": "user", "content": "ping"}],
                "max_tokens": 1,
            });
            let result = self.send(backend, &[], &body);
            let row = match result {
                Err(row_detail) => row.fail(row_detail),
                Ok(c) if (200..300).contains(&c.status) => {
                    answered.insert(id);
                    row.timed(c.status, c.latency).ok("answered")
                }
                Ok(c) => row
                    .timed(c.status, c.latency)
                    .fail(refusal(c.status, c.error.as_deref())),
            };
            checks.push(row);
        }
        answered
    }

    /// Phase 3.
    fn routed(&self, answered: &HashSet<ModelId>, checks: &mut Vec<Check>) {
        let checked = self.checked();
        for (i, route) in checked.routes.iter().enumerate() {
            let to_backend = &checked.backends[checked.models[route.to.index()].backend.index()];
            let Some(case) = plan::representative_test(checked, RouteId(i as u32)) else {
                checks.push(
                    Check::new(Phase::Routed, &to_backend.name)
                        .route(&route.name, None)
                        .skip("no `test` expects this route"),
                );
                continue;
            };
            let row = |backend: &str| {
                Check::new(Phase::Routed, backend).route(&route.name, Some(&case.name))
            };
            let result = run_case(self.policy, case);
            let chosen = match &result.actual {
                Actual::Route { route: r, model } if *r == route.name => {
                    checked.model_by_name(model)
                }
                other => {
                    checks.push(row(&to_backend.name).fail(format!(
                        "the policy decides the test as {other}, not this route: run `src test`"
                    )));
                    continue;
                }
            };
            let Some(chosen) = chosen else {
                checks.push(row(&to_backend.name).fail("the decision names no model"));
                continue;
            };
            let model = &checked.models[chosen.index()];
            let backend = self.backend_of(model);
            let row = row(&backend.name).model(&model.name, &model.serves);
            if backend.simulated {
                checks.push(row.skip(SIMULATED));
                continue;
            }
            if !answered.contains(&chosen) {
                checks.push(row.skip(format!(
                    "model `{}` did not pass the direct request: not sent",
                    model.name
                )));
                continue;
            }
            let mut body = chat_body(case);
            if let Some(object) = body.as_object_mut() {
                object.insert("model".into(), json!(model.serves));
                object.insert("max_tokens".into(), json!(1));
                object.remove("stream");
            }
            let row = match self.send(backend, &case.headers, &body) {
                Err(why) => row.fail(why),
                Ok(c) if !(200..300).contains(&c.status) => row
                    .timed(c.status, c.latency)
                    .fail(refusal(c.status, c.error.as_deref())),
                Ok(c) => {
                    let timed = row.timed(c.status, c.latency);
                    match c.model {
                        Some(m) if m == model.serves => {
                            timed.ok(format!("reached `{m}` (model `{}`)", model.name))
                        }
                        Some(m) => timed.fail(format!(
                            "expected an answer from `{}` (model `{}`), got one from `{m}`",
                            model.serves, model.name
                        )),
                        None => timed.fail("the answer names no `model`"),
                    }
                }
            };
            checks.push(row);
        }
    }

    fn send(
        &self,
        backend: &BackendDef,
        headers: &[(String, String)],
        body: &serde_json::Value,
    ) -> Result<probe::Completion, String> {
        self.probe.complete(
            &backend.url,
            self.key_of(backend),
            headers,
            body,
            self.timeout_of(backend),
        )
    }
}

fn refusal(status: u16, error: Option<&str>) -> String {
    match error {
        Some(e) => format!("answered {status}: {e}"),
        None => format!("answered {status}"),
    }
}

fn listing(ids: &[String]) -> String {
    if ids.is_empty() {
        return "nothing".to_string();
    }
    ids.iter()
        .map(|id| format!("`{id}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_use_the_language_durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("10").is_err());
    }

    #[test]
    fn served_lists_are_quoted() {
        assert_eq!(listing(&["a".into(), "b".into()]), "`a`, `b`");
        assert_eq!(listing(&[]), "nothing");
    }
}
