-- wrk request of the proxy benchmark: one small non-streaming chat completion, the same for
-- every target. BENCH_AUTH, when set, is sent as a bearer token (LiteLLM needs its master key).
-- BENCH_HEADERS adds headers, `name: value` separated by `;` (the Portkey gateway reads its
-- upstream from headers). BENCH_SESSION=1 sends an `x-session-id` per wrk thread, so every call
-- after a thread's first follows that session's pin.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local auth = os.getenv("BENCH_AUTH")
if auth and auth ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. auth
end
for name, value in string.gmatch(os.getenv("BENCH_HEADERS") or "", "%s*([^:;]+):%s*([^;]*)") do
  wrk.headers[name] = value
end
wrk.body = '{"model":"auto","messages":[{"role":"system","content":"You are helpful."},'
  .. '{"role":"user","content":"my build fails with a compile error in the parser, what should I check first?"}],'
  .. '"temperature":0.2,"max_tokens":16}'

local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("thread_index", threads)
end

function init(args)
  if os.getenv("BENCH_SESSION") == "1" then
    wrk.headers["x-session-id"] = "bench-session-" .. tostring(thread_index)
  end
end

-- The trimmed mean line (`done`), from the script beside this one.
dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "trimmed.lua")
