#!/usr/bin/env bash
# Runs the official `anthropic` Python client (tests/e2e/anthropic_client.py) against a fresh
# `src serve` on `POST /v1/messages`: the built-in simulator through translation, and a
# tool-calling OpenAI backend the script serves itself.
# Usage: tests/e2e/anthropic_client.sh [SRC_BINARY] [PYTHON]
#        (defaults: target/debug/src, and the client environment scripts/setup.sh makes)
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${1:-target/debug/src}
python=${2:-.cache/venv-anthropic/bin/python}
exec "$python" tests/e2e/anthropic_client.py "$src"
