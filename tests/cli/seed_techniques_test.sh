#!/usr/bin/env bash
# The seed techniques as train-study options, driven as a user drives them: bad fields in the spec's
# [training] table and in a recipe file's [training] table (one line naming the file and the field,
# exit 2, no results file), and a tiny study whose per-step records are checked against what each
# option defines, read back with xarray.
# Usage: seed_techniques_test.sh CASE PATH/TO/fp8lab SOURCE_DIR
set -euo pipefail
case_name=$1
fp8lab=$2
source_dir=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/test_lib.sh"

# A tiny seeded run; $1 adds lines to [training], $2 lists the recipe axis.
write_spec() {
  local training=$1 recipes=${2:-'"bf16"'}
  cat >"$work/spec.toml" <<TOML
[study]
name = "t"
kind = "train"
[axes]
recipe = [$recipes]
[model]
init = "seeded"
[data]
sample_tokens = 2048
[training]
batch = 4
seq_len = 16
steps = 4
stats_every = 0
$training
TOML
}

# expect_recipe_refused FRAGMENT...: as expect_spec_refused, for an error that names the recipe file
# on the spec's recipe axis rather than the spec.
expect_recipe_refused() {
  expect_one_line_error "$1" "$fp8lab" run "$work/spec.toml" -o "$work/out.h5" --quiet
  for fragment in "$@"; do
    grep -qF -- "$fragment" "$work/err" || fail "stderr lacks '$fragment': $(cat "$work/err")"
  done
  [[ ! -e "$work/out.h5" ]] || fail "a results file was written for a refused recipe"
}

recipe_file() {  # recipe_file NAME TRAINING_LINES
  printf 'name = "%s"\nbase = "bf16"\n[training]\n%s\n' "$1" "$2" >"$work/$1.toml"
}

case_bad_specs() {
  local spec=$work/spec.toml
  write_spec 'workers = 3'; expect_spec_refused "$spec" "training.workers" "does not divide the batch of 4"
  write_spec 'workers = 0'; expect_spec_refused "$spec" "training.workers"
  write_spec 'compression = "zip"'; expect_spec_refused "$spec" "training.compression" "zip"
  write_spec $'compression = "quantize"\ncompression_bits = 3'; expect_spec_refused "$spec" "training.compression_bits"
  write_spec $'compression = "quantize"\ncompression_bits = 99999999999'
  expect_spec_refused "$spec" "training.compression_bits" "got 99999999999"   # the value written, not a clamp
  # A field of an option the table does not select configures nothing: refused.
  write_spec $'compression = "quantize"\ntopk_ratio = 0.5'; expect_spec_refused "$spec" "training.topk_ratio" "applies with"
  write_spec 'adaptive_low = 20'; expect_spec_refused "$spec" "training.adaptive_low" "adaptive_every > 0"
  write_spec 'error_feedback = true'; expect_spec_refused "$spec" "training.error_feedback" "applies with"
  write_spec $'compression = "topk"\ntopk_ratio = 0'; expect_spec_refused "$spec" "training.topk_ratio"
  write_spec 'compression_rounding = "up"'; expect_spec_refused "$spec" "training.compression_rounding"
  write_spec 'sparse_update = "sometimes"'; expect_spec_refused "$spec" "training.sparse_update"
  write_spec $'sparse_update = "gradient"\nsparse_ratio = 1.5'; expect_spec_refused "$spec" "training.sparse_ratio"
  write_spec 'sparse_frozen_momentum = true'; expect_spec_refused "$spec" "training.sparse_frozen_momentum"
  write_spec 'adaptive_every = 5'; expect_spec_refused "$spec" "training.adaptive_"   # no band given
  write_spec $'adaptive_every = 5\nadaptive_low = 30\nadaptive_high = 20'; expect_spec_refused "$spec" "training.adaptive_low"
  write_spec $'adaptive_every = 5\nadaptive_low = 20\nadaptive_high = 30\nadaptive_statistic = "vibes"'
  expect_spec_refused "$spec" "training.adaptive_statistic"
  write_spec $'adaptive_every = 5\nadaptive_low = 20\nadaptive_high = 30'   # bf16 has no FP8 GEMM to schedule
  expect_spec_refused "$spec" "adaptive_every" "no FP8 GEMM" "recipe bf16"
  write_spec $'adaptive_every = 5\nadaptive_low = 20\nadaptive_high = 30' '"fp8_delayed"'
  expect_spec_refused "$spec" "adaptive_every" "delayed-scaling"
  # ... and set in the spec for an FP8 recipe, it runs.
  write_spec $'adaptive_every = 2\nadaptive_low = 20\nadaptive_high = 30' '"deepseek_v3"'
  expect_exit 0 "$fp8lab" run "$spec" -o "$work/adaptive.h5" --quiet
  write_spec 'moments = "fp8"'; expect_spec_refused "$spec" "training.moments" "e4m3_1x128"
  write_spec 'error_feedback = "yes"'; expect_spec_refused "$spec" "training.error_feedback"
  write_spec 'compresion = "topk"'; expect_spec_refused "$spec" "training.compresion" "unknown key"
  # A recipe file's [training] table: its own file and field are named.
  recipe_file badbits $'compression = "quantize"\ncompression_bits = 20'
  write_spec '' '"badbits.toml"'; expect_recipe_refused "$work/badbits.toml" "training.compression_bits" "4..16"
  recipe_file steps 'steps = 3'
  write_spec '' '"steps.toml"'; expect_recipe_refused "$work/steps.toml" "training.steps" "not a technique field"
  recipe_file odd 'workers = 3'
  write_spec '' '"odd.toml"'; expect_recipe_refused "$work/odd.toml" "training.workers" "workers: 3 does not divide"
  # fp8lab train runs the same study kind: a recipe file's [training] table applies there too.
  recipe_file dp3 'workers = 3'
  expect_one_line_error "workers: 3 does not divide the batch of 2" "$fp8lab" train --recipe "$work/dp3.toml" --steps 1 \
    --batch 2 --seq-len 8 -o "$work/out.h5" --quiet
  [[ ! -e "$work/out.h5" ]] || fail "fp8lab train wrote a results file for a refused recipe"
}

case_small_run() {
  recipe_file dp2 'workers = 2'
  recipe_file dp2_q4 $'workers = 2\ncompression = "quantize"\ncompression_bits = 4\ncompression_block = 64\ncompression_rounding = "stochastic"\nerror_feedback = true'
  recipe_file top10 $'workers = 2\ncompression = "topk"\ntopk_ratio = 0.1\nerror_feedback = false'
  recipe_file sparse $'sparse_update = "gradient"\nsparse_ratio = 0.5'
  recipe_file mask $'sparse_update = "weight_mask"\nsparse_ratio = 0.5'
  recipe_file m8 'moments = "e4m3_1x128"'
  printf 'name = "adaptive"\nbase = "deepseek_v3"\n[training]\nadaptive_every = 2\nadaptive_low = 1000\nadaptive_high = 2000\n' \
    >"$work/adaptive.toml"
  write_spec '' '"bf16", "dp2.toml", "dp2_q4.toml", "top10.toml", "sparse.toml", "mask.toml", "m8.toml", "deepseek_v3", "adaptive.toml"'
  expect_exit 0 "$fp8lab" run "$work/spec.toml" -o "$work/out.h5" --quiet
  "$py" - "$work/out.h5" <<'PY' || fail "seed-technique records are not as expected"
import sys, numpy as np, xarray as xr
ds = xr.open_dataset(sys.argv[1], engine="h5netcdf")
assert ds.train_loss.dims == ("recipe", "seed", "step"), ds.train_loss.dims
r = lambda name: ds.sel(recipe=name, seed=1)
params = int(r("bf16").parameters)
assert (r("bf16").compression_ratio.values == 1).all() and (r("bf16").update_fraction.values == 1).all()
assert (r("bf16").fp8_flop_fraction.values == 0).all()
# Two workers, uncompressed: the same losses (summed in batch order), an FP32 all-reduce.
assert (r("dp2.toml").train_loss.values[0] == r("bf16").train_loss.values[0])
assert (r("dp2.toml").bytes_sent_per_worker.values == 4 * params).all()
# 4 bits per element plus an FP32 scale per 64 elements of each tensor: a ratio just above 4/32.
q4 = r("dp2_q4.toml").compression_ratio.values
assert ((q4 > 4 / 32) & (q4 < 4 / 32 + 32 / 64 / 32 + 0.01)).all(), q4
assert int(r("dp2_q4.toml").error_feedback_bytes_per_worker) == 4 * params
assert int(r("top10.toml").error_feedback_bytes_per_worker) == 0
top = r("top10.toml").compression_ratio.values   # 64 bits per kept entry, 10% kept (per tensor, rounded up)
assert ((top >= 0.2) & (top < 0.21)).all(), top
s = r("sparse.toml").update_fraction.values
assert ((s >= 0.5) & (s < 0.51)).all(), s
assert (r("sparse.toml").optimizer_flops.values < 0.51 * r("bf16").optimizer_flops.values).all()
assert (r("mask.toml").zero_weight_fraction.values >= 0.49).all(), r("mask.toml").zero_weight_fraction.values
assert int(r("m8.toml").optimizer_state_bytes) < int(r("bf16").optimizer_state_bytes) / 3
# The controller moves every FP8 GEMM of deepseek_v3 to BF16 at step 0 (no SQNR reaches 1000 dB).
a = r("adaptive.toml")
assert a.fp8_flop_fraction.values[0] == r("deepseek_v3").fp8_flop_fraction.values[0] > 0.5
assert (a.fp8_flop_fraction.values[1:] == 0).all(), a.fp8_flop_fraction.values
assert int(a.precision_switches) == a.gemms_high_precision.values[0] > 0
assert "-> bf16" in str(a.switch_log.values) and "step 0" in str(a.switch_log.values)
assert int(r("deepseek_v3").precision_switches) == 0
assert np.isfinite(ds.train_loss.values).all()
PY
}

"case_$case_name"
