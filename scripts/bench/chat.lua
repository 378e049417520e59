-- wrk request of the proxy benchmark: one small non-streaming chat completion, the same for
-- every target. BENCH_AUTH, when set, is sent as a bearer token (LiteLLM needs its master key).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local auth = os.getenv("BENCH_AUTH")
if auth and auth ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. auth
end
wrk.body = '{"model":"auto","messages":[{"role":"system","content":"You are helpful."},'
  .. '{"role":"user","content":"my build fails with a compile error in the parser, what should I check first?"}],'
  .. '"temperature":0.2,"max_tokens":16}'
