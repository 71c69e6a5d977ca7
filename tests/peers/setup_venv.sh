#!/usr/bin/env bash
# Installs the pinned peers (tests/peers/requirements.lock: torch CPU use, ml_dtypes, torchao,
# mmasim, safetensors, numpy) into a virtual environment, build/peers-venv by default, and
# reuses it when it is already there with the same pins (a stamp file holds the lock's hash).
#   bash tests/peers/setup_venv.sh [VENV_DIR]
# Exit 0: ready. Exit 77: PyPI cannot be reached (or Python has no venv module) -- the peers
# label is skipped with the reason on stderr, never passed. Any other failure: exit 1.
# Cost (measured on the dev machine): torch's PyPI wheel for Linux x86-64 is the CUDA build
# and `import torch` needs its CUDA libraries, so the first install downloads about 2.7 GB
# (~1 min 50 s) and takes 4.7 GB on disk; later runs reuse it in well under a second.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${1:-$root/build/peers-venv}"
lock="$here/requirements.lock"
# Debian's Python by default (its venv module is the python3-venv package of .ci/deps).
default_python=python3
[[ -x /usr/bin/python3 ]] && default_python=/usr/bin/python3
python="${FP8LAB_PEERS_PYTHON:-$default_python}"
stamp_of_lock="$(sha256sum "$lock" | cut -d' ' -f1)"

mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9   # ctest -j: the first peers test installs, the others wait and then reuse

if [[ -f "$venv/.fp8lab-peers-stamp" && "$(cat "$venv/.fp8lab-peers-stamp")" == "$stamp_of_lock" ]]; then
  exit 0
fi

skip() { echo "peers: SKIPPED: $*" >&2; exit 77; }

if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  skip "$python has no venv/ensurepip module (Debian: apt-get install python3-venv; .ci/deps does)"
fi

# Built in place (a venv's scripts, ninja's among them, name its path) and stamped only when
# complete, so a half-finished one is never reused. A venv already there (an older lock, or an
# interrupted install) is updated in place: pip installs only what differs from the pins.
rm -f "$venv/.fp8lab-peers-stamp"
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
log="$venv/install.log"
echo "peers: installing the pinned peers into $venv (first time: ~2.7 GB from PyPI, a few minutes)" >&2
# Short timeout and few retries so that a machine without network gives up in seconds.
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --timeout 30 --retries 1 \
      -r "$lock" >"$log" 2>&1; then
  if grep -qiE "NewConnectionError|Failed to establish|Temporary failure in name resolution|Name or service not known|Network is unreachable|ConnectTimeout|ReadTimeout|Max retries exceeded|No route to host|Connection refused" "$log"; then
    tail -n 3 "$log" >&2
    skip "PyPI cannot be reached, so the peers (torch, ml_dtypes, torchao, mmasim, safetensors) cannot be installed"
  fi
  echo "peers: pip install failed, and not for lack of network (log: $log):" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
echo "$stamp_of_lock" >"$venv/.fp8lab-peers-stamp"
echo "peers: ready: $venv" >&2
