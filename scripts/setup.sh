#!/bin/sh
# Set up vllmchat in a project-local virtual environment (.venv). Idempotent:
# a second run only checks its stamps. The set-up itself is Python (stdlib only):
# python -m vllmchat.setup; this wrapper only finds a Python to run it with.
#   usage: scripts/setup.sh [run|dev|llama]     (--plan [--json] shows the decisions)
#     run    the app (default)      dev    the app and the test tools
#     llama  only (re)build llama-cpp-python for this machine's backend
# PYTHON=python3.12 picks the Python; VLLMCHAT_BACKEND=cuda|vulkan|metal|hip|cpu
# forces a backend (docs/setup.md).
cd "$(dirname "$0")/.." || exit 1
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
  echo "vllmchat set-up: $python was not found" >&2
  echo "  fix: install Python 3.10 or newer (Debian/Ubuntu: sudo apt-get install python3 python3-venv; macOS: python.org or brew install python@3.12), or set PYTHON" >&2
  exit 2
fi
exec "$python" -m vllmchat.setup "$@"
