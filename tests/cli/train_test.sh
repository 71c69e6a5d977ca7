#!/usr/bin/env bash
# fp8lab train and the study kind train, driven as a user drives them: bad input (one line
# naming the flag or the file, exit 2, no results file) and small runs whose records are checked
# against what the spec defines (schedule, cadence, token formats), in Python.
# Usage: train_test.sh CASE PATH/TO/fp8lab SOURCE_DIR
set -euo pipefail
case_name=$1
fp8lab=$2
source_dir=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/test_lib.sh"

# expect_refused FRAGMENT ARGS...: exit 2, one line containing FRAGMENT, no results file.
expect_refused() {
  local fragment=$1; shift
  expect_one_line_error "$fragment" "$fp8lab" train "$@" -o "$work/out.h5" --quiet
  [[ ! -e "$work/out.h5" ]] || fail "a results file was written for refused input: $*"
}

# Token files of the same 300 ids (a stretch of 0..511), as uint16 and int32 .npy and a raw .bin,
# and bad ones.
make_tokens() {
  "$py" - "$work" <<'PY'
import sys, numpy as np
w = sys.argv[1]
ids = (np.arange(300) * 37 + 11) % 512
np.save(f"{w}/u16.npy", ids.astype("<u2"))
np.save(f"{w}/i32.npy", ids.astype("<i4"))
ids.astype("<u2").tofile(f"{w}/raw.bin")
np.save(f"{w}/f32.npy", ids.astype("<f4"))
np.save(f"{w}/big.npy", np.append(ids, 512).astype("<i4"))
np.save(f"{w}/short.npy", ids[:17].astype("<u2"))  # one batch of 2 x 8 needs 18
open(f"{w}/odd.bin", "wb").write(ids.astype("<u2").tobytes()[:-1])
PY
}

case_bad_input() {
  make_tokens
  local small=(--steps 2 --batch 2 --seq-len 8)
  expect_refused "f32" --tokens "$work/f32.npy" "${small[@]}"
  expect_refused "token 300 is 512" --tokens "$work/big.npy" "${small[@]}"
  expect_refused "--tokens" --tokens "$work/short.npy" "${small[@]}"
  expect_refused "fewer than one batch" --tokens "$work/short.npy" "${small[@]}"
  expect_refused "odd number of bytes" --tokens "$work/odd.bin" "${small[@]}"
  expect_refused "--tokens" --tokens "$work/missing.npy" "${small[@]}"
  expect_refused "--val-tokens" --tokens "$work/u16.npy" --val-tokens "$work/f32.npy" "${small[@]}"
  expect_refused "--recipe" --recipe fp9 --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--lr" --lr 0 --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--lr" --lr nan --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--lr" --lr inf --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--steps" --steps 0 --tokens "$work/u16.npy" --batch 2 --seq-len 8
  expect_refused "--batch" --batch -1 --tokens "$work/u16.npy" --steps 2 --seq-len 8
  expect_refused "--seq-len" --seq-len 0 --tokens "$work/u16.npy" --steps 2 --batch 2
  expect_refused "--init" --init seed:abc --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--model" --init seed:3 --model gpt9 --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--model" --model dim256 --tokens "$work/u16.npy" "${small[@]}"   # a checkpoint has its own shape
  expect_refused "--seed" --init seed:3 --seed 4 --tokens "$work/u16.npy" "${small[@]}"  # one seed, given twice
  expect_refused "--init" --init "$work/missing.bin" --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--moments" --moments fp8 --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--schedule" --schedule linear --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--warmup" --schedule cosine --warmup 5 --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--clip" --clip -1 --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--order" --order random --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "--attention" --attention sometimes --tokens "$work/u16.npy" "${small[@]}"
  expect_refused "not one of naive, flash" --attention sometimes --tokens "$work/u16.npy" "${small[@]}"
}

# The same ids as .npy uint16, .npy int32 and raw .bin give the same curve; the record follows the
# spec: the cosine schedule, validation every 2 steps and at the end, tokens/s = B T / step time.
case_small_run() {
  make_tokens
  for f in u16.npy i32.npy raw.bin; do
    expect_exit 0 "$fp8lab" train --tokens "$work/$f" --val-tokens "$work/u16.npy" --val-every 2 --val-sequences 2 \
      --steps 5 --batch 2 --seq-len 16 --lr 1e-3 --schedule cosine --warmup 2 --min-lr 1e-4 \
      --recipe bf16 -o "$work/$f.h5" --quiet
  done
  "$py" - "$work" <<'PY' || fail "train results are not as expected"
import sys, math, numpy as np, xarray as xr
w = sys.argv[1]
runs = [xr.open_dataset(f"{w}/{f}.h5", engine="h5netcdf") for f in ("u16.npy", "i32.npy", "raw.bin")]
ds = runs[0]
assert ds.train_loss.dims == ("recipe", "seed", "step"), ds.train_loss.dims
assert list(ds.step.values) == [0, 1, 2, 3, 4]
for other in runs[1:]:
    assert (other.train_loss.values == ds.train_loss.values).all(), "token formats give different curves"
r = ds.sel(recipe="bf16", seed=1)
loss = r.train_loss.values
assert np.isfinite(loss).all() and (loss > 0).all(), loss
# Warm-up 2 then cosine over the 3 remaining steps, written from the definition.
want = [1e-3 * 1 / 2, 1e-3, 1e-3, 1e-4 + 0.9e-3 * (1 + math.cos(math.pi / 3)) / 2, 1e-4 + 0.9e-3 * (1 + math.cos(2 * math.pi / 3)) / 2]
assert np.allclose(r.learning_rate.values, want, rtol=1e-15, atol=0), (r.learning_rate.values, want)
val = r.val_loss.values
assert np.isnan(val[[0, 2]]).all() and np.isfinite(val[[1, 3, 4]]).all(), val
assert np.allclose(r.tokens_per_second.values, 32 / r.step_seconds.values, rtol=1e-12)
assert (r.loss_scale.values == 1).all() and (r.skipped.values == 0).all()
assert float(r.final_train_loss) == loss[-1] and float(r.final_val_loss) == val[-1]
assert int(r.parameters) > 0 and int(r.peak_bytes) > int(r.optimizer_state_bytes) > 0
assert "sha256" in str(r.train_tokens.values) and "u16.npy" in str(r.train_tokens.values)
assert "fp8lab train" in ds.attrs["spec_file"] and 'kind = "train"' in ds.attrs["spec_toml"]
assert r.train_loss.attrs["units"] == "nat"
# New runs train with flash attention; the kind and the policy are root attributes.
assert ds.attrs["attention"] == "flash" and ds.attrs["policy"] == "none", (ds.attrs.get("attention"), ds.attrs.get("policy"))
PY
}

# A seeded dim256 model (1x128 tiles and 128x128 blocks cut whole rows) trains under the
# DeepSeek-V3 recipe; BF16 moments halve the optimizer state.
case_seeded_dim256() {
  make_tokens
  expect_exit 0 "$fp8lab" train --init seed:3 --model dim256 --tokens "$work/u16.npy" --steps 2 --batch 1 --seq-len 32 \
    --recipe deepseek_v3 --moments bf16 -o "$work/d.h5" --quiet
  expect_exit 0 "$fp8lab" train --init seed:3 --model dim256 --tokens "$work/u16.npy" --steps 1 --batch 1 --seq-len 32 \
    --recipe fp32 -o "$work/f.h5" --quiet
  "$py" - "$work" <<'PY' || fail "dim256 results are not as expected"
import sys, numpy as np, xarray as xr
w = sys.argv[1]
d = xr.open_dataset(f"{w}/d.h5", engine="h5netcdf").sel(recipe="deepseek_v3", seed=3)
f = xr.open_dataset(f"{w}/f.h5", engine="h5netcdf").sel(recipe="fp32", seed=3)
# 512 x 256 embedding + 4 layers x (2 x 256 gains + 256^2 x 2 + 2 x 128 x 256 + 3 x 768 x 256) + 256
params = 512 * 256 + 4 * (2 * 256 + 2 * 256 * 256 + 2 * 128 * 256 + 3 * 768 * 256) + 256
assert int(d.parameters) == params, int(d.parameters)
assert int(d.optimizer_state_bytes) == 4 * params and int(f.optimizer_state_bytes) == 8 * params
# Same seeded weights, same first window: the FP8 and FP32 first losses are close (ln 512 ~ 6.24 at init).
l8, l32 = float(d.train_loss.values[0]), float(f.train_loss.values[0])
assert abs(l8 - l32) < 0.05 and abs(l32 - np.log(512)) < 0.5, (l8, l32)
assert "seeded init of dim256" in str(d.operands.values)
PY
}

"case_$case_name"
echo "PASS [$case_name]"
