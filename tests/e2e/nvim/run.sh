#!/usr/bin/env bash
# Neovim (headless) as a real client of `src lsp`: diagnostics with their position and code, and
# formatting. Needs `nvim` (Debian: apt-get install -y neovim) and SRC_BIN, the `src` binary.
# Exits non-zero on any failure.
set -euo pipefail

: "${SRC_BIN:?set SRC_BIN to the path of the src binary}"
command -v nvim >/dev/null || { echo "nvim is not installed" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/policy" "$work/messy"

cat > "$work/policy/providers.sr" <<'SR'
backend sim { url = "http://127.0.0.1:8000/v1"  simulated = true }
model small  { backend = sim  serves = "Qwen/Qwen3-0.6B" }
model strong { backend = sim  serves = "Qwen/Qwen3-8B" }
SR
cat > "$work/policy/routing.sr" <<'SR'
# é中😀 non-ASCII text before the error
signal code_talk = contains(prompt, ["segfault", "é中😀"])
route default { to small }
route coding priority 10 { when code_talk and contains(prompt, ["😀"])  to strnog }
SR
printf 'signal   a=true\nroute default {to small}\n' > "$work/messy/messy.sr"

SRC_BIN="$SRC_BIN" SR_WORK="$work" timeout 120 \
  nvim --headless --clean -u "$here/init.lua" "+lua print('init did not finish')" "+cquit 1"
