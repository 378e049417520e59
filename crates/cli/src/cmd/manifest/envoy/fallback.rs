//! The fail-open fallback: an `envoy.filters.http.lua` filter after the external processor.
//! When the router did not decide a request it would have (it is down or silent past
//! `message_timeout`, and Envoy passes the request on), the client's `"model": "auto"` reaches
//! no backend that knows it: every one answers 404, an outage. The script sends such a request
//! to a model the backends know instead: a served id the client named goes to its backend as
//! written; anything else (`auto`, a logical name) becomes the default route's served id, on its
//! backend. It sets `x-selected-model`, `x-gateway-model-name` and `x-sr-backend` as the router
//! would, and clears the route cache so the routes match them.
//!
//! Lua is in every Envoy build. The script (`fallback.lua`) reads the body's top-level `model`
//! with a small scanner rather than a JSON library, which Envoy's Lua does not have; the table of
//! served ids, the default and the paths come first, written from the policy.

use super::routes::Table;
use serde_json::{json, Value};
use src_compiler::hir::CheckedPolicy;
use src_runtime::headers;
use std::fmt::Write;

const SCRIPT: &str = include_str!("fallback.lua");

/// `s` as a Lua string literal: `"`, `\` and control bytes escaped as decimal `\ddd`, anything
/// else (UTF-8 included) as it is.
fn lua_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\{:03}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The script: the policy's table, then [`SCRIPT`].
pub fn source(checked: &CheckedPolicy, table: &Table) -> String {
    let (default_model, default_backend) = table.default_model(checked);
    let backend_name = |index: usize| {
        table
            .backends
            .get(index)
            .map_or("", |b| b.name.as_str())
            .to_string()
    };
    let mut out =
        String::from("-- Written by `src manifest --format envoy --fail-open` from the policy.\n");
    let _ = writeln!(out, "local DEFAULT_MODEL = {}", lua_string(default_model));
    let _ = writeln!(
        out,
        "local DEFAULT_BACKEND = {}",
        lua_string(&backend_name(default_backend))
    );
    out.push_str("local SERVED = {\n");
    for (served, backends) in &table.serving {
        if let Some(&first) = backends.first() {
            let _ = writeln!(
                out,
                "  [{}] = {},",
                lua_string(served),
                lua_string(&backend_name(first))
            );
        }
    }
    out.push_str("}\nlocal DECIDED = {\n");
    for (path, api) in src_runtime::door::PROXIED {
        if src_runtime::extproc::decides(api) {
            let _ = writeln!(out, "  [{}] = true,", lua_string(path));
        }
    }
    out.push_str("}\n");
    let _ = writeln!(
        out,
        "local SELECTED, GATEWAY, BACKEND = {}, {}, {}\n",
        lua_string(headers::SELECTED_MODEL),
        lua_string(headers::GATEWAY_MODEL_NAME),
        lua_string(headers::SR_BACKEND)
    );
    out.push_str(SCRIPT);
    out
}

pub fn filter(checked: &CheckedPolicy, table: &Table) -> Value {
    json!({
        "name": "envoy.filters.http.lua",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
            "default_source_code": {"inline_string": source(checked, table)},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lua_strings_escape_what_lua_reads_specially() {
        assert_eq!(lua_string("Qwen/Qwen3-8B"), "\"Qwen/Qwen3-8B\"");
        assert_eq!(lua_string("a\"b\\c\nd"), "\"a\\\"b\\\\c\\010d\"");
        assert_eq!(lua_string("é"), "\"é\"");
    }
}
