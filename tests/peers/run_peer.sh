#!/usr/bin/env bash
# One peers test: tests/peers/run_peer.sh SCRIPT.py BUILD_DIR [ARGS...]
# Installs (or reuses) the pinned peers in build/peers-venv, then runs the script with them.
# Exit 77 (ctest: skipped) with a line saying why when they cannot be installed offline.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
script="$1" build="$2"
shift 2
venv="${FP8LAB_PEERS_VENV:-$root/build/peers-venv}"
bash "$here/setup_venv.sh" "$venv"
rc=$?
((rc == 0)) || exit "$rc"
# mmasim compiles a small FMA helper at import (torch.utils.cpp_extension: the venv's ninja).
export PATH="$venv/bin:$PATH" TORCH_EXTENSIONS_DIR="$venv/torch_extensions"
exec "$venv/bin/python" "$here/$script" --build "$build" "$@"
