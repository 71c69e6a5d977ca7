#!/usr/bin/env bash
# Installs Debian's Slurm (slurm-wlm: slurmctld, slurmd and the client commands) and MUNGE for
# the cluster test (tests/cluster/slurm_test.sh, label cluster), if missing; safe to run again.
# .ci/run calls it before ctest. It is not part of .ci/deps on purpose: on a machine that runs
# systemd, Debian enables these daemons on install (munged starts with a new key; slurmctld and
# slurmd wait for an /etc/slurm/slurm.conf), which nobody building fp8lab should get unasked.
# The test uses none of that: it starts its own munged, slurmctld and slurmd on a private
# socket and free ports of 127.0.0.1, from a configuration in a temporary directory.
set -euo pipefail
packages=(slurm-wlm munge)   # 9 packages with --no-install-recommends, about 15 s
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "fp8lab: installing ${missing[*]} (for the cluster test)" >&2
  sudo=""
  [[ $(id -u) == 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
