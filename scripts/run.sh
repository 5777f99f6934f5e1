#!/bin/sh
# Set everything up (once) and start vllmchat on the demo model, in this folder:
# python vllmchat/setup/__main__.py launch [APP ARGS].
here=$(cd "$(dirname "$0")/.." && pwd) || exit 1
python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || exec "$here/scripts/setup.sh"
exec "$python" "$here/vllmchat/setup/__main__.py" launch "$@"
