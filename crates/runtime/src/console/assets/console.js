// The src operator console: plain script, no framework, no network beyond this listener.
"use strict";

const API = "/v1/console/";
const MAX_ROWS = 500;
let token = sessionStorage.getItem("src-admin-token") || "";
let paused = false;
let liveReader = null;
const seen = { routes: new Set(), models: new Set(), tenants: new Set() };
const evidence = { prompt: 0, cached: 0, answers: 0 };
// Requests the server's pace left out of the stream since this page connected.
let notShown = 0;

function $(id) { return document.getElementById(id); }
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c === null || c === undefined ? "" : c);
  return node;
}
function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}
function needToken(message) {
  $("token-form").hidden = false;
  $("token-error").textContent = message || "";
}

async function call(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const response = await fetch(API + path, opts);
  if (response.status === 401) {
    needToken(token ? "that token was refused" : "");
    throw new Error("unauthorized");
  }
  const body = await response.json();
  if (!response.ok) {
    const message = body && body.error ? body.error.message : response.statusText;
    throw new Error(message);
  }
  return body;
}

// ---- tabs
function show(view) {
  for (const b of document.querySelectorAll("#tabs button")) {
    b.classList.toggle("active", b.dataset.view === view);
  }
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== "view-" + view;
  if (view === "policy") loadPolicy();
  if (view === "health") loadHealth();
  if (view === "sessions") loadSessions();
  if (view === "budgets") loadBudgets();
  location.hash = view;
}

// ---- live decisions
function matches(line) {
  const want = (id, value) => { const v = $(id).value; return !v || v === (value || ""); };
  return want("f-route", line.route) && want("f-model", line.model) && want("f-path", line.path) &&
    want("f-tenant", line.tenant);
}
function addOption(select, set, value) {
  if (!value || set.has(value)) return;
  set.add(value);
  select.append(el("option", {}, value));
}
function onLine(line) {
  if (line.skipped) {
    notShown += line.skipped;
    $("live-paced").textContent = "· " + notShown + " requests not shown (paced stream; counts stay exact)";
  }
  addOption($("f-route"), seen.routes, line.route);
  addOption($("f-model"), seen.models, line.model);
  if (line.tenant && !seen.tenants.has(line.tenant)) $("budgets-tenants").append(el("option", { value: line.tenant }));
  addOption($("f-tenant"), seen.tenants, line.tenant);
  if (line.path === "upstream" && line.prompt_tokens !== null) {
    evidence.answers += 1;
    evidence.prompt += line.prompt_tokens;
    if (line.cached_tokens !== null) evidence.cached += line.cached_tokens;
  }
  if (paused || !matches(line)) return;
  const row = el("tr", { class: "path-" + line.path, "data-route": line.route || "", "data-model": line.model || "", "data-path": line.path, "data-tenant": line.tenant || "" },
    el("td", {}, (line.time || "").slice(11, 23)),
    el("td", { class: "route" }, line.route || (line.block ? "block " + line.block : "—")),
    el("td", { class: "model" }, line.model || "—"),
    el("td", { class: "path" }, line.path),
    el("td", {}, String(line.status)),
    el("td", { class: "tenant" }, line.tenant ? line.tenant.slice(0, 12) : ""),
    el("td", {}, (line.session || "") + (line.session_id ? " " + line.session_id : "")),
    el("td", {}, line.protection || ""),
    el("td", {}, line.latency_ms.toFixed(1)),
    el("td", {}, line.prompt_tokens === null ? "" : String(line.prompt_tokens)),
    // Text only where the operator enabled prompt display; otherwise its length.
    el("td", { class: "prompt" }, typeof line.prompt === "string" ? line.prompt
      : (line.prompt_chars === null || line.prompt_chars === undefined ? "" : line.prompt_chars + " chars")));
  const rows = $("live-rows");
  rows.prepend(row);
  while (rows.children.length > MAX_ROWS) rows.lastChild.remove();
}
async function openLive() {
  if (liveReader) return;
  try {
    const response = await fetch(API + "live", { headers: headers() });
    if (response.status === 401) { needToken(token ? "that token was refused" : ""); return; }
    $("live-state").textContent = "connected";
    liveReader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await liveReader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const l of event.split("\n")) {
          if (l.startsWith("data: ")) {
            try { onLine(JSON.parse(l.slice(6))); } catch (e) { /* a line we cannot read */ }
          }
        }
      }
    }
  } catch (e) {
    // The server went away; try again shortly.
  }
  liveReader = null;
  $("live-state").textContent = "reconnecting";
  setTimeout(openLive, 2000);
}
function fillCounts(table, minute, hour) {
  const body = table.tBodies[0];
  body.replaceChildren();
  const names = new Set([...Object.keys(hour || {}), ...Object.keys(minute || {})]);
  for (const name of [...names].sort()) {
    body.append(el("tr", { "data-name": name }, el("td", {}, name), el("td", {}, String((minute || {})[name] || 0)), el("td", {}, String((hour || {})[name] || 0))));
  }
}
async function loadCounts() {
  try {
    const c = await call("counts");
    fillCounts($("counts-route"), c.minute.by_route, c.hour.by_route);
    fillCounts($("counts-model"), c.minute.by_model, c.hour.by_model);
  } catch (e) { /* shown by the token form or the next poll */ }
}

// ---- the policy as a picture
function signalTags(signals) {
  return (signals || []).map(s => el("span", { class: "cost " + s.cost, title: s.cost }, s.name));
}
function warnings(list) {
  return (list || []).map(w => el("div", { class: "warning" }, "warning[" + w.code + "]: " + w.message + (w.help ? " — " + w.help : "")));
}
async function loadPolicy() {
  let p;
  try { p = await call("policy"); } catch (e) { return; }
  $("pic-blocks").replaceChildren(...(p.blocks.length ? [] : [el("li", { class: "none" }, "(none)")]), ...p.blocks.map(b => el("li", { class: "item", "data-block": b.name },
    el("b", {}, b.name), " ", el("code", {}, b.when), el("div", {}, b.action), el("div", {}, ...signalTags(b.signals)), ...warnings(b.warnings))));
  $("pic-routes").replaceChildren(...p.routes.map(r => el("li", { class: "item", "data-route": r.name },
    el("b", {}, r.name), r.priority === null ? " (default)" : " priority " + r.priority,
    el("div", {}, el("code", {}, r.when || "otherwise")),
    el("div", {}, "→ " + r.to + (r.fallbacks.length ? ", then " + r.fallbacks.join(", ") : "")),
    el("div", {}, ...signalTags(r.signals)), ...warnings(r.warnings))));
  $("pic-models").replaceChildren(...p.models.map(m => el("li", { class: "item", "data-model": m.name },
    el("b", {}, m.name), " serves ", el("code", {}, m.serves), " on " + m.backend, ...warnings(m.warnings))));
  $("pic-backends").replaceChildren(...p.backends.map(b => el("li", { class: "item", "data-backend": b.name },
    el("b", {}, b.name), " " + b.url, el("div", {}, "served ids: " + b.serves.join(", ")), ...warnings(b.warnings))));
  $("pic-signals").replaceChildren(...p.signals.map(s => el("li", { class: "item", "data-signal": s.name },
    el("span", { class: "cost " + s.cost }, s.cost), el("b", {}, s.name), " = ", el("code", {}, s.definition), ...warnings(s.warnings))));
  $("pic-other").replaceChildren(...warnings(p.other_warnings));
}

// ---- explain box
function explainBody() {
  const text = $("explain-input").value;
  const hdrs = {};
  for (const line of $("explain-headers").value.split("\n")) {
    const at = line.indexOf(":");
    if (at > 0) hdrs[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    try { return { request: JSON.parse(trimmed), headers: hdrs }; } catch (e) { /* a prompt that starts with a brace */ }
  }
  return { prompt: text, headers: hdrs };
}
async function runExplain() {
  $("explain-error").textContent = "";
  let e;
  try {
    e = await call("explain", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(explainBody()) });
  } catch (err) {
    $("explain-error").textContent = err.message;
    $("explain-decision").textContent = "";
    return;
  }
  let decision = e.blocked ? "blocked by `" + e.blocked + "`" + (e.model ? ": sent to model `" + e.model + "`" : ": refused")
    : e.route ? "route `" + e.route + "`" : "explicit model (routing skipped)";
  if (e.model && e.serves) decision += " — model `" + e.model + "` = `" + e.serves + "` on backend `" + e.backend + "`";
  const d = $("explain-decision");
  d.textContent = decision;
  d.dataset.route = e.route || "";
  d.dataset.model = e.model || "";
  d.dataset.blocked = e.blocked || "";
  $("explain-signals").tBodies[0].replaceChildren(...Object.entries(e.signals).map(([k, v]) =>
    el("tr", { "data-signal": k }, el("td", {}, k), el("td", {}, v === null ? "(not computed: not needed)" : JSON.stringify(v)))));
  $("explain-skipped").textContent = e.skipped.length ? "skipped: " + e.skipped.join(", ") : "";
  $("explain-trace").replaceChildren(...e.trace.map(c => el("li", { class: c.state.replace(" ", "-"), "data-kind": c.kind, "data-name": c.name, "data-state": c.state },
    c.kind + " `" + c.name + "` " + c.state + ": " + (c.condition || "(default)"),
    ...c.because.map(p => el("div", { class: p.state.replace(" ", "-") }, "because `" + p.condition + "` " + p.state)))));
}

// ---- sessions
async function loadSessions() {
  let s;
  try { s = await call("sessions"); } catch (e) { $("sessions-store").textContent = e.message; return; }
  if (!s.store) { $("sessions-store").textContent = "the policy declares no session"; $("sessions").replaceChildren(); return; }
  $("sessions-store").textContent = s.listed + " pin(s) in the " + s.store + " store (ttl " + s.ttl_s + " s" + (s.listed >= s.limit ? ", first " + s.limit + " shown" : "") + ")";
  const header = el("tr", {}, ...["session", "model", "route", "turns", "age s", "ttl left s", "recent outcomes", "switches", "recent decisions"].map(h => el("th", {}, h)));
  // Kept by the router since a page connected, whatever the stream's pace left out.
  const decisions = p => (p.decisions || []).slice(0, 5)
    .map(d => new Date(d.at_ms).toISOString().slice(11, 19) + " " + (d.route || "—") + " → " + (d.model || "—") + " " + d.path + (d.session ? " (" + d.session + ")" : "")).join("; ");
  const pinRow = p => el("tr", { "data-session": p.id, "data-model": p.model, class: p.stale ? "stale" : "" },
    el("td", {}, p.id), el("td", {}, p.model), el("td", {}, p.route || ""), el("td", {}, String(p.turns)),
    el("td", {}, p.age_s.toFixed(0)), el("td", {}, p.stale ? "expired" : p.ttl_left_s.toFixed(0)),
    el("td", {}, p.outcomes && p.outcomes.count ? p.outcomes.fails + " failed of " + p.outcomes.count : "none"),
    el("td", {}, p.switches.map(w => w.from + " → " + w.to + (w.observed ? " (observed: " + w.observed + ")" : "")).join("; ")),
    el("td", { class: "decisions" }, decisions(p)));
  const groups = Object.entries(s.tenants).map(([tenant, pins]) => el("div", { class: "tenant", "data-tenant": tenant },
    el("h3", {}, "tenant " + tenant),
    el("table", {}, el("thead", {}, header.cloneNode(true)), el("tbody", {}, ...pins.map(pinRow)))));
  $("sessions").replaceChildren(...groups);
}

// ---- budgets
function duration(ms) {
  const units = [[86400000, "d"], [3600000, "h"], [60000, "m"], [1000, "s"]];
  for (const [size, unit] of units) if (ms >= size && ms % size === 0) return ms / size + unit;
  return ms + "ms";
}
function amount(value, unit) {
  return unit === "cost" ? value.toFixed(2) : String(Math.round(value));
}
async function loadBudgets() {
  // Until a tenant is named, the first one the live stream has shown.
  if (!$("budgets-tenant").value && !$("budgets-per").value && seen.tenants.size) {
    $("budgets-tenant").value = seen.tenants.values().next().value;
  }
  const tenant = $("budgets-tenant").value.trim();
  const per = $("budgets-per").value.trim();
  const body = $("budgets").tBodies[0];
  if (!tenant && !per) {
    $("budgets-note").textContent = "name a tenant (as the live stream shows it) or a per value";
    body.replaceChildren();
    return;
  }
  const query = [tenant ? "tenant=" + encodeURIComponent(tenant) : "", per ? "per=" + encodeURIComponent(per) : ""].filter(Boolean).join("&");
  let b;
  try { b = await call("budgets?" + query); } catch (e) { $("budgets-note").textContent = e.message; body.replaceChildren(); return; }
  $("budgets-note").textContent = b.budgets.length ? "use in the current window" + (tenant ? " of tenant " + tenant : "") + (per ? " of per value " + per : "")
    : "no budget of the policy counts " + (tenant ? "tenants" : "this per value");
  body.replaceChildren(...b.budgets.map(x => el("tr", { "data-budget": x.budget, "data-used": String(x.used), "data-limit": String(x.limit), "data-share": String(x.share), class: x.share >= 1 ? "spent" : "" },
    el("td", {}, x.budget), el("td", {}, x.per), el("td", {}, duration(x.window_ms)),
    el("td", {}, amount(x.used, x.unit) + " / " + amount(x.limit, x.unit) + " " + x.unit),
    el("td", { class: "share" }, el("meter", { min: "0", max: "1", value: String(x.share) }), " " + (100 * x.share).toFixed(0) + "%"),
    el("td", {}, String(x.window_ends_in_s)))));
}

// ---- health
async function loadHealth() {
  let h;
  try { h = await call("health"); } catch (e) { return; }
  $("backends").tBodies[0].replaceChildren(...Object.entries(h.backends || {}).map(([name, b]) =>
    el("tr", { "data-backend": name }, el("td", {}, name), el("td", {}, b.ready ? "ready" : "down"),
      el("td", {}, b.simulated ? "simulated (not probed)" : (b.probed_at || "")), el("td", {}, b.detail || ""))));
  $("reloads").replaceChildren(...h.reloads.map(r => el("li", { class: "reload-" + r.result, "data-result": r.result, "data-generation": String(r.generation) },
    r.at + " — generation " + r.generation + " — " + r.result + (r.message ? ": " + r.message : ""),
    r.rendered ? el("pre", { class: "diagnostics" }, r.rendered) : "")));
  const latency = [];
  for (const [name, m] of Object.entries(h.model_latency || {})) latency.push(["model " + name, m]);
  for (const [name, m] of Object.entries(h.signal_latency || {})) latency.push(["signal " + name, m]);
  $("model-latency").tBodies[0].replaceChildren(...latency.map(([name, m]) =>
    el("tr", {}, el("td", {}, name), el("td", {}, String(m.count)), el("td", {}, m.mean_ms.toFixed(2)))));
  const ratio = h.cache.hit_ratio;
  $("cache-ratio").textContent = "router response cache: " + (ratio === null ? "no lookups yet" : (100 * ratio).toFixed(1) + "% hits") +
    " (" + Object.entries(h.cache.lookups).map(([k, v]) => k + " " + v).join(", ") + ")";
  $("prefix-evidence").textContent = "backend prefix-cache evidence (cached_tokens the backends reported, over the " + evidence.answers +
    " answers this page has seen): " + (evidence.prompt ? (100 * evidence.cached / evidence.prompt).toFixed(1) + "% of prompt tokens" : "none yet");
  $("status").textContent = "generation " + h.generation + (h.ready ? " · ready" : " · not ready");
}

// ---- start
$("token-form").addEventListener("submit", ev => {
  ev.preventDefault();
  token = $("token").value;
  sessionStorage.setItem("src-admin-token", token);
  $("token-form").hidden = true;
  openLive();
  loadCounts();
});
for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => show(b.dataset.view));
$("pause").addEventListener("change", ev => { paused = ev.target.checked; });
$("explain-go").addEventListener("click", runExplain);
$("budgets-form").addEventListener("submit", ev => { ev.preventDefault(); loadBudgets(); });
show((location.hash || "#live").slice(1) || "live");
openLive();
loadCounts();
setInterval(loadCounts, 5000);
setInterval(() => { if (!$("view-health").hidden) loadHealth(); }, 3000);
setInterval(() => { if (!$("view-sessions").hidden) loadSessions(); }, 5000);
setInterval(() => { if (!$("view-budgets").hidden) loadBudgets(); }, 5000);
