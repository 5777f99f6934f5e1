#!/bin/sh
# Set everything up (once) and run the whole test suite with lint, the import
# contracts (the core never imports Qt; the layers; no cycles) and mypy (strict
# for the core): python -m vllmchat.setup test [PYTEST ARGS].
cd "$(dirname "$0")/.." || exit 1
python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || exec scripts/setup.sh
exec "$python" -m vllmchat.setup test "$@"
