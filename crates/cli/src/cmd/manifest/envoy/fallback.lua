-- A request the router did not decide (it is down or silent, and the gateway fails open) is
-- sent to a model the backends know: the served id the client named, or else the default
-- route's. The router's headers are removed before the router is asked, so one set here means
-- the router decided and nothing is done.

-- Where the first byte after `i` that is not JSON white space is.
local function skip_blank(s, i)
  return s:find("[^ \t\r\n]", i) or (#s + 1)
end

-- Where the JSON string opening at `i` closes.
local function string_end(s, i)
  local j = i + 1
  while true do
    local k = s:find('["\\]', j)
    if k == nil then return nil end
    if s:byte(k) == 34 then return k end
    j = k + 2
  end
end

-- Where the string value of the top-level `model` of a JSON object is, quotes included; nil
-- when the body is not an object with one. Only the top level is read: a `model` key nested in
-- a message or a tool's schema is skipped with its object.
local function model_value(s)
  local i = skip_blank(s, 1)
  if s:byte(i) ~= 123 then return nil end
  local depth, key_next = 1, true
  i = i + 1
  while i <= #s do
    local c = s:byte(i)
    if c == 34 then
      local e = string_end(s, i)
      if e == nil then return nil end
      if depth == 1 and key_next then
        local colon = skip_blank(s, e + 1)
        if s:byte(colon) ~= 58 then return nil end
        local value = skip_blank(s, colon + 1)
        if s:sub(i + 1, e - 1) == "model" then
          if s:byte(value) ~= 34 then return nil end
          local value_end = string_end(s, value)
          if value_end == nil then return nil end
          return value, value_end
        end
        key_next = false
        i = value
      else
        i = e + 1
      end
    elseif c == 123 or c == 91 then
      depth = depth + 1
      i = i + 1
    elseif c == 125 or c == 93 then
      depth = depth - 1
      if depth == 0 then return nil end
      i = i + 1
    else
      if c == 44 and depth == 1 then key_next = true end
      i = i + 1
    end
  end
  return nil
end

-- `s` as a JSON string.
local function json_string(s)
  local escaped = s:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end)
  return '"' .. escaped .. '"'
end

function envoy_on_request(handle)
  local headers = handle:headers()
  local path = (headers:get(":path") or ""):gsub("%?.*", "")
  if headers:get(SELECTED) ~= nil or headers:get(":method") ~= "POST" or not DECIDED[path] then
    return
  end
  local body = handle:body()
  if body == nil then return end
  local text = body:getBytes(0, body:length())
  local from, to = model_value(text)
  if from == nil then return end
  local served = text:sub(from + 1, to - 1)
  local backend = SERVED[served]
  if backend == nil then
    served, backend = DEFAULT_MODEL, DEFAULT_BACKEND
    body:setBytes(text:sub(1, from - 1) .. json_string(served) .. text:sub(to + 1))
  end
  -- The body call waited for the whole body: the headers are fetched again.
  headers = handle:headers()
  headers:replace(SELECTED, served)
  headers:replace(GATEWAY, served)
  headers:replace(BACKEND, backend)
  handle:clearRouteCache()
end
