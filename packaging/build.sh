#!/usr/bin/env bash
# Build the one-folder bundle into dist/vllmchat/ (run after scripts/setup.sh dev).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pip install -q "pyinstaller>=6.10"
.venv/bin/pyinstaller --noconfirm --clean --log-level WARN \
  --distpath dist --workpath build/pyinstaller packaging/vllmchat.spec
echo "bundle: dist/vllmchat/vllmchat"
