#!/usr/bin/env bash
# Executes notebooks/STUDY.ipynb headless (jupyter nbconvert, Debian's python3 kernel) on a
# small sweep shaped like the study, and checks that
#   1. notebooks/fp8lab_results.py reads the sweep's file as the contract's grid
#      (check_grid.py: axes, order, types, every point, an interrupted copy);
#   2. the notebook ran against that grid without an error output;
#   3. it saved every figure it is listed with below (and no other), as PNG files, each with the
#      numbers it draws beside it (FIGURE.csv);
#   4. for the default study, on an interrupted copy of the file, it still runs and marks
#      its figure incomplete, and relative FP8LAB_RESULTS / FP8LAB_FIGURES are taken from the
#      directory the notebook was run from.
# Usage: notebook_test.sh STUDY FIGURE.png PATH/TO/fp8lab SOURCE_DIR
# (FIGURE is the one tests/CMakeLists.txt names; it must be among the study's list.) The sweep
# is tests/notebook/STUDY_small.toml; the notebook is notebooks/STUDY.ipynb unless notebook_of
# below names another (a second study that the same notebook plots).
set -euo pipefail
study=$1 figure=$2 fp8lab=$3 source_dir=$4
python=/usr/bin/python3  # Debian's, which sees python3-xarray & co. (FACTS.md)

# Every figure each notebook saves.
declare -A figures_of=(
  [default]="default_errors_by_recipe.png"
  [accumulation_k]="accumulation_k.png"
  [promotion_interval]="promotion_interval.png"
  [real_layers]="real_layers.png"
  [tile_size]="tile_size.png"
  [loss_scaling]="loss_scaling.png"
  [scale_trajectory]="scale_trajectory.png"
  [recompute]="recompute_tradeoff.png recompute_grad_error.png"
  [fp8_training]="fp8_training.png fp8_training_operand_sqnr.png"
  [fp8_training_nvfp4]="fp8_training.png fp8_training_operand_sqnr.png"
  [fp8_training_power]="fp8_training_power.png"
  [formats]="formats_error.png formats_clipping.png formats_ue8m0_tax.png formats_code_diff.png"
  [seed_techniques]="seed_techniques_curves.png seed_techniques_claims.png seed_techniques_zero.png"
)
declare -A notebook_of=([fp8_training_nvfp4]=fp8_training)
notebook=${notebook_of[$study]:-$study}
expected=${figures_of[$study]:-}
[[ -n "$expected" ]] || { echo "FAIL: no figure list for study $study in $0" >&2; exit 1; }
[[ " $expected " == *" $figure "* ]] || { echo "FAIL: $figure is not in $study's list ($expected)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v jupyter >/dev/null || { echo "FAIL: jupyter nbconvert missing (bash .ci/deps)" >&2; exit 1; }
"$fp8lab" run "$source_dir/tests/notebook/${study}_small.toml" -o "$work/results.h5" --quiet >/dev/null
"$python" "$source_dir/tests/notebook/check_grid.py" "$work/results.h5" "$source_dir"
# The seed-techniques notebook also reads a zero_memory sweep (FP8LAB_ZERO_RESULTS) for its ZeRO figure.
if [[ $study == seed_techniques ]]; then
  "$fp8lab" run "$source_dir/tests/notebook/zero_memory_small.toml" -o "$work/zero.h5" --quiet >/dev/null
  "$python" "$source_dir/tests/notebook/check_grid.py" "$work/zero.h5" "$source_dir"
  export FP8LAB_ZERO_RESULTS=$work/zero.h5
fi

# The training-power notebook also reads the dim256 noise sweep (FP8LAB_DIM256_RESULTS) for its trade.
if [[ $study == fp8_training_power ]]; then
  "$fp8lab" run "$source_dir/tests/notebook/fp8_training_power_dim256_small.toml" -o "$work/dim256.h5" --quiet >/dev/null
  export FP8LAB_DIM256_RESULTS=$work/dim256.h5
fi

# run_notebook RESULTS FIGURES_DIR: executes the notebook on RESULTS (execute_notebook.sh).
source "$(dirname "$0")/execute_notebook.sh"
run_notebook() {
  FP8LAB_RESULTS=$1 FP8LAB_FIGURES=$2 execute_notebook "$source_dir/notebooks/$notebook.ipynb" "$work"
}

text=$(run_notebook "$work/results.h5" "$work/figures")
grep -q "layout .*grid; dimensions" <<<"$text" || { echo "$text" >&2; echo "FAIL: $notebook.ipynb did not report reading a grid" >&2; exit 1; }
layout=$(grep -o "layout [^;]*" <<<"$text" | head -1)
for png in $expected; do
  [[ -s "$work/figures/$png" ]] || { echo "FAIL: $notebook.ipynb saved no $png" >&2; exit 1; }
  [[ "$(head -c 8 "$work/figures/$png" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] ||
    { echo "FAIL: $notebook.ipynb: $png is not a PNG file" >&2; exit 1; }
  # Beside every figure, the numbers it draws (notebooks/figure_data.py): a header and some rows.
  [[ $(wc -l <"$work/figures/${png%.png}.csv") -ge 2 ]] ||
    { echo "FAIL: $notebook.ipynb: no numbers beside $png (${png%.png}.csv)" >&2; exit 1; }
done
saved=$(cd "$work/figures" && ls *.png | sort | tr '\n' ' ')
[[ "$saved" == "$(tr ' ' '\n' <<<"$expected" | sort | tr '\n' ' ')" ]] ||
  { echo "FAIL: $notebook.ipynb saved [$saved], its list is [$expected] (update the list in $0)" >&2; exit 1; }

if [[ $study == fp8_training_nvfp4 ]]; then
  # The NVFP4 study through the training notebook: a row of its table and of the operand
  # statistics for the nvfp4 recipe (the notebook names a recipe by its file's stem).
  [[ $(grep -c "^nvfp4 " <<<"$text") -ge 2 ]] ||
    { echo "$text" >&2; echo "FAIL: $notebook.ipynb printed no nvfp4 rows for the NVFP4 study" >&2; exit 1; }
fi

if [[ $study == seed_techniques ]]; then
  # The ZeRO paper's example, checked from the file, and a verdict for every claim.
  grep -q "7.5B on 64 ranks (paper: 120 / 31.4 / 16.6 / 1.9 GB): \[120.0, 31.4, 16.6, 1.9\]" <<<"$text" &&
    [[ $(grep -c "^  verdict: " <<<"$text") -ge 10 ]] ||
    { echo "$text" >&2; echo "FAIL: $notebook.ipynb did not check ZeRO's example or give every claim a verdict" >&2; exit 1; }
fi

if [[ $study == default ]]; then
  # Relative FP8LAB_RESULTS / FP8LAB_FIGURES mean the caller's working directory, not
  # notebooks/ where the kernel runs.
  relative=$( (cd "$work" && run_notebook results.h5 figures-relative) ) ||
    { echo "FAIL: $notebook.ipynb did not run with relative FP8LAB_RESULTS / FP8LAB_FIGURES" >&2; exit 1; }
  [[ -s "$work/figures-relative/$figure" ]] ||
    { echo "$relative" >&2; echo "FAIL: relative FP8LAB_FIGURES: no $work/figures-relative/$figure" >&2; exit 1; }
  # An interrupted run: its first half of points only (flat layout: the first rows and no
  # end time; grid layout: the other points back to their fill, complete = "false").
  "$python" -c '
import sys, numpy as np, xarray as xr
ds = xr.open_dataset(sys.argv[1], engine="h5netcdf").load()
if "run" in ds.dims:
    part = ds.isel(run=slice(0, ds.sizes["run"] // 2))
    part.attrs["utc_end"] = ""
else:
    part = ds.copy(deep=True)
    unfinished = np.arange(part.status.size).reshape(part.status.shape) >= part.status.size // 2
    for name, v in part.data_vars.items():
        if v.dims[:unfinished.ndim] == part.status.dims:
            mask = xr.DataArray(unfinished, dims=part.status.dims)
            part[name] = v.where(~mask, "" if v.dtype == object else np.nan)
    part.attrs["complete"] = "false"
part.to_netcdf(sys.argv[2], engine="h5netcdf")' "$work/results.h5" "$work/interrupted.h5"
  text=$(run_notebook "$work/interrupted.h5" "$work/figures-interrupted")
  grep -q "complete = false" <<<"$text" && grep -q "marked INCOMPLETE" <<<"$text" ||
    { echo "$text" >&2; echo "FAIL: $study.ipynb did not mark an interrupted file incomplete" >&2; exit 1; }
  [[ -s "$work/figures-interrupted/$figure" ]] || { echo "FAIL: no $figure from an interrupted file" >&2; exit 1; }
fi
echo "PASS [$study notebook] ($layout; saved $expected)"
