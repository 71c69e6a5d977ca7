#!/usr/bin/env bash
# Regenerates the committed peers findings, results/peers/*.json and README.md, on purpose: the
# peers tests run as ctest runs them (label peers, the cpu preset's build), but write their
# findings there instead of under build/cpu/peers-findings. Run from anywhere; commit the result
# with a message saying why the findings changed (a new peer version, a new test, ...).
#   bash tests/peers/update_findings.sh [extra ctest arguments, e.g. -R llama]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
FP8LAB_PEERS_RESULTS="$root/results/peers" ctest --preset cpu -L peers "$@"
git -C "$root" status --short results/peers
