#!/usr/bin/env bash
# Installs what the tests need on a fresh machine (Debian, as root or with sudo): redis-server
# for the session-store tests, Neovim for the editor test, the `openai` Python client for the
# client test, and the model directories (scripts/models.sh). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v nvim >/dev/null || need_apt+=(neovim)
if ((${#need_apt[@]})); then
  echo "== apt-get install ${need_apt[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

venv=.cache/venv-e2e
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import openai' 2>/dev/null; then
  echo "== python client environment ($venv)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'openai==3.57.0'
fi

scripts/models.sh
