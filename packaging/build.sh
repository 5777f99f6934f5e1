#!/bin/sh
# Build the one-folder bundle (run after scripts/setup.sh dev): on Linux
# dist/vllmchat/vllmchat, on macOS dist/vllmchat.app. Icons are drawn first.
set -eu
cd "$(dirname "$0")/.."
venv=${VLLMCHAT_VENV:-.venv}
"$venv/bin/python" -m pip install -q "pyinstaller>=6.10"
QT_QPA_PLATFORM=offscreen "$venv/bin/python" packaging/icons.py build/icons >/dev/null
"$venv/bin/pyinstaller" --noconfirm --clean --log-level WARN \
  --distpath dist --workpath build/pyinstaller packaging/vllmchat.spec
if [ "$(uname -s)" = Darwin ]; then echo "bundle: dist/vllmchat.app"; else echo "bundle: dist/vllmchat/vllmchat"; fi
