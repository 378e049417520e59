-- wrk request of the Messages benchmark: the conversation of chat.lua as an Anthropic Messages
-- request (`POST /v1/messages`), which `src serve` translates for the OpenAI upstream.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["anthropic-version"] = "2023-06-01"
wrk.body = '{"model":"auto","system":"You are helpful.","messages":['
  .. '{"role":"user","content":"my build fails with a compile error in the parser, what should I check first?"}],'
  .. '"temperature":0.2,"max_tokens":16}'

-- The trimmed mean line (`done`), from the script beside this one.
dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "trimmed.lua")
