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

# same_metrics A B: every metric column equal (seconds excepted), rows matched by point_key.
same_metrics() {
  "$py" - "$1" "$2" <<'PY' || fail "metrics differ between $1 and $2"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
ka = [k.decode() for k in a["point_key"][:]]; kb = [k.decode() for k in b["point_key"][:]]
assert sorted(ka) == sorted(kb), "different points"
order = [kb.index(k) for k in ka]
for name, d in a.items():
    if name in ("run", "seconds", "grid_index") or d.dtype.kind not in "fi": continue
    x, y = d[:], b[name][:][order]
    assert np.array_equal(x, y, equal_nan=True), name
PY
}

case_run_and_xarray() {
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/ci.h5" --quiet
  grep -q "study ci, 192 points" "$work/out" || fail "no summary table: $(head -3 "$work/out")"
  [[ ! -s "$work/err" ]] || fail "--quiet printed progress: $(cat "$work/err")"
  "$py" - "$work/ci.h5" <<'PY' || fail "xarray cannot read the results as expected"
import sys, xarray as xr
ds = xr.open_dataset(sys.argv[1], engine="h5netcdf")
assert dict(ds.sizes) == {"run": 192}, ds.sizes
for v in ["layer", "gemm", "format", "a_granularity", "promotion", "total_rel_frobenius", "accumulation_sqnr_db", "k"]:
    assert ds[v].dims == ("run",), v
assert ds["total_sqnr_db"].attrs["units"] == "dB" and ds["total_rel_frobenius"].attrs["long_name"]
assert ds.attrs["backend"] == "cpu" and "CPU emulation" in ds.attrs["device"]
for a in ["git_sha", "git_dirty", "fp8lab_version", "backend", "host", "spec_toml", "resolved_spec_json",
          "utc_start", "utc_end", "hdf5_version", "operands"]:
    assert ds.attrs.get(a), a
df = ds.to_dataframe()
skipped = df[df.status == "skipped"]
assert len(skipped) == 48 and skipped.skip_reason.str.contains("does not divide").all()
ok = df[df.status == "ok"]
assert (ok.total_rel_frobenius > 0).all() and (ok.total_rel_frobenius < 0.2).all()
PY
}

case_progress_lines() {
  expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/ci.h5"
  grep -qE "^fp8lab: 0/192 points, elapsed 0:00:00, eta \?, now: shape:192x320 fprop" "$work/err" || fail "no start line: $(head -2 "$work/err")"
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
ds = xr.open_dataset('$work/r.h5', engine='h5netcdf'); n = ds.sizes['run']
assert ds['total_rel_frobenius'].shape == (n,)
print(n)") || fail "the killed sweep's file is not readable by xarray"
  (( done_rows > 0 && done_rows < 54 )) || fail "expected a partial file, found $done_rows of 54 points"
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
  "$py" -c "
import h5py, numpy as np
g = h5py.File('$work/merged.h5', 'r')['grid_index'][:]
assert (np.diff(g) > 0).all(), 'merged rows are not in grid order'" || fail "merge order"
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
  expect_one_line_error "unknown study kind 'training' (known: gemm, recompute)" "$fp8lab" run "$work/kind.toml" -o "$work/a.h5"
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
  expect_one_line_error "not an HDF5 file" "$fp8lab" report "$ci_spec"
}

case_layers() {
  expect_exit 0 "$fp8lab" layers
  grep -qE "^deepseek-v3/o_proj +7168 +16384" "$work/out" || fail "catalog lacks DeepSeek-V3 o_proj: $(cat "$work/out")"
  grep -qE "^llama-3.1-405b/q_proj +16384 +16384" "$work/out" || fail "catalog lacks Llama-3.1 405B"
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
df = xr.open_dataset(sys.argv[1], engine="h5netcdf").to_dataframe()
assert (df.status == "ok").all() and len(df) == 6
assert df.operand_source.str.startswith("bring-your-own: x=").all() and df.operand_source.str.contains("sha256").all()
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
  expect_exit 0 "$fp8lab" compare "$source_dir/results/baselines/ci.h5" "$work/ci.h5"
  grep -q "0 worse" "$work/out" || fail "$(cat "$work/out")"
}

case_regression_detects_broken_rounding() {
  FP8LAB_TEST_BREAK_ROUNDING=1 expect_exit 0 "$fp8lab" run "$ci_spec" -o "$work/broken.h5" --quiet
  expect_exit 3 "$fp8lab" compare "$source_dir/results/baselines/ci.h5" "$work/broken.h5"   # 3: regression found
  grep -qE "^accumulation_rel_frobenius +[0-9.e-]+ +[0-9.e-]+ +[0-9.]+%" "$work/out" ||
    fail "the table does not show the worse accumulation error: $(head -5 "$work/out")"
}

"case_$case_name"
echo "PASS [$case_name]"
