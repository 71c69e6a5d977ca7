#!/usr/bin/env bash
# One peers test: tests/peers/run_peer.sh SCRIPT.py BUILD_DIR [ARGS...]
# (FP8LAB_PEERS_RESULTS: where its findings go; BUILD_DIR/peers-findings by default)
# Installs (or reuses) the pinned peers in build/peers-venv, then runs the script with them.
# Exit 77 (ctest: skipped) with a line saying why when they cannot be installed offline.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
script="$1" build="$2"
shift 2
source "$here/use_venv.sh"
# mmasim compiles a small FMA helper at import (torch.utils.cpp_extension: the venv's ninja).
export TORCH_EXTENSIONS_DIR="$venv/torch_extensions"
# One thread per test: ctest -j2 runs two at once on 2 cores, and torch's default pool of one
# thread per core, run beside another test, made MMA-Sim's many small reductions 6x slower
# (measured: gemm_test.py 40 s with 2 threads, 7 s with 1). formats_test.py forks its own workers.
export OMP_NUM_THREADS=1
# Findings go under the build folder: a test never writes into the source tree. The committed copies
# in results/peers/ are regenerated on purpose, by tests/peers/update_findings.sh.
results="${FP8LAB_PEERS_RESULTS:-$build/peers-findings}"
exec "$venv/bin/python" "$here/$script" --build "$build" --results "$results" "$@"
