#!/usr/bin/env bash
# Hostile input: no crash, no silent wrong number, exit 2 with one line naming the file and the
# field for a user's mistake, no file left behind by a failed command.
# Usage: hostile_test.sh CASE PATH/TO/fp8lab SOURCE_DIR. tests/README.md tabulates the classes.
set -euo pipefail
case_name=$1
fp8lab=$2
source_dir=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/test_lib.sh"

# spec NAME BODY: a gemm study on one small layer, BODY appended (axes and tables).
spec() {
  printf '[study]\nname = "h"\nkind = "gemm"\n[axes]\nlayer = ["shape:128x128"]\n%s\n' "$2" >"$work/$1"
}

# no_new_files: nothing in $work but what the case made on purpose (listed in $keep).
no_new_files() {
  local extra
  extra=$(cd "$work" && ls -A | grep -vxE "${keep}|out|err" || true)
  [[ -z $extra ]] || fail "a failed command left files behind: $extra"
}

case_synth_huge() {
  expect_one_line_error "rows x cols (4611686018427387904 x 4) is more elements" \
    "$fp8lab" synth --rows 4611686018427387904 --cols 4 -o "$work/x.npy"
  expect_one_line_error "synth --rows 1000000 --cols 1000000 needs about 8.0 TB of memory" \
    "$fp8lab" synth --rows 1000000 --cols 1000000 -o "$work/x.npy"
  grep -qF -- "--ignore-memory-limit" "$work/err" || fail "the refusal does not name the override flag"
  keep="^$"; no_new_files
}

case_threads_bounds() {
  expect_exit 0 "$fp8lab" synth --rows 64 --cols 128 -o "$work/a.npy"
  for n in -1 5000 100000; do
    expect_one_line_error "--threads: must be 0 (all cores) to 1024, got $n" "$fp8lab" gemm --a "$work/a.npy" --b "$work/a.npy" --threads "$n"
    expect_one_line_error "--threads: must be 0 (all cores) to 1024, got $n" "$fp8lab" run "$source_dir/experiments/ci.toml" -o "$work/r.h5" --threads "$n"
  done
  [[ ! -e $work/r.h5 ]] || fail "a refused run created its results file"
  expect_exit 0 "$fp8lab" gemm --a "$work/a.npy" --b "$work/a.npy" --threads 1024
}

case_damaged_results() {
  spec s.toml 'seed = [1, 2, 3]'
  expect_exit 0 "$fp8lab" run "$work/s.toml" -o "$work/r.h5" --quiet
  cp "$work/r.h5" "$work/nostatus.h5"
  "$py" -c "import h5py; del h5py.File('$work/nostatus.h5', 'r+')['status']"
  expect_one_line_error "nostatus.h5: not an fp8lab results file (no 'status' column)" "$fp8lab" report "$work/nostatus.h5" --by promotion
  expect_one_line_error "nostatus.h5: not an fp8lab results file" "$fp8lab" compare "$work/r.h5" "$work/nostatus.h5"
  "$py" -c "import h5py; h5py.File('$work/short.h5', 'w')['run'] = [0, 1]"
  expect_one_line_error "short.h5: not an fp8lab results file" "$fp8lab" report "$work/short.h5"
}

case_outlier_overflow() {
  # synth refuses to write inf; a spec's scale beyond FP32 is refused naming file, line and field;
  # a scale within FP32 whose operand still overflows marks the point failed with the reason.
  expect_one_line_error "--outlier-scale 3e+38 makes element" "$fp8lab" synth --rows 64 --cols 64 --outlier-channels 64 --outlier-scale 3e38 -o "$work/x.npy"
  expect_one_line_error "outlier_scale must be a positive number within the FP32 range" "$fp8lab" synth --rows 4 --cols 4 --outlier-channels 1 --outlier-scale 1e39 -o "$work/x.npy"
  for scale in 1e39 inf nan; do
    spec s.toml $'[operands]\noutlier_channels = 4\noutlier_scale = '"$scale"
    expect_one_line_error "s.toml:8:17: field 'operands.outlier_scale': must be a positive number within the FP32 range" \
      "$fp8lab" run "$work/s.toml" -o "$work/r.h5"
  done
  keep="s\.toml"; no_new_files
  spec s.toml $'[operands]\noutlier_channels = 4\noutlier_scale = 3e38'
  expect_exit 0 "$fp8lab" run "$work/s.toml" -o "$work/r.h5" --quiet
  grep -qF "1 of 1 points failed" "$work/err" || fail "the run does not say a point failed: $(cat "$work/err")"
  "$py" - "$work/r.h5" <<'PY' || fail "the overflowing point is not marked failed with its reason"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
status, reason = f["status"][()].ravel()[0].decode(), f["reason"][()].ravel()[0].decode()
assert status == "failed", status
assert "operand A: element" in reason and "infinite in FP32" in reason, reason
assert np.isnan(f["total_rel_frobenius"][()]).all() and np.isnan(f["total_sqnr_db"][()]).all()
PY
  expect_exit 0 "$fp8lab" report "$work/r.h5"
  grep -qE "^failed " "$work/out" || grep -qE "1 failed" "$work/out" || fail "report does not show the failed point: $(cat "$work/out")"
}

case_gemm_overflow() {
  # Finite operands whose product overflows FP32: no error is defined, so no numbers are printed.
  "$py" -c "import numpy as np; np.save('$work/big.npy', np.full((32, 128), 1e20, np.float32))"
  expect_one_line_error "the FP32 result overflowed" "$fp8lab" gemm --a "$work/big.npy" --b "$work/big.npy" --out "$work/c.npy"
  [[ ! -e $work/c.npy ]] || fail "gemm wrote C after refusing it"
}

case_shape_overflow() {
  "$py" - "$work" <<'PY'
import json, struct, sys
w = sys.argv[1]
def st(name, header, data=b"\0" * 16):
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    open(f"{w}/{name}", "wb").write(struct.pack("<Q", len(h)) + h + data)
st("e400.safetensors", b'{"w": {"dtype": "F32", "shape": [1e400, 4], "data_offsets": [0, 16]}}')
st("u64.safetensors", {"w": {"dtype": "F32", "shape": [2**64 - 64, 2**64 - 256], "data_offsets": [0, 16]}})
st("i64.safetensors", {"w": {"dtype": "F32", "shape": [2**62 + 4096, 4], "data_offsets": [0, 16]}})
st("overlap.safetensors", {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                           "v": {"dtype": "F32", "shape": [2, 2], "data_offsets": [8, 24]}}, b"\0" * 24)
def npy(name, header):
    h = header.encode(); h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    open(f"{w}/{name}", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + b"\0" * 16)
npy("i64.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427391999, 4), }")
npy("maybe.npy", "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 2), }")
PY
  expect_one_line_error "e400.safetensors: bad header: " "$fp8lab" quantize "$work/e400.safetensors" --granularity row
  expect_one_line_error "u64.safetensors: tensor 'w': field 'shape' holds the entry 18446744073709551552, larger than int64" \
    "$fp8lab" quantize "$work/u64.safetensors" --granularity row
  expect_one_line_error "i64.safetensors: tensor 'w': field 'shape' 4611686018427392000x4 of f32 has more bytes than int64 can count" \
    "$fp8lab" quantize "$work/i64.safetensors" --granularity row
  expect_one_line_error "overlap.safetensors: bad header: tensors 'w' and 'v' overlap" "$fp8lab" quantize "$work/overlap.safetensors" --name w --granularity row
  expect_one_line_error "i64.npy: bad header: shape 4611686018427391999x4 of f32 has more bytes than int64 can count" \
    "$fp8lab" quantize "$work/i64.npy" --granularity row
  expect_one_line_error "maybe.npy: bad header: fortran_order is 'Maybe', not True or False" "$fp8lab" quantize "$work/maybe.npy" --granularity row
}

case_paths() {
  expect_exit 0 "$fp8lab" synth --rows 64 --cols 128 -o "$work/a.npy"
  mkdir "$work/dir.npy" "$work/dir.toml"
  : >"$work/file"
  expect_one_line_error "dir.npy: is a directory, not a tensor file" "$fp8lab" quantize "$work/dir.npy" --granularity row
  expect_one_line_error "dir.npy: is a directory, not a tensor file" "$fp8lab" gemm --a "$work/dir.npy" --b "$work/a.npy"
  expect_one_line_error "dir.toml: is a directory, not a study spec" "$fp8lab" run "$work/dir.toml"
  expect_one_line_error "file/r.h5: cannot create directory" "$fp8lab" run "$source_dir/experiments/ci.toml" -o "$work/file/r.h5"
  expect_one_line_error "file/x.npy: cannot write: " "$fp8lab" synth --rows 4 --cols 4 -o "$work/file/x.npy"
  expect_one_line_error "file/c.npy: cannot write: " "$fp8lab" gemm --a "$work/a.npy" --b "$work/a.npy" --out "$work/file/c.npy"
  expect_one_line_error "dir.npy: is a directory" "$fp8lab" quantize "$work/a.npy" --granularity row --dequant "$work/dir.npy"
}

# Outputs that would destroy something: a FIFO (a device node needs root to make; the same
# check refuses both), the input itself under another spelling or through a link; a link as an
# output is written through; empty values are refused rather than taken as "not given".
case_output_targets() {
  expect_exit 0 "$fp8lab" synth --rows 64 --cols 128 -o "$work/a.npy"
  cp "$work/a.npy" "$work/a.orig.npy"
  mkfifo "$work/fifo"
  expect_one_line_error "fifo: is not a regular file" "$fp8lab" quantize "$work/a.npy" --scheme nvfp4 --dequant "$work/fifo"
  expect_one_line_error "fifo: is not a regular file" "$fp8lab" gemm --a "$work/a.npy" --b "$work/a.npy" --out "$work/fifo"
  [[ -p $work/fifo ]] || fail "the FIFO was replaced"
  expect_one_line_error "a.npy: is the input" "$fp8lab" quantize "$work/a.npy" --scheme nvfp4 --codes "$work/./a.npy"
  ln -s a.npy "$work/link.npy"
  expect_one_line_error "link.npy: is the input" "$fp8lab" quantize "$work/a.npy" --scheme mxfp8 --dequant "$work/link.npy"
  expect_one_line_error "a.npy: is the input" "$fp8lab" gemm --a "$work/a.npy" --b "$work/a.npy" --out "$work/a.npy"
  cmp -s "$work/a.npy" "$work/a.orig.npy" || fail "a refused command changed its input"
  : >"$work/target.npy"
  ln -s target.npy "$work/out-link.npy"
  expect_exit 0 "$fp8lab" quantize "$work/a.npy" --scheme mxfp8 --dequant "$work/out-link.npy"
  [[ -L $work/out-link.npy && -s $work/target.npy ]] || fail "quantize replaced an output link"
  : >"$work/target.npy"
  expect_exit 0 "$fp8lab" gemm --a "$work/a.npy" --b "$work/a.npy" --out "$work/out-link.npy"
  [[ -L $work/out-link.npy && -s $work/target.npy ]] || fail "gemm replaced an output link"
  ln -s dangling-target.npy "$work/dangling.npy"
  expect_exit 0 "$fp8lab" synth --rows 4 --cols 4 -o "$work/dangling.npy"
  [[ -L $work/dangling.npy && -s $work/dangling-target.npy ]] || fail "synth did not create a dangling link's target"
  # a link and its target named as two outputs are one file named twice, refused before writing
  cp "$work/target.npy" "$work/target.before"
  expect_one_line_error "named twice as an output" "$fp8lab" quantize "$work/a.npy" --scheme mxfp8 \
    --codes "$work/out-link.npy" --dequant "$work/target.npy"
  cmp -s "$work/target.npy" "$work/target.before" || fail "a refused quantize changed an output"
  # ... and so are two spellings of a file that does not exist yet, refused before any work
  (cd "$work" && expect_one_line_error "named twice as an output" "$fp8lab" quantize a.npy --scheme mxfp8 \
    --codes new.npy --dequant ./new.npy)
  [[ ! -e $work/new.npy ]] || fail "a refused quantize wrote new.npy"
  for option in --scheme --operand --dequant; do
    expect_one_line_error "$option: must not be empty" "$fp8lab" quantize "$work/a.npy" --granularity row "$option" ""
  done
  expect_one_line_error "--granularity: tile:1x32 is given twice" "$fp8lab" quantize "$work/a.npy" --granularity tile:1x32,row,tile:1x32
  expect_one_line_error "--accum: must not be empty" "$fp8lab" gemm --a "$work/a.npy" --b "$work/a.npy" --accum ""
  for floor in nan inf -1; do
    expect_one_line_error "--rel-floor: " "$fp8lab" quantize "$work/a.npy" --granularity row --rel-floor "$floor"
  done
  keep="a\.npy|a\.orig\.npy|fifo|link\.npy|target\.npy|target\.before|out-link\.npy|dangling\.npy"
  keep+="|dangling-target\.npy"; no_new_files
}

# A refusal's hint must work when followed: no CUDA-core route offered to an FP4 operand, and a
# default promotion interval that cannot serve the scheme's tiles named as the option to set.
case_gemm_hints() {
  expect_exit 0 "$fp8lab" synth --rows 64 --cols 128 -o "$work/a.npy"
  expect_one_line_error "A's scale rule te gives FP32 scales" "$fp8lab" gemm --a "$work/a.npy" --b "$work/a.npy" \
    --format e2m1 --a-granularity tile:1x32 --b-granularity tile:1x32 --scale te --accum b200
  ! grep -qF "bits:25" "$work/err" || fail "an FP4 operand was offered the FP8-only CUDA-core route: $(cat "$work/err")"
  expect_one_line_error "(--promotion, promotion =; default 128) to a divisor of 32" \
    "$fp8lab" gemm --a "$work/a.npy" --b "$work/a.npy" --scheme mxfp8 --accum hopper
  expect_exit 0 "$fp8lab" gemm --a "$work/a.npy" --b "$work/a.npy" --scheme mxfp8 --accum hopper --promotion 32
}

# A dequantized value past FP32's range (mx:rceil rounds the scale of a block near FLT_MAX up:
# code 256 x 2^120 = 2^128) is refused, as gemm refuses such a C; a tensor too small for
# torchao's per-tensor scale (amax / 2688 underflows to 0) quantizes to zeros with finite
# scales, its all-zero block included (torchao: 0 / 0 = NaN there).
case_quantize_range_edges() {
  "$py" -c "import numpy as np; np.save('$work/huge.npy', np.full((4, 32), 3.4e38, np.float32)); t = np.full((4, 32), 1e-42, np.float32); t[0, :16] = 0; np.save('$work/tiny.npy', t)"
  expect_one_line_error "huge.npy: element (0, 0) = 3.39999995e+38 dequantizes past FP32's range" \
    "$fp8lab" quantize "$work/huge.npy" --scheme mxfp8 --dequant "$work/d.npy"
  [[ ! -e $work/d.npy ]] || fail "a refused quantize wrote --dequant"
  expect_exit 0 "$fp8lab" quantize "$work/tiny.npy" --format e2m1 --granularity tile:1x16 --scale nvfp4:torchao --json \
    --dequant "$work/d.npy" --scales "$work/s.npy"
  "$py" - "$work/out" "$work/d.npy" "$work/s.npy" <<'PY' || fail "nvfp4:torchao on a 1e-42 tensor: $(cat "$work/out")"
import json, sys, numpy as np
result = json.load(open(sys.argv[1]))["results"][0]
assert result["zeroed"] == 112, result  # every nonzero element: the per-tensor scale is 0
assert np.all(np.load(sys.argv[2]) == 0), "dequantized values are not all zero"
scales = np.load(sys.argv[3])
assert np.all(np.isfinite(scales)) and scales[0, 0] == 2.0**-6, scales  # the all-zero block: not 0 / 0
PY
}

case_memory_estimate() {
  spec s.toml $'[operands]\ntokens = 2000000000'
  expect_one_line_error "s.toml: field 'operands.tokens': point layer=shape:128x128" "$fp8lab" run "$work/s.toml" -o "$work/r.h5"
  grep -qF "of memory but this machine has" "$work/err" || fail "the refusal does not compare with the machine: $(cat "$work/err")"
  grep -qF -- "--ignore-memory-limit" "$work/err" || fail "the refusal does not name the override flag"
  [[ ! -e $work/r.h5 ]] || fail "a refused run created its results file"
  expect_exit 0 "$fp8lab" run --help
  grep -qF -- "--ignore-memory-limit" "$work/out" || fail "run --help lacks --ignore-memory-limit"
}

case_no_file_left_behind() {
  expect_exit 0 "$fp8lab" synth --rows 64 --cols 128 -o "$work/a.npy"
  expect_one_line_error "nodir/s.npy: cannot write: directory" "$fp8lab" quantize "$work/a.npy" --granularity row --codes "$work/c.npy" --scales "$work/nodir/s.npy"
  [[ ! -e $work/c.npy ]] || fail "quantize wrote --codes before failing on --scales"
  # A merge that fails (a shard lacks a column) leaves no output.
  spec s.toml 'seed = [1, 2]'
  expect_exit 0 "$fp8lab" run "$work/s.toml" -o "$work/s0.h5" --shard 0/2 --quiet
  expect_exit 0 "$fp8lab" run "$work/s.toml" -o "$work/s1.h5" --shard 1/2 --quiet
  "$py" -c "import h5py; del h5py.File('$work/s1.h5', 'r+')['total_one_minus_cosine']"
  expect_exit 2 "$fp8lab" merge "$work/m.h5" "$work/s0.h5" "$work/s1.h5"
  keep="a\.npy|s\.toml|s0\.h5|s1\.h5"; no_new_files
}

# own_spec X_FILE: a study on the spec's own tensors.
own_spec() {
  printf '[study]\nname = "own"\nkind = "gemm"\n[axes]\nlayer = ["tensors"]\naccum = ["hopper", "fp32"]\npromotion = [32, 64]\na_granularity = ["tile:1x64"]\nb_granularity = ["block:64x64"]\n[tensors]\nx = "x.npy"\nw = "w.npy"\n' >"$work/own.toml"
}

case_changed_inputs() {
  "$py" -c "
import numpy as np
rng = np.random.default_rng(1)
np.save('$work/x.npy', rng.standard_normal((64, 128)).astype(np.float32))
np.save('$work/w.npy', rng.standard_normal((32, 128)).astype(np.float32))"
  own_spec
  expect_exit 0 "$fp8lab" run "$work/own.toml" -o "$work/s0.h5" --shard 0/2 --quiet
  "$py" -c "
import numpy as np
np.save('$work/x.npy', np.load('$work/x.npy') * 2)"
  expect_exit 0 "$fp8lab" run "$work/own.toml" -o "$work/s1.h5" --shard 1/2 --quiet
  expect_one_line_error "x.npy: sha256 " "$fp8lab" merge "$work/m.h5" "$work/s0.h5" "$work/s1.h5"
  grep -qF "computed from different versions" "$work/err" || fail "$(cat "$work/err")"
  [[ ! -e $work/m.h5 ]] || fail "a refused merge wrote its output"
  # --resume of a file computed from the old x.npy: refused, naming the file.
  "$py" -c "import h5py; f = h5py.File('$work/s0.h5', 'r')"
  expect_one_line_error "x.npy: sha256 " "$fp8lab" run "$work/own.toml" -o "$work/s0.h5" --shard 0/2 --resume
  grep -qF -- "--resume would mix results" "$work/err" || fail "$(cat "$work/err")"
}

case_data_dir_catalog() {
  mkdir -p "$work/data/stories260K"
  FP8LAB_DATA_DIR=$work/data expect_exit 0 "$fp8lab" layers
  grep -qE "^deepseek-v3/o_proj " "$work/out" || fail "the shipped catalog is not used: $(cat "$work/out")"
  spec s.toml ''
  FP8LAB_DATA_DIR=$work/data expect_exit 0 "$fp8lab" run "$work/s.toml" -o "$work/r.h5" --quiet
}

case_unknown_spec_keys() {
  spec s.toml $'[operands]\ntoken = 64'
  expect_one_line_error "s.toml:7:1: field 'operands.token': unknown key (did you mean 'tokens'?)" "$fp8lab" run "$work/s.toml" -o "$work/r.h5"
  spec s.toml $'[operandz]\ntokens = 64'
  expect_one_line_error "s.toml:6:2: field 'operandz': unknown table [operandz] (did you mean 'operands'?)" "$fp8lab" run "$work/s.toml" -o "$work/r.h5"
  spec s.toml $'[sampling]\nrows = 8\ncolumns = 8'
  expect_one_line_error "field 'sampling.columns': unknown key" "$fp8lab" run "$work/s.toml" -o "$work/r.h5"
  printf '[study]\nname = "h"\nkind = "gemm"\nowner = "me"\n' >"$work/s.toml"
  expect_one_line_error "s.toml:4:1: field 'study.owner': unknown key" "$fp8lab" run "$work/s.toml" -o "$work/r.h5"
  spec s.toml 'seed = [1, 1]'
  expect_one_line_error "field 'axes.seed': value '1' is listed twice" "$fp8lab" run "$work/s.toml" -o "$work/r.h5"
  [[ ! -e $work/r.h5 ]] || fail "a refused run created its results file"
}

case_compare_options() {
  spec s.toml ''
  expect_exit 0 "$fp8lab" run "$work/s.toml" -o "$work/r.h5" --quiet
  expect_one_line_error "--rtol: must be a finite number >= 0, got -1" "$fp8lab" compare "$work/r.h5" "$work/r.h5" --rtol -1
  expect_one_line_error "--rtol: must be a finite number >= 0, got nan" "$fp8lab" compare "$work/r.h5" "$work/r.h5" --rtol nan
  expect_exit 0 "$fp8lab" compare "$work/r.h5" "$work/r.h5" --rtol 0
  expect_one_line_error "missing.h5: no such results file" "$fp8lab" compare "$work/r.h5" "$work/missing.h5"
  expect_exit 0 "$fp8lab" compare --help
  grep -qF "exit 3" "$work/out" || fail "compare --help does not document exit 3"
}

case_usage_errors() {
  expect_one_line_error "--shard '0/3x' is not I/N" "$fp8lab" run "$source_dir/experiments/ci.toml" --shard 0/3x -o "$work/r.h5"
  expect_one_line_error "--rows is required" "$fp8lab" synth --cols 4 -o "$work/x.npy"
  expect_one_line_error "unknown command 'frobnicate' (commands: run, " "$fp8lab" frobnicate
}

case_interrupt() {
  "$fp8lab" run "$source_dir/experiments/resume_check.toml" -o "$work/r.h5" --quiet >/dev/null 2>"$work/err" &
  local pid=$!
  wait_for_points "$work/r.h5" 1 || fail "no point finished in time"
  kill -INT "$pid"
  local got=0
  wait "$pid" || got=$?
  [[ $got == 130 ]] || fail "exit $got after SIGINT, want 130"
  grep -qxF "fp8lab: interrupted (SIGINT); $work/r.h5 keeps every finished point and is resumable: fp8lab run $source_dir/experiments/resume_check.toml -o $work/r.h5 --resume" "$work/err" || fail "$(cat "$work/err")"
}

"case_$case_name"
echo "PASS [$case_name]"
