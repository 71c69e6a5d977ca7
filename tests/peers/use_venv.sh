# Sourced by the runners of the tests that need the pinned peers (run_peer.sh, tests/torch/
# run_torch_test.sh): installs or reuses build/peers-venv (FP8LAB_PEERS_VENV), exits 77 (ctest:
# skipped, with a line saying why) when it cannot be installed offline, and puts it first on PATH.
peers_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${FP8LAB_PEERS_VENV:-$peers_root/build/peers-venv}"
bash "$peers_root/tests/peers/setup_venv.sh" "$venv"
rc=$?
((rc == 0)) || exit "$rc"
export PATH="$venv/bin:$PATH" PYTHONDONTWRITEBYTECODE=1  # no bytecode written into the source tree
