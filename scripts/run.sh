#!/usr/bin/env bash
# Set everything up (once) and start vllmchat on the demo model.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
"$here/scripts/setup.sh" run
exec "$here/.venv/bin/vllmchat" "$@"
