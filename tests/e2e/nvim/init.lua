-- Neovim as a real client of `src lsp`: open a policy with an error, wait for the diagnostic and
-- check where it points and its code; then format a messy file and check the result.
-- Written for Neovim 0.7+ (start_client/buf_attach_client, request_sync). Exits 0 on success,
-- 1 on the first failed check.

local bin = os.getenv('SRC_BIN')
local work = os.getenv('SR_WORK')

local function fail(msg)
  io.stderr:write('FAIL: ' .. msg .. '\n')
  vim.cmd('cquit 1')
end

local function check(cond, msg)
  if not cond then fail(msg) end
end

local function run()
  check(bin and bin ~= '', 'SRC_BIN is not set')
  check(work and work ~= '', 'SR_WORK is not set')

  local client_id = vim.lsp.start_client({
    name = 'src',
    cmd = { bin, 'lsp' },
    root_dir = work .. '/policy',
  })
  check(client_id ~= nil, 'the server did not start')

  -- 1. A policy with an unknown model: E011 on `strnog`.
  vim.cmd('edit ' .. work .. '/policy/routing.sr')
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].filetype = 'sr'
  vim.lsp.buf_attach_client(buf, client_id)
  local got = vim.wait(20000, function()
    return #vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR }) > 0
  end, 50)
  check(got, 'no error diagnostic arrived')
  local d = vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR })[1]
  local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
  check(code == 'E011', 'expected code E011, got ' .. tostring(code))
  -- Line 4 (0-based 3) is `route coding ... to strnog }` after a line of non-ASCII text.
  local line = vim.api.nvim_buf_get_lines(buf, d.lnum, d.lnum + 1, false)[1] or ''
  local col = line:find('strnog', 1, true)
  check(d.lnum == 3, 'expected the error on line 4, got line ' .. tostring(d.lnum + 1))
  check(col ~= nil and d.col == col - 1,
    'expected the error at byte column ' .. tostring(col and col - 1) .. ', got ' .. tostring(d.col))

  -- 2. Formatting a messy file.
  vim.cmd('edit ' .. work .. '/messy/messy.sr')
  local messy = vim.api.nvim_get_current_buf()
  vim.bo[messy].filetype = 'sr'
  vim.lsp.buf_attach_client(messy, client_id)
  local client = vim.lsp.get_client_by_id(client_id)
  vim.wait(10000, function() return client.initialized end, 50)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(messy) },
    options = { tabSize = 2, insertSpaces = true },
  }
  local reply = client.request_sync('textDocument/formatting', params, 20000, messy)
  check(reply ~= nil and reply.err == nil, 'formatting failed: ' .. vim.inspect(reply))
  check(reply.result ~= nil and #reply.result > 0, 'formatting returned no edit')
  vim.lsp.util.apply_text_edits(reply.result, messy, 'utf-16')
  local text = table.concat(vim.api.nvim_buf_get_lines(messy, 0, -1, false), '\n')
  local want = table.concat({
    'signal a = true',
    '',
    'route default {',
    '  to small',
    '}',
  }, '\n')
  check(text == want, 'formatted text differs:\n' .. text)

  vim.lsp.stop_client(client_id)
  print('nvim e2e: ok')
  vim.cmd('qall!')
end

local ok, err = pcall(run)
if not ok then fail(tostring(err)) end
