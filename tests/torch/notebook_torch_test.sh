#!/usr/bin/env bash
# notebooks/fp8_training.ipynb with PyTorch runs beside the engine's: a tiny engine sweep
# (tests/notebook/fp8_training_small.toml) and experiments/torch_llama_train.py with the same
# settings write two files side by side; the notebook must read both and save its PyTorch figure
# (fp8_training_torch.png) beside its usual two. Runs the script with this interpreter (torch), the
# notebook with Debian's python3 (xarray, jupyter), as notebook_test.sh does.
# Usage (run_torch_test.sh sets FP8LAB_BUILD): bash notebook_torch_test.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
fp8lab="$FP8LAB_BUILD/harness/fp8lab"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$fp8lab" run "$root/tests/notebook/fp8_training_small.toml" -o "$work/fp8_training.h5" --quiet >/dev/null
python "$root/experiments/torch_llama_train.py" --recipe fp32 --recipe deepseek_v3 --seed 1 --seed 2 --init seeded \
  --order shuffled --sample-tokens 2048 --val-sample-tokens 512 --batch 2 --seq-len 32 --steps 6 --lr 3e-3 \
  --val-every 3 --val-sequences 2 --quiet -o "$work/torch_llama.h5" >/dev/null
source "$root/tests/notebook/execute_notebook.sh"
text=$(FP8LAB_RESULTS=$work/fp8_training.h5 FP8LAB_FIGURES=$work/figures execute_notebook "$root/notebooks/fp8_training.ipynb" "$work")
for png in fp8_training.png fp8_training_operand_sqnr.png fp8_training_torch.png; do
  [[ -s "$work/figures/$png" ]] || { echo "$text" >&2; echo "FAIL: no $png" >&2; exit 1; }
done
grep -q "^deepseek_v3: final seed mean engine [0-9.]*, PyTorch [0-9.]*" <<<"$text" &&
  grep -q "^torch_llama: layout" <<<"$text" || { echo "$text" >&2; echo "FAIL: the PyTorch runs were not drawn" >&2; exit 1; }
echo "PASS [fp8_training notebook with PyTorch runs]"
