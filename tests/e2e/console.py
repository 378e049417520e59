"""Drives the operator console in headless Chromium (over WebDriver, with chromium-driver)
against a running `src serve` on the simulator, and asserts on the page's DOM:

- the live stream shows the requests sent, with their routes;
- the explain box answers what `src explain` answers for the same prompt;
- the budgets view shows a tenant's use of each budget in the current window;
- a broken policy edit shows the reload error with its diagnostic.

A screenshot of each view is saved in SHOTS. Only the standard library is used.

Usage: console.py SRC API_PORT ADMIN_PORT DRIVER_PORT POLICY_DIR SERVER_PID SHOTS
"""

import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

src, api, admin, driver, policy_dir, server_pid, shots = sys.argv[1:8]
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
PATIENCE = 30.0


def http(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read() or b"null")


class Browser:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"
        profile = tempfile.mkdtemp(prefix="src-console-chromium-")
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless", "--no-sandbox", "--disable-gpu",
                         "--window-size=1280,900", f"--user-data-dir={profile}"],
            },
        }}}
        self.session = http("POST", self.base + "/session", caps)["value"]["sessionId"]

    def call(self, method, path, body=None):
        return http(method, f"{self.base}/session/{self.session}{path}", body)["value"]

    def open(self, url):
        self.call("POST", "/url", {"url": url})

    def find(self, css):
        found = self.call("POST", "/element", {"using": "css selector", "value": css})
        if ELEMENT not in found:
            raise AssertionError(f"no element `{css}` on the page: {found}")
        return found[ELEMENT]

    def click(self, css):
        self.call("POST", f"/element/{self.find(css)}/click", {})

    def type(self, css, text):
        element = self.find(css)
        self.call("POST", f"/element/{element}/clear", {})
        self.call("POST", f"/element/{element}/value", {"text": text})

    def js(self, script, *args):
        return self.call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def wait(self, what, script, *args):
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            value = self.js(script, *args)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"never happened on the page: {what}")

    def screenshot(self, name):
        png = base64.b64decode(self.call("GET", "/screenshot"))
        with open(os.path.join(shots, name), "wb") as f:
            f.write(png)

    def close(self):
        http("DELETE", f"{self.base}/session/{self.session}")


def chat(text, session=None, key=None):
    body = {"model": "auto", "messages": [{"role": "user", "content": text}]}
    headers = {"content-type": "application/json"}
    if session:
        headers["x-session-id"] = session
    if key:
        headers["authorization"] = "Bearer " + key
    request = urllib.request.Request(f"http://127.0.0.1:{api}/v1/chat/completions",
                                     data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=60) as r:
        return r.headers["x-sr-route"]


def main():
    os.makedirs(shots, exist_ok=True)
    browser = Browser(driver)
    try:
        browser.open(f"http://127.0.0.1:{admin}/#live")
        browser.wait("the live stream connects",
                     "return document.getElementById('live-state').textContent === 'connected'")

        # Live decisions: the requests sent show up with the routes the proxy chose.
        sent = {"my service panics with this stack trace": "coding",
                "hello there": "default", "a segfault, again": "coding"}
        for prompt, route in sent.items():
            assert chat(prompt) == route, prompt
        rows = browser.wait("three rows in the live stream", """
            const rows = [...document.querySelectorAll('#live-rows tr')];
            return rows.length >= 3 ? rows.map(r => [r.dataset.route, r.dataset.model, r.dataset.path]) : null;
        """)
        assert sorted(r[0] for r in rows) == ["coding", "coding", "default"], rows
        assert all(r[2] == "upstream" for r in rows), rows
        assert {r[1] for r in rows} == {"strong", "small"}, rows
        browser.wait("counts per route", """
            const row = document.querySelector('#counts-route tr[data-name="coding"]');
            return row && row.children[1].textContent === '2';
        """)
        # A filter hides the other route's rows from then on.
        browser.js("const s = document.getElementById('f-route'); s.value = 'default';"
                   "s.dispatchEvent(new Event('change'));")
        browser.js("document.getElementById('live-rows').replaceChildren();")
        chat("my service panics with this stack trace")
        chat("hello there")
        browser.wait("the filtered row", "return document.querySelectorAll('#live-rows tr').length === 1")
        only = browser.js("return document.querySelector('#live-rows tr').dataset.route")
        assert only == "default", only
        browser.js("const s = document.getElementById('f-route'); s.value = '';")
        browser.screenshot("live.png")

        # The policy as a picture: routes in priority order, with their conditions.
        browser.click('#tabs button[data-view="policy"]')
        routes = browser.wait("the routes", """
            const items = [...document.querySelectorAll('#pic-routes li')];
            return items.length ? items.map(i => i.dataset.route) : null;
        """)
        assert routes == ["coding", "long", "default"], routes
        browser.screenshot("policy.png")

        # The explain box answers what `src explain` answers.
        prompt = "why does my build fail with a compile error?"
        cli = json.loads(subprocess.check_output(
            [src, "explain", policy_dir, "--prompt", prompt, "--format", "json"]))
        browser.click('#tabs button[data-view="explain"]')
        browser.type("#explain-input", prompt)
        browser.click("#explain-go")
        page = browser.wait("the explain answer", """
            const d = document.getElementById('explain-decision');
            if (!d.textContent) return null;
            return {
              route: d.dataset.route, model: d.dataset.model,
              trace: [...document.querySelectorAll('#explain-trace > li')].map(l => [l.dataset.kind, l.dataset.name, l.dataset.state]),
              signals: [...document.querySelectorAll('#explain-signals tr')].map(r => r.dataset.signal),
            };
        """)
        assert page["route"] == cli["route"], (page, cli)
        assert page["model"] == cli["model"], (page, cli)
        assert page["trace"] == [[c["kind"], c["name"], c["state"]] for c in cli["trace"]], (page, cli)
        assert page["signals"] == list(cli["signals"].keys()), (page, cli)
        browser.screenshot("explain.png")

        # Sessions: the pin a conversation made, with its turns.
        chat("hello there", session="task-7")
        chat("and again", session="task-7")
        browser.click('#tabs button[data-view="sessions"]')
        pin = browser.wait("the session's pin", """
            const row = document.querySelector('#sessions tr[data-session="task-7"]');
            return row ? [row.dataset.model, row.children[3].textContent, row.children[8].textContent] : null;
        """)
        assert pin[:2] == ["small", "2"], pin
        # The session's recent decisions, kept by the router while this page watches.
        assert pin[2].count("default → small") == 2, pin
        browser.screenshot("sessions.png")

        # Budgets (console.sh adds two to the policy): one tenant's use, as the live stream names
        # the tenant. The tenant sent three requests; every other request of this test is
        # anonymous, a tenant of its own.
        browser.click('#tabs button[data-view="live"]')
        before = set(browser.js("return [...document.querySelectorAll('#live-rows tr')].map(r => r.dataset.tenant)"))
        for prompt in ["hello there", "my service panics with this stack trace", "hello again"]:
            chat(prompt, key="sk-console-budgets")
        tenant = browser.wait("the keyed tenant in the live stream", """
            const rows = [...document.querySelectorAll('#live-rows tr')].map(r => r.dataset.tenant);
            const fresh = rows.filter(t => t && !arguments[0].includes(t));
            return fresh.length === 3 ? fresh[0] : null;
        """, sorted(before))
        browser.click('#tabs button[data-view="budgets"]')
        browser.type("#budgets-tenant", tenant)
        browser.click("#budgets-go")
        # Opening the view shows the first tenant the stream saw until the typed one is
        # fetched, so the table counts only once its note names the tenant typed.
        budgets = browser.wait("the tenant's budgets, tokens charged", """
            const rows = [...document.querySelectorAll('#budgets tbody tr')];
            const out = Object.fromEntries(rows.map(r => [r.dataset.budget,
                [r.children[1].textContent, r.children[2].textContent, r.children[3].textContent,
                 r.children[4].textContent.trim(), Number(r.dataset.used), Number(r.dataset.share)]]));
            const note = document.getElementById('budgets-note').textContent;
            if (!note.endsWith(' of tenant ' + arguments[0]) || !out.tokens_seen || out.tokens_seen[4] === 0) {
                document.getElementById('budgets-go').click();
                return null;
            }
            return out;
        """, tenant)
        assert sorted(budgets) == ["per_key", "tokens_seen"], budgets
        assert budgets["per_key"][:4] == ["tenant", "1h", "3 / 50 requests", "6%"], budgets
        assert budgets["per_key"][4:] == [3, 0.06], budgets
        assert budgets["tokens_seen"][1] == "1d" and budgets["tokens_seen"][4] > 0, budgets
        assert budgets["tokens_seen"][2].endswith(" / 1000000 tokens"), budgets
        browser.screenshot("budgets.png")

        # A broken edit: the reload fails, the old policy keeps serving, and the health view
        # shows the error with its rendered diagnostic.
        path = os.path.join(policy_dir, "policy.sr")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("to strong else small", "to stronk else small"))
        os.kill(int(server_pid), signal.SIGHUP)
        browser.click('#tabs button[data-view="health"]')
        shown = browser.wait("the failed reload", """
            const li = document.querySelector('#reloads li[data-result="error"] pre.diagnostics');
            return li ? li.textContent : null;
        """)
        assert "stronk" in shown and "E0" in shown, shown
        assert chat("hello there") == "default", "the old policy keeps serving"
        browser.screenshot("health.png")
    finally:
        browser.close()
    print("console: live stream, policy picture, explain box, sessions, budgets and reload error checked in Chromium")


main()
