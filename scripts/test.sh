#!/usr/bin/env bash
# Set everything up (once) and run the whole test suite with lint and the
# import contract (the core never imports Qt).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
export QT_QPA_PLATFORM=offscreen
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/lint-imports
exec .venv/bin/python -m pytest "$@"
