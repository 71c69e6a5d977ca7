#!/usr/bin/env bash
# fp8lab run / report / compare / merge / layers, driven as a user drives them.
# Usage: harness_test.sh CASE PATH/TO/fp8lab SOURCE_DIR
# Files are inspected with Debian's /usr/bin/python3 (h5py, xarray, h5netcdf).
set -euo pipefail
case_name=$1
fp8lab=$2
source_dir=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/test_lib.sh"
"$py" -c "import h5py, xarray, h5netcdf" 2>/dev/null || { echo "FAIL: $py lacks h5py/xarray/h5netcdf (bash .ci/deps)" >&2; exit 1; }
ci_spec=$source_dir/experiments/ci.toml
resume_spec=$source_dir/experiments/resume_check.toml

# same_metrics A B: the same grid, every variable equal but the timings (grid cell by cell).
same_metrics() {
  "$py" - "$1" "$2" <<'PY' || fail "metrics differ between $1 and $2"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert set(a) == set(b), sorted(set(a) ^ set(b))
for name, d in a.items():
    if name in ("seconds", "elapsed_seconds"): continue
    x, y = d[()], b[name][()]
    assert x.shape == y.shape, name
    assert (np.array_equal(x, y, equal_nan=True) if d.dtype.kind == "f" else np.array_equal(x, y)), name
assert a.attrs["complete"] == b.attrs["complete"] == "true"
PY
}

case_run_and_xarray() {
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/ci.h5" --quiet
  grep -q "study ci, 192 points (144 ok, 48 skipped, 0 failed)" "$work/out" || fail "no summary line: $(head -3 "$work/out")"
  [[ ! -s "$work/err" ]] || fail "--quiet printed progress: $(cat "$work/err")"
  "$py" - "$work/ci.h5" <<'PY' || fail "xarray cannot read the results as expected"
import sys, numpy as np, xarray as xr
ds = xr.open_dataset(sys.argv[1], engine="h5netcdf")
# The grid: every axis a dimension, in the kind's order, spec values as coordinates.
assert dict(ds.sizes) == {"layer": 2, "gemm": 3, "format": 2, "a_granularity": 2, "b_granularity": 2, "scale": 1,
                          "accum": 2, "promotion": 2, "distribution": 1, "seed": 1}, ds.sizes
assert ds.total_rel_frobenius.dims == tuple(ds.sizes), ds.total_rel_frobenius.dims
assert ds.promotion.dtype == np.int64 and list(ds.promotion.values) == [128, 0], ds.promotion.values
assert ds.promotion.attrs["flag_meanings"] == "never" and ds.promotion.attrs["flag_values"] == 0
assert ds.seed.dtype == np.int64 and ds.seed.values.tolist() == [7]
assert list(ds.a_granularity_tile_cols.values) == [128, -1] and list(ds.b_granularity_tile_rows.values) == [128, -1]
assert "a_granularity_tile_cols" in ds.coords
# Selection by value, with no reshaping.
sel = ds.total_rel_frobenius.sel(layer="shape:256x256", promotion=128, accum="hopper", gemm="fprop", format="e4m3",
                                 a_granularity="tile:1x128", b_granularity="block:128x128").squeeze()
assert sel.shape == () and 0 < float(sel) < 0.2, sel
assert ds.total_sqnr_db.attrs["units"] == "dB" and ds.total_rel_frobenius.attrs["long_name"]
assert ds.total_max_abs.attrs["units"] == "same as C"
assert "units" not in ds.status.attrs and "units" not in ds.operands.attrs
assert ds.attrs["backend"] == "cpu" and "CPU emulation" in ds.attrs["device"]
for a in ["Conventions", "title", "history", "source", "study_kind", "study_name", "git_sha", "git_dirty", "host",
          "spec_toml", "resolved_spec_json", "utc_start", "utc_end", "hdf5_version", "eigen_version", "openmp_version",
          "compiler", "compiler_flags", "build_march", "cpu_isa", "operands"]:
    assert ds.attrs.get(a), a
assert ds.attrs["Conventions"] == "CF-1.10" and "fp8lab run" in ds.attrs["history"]
assert ds.attrs["complete"] == "true" and ds.attrs["points_total"] == ds.attrs["points_done"] == 192
df = ds.to_dataframe()
assert len(df) == 192
skipped = df[df.status == "skipped"]
assert len(skipped) == 48 and skipped.reason.str.contains("does not divide").all()
ok = df[df.status == "ok"]
assert (ok.total_rel_frobenius > 0).all() and (ok.total_rel_frobenius < 0.2).all()
assert df.operands.str.startswith("synthetic gaussian: X tokens=128").all() and df.operands.str.contains("seed=7").all()
PY
}

# Real layers: operands labelled real per point, no synthetic axes; a synthetic axis or
# setting on them is refused naming the field.
case_real_layer_labels() {
  printf '[study]\nname = "r"\nkind = "gemm"\n[axes]\nlayer = ["stories260K/L0.w1", "stories260K/classifier"]\na_granularity = ["tile:1x32"]\nb_granularity = ["block:32x32"]\npromotion = [32, "never"]\n' >"$work/real.toml"
  expect_exit 0 "$fp8lab" run "$work/real.toml" -o "$work/real.h5" --quiet
  "$py" - "$work/real.h5" <<'PY' || fail "real-layer results are not labelled as real"
import sys, xarray as xr
ds = xr.open_dataset(sys.argv[1], engine="h5netcdf")
assert "distribution" not in ds.dims and "seed" not in ds.dims, ds.dims
ops = ds.operands.sel(layer="stories260K/L0.w1", promotion=0).values.ravel()
assert all(o.startswith("stories260K real tensors L0.w1: W from checkpoint=") and "sha256 " in o for o in ops), ops
assert "synthetic" not in ds.attrs["operands"]
PY
  printf 'distribution = ["uniform"]\n' >>"$work/real.toml"
  expect_one_line_error "real.toml:9:17: field 'axes.distribution': does not apply to layer stories260K/L0.w1" \
    "$fp8lab" run "$work/real.toml" -o "$work/a.h5"
  printf '[study]\nname = "r"\nkind = "gemm"\n[axes]\nlayer = ["stories260K/L0.w1"]\na_granularity = ["tile:1x32"]\nb_granularity = ["block:32x32"]\n[operands]\noutlier_channels = 4\n' >"$work/real2.toml"
  expect_one_line_error "field 'operands.outlier_channels': does not apply: no layer of the study is synthetic" \
    "$fp8lab" run "$work/real2.toml" -o "$work/a.h5"
  [[ ! -e "$work/a.h5" ]] || fail "a refused run created its output file"
}

case_progress_lines() {
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/ci.h5"
  grep -qE "^fp8lab: 0/192 points, elapsed 0:00:00, eta \?, now: layer=shape:192x320 gemm=fprop format=e4m3 a_granularity=tile:1x128 b_granularity=block:128x128 accum=hopper promotion=128$" "$work/err" || fail "no start line: $(head -2 "$work/err")"
  grep -qE "^fp8lab: 192/192 points, elapsed [0-9:]+, eta 0:00:00, now: done" "$work/err" || fail "no final line: $(tail -2 "$work/err")"
}

case_threads_do_not_change_results() {
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/t1.h5" --threads 1 --quiet
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/t2.h5" --threads 2 --quiet
  same_metrics "$work/t1.h5" "$work/t2.h5"
}

case_kill_and_resume() {
  "$fp8lab" run "$resume_spec" -o "$work/r.h5" --quiet >/dev/null 2>&1 &
  local pid=$!
  wait_for_points "$work/r.h5" 3 || fail "no 3 points finished within 120 s"   # a count, not a time: load-proof
  kill -9 "$pid" 2>/dev/null || fail "the sweep finished before it could be killed"
  wait "$pid" 2>/dev/null || true
  local done_rows
  done_rows=$("$py" -c "
import sys, xarray as xr
ds = xr.open_dataset('$work/r.h5', engine='h5netcdf')
assert ds.attrs['complete'] == 'false'
done = int((ds.status != '').sum())
assert done >= ds.attrs['points_done'] - 1, (done, ds.attrs['points_done'])   # the counter follows the status
assert int(ds.total_rel_frobenius.notnull().sum()) == int((ds.status == 'ok').sum())
print(done)") || fail "the killed sweep's file is not readable by xarray"
  (( done_rows > 0 && done_rows < 54 )) || fail "expected a partial file, found $done_rows of 54 points"
  expect_exit 0 "$fp8lab" report "$work/r.h5"
  grep -qF "INCOMPLETE: $((54 - done_rows)) of 54 points not run" "$work/out" || fail "report does not say incomplete: $(head -3 "$work/out")"
  expect_exit 0 "$fp8lab" run "$resume_spec" -o "$work/r.h5" --resume --quiet
  expect_exit 0 "$fp8lab" run "$resume_spec" -o "$work/full.h5" --quiet
  same_metrics "$work/r.h5" "$work/full.h5"
}

case_shard_and_merge() {
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/s0.h5" --shard 0/2 --quiet
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/s1.h5" --shard 1/2 --quiet
  expect_exit 0 "$fp8lab" merge "$work/merged.h5" "$work/s0.h5" "$work/s1.h5"
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/full.h5" --quiet
  same_metrics "$work/merged.h5" "$work/full.h5"
  # An incomplete or duplicated set is refused unless --allow-partial.
  expect_one_line_error "merge: shard 1/2 is missing (--allow-partial merges what there is)" "$fp8lab" merge "$work/m.h5" "$work/s0.h5"
  expect_one_line_error "(duplicated)" "$fp8lab" merge "$work/m.h5" "$work/s0.h5" "$work/s0.h5" "$work/s1.h5"
  [[ ! -e "$work/m.h5" ]] || fail "a refused merge wrote its output"
  expect_exit 0 "$fp8lab" merge "$work/m.h5" "$work/s0.h5" --allow-partial
  grep -qF "INCOMPLETE: 96 of 192 points not run" "$work/out" || fail "a partial merge does not say so: $(head -3 "$work/out")"
}

case_bad_specs() {
  printf '[study]\nname = "x"\nkind = "gemm"\n[axes]\nformat = ["e4m3",\n' >"$work/malformed.toml"
  expect_one_line_error "malformed.toml:5:" "$fp8lab" run "$work/malformed.toml" -o "$work/a.h5"   # line of the unterminated array
  grep -qF "malformed TOML" "$work/err" || fail "not called malformed TOML: $(cat "$work/err")"
  printf '[study]\nname = "x"\nkind = "gemm"\n[axes]\nformats = ["e4m3"]\n' >"$work/axis.toml"
  expect_one_line_error "axis.toml:5:12: field 'axes.formats': unknown axis" "$fp8lab" run "$work/axis.toml" -o "$work/a.h5"
  printf '[study]\nname = "x"\nkind = "gemm"\n[axes]\nformat = ["e4m3", "e3m4"]\n' >"$work/value.toml"
  expect_one_line_error "value.toml:5:19: field 'axes.format': format 'e3m4' is not one of" "$fp8lab" run "$work/value.toml" -o "$work/a.h5"
  printf '[study]\nname = "x"\nkind = "gemm"\n[axes]\nlayer = ["llama-9/q_proj"]\n' >"$work/layer.toml"
  expect_one_line_error "field 'axes.layer': layer 'llama-9/q_proj' is not in the catalog" "$fp8lab" run "$work/layer.toml" -o "$work/a.h5"
  printf '[study]\nname = "x"\nkind = "gemm"\n[axes]\nlayer = ["shape:64x64"]\na_granularity = ["tile:1x128"]\n' >"$work/small.toml"
  expect_one_line_error "field 'axes.a_granularity': tile:1x128 is larger than K = 64" "$fp8lab" run "$work/small.toml" -o "$work/a.h5"
  printf '[study]\nname = "x"\nkind = "gemm"\n[operands]\ntokens = "many"\n' >"$work/type.toml"
  expect_one_line_error "field 'operands.tokens': expected an integer" "$fp8lab" run "$work/type.toml" -o "$work/a.h5"
  printf '[study]\nname = "x"\nkind = "training"\n' >"$work/kind.toml"
  expect_one_line_error "unknown study kind 'training' (known: gemm, recompute, loss_scaling, scale_trajectory, train, formats, zero_memory)" "$fp8lab" run "$work/kind.toml" -o "$work/a.h5"
  expect_one_line_error "nope.toml: cannot open the study spec" "$fp8lab" run "$work/nope.toml"
  expect_one_line_error "--backend cuda: " "$fp8lab" run "$ci_spec" -o "$work/a.h5" --backend cuda
  [[ ! -e "$work/a.h5" ]] || fail "a failed run created its output file"
}

case_existing_results_are_safe() {
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/ci.h5" --quiet
  local before; before=$(sha256sum <"$work/ci.h5")
  expect_one_line_error "ci.h5: exists; use --resume" "$fp8lab" run "$ci_spec" -o "$work/ci.h5"
  printf '[study]\nname = "other"\nkind = "gemm"\n' >"$work/other.toml"
  expect_one_line_error "was written from a different spec" "$fp8lab" run "$work/other.toml" -o "$work/ci.h5" --resume
  printf '[study]\nname = "x"\nkind = "gemm"\n[axes]\nformat = ["e3m4"]\n' >"$work/bad.toml"
  expect_exit 2 "$fp8lab" run "$work/bad.toml" -o "$work/ci.h5" --resume
  [[ $(sha256sum <"$work/ci.h5") == "$before" ]] || fail "a refused run changed the existing results file"
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/ci.h5" --resume --quiet   # nothing missing: a no-op
  expect_exit 0 "$fp8lab" report "$work/ci.h5"
  grep -q "192 points" "$work/out" || fail "report after a no-op resume: $(head -2 "$work/out")"
  (( $(grep -c "^shape:" "$work/out") == 192 )) || fail "report does not give one row per point: $(head -5 "$work/out")"
  expect_exit 0 "$fp8lab" report "$work/ci.h5" --by accum,promotion
  grep -qF "AVERAGED OVER layer (2 values), gemm (3 values), format (2 values), a_granularity (2 values), b_granularity (2 values)" "$work/out" ||
    fail "report --by does not say what it averaged over: $(head -5 "$work/out")"
  expect_exit 0 "$fp8lab" report "$work/ci.h5" --json
  "$py" -c "import json, sys; j = json.load(open('$work/out')); assert j['points'] == 192 and j['complete'] and len(j['rows']) == 192" ||
    fail "report --json: $(head -c 300 "$work/out")"
  expect_one_line_error "not an HDF5 file" "$fp8lab" report "$ci_spec"
}

case_layers() {
  expect_exit 0 "$fp8lab" layers
  grep -qE "^deepseek-v3/o_proj +7168 +16384" "$work/out" || fail "catalog lacks DeepSeek-V3 o_proj: $(cat "$work/out")"
  grep -qE "^llama-3.1-405b/q_proj +16384 +16384" "$work/out" || fail "catalog lacks Llama-3.1 405B"
  # stories260K: dim 64, hidden 172, 5 layers, vocab 512 (its config); 5 x 7 + the classifier.
  grep -qE "^stories260K/L2.w1 +172 +64  real X, W, dY" "$work/out" || fail "the real layers are not listed: $(tail -5 "$work/out")"
  grep -qE "^stories260K/classifier +512 +64 " "$work/out" || fail "the real classifier is not listed"
  (( $(grep -c "^stories260K/" "$work/out") == 36 )) || fail "not 36 real layers"
  expect_exit 0 "$fp8lab" layers --json
  "$py" -c "import json; j = json.load(open('$work/out')); assert sum(l['operands'] == 'real' for l in j['layers']) == 36" ||
    fail "layers --json: $(head -c 300 "$work/out")"
}

case_own_tensors() {
  "$py" - "$work" <<'PY'
import json, struct, sys, numpy as np
w = sys.argv[1]
rng = np.random.default_rng(1)
x = rng.standard_normal((64, 256)).astype(np.float32)
wt = (rng.standard_normal((96, 256)) / 16).astype(np.float32)
dy = rng.standard_normal((64, 96)).astype(np.float32)
np.save(f"{w}/x.npy", x); np.save(f"{w}/dy.npy", dy)
h = json.dumps({"proj.weight": {"dtype": "F32", "shape": [96, 256], "data_offsets": [0, wt.nbytes]}}).encode()
open(f"{w}/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + wt.tobytes())
bad = x.copy(); bad[3, 7] = np.nan; np.save(f"{w}/x_nan.npy", bad)
np.save(f"{w}/x_k128.npy", x[:, :128])
PY
  spec() {  # spec X_FILE DY_LINE
    printf '[study]\nname = "own"\nkind = "gemm"\n[axes]\nlayer = ["tensors"]\ngemm = ["fprop", "dgrad", "wgrad"]\na_granularity = ["tile:1x64", "row"]\nb_granularity = ["block:64x64"]\npromotion = [64]\n[tensors]\nx = "%s"\nw = "model.safetensors"\nw_name = "proj.weight"\n%s\n' "$1" "$2" >"$work/own.toml"
  }
  spec x.npy 'dy = "dy.npy"'
  expect_exit 0 "$fp8lab" run "$work/own.toml" -o "$work/own.h5" --quiet
  "$py" - "$work/own.h5" <<'PY' || fail "own-tensor study results are not as expected"
import sys, xarray as xr
df = xr.open_dataset(sys.argv[1], engine="h5netcdf").to_dataframe().reset_index()
assert (df.status == "ok").all() and len(df) == 6
assert df.operands.str.startswith("bring-your-own: x=").all() and df.operands.str.contains("sha256").all()
assert set(zip(df.gemm, df.m, df.n, df.k)) == {("fprop", 64, 96, 256), ("dgrad", 64, 256, 96), ("wgrad", 96, 256, 64)}
PY
  spec x_nan.npy 'dy = "dy.npy"'
  expect_one_line_error "x_nan.npy: element (3, 7) is NaN" "$fp8lab" run "$work/own.toml" -o "$work/a.h5"
  spec missing.npy 'dy = "dy.npy"'
  expect_one_line_error "missing.npy: cannot open" "$fp8lab" run "$work/own.toml" -o "$work/a.h5"
  spec x_k128.npy 'dy = "dy.npy"'
  expect_one_line_error "field 'tensors.w': W is 96x256 but X is 64x128" "$fp8lab" run "$work/own.toml" -o "$work/a.h5"
  spec x.npy ''
  expect_one_line_error "field 'tensors.dy': missing: dgrad needs the output gradient" "$fp8lab" run "$work/own.toml" -o "$work/a.h5"
  head -c 100 "$work/model.safetensors" >"$work/cut.safetensors"
  sed -i 's/model.safetensors/cut.safetensors/' "$work/own.toml"
  expect_one_line_error "cut.safetensors: truncated" "$fp8lab" run "$work/own.toml" -o "$work/a.h5"
  [[ ! -e "$work/a.h5" ]] || fail "a refused run created its output"
}

# Label regression: the CI sweep against the committed baseline; and proof that the
# comparison can fail: the test-only switch coarsens the accumulation rounding.
case_regression_baseline() {
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/ci.h5" --quiet
  sed 's/promotion = \["128", "never"\]/promotion = ["128"]/' "$ci_spec" >"$work/other.toml"
  expect_exit 0 "$fp8lab" run "$work/other.toml" -o "$work/other.h5" --quiet
  expect_exit 0 "$fp8lab" compare "$source_dir/results/baselines/ci.h5" "$work/ci.h5"
  grep -q "0 worse" "$work/out" || fail "$(cat "$work/out")"
  expect_exit 0 "$fp8lab" compare "$source_dir/results/baselines/ci.h5" "$work/ci.h5" --json
  "$py" -c "import json; j = json.load(open('$work/out')); assert j['regression'] is False and j['points_compared'] == 192" ||
    fail "compare --json: $(head -c 300 "$work/out")"
  # Another grid is one error line, not a row per point.
  expect_one_line_error "axis 'promotion': the baseline's values never are not in NEW" \
    "$fp8lab" compare "$source_dir/results/baselines/ci.h5" "$work/other.h5"
}

case_regression_detects_broken_rounding() {
  FP8LAB_TEST_BREAK_ROUNDING=1 expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/broken.h5" --quiet
  expect_exit 3 "$fp8lab" compare "$source_dir/results/baselines/ci.h5" "$work/broken.h5"   # 3: regression found
  grep -qE "^accumulation_rel_frobenius +[0-9.e-]+ +[0-9.e-]+ +\+[0-9.]+%" "$work/out" ||
    fail "the table does not show the worse accumulation error: $(head -5 "$work/out")"
}

"case_$case_name"
echo "PASS [$case_name]"
