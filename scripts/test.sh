#!/usr/bin/env bash
# Set everything up (once) and run the whole test suite with lint, the import
# contracts (the core never imports Qt; the layers; no cycles) and mypy (strict
# for the core).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
export QT_QPA_PLATFORM=offscreen
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/lint-imports
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
