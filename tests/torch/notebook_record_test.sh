#!/usr/bin/env bash
# notebooks/torch_record.ipynb on recorder files: the PyTorch Llama example trains a few steps under
# deepseek_v3 and fp8_tensor_no_promotion with --record, and the notebook (Debian's python3, as the
# other notebook tests run them) must draw one figure per recipe, with the numbers beside it, and
# print each recipe's worst figures per GEMM.
# Usage (run_torch_test.sh sets FP8LAB_BUILD): bash notebook_record_test.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python "$root/experiments/torch_llama_train.py" --recipe deepseek_v3 --recipe fp8_tensor_no_promotion --steps 6 \
  --batch 2 --seq-len 32 --val-every 2 --record "$work/torch_llama_records" --record-every 2 --quiet \
  -o "$work/torch_llama.h5" >/dev/null
source "$root/tests/notebook/execute_notebook.sh"
text=$(FP8LAB_RESULTS=$work/torch_llama.h5 FP8LAB_FIGURES=$work/figures execute_notebook "$root/notebooks/torch_record.ipynb" "$work")
for recipe in deepseek_v3 fp8_tensor_no_promotion; do
  [[ -s "$work/figures/torch_record_$recipe.png" && $(wc -l <"$work/figures/torch_record_$recipe.csv") -ge 2 ]] ||
    { echo "$text" >&2; echo "FAIL: no figure (or its numbers) for $recipe" >&2; exit 1; }
  grep -q "^$recipe seed 1:" <<<"$text" || { echo "$text" >&2; echo "FAIL: no summary for $recipe" >&2; exit 1; }
done
[[ $(grep -c "min operand A SQNR (dB) [0-9]" <<<"$text") == 6 ]] ||
  { echo "$text" >&2; echo "FAIL: not every GEMM of both recipes has its figures" >&2; exit 1; }
echo "PASS [torch_record notebook]"
