#!/usr/bin/env bash
# Executes notebooks/STUDY.ipynb headless (jupyter nbconvert, Debian's python3 kernel) on a
# small sweep shaped like the study, and checks that it saved its figure.
# Usage: notebook_test.sh STUDY FIGURE.png PATH/TO/fp8lab SOURCE_DIR
set -euo pipefail
study=$1 figure=$2 fp8lab=$3 source_dir=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v jupyter >/dev/null || { echo "FAIL: jupyter nbconvert missing (bash .ci/deps)" >&2; exit 1; }
"$fp8lab" run "$source_dir/tests/notebook/${study}_small.toml" -o "$work/results.h5" --quiet >/dev/null
FP8LAB_RESULTS="$work/results.h5" FP8LAB_FIGURES="$work/figures" \
  jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=300 --output-dir "$work" \
  "$source_dir/notebooks/$study.ipynb" >"$work/log" 2>&1 || { cat "$work/log" >&2; echo "FAIL: $study.ipynb did not run" >&2; exit 1; }
[[ -s "$work/figures/$figure" ]] || { echo "FAIL: $study.ipynb saved no $figure" >&2; exit 1; }
echo "PASS [$study notebook]"
