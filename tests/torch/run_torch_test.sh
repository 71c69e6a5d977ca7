#!/usr/bin/env bash
# One fp8lab.torch test: tests/torch/run_torch_test.sh SCRIPT.py|SCRIPT.sh BUILD_DIR [ARGS...]
# Runs the script with the pinned torch of the peers' venv (tests/peers/setup_venv.sh installs it,
# or exits 77, ctest's "skipped", with the reason when PyPI cannot be reached) and the fp8lab
# package of BUILD_DIR/python. No bytecode is written into the source tree.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
script="$1" build="$2"
shift 2
source "$here/../peers/use_venv.sh"
export PYTHONPATH="$build/python:$here" FP8LAB_BUILD="$build"
case "$script" in
  *.sh) exec bash "$here/$script" "$@" ;;
  *) exec "$venv/bin/python" "$here/$script" "$@" ;;
esac
