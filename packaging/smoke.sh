#!/usr/bin/env bash
# Build the bundle and start it headless: --version, then a self-test that loads the
# demo model in the bundled engine process and streams one reply.
# VLLMCHAT_BUNDLE_BUILT=1: the bundle was just built (packaging/build.sh); start it only.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${VLLMCHAT_BUNDLE_BUILT:-}" = 1 ] || packaging/build.sh
home=$(mktemp -d)
export QT_QPA_PLATFORM=offscreen VLLMCHAT_DATA_DIR="$home/data" VLLMCHAT_CONFIG_DIR="$home/config" \
  VLLMCHAT_CACHE_DIR="$home/cache"
dist/vllmchat/vllmchat --version
timeout 300 dist/vllmchat/vllmchat --self-test
rm -rf "$home"
