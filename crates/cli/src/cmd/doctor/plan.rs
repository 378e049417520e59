//! What `src doctor` checks, read from the checked policy alone: every model a request can end
//! up on (with the reasons, for the report) and, per route, the `test` case that stands for it.
//! No I/O here, so the selection is unit tested without a backend.

use src_compiler::hir::{BlockActionDef, CheckedPolicy, ExpectDef, ModelId, RouteId, TestDef};

/// A model some request can be sent to, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selectable {
    pub model: ModelId,
    /// `route `coding` to`, `route `coding` else`, `block `unsafe` to`, `alias `fast``,
    /// `named by clients`.
    pub why: Vec<String>,
}

/// Every model a request can be sent to, in declaration order. A client may name any declared
/// model (or one of its aliases) in `model`, so every declared model is selectable; the reasons
/// say which routes, fallbacks, blocks and aliases reach it besides.
pub fn selectable_models(checked: &CheckedPolicy) -> Vec<Selectable> {
    let mut out: Vec<Selectable> = (0..checked.models.len())
        .map(|i| Selectable {
            model: ModelId(i as u32),
            why: Vec::new(),
        })
        .collect();
    let mut add = |m: ModelId, why: String| {
        if let Some(s) = out.get_mut(m.index()) {
            if !s.why.contains(&why) {
                s.why.push(why);
            }
        }
    };
    for route in &checked.routes {
        add(route.to, format!("route `{}` to", route.name));
        for &m in &route.fallbacks {
            add(m, format!("route `{}` else", route.name));
        }
    }
    for block in &checked.blocks {
        if let BlockActionDef::Redirect(m) = block.action {
            add(m, format!("block `{}` to", block.name));
        }
    }
    for (i, model) in checked.models.iter().enumerate() {
        for alias in &model.aliases {
            add(ModelId(i as u32), format!("alias `{alias}`"));
        }
        add(ModelId(i as u32), "named by clients".to_string());
    }
    out
}

/// The `test` case that stands for `route`: the first, in declaration order, that expects it.
pub fn representative_test(checked: &CheckedPolicy, route: RouteId) -> Option<&TestDef> {
    checked
        .tests
        .iter()
        .find(|t| t.expect == ExpectDef::Route(route))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a failed step fails the test")]
    use super::*;
    use src_compiler::{check, CheckOptions};

    fn checked(text: &str) -> CheckedPolicy {
        let source = src_compiler::load::load_str("p.sr", text);
        let outcome = check(source, &CheckOptions::default());
        outcome.policy.unwrap()
    }

    const POLICY: &str = r#"
backend b { url = "http://127.0.0.1:1/v1" }
model small  { backend = b  serves = "s"  aliases = ["fast"] }
model strong { backend = b  serves = "S" }
model safe   { backend = b  serves = "x" }
signal code = contains(prompt, ["segfault"])
block unsafe { when contains(prompt, ["bomb"])  to safe }
route coding priority 10 { when code  to strong else small }
route default { to small }
test t1 { prompt = "plain"  expect default }
test t2 { prompt = "a segfault"  expect coding model strong }
test t3 { prompt = "another segfault"  expect coding }
"#;

    #[test]
    fn every_model_is_selectable_with_its_reasons() {
        let p = checked(POLICY);
        let sel = selectable_models(&p);
        let why = |name: &str| {
            let id = p.model_by_name(name).unwrap();
            sel.iter().find(|s| s.model == id).unwrap().why.clone()
        };
        assert_eq!(sel.len(), 3);
        assert_eq!(
            why("small"),
            [
                "route `coding` else",
                "route `default` to",
                "alias `fast`",
                "named by clients"
            ]
        );
        assert_eq!(why("strong"), ["route `coding` to", "named by clients"]);
        assert_eq!(why("safe"), ["block `unsafe` to", "named by clients"]);
    }

    #[test]
    fn the_first_test_expecting_a_route_represents_it() {
        let p = checked(POLICY);
        let coding = RouteId(p.routes.iter().position(|r| r.name == "coding").unwrap() as u32);
        assert_eq!(representative_test(&p, coding).unwrap().name, "t2");
        assert_eq!(
            representative_test(&p, p.default_route()).unwrap().name,
            "t1"
        );
    }
}
