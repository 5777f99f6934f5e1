#!/usr/bin/env bash
# Set up vllmchat in a project-local virtual environment (.venv). Idempotent:
# the second run only checks a stamp. llama-cpp-python is built portably
# (GGML_NATIVE=OFF): a -march=native build can die with SIGILL on CPUs whose
# features differ from the build machine's. pip caches the built wheel.
#   usage: scripts/setup.sh [run|dev]
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-run}
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
extras=""
[ "$profile" = dev ] && extras="[dev]"
want="$(sha256sum pyproject.toml | cut -c1-16) $profile"
stamp=.venv/.vllmchat-setup
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] && ! grep -qx "$(sha256sum pyproject.toml | cut -c1-16) dev" "$stamp" 2>/dev/null; then
  export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}"
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
  echo "Setting up .venv (the first time builds llama.cpp: several minutes)..." >&2
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".$extras"
  echo "$want" > "$stamp"
fi
# Qt needs a few system libraries that minimal Linux images lack; the tests also
# validate the desktop entry (desktop-file-utils).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && { \
   ! .venv/bin/python -c "import PySide6.QtWidgets" 2>/dev/null || \
   { [ "$profile" = dev ] && ! command -v desktop-file-validate >/dev/null; }; }; then
  apt-get update -qq && apt-get install -y -qq libegl1 libgl1 libxkbcommon0 libfontconfig1 \
    libdbus-1-3 desktop-file-utils >/dev/null
fi
