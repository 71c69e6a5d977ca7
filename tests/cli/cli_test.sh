#!/usr/bin/env bash
# fp8lab's command line, driven as a user drives it. Usage: cli_test.sh CASE PATH/TO/fp8lab
# Files are checked from Debian's /usr/bin/python3 with NumPy (python3-numpy, installed by
# .ci/deps), so the .npy files are proven readable by the tool researchers use.
set -euo pipefail
case_name=$1
fp8lab=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/test_lib.sh"
"$py" -c "import numpy" 2>/dev/null || { echo "FAIL: $py lacks numpy (run: bash .ci/deps)" >&2; exit 1; }

make_activation() {  # 256 x 1000: K = 1000 is no multiple of 128, so the tile grid is padded
  expect_exit 0 "$fp8lab" synth --rows 256 --cols 1000 --outlier-channels 8 --outlier-scale 100 --seed 3 -o "$work/x.npy"
}

case_help() {
  expect_exit 0 "$fp8lab" --help
  grep -q quantize "$work/out" && grep -q synth "$work/out" && grep -q gemm "$work/out" || fail "fp8lab --help does not list the commands"
  expect_exit 0 "$fp8lab" quantize --help
  for option in --name --format --granularity --scale --codes --scales --dequant --json --rel-floor; do
    grep -qF -- "$option" "$work/out" || fail "quantize --help does not explain $option"
  done
  expect_exit 0 "$fp8lab" gemm --help
  for option in --a --b --a-name --b-name --a-granularity --b-granularity --format --scale --accum --promotion \
                --output --out --sample-rows --sample-cols --json --rht; do
    grep -qF -- "$option" "$work/out" || fail "gemm --help does not explain $option"
  done
  expect_exit 0 "$fp8lab" compare --help
  for text in --rtol --floor-scale "noise floor" "*_rel_frobenius" "*_max_rel" "eta = 4 sqrt(K)"; do
    grep -qF -- "$text" "$work/out" || fail "compare --help does not explain '$text'"
  done
  expect_exit 2 "$fp8lab" quantize
  expect_exit 2 "$fp8lab" frobnicate
}

case_synth_and_quantize() {
  make_activation
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --granularity tensor,row,tile:1x128,block:128x128
  for row in "tensor +1x1 " "row +256x1 " "tile:1x128 +256x8 " "block:128x128 +2x8 "; do
    grep -qE "^$row" "$work/out" || fail "no result row '$row' in: $(cat "$work/out")"
  done
}

case_outputs() {
  make_activation
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --format e4m3 --granularity tile:1x128 --scale pow2 \
    --codes "$work/c.npy" --scales "$work/s.npy" --dequant "$work/d.npy"
  # Decode the codes with the E4M3 table written out in Python, apply the tile scales from
  # the row-major grid, and compare with the dequantized file and the input.
  "$py" - "$work" <<'PY' || fail "output files are inconsistent"
import sys, numpy as np
w = sys.argv[1]
x, c, s, d = (np.load(f"{w}/{n}.npy") for n in "xcsd")
assert c.dtype == np.uint8 and c.shape == (256, 1000), (c.dtype, c.shape)
assert s.dtype == np.float32 and s.shape == (256, 8), s.shape            # ceil(1000 / 128) = 8
assert d.dtype == np.float32 and d.shape == x.shape
assert np.all(np.log2(s) == np.round(np.log2(s))), "pow2 scales are powers of two"
e, m, sign = (c >> 3) & 0xF, c & 7, np.where(c & 0x80, -1.0, 1.0)
value = sign * np.where(e == 0, m / 8.0 * 2.0**-6, (1 + m / 8.0) * 2.0**(e.astype(np.int64) - 7))
scale = np.repeat(s, 128, axis=1)[:, :1000]
assert np.array_equal((value * scale).astype(np.float32), d), "dequant != decode(codes) * scale"
# Per-element bound derived in tests/reference/quantize_error_bound_test.cpp:
# max(2^-4 |x|, sf 2^-10) + 2^-22 |x| + 2^-149.
bound = np.maximum(2.0**-4 * np.abs(x), scale * 2.0**-10) + 2.0**-22 * np.abs(x) + 2.0**-149
assert np.all(np.abs(d.astype(np.float64) - x) <= bound), "dequantized error beyond the derived bound"
PY
}

case_json_report() {
  make_activation
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --granularity tensor,tile:1x128 --format e5m2 --json
  "$py" - "$work/out" <<'PY' || fail "--json output is not the expected report: $(cat "$work/out")"
import json, math, sys
r = json.load(open(sys.argv[1]))
assert r["format"] == "e5m2" and r["shape"] == [256, 1000] and r["backend"] == "cpu"
assert [g["granularity"] for g in r["results"]] == ["tensor", "tile:1x128"]
for g in r["results"]:
    m = g["metrics"]
    for key in ["rel_frobenius", "sqnr_db", "deepgemm_diff", "max_abs", "max_rel", "one_minus_cosine", "rel_floor"]:
        assert math.isfinite(m[key]), key
    assert 0 < m["rel_frobenius"] < 0.2 and m["count"] == 256000
PY
}

case_bf16_npy() {
  # bf16 in .npy as the structured dtype [('bf16', '<u2')], and F32 in a two-tensor safetensors.
  "$py" - "$work" <<'PY'
import json, struct, sys, numpy as np
w = sys.argv[1]
x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
bits = (x.view(np.uint32) >> 16).astype(np.uint16)           # truncation gives valid bf16 values
np.save(f"{w}/b.npy", bits.view(np.dtype([("bf16", "<u2")])).reshape(64, 256))
header = {"w": {"dtype": "F32", "shape": [64, 256], "data_offsets": [0, x.nbytes]},
          "v": {"dtype": "F32", "shape": [64, 256], "data_offsets": [x.nbytes, 2 * x.nbytes]}}
h = json.dumps(header).encode()
open(f"{w}/m.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + x.tobytes() + x.tobytes())
PY
  expect_exit 0 "$fp8lab" quantize "$work/b.npy" --granularity tile:1x64
  grep -q "64x256 bf16 -> e4m3" "$work/out" || fail "bf16 .npy not read as bf16: $(cat "$work/out")"
  expect_exit 0 "$fp8lab" quantize "$work/m.safetensors" --name w --granularity row
  grep -q "m.safetensors:w: 64x256 f32" "$work/out" || fail "safetensors tensor not read: $(cat "$work/out")"
}

case_bad_inputs() {
  make_activation
  expect_one_line_error "missing.npy: cannot open" "$fp8lab" quantize "$work/missing.npy" --granularity row
  head -c 3000 "$work/x.npy" >"$work/truncated.npy"
  expect_one_line_error "truncated.npy: truncated" "$fp8lab" quantize "$work/truncated.npy" --granularity row
  "$py" -c "
import numpy as np
x = np.ones((4, 8), np.float32); x[1, 3] = np.nan; np.save('$work/nan.npy', x)
y = np.ones((4, 8), np.float32); y[2, 5] = -np.inf; np.save('$work/inf.npy', y)
np.save('$work/cube.npy', np.ones((2, 3, 4), np.float32))
np.save('$work/ints.npy', np.ones((2, 3), np.int32))
np.save('$work/bytes.npy', np.ones((2, 3), np.uint8))"
  expect_one_line_error "nan.npy: element (1, 3) is NaN" "$fp8lab" quantize "$work/nan.npy" --granularity row
  expect_one_line_error "inf.npy: element (2, 5) is infinite" "$fp8lab" quantize "$work/inf.npy" --granularity row
  expect_one_line_error "cube.npy: shape 2x3x4 is not 2-D" "$fp8lab" quantize "$work/cube.npy" --granularity row
  expect_one_line_error "ints.npy: dtype i32 holds integers" "$fp8lab" quantize "$work/ints.npy" --granularity row
  expect_one_line_error "bytes.npy: dtype u8 holds integers" "$fp8lab" quantize "$work/bytes.npy" --granularity row
  expect_one_line_error "size 100 is not a power of two" "$fp8lab" quantize "$work/x.npy" --granularity tile:1x100
  expect_one_line_error "format 'e3m4' is not one of e4m3, e5m2" "$fp8lab" quantize "$work/x.npy" --granularity row --format e3m4
  expect_one_line_error "scale rule 'ue8m0'" "$fp8lab" quantize "$work/x.npy" --granularity row --scale ue8m0
  expect_one_line_error "need exactly one --granularity" "$fp8lab" quantize "$work/x.npy" --granularity row,tensor --codes "$work/c.npy"
  expect_one_line_error "x.npy: a .npy file holds one tensor" "$fp8lab" quantize "$work/x.npy" --name w --granularity row
  expect_one_line_error "unknown tensor file type '.pt'" "$fp8lab" quantize "$work/model.pt" --granularity row
  expect_exit 2 "$fp8lab" quantize "$work/x.npy" --granularity row --no-such-option
  expect_one_line_error "--backend 'tpu' is not one of cpu, cuda, cuda-cublaslt, auto" "$fp8lab" quantize "$work/x.npy" --granularity row --backend tpu
  expect_one_line_error "outlier_channels must be between 0 and cols" "$fp8lab" synth --rows 4 --cols 4 --outlier-channels 9 -o "$work/s.npy"
}

case_scale_rules() {
  make_activation
  for rule in fp32 pow2 deepgemm te te-pow2 div mx mx:ceil mx:even mx:rceil; do
    expect_exit 0 "$fp8lab" quantize "$work/x.npy" --granularity tile:1x32 --scale "$rule" --json
    grep -qF "\"scale_rule\": \"$rule\"" "$work/out" || fail "--scale $rule: the report does not name the rule"
  done
  # MX scales are powers of two; FP4 codes sit in the low 4 bits; nvfp4 dequantizes as
  # code * (s_b * global scale), all in float32, with s_b an E4M3 value.
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --granularity tile:1x32 --scale mx:rceil --scales "$work/mx_s.npy"
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --format e2m1 --granularity tile:1x16 --scale nvfp4 --json \
    --codes "$work/c.npy" --scales "$work/s.npy" --global-scale "$work/g.npy" --dequant "$work/d.npy"
  grep -q '"tensor_scale"' "$work/out" || fail "nvfp4: the JSON report lacks the per-tensor scale"
  "$py" - "$work" <<'PY' || fail "scale rule outputs are not what the rules say"
import sys
import numpy as np
w = sys.argv[1]
mx = np.load(f"{w}/mx_s.npy")
m, _ = np.frexp(mx)
assert (m == 0.5).all(), "mx:rceil scales are not powers of two"
c, s, g, d = (np.load(f"{w}/{n}.npy") for n in ("c", "s", "g", "d"))
assert c.dtype == np.uint8 and c.max() < 16 and g.shape == (1,) and s.shape == (256, 63)
e2m1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
assert (0 <= s).all() and (s <= 448).all()
factor = (np.repeat(s, 16, axis=1)[:, :1000] * g[0]).astype(np.float32)
assert np.array_equal(e2m1[c] * factor, d), "nvfp4 dequantized values differ from code * (s_b * global)"
PY
  expect_one_line_error "--scale: scale rule 'ocp' is not one of fp32, pow2, deepgemm, te, te-pow2, div, mx, mx:ceil, mx:even, mx:rceil, nvfp4, nvfp4:torchao" \
    "$fp8lab" quantize "$work/x.npy" --granularity row --scale ocp
  expect_one_line_error "scale rule nvfp4 needs format e2m1, not e4m3" \
    "$fp8lab" quantize "$work/x.npy" --granularity tile:1x16 --scale nvfp4 --codes "$work/refused.npy"
  expect_one_line_error "--global-scale: scale rule fp32 has no per-tensor scale" \
    "$fp8lab" quantize "$work/x.npy" --granularity row --global-scale "$work/refused.npy"
  [[ ! -e "$work/refused.npy" ]] || fail "a refused quantize wrote a file"
  # --rounding stochastic --seed N: the same seed gives the same codes, another seed others;
  # nearest is the default and takes no seed.
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --granularity tile:1x32 --rounding stochastic --seed 7 --json \
    --codes "$work/sr1.npy"
  for field in '"rounding": "stochastic"' '"seed": 7'; do
    grep -qF "$field" "$work/out" || fail "--rounding stochastic: the report lacks $field"
  done
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --granularity tile:1x32 --rounding stochastic --seed 7 --codes "$work/sr2.npy"
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --granularity tile:1x32 --rounding stochastic --seed 8 --codes "$work/sr3.npy"
  cmp -s "$work/sr1.npy" "$work/sr2.npy" || fail "--seed 7 twice gave different codes"
  ! cmp -s "$work/sr1.npy" "$work/sr3.npy" || fail "--seed 7 and --seed 8 gave the same codes"
  expect_one_line_error "--rounding: rounding 'up' is not one of nearest, stochastic" \
    "$fp8lab" quantize "$work/x.npy" --granularity row --rounding up
  expect_one_line_error "--seed: '-1' is not a whole number from 0 to 2^64 - 1" \
    "$fp8lab" quantize "$work/x.npy" --granularity row --rounding stochastic --seed -1
  expect_one_line_error "--seed: '18446744073709551616' is not a whole number from 0 to 2^64 - 1" \
    "$fp8lab" quantize "$work/x.npy" --granularity row --rounding stochastic --seed 18446744073709551616
  expect_one_line_error "--seed: only --rounding stochastic takes a seed" \
    "$fp8lab" quantize "$work/x.npy" --granularity row --seed 3
  # nvfp4:4over6: TE's 1x16 / 16x16 blocks only, nearest rounding only.
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --format e2m1 --granularity block:16x16 --scale nvfp4:4over6 --json
  grep -q '"tensor_scale"' "$work/out" || fail "nvfp4:4over6: the JSON report lacks the per-tensor scale"
  expect_one_line_error "scale rule nvfp4:4over6 takes granularity tile:1x16 or block:16x16" \
    "$fp8lab" quantize "$work/x.npy" --format e2m1 --granularity tile:1x32 --scale nvfp4:4over6
  expect_one_line_error "scale rule nvfp4:4over6 rounds to nearest only" \
    "$fp8lab" quantize "$work/x.npy" --format e2m1 --granularity tile:1x16 --scale nvfp4:4over6 --rounding stochastic
  # --scheme: format, granularity and rule in one word; it excludes the three options.
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --scheme mxfp4 --json
  for field in '"scheme": "mxfp4"' '"format": "e2m1"' '"scale_rule": "mx"' '"granularity": "tile:1x32"'; do
    grep -qF "$field" "$work/out" || fail "--scheme mxfp4: the report lacks $field"
  done
  # --operand weight: the scheme's weight blocks (nvfp4: TE's 16x16 2-D weight scaling).
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --scheme nvfp4 --operand weight --json
  for field in '"operand": "weight"' '"granularity": "block:16x16"' '"scale_rule": "nvfp4"'; do
    grep -qF "$field" "$work/out" || fail "--scheme nvfp4 --operand weight: the report lacks $field"
  done
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --scheme nvfp4 --operand gradient --json
  grep -qF '"granularity": "tile:1x16"' "$work/out" || fail "--scheme nvfp4 --operand gradient is not 1x16"
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --scheme deepseek --operand weight --json
  grep -qF '"granularity": "block:128x128"' "$work/out" || fail "--scheme deepseek --operand weight is not 128x128"
  expect_one_line_error "--operand: operand 'bias' is not one of activation, gradient, weight" \
    "$fp8lab" quantize "$work/x.npy" --scheme nvfp4 --operand bias
  expect_one_line_error "--operand: only --scheme picks a granularity by operand" \
    "$fp8lab" quantize "$work/x.npy" --granularity row --operand weight
  expect_one_line_error "--scheme: scheme 'fp4' is not one of deepseek, mxfp8, mxfp4, nvfp4" \
    "$fp8lab" quantize "$work/x.npy" --scheme fp4
  expect_exit 2 "$fp8lab" quantize "$work/x.npy" --scheme nvfp4 --granularity row
  grep -qF "excludes" "$work/err" || fail "--scheme with --granularity: the error does not say they exclude each other"
}

case_keeps_existing_outputs() {
  make_activation
  expect_exit 0 "$fp8lab" quantize "$work/x.npy" --granularity row --dequant "$work/d.npy"
  local before; before=$(sha256sum <"$work/d.npy")
  "$py" -c "import numpy as np; x = np.ones((4, 8), np.float32); x[0, 0] = np.nan; np.save('$work/nan.npy', x)"
  expect_exit 2 "$fp8lab" quantize "$work/nan.npy" --granularity row --dequant "$work/d.npy"
  [[ $(sha256sum <"$work/d.npy") == "$before" ]] || fail "a failed run changed an existing output file"
  expect_exit 2 "$fp8lab" quantize "$work/x.npy" --granularity row --dequant "$work/no/such/dir/d.npy"
  [[ -z $(find "$work" -name '*.tmp-*') ]] || fail "a failed write left a temporary file"
}

make_gemm_operands() {  # A: 96 x 640 activations with outliers, B: 80 x 640 weights (K = 640: 5 tiles)
  expect_exit 0 "$fp8lab" synth --rows 96 --cols 640 --outlier-channels 4 --outlier-scale 50 --seed 5 -o "$work/a.npy"
  expect_exit 0 "$fp8lab" synth --rows 80 --cols 640 --seed 6 -o "$work/b.npy"
}

case_gemm_report() {
  make_gemm_operands
  expect_exit 0 "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --out "$work/c.npy"
  for row in quantization accumulation total; do
    grep -qE "^$row +[0-9.e+-]+ +[0-9.]+ " "$work/out" || fail "no '$row' error row in: $(cat "$work/out")"
  done
  grep -q "accumulation hopper, promotion every 128" "$work/out" || fail "configuration not stated: $(cat "$work/out")"
  # C from the file against NumPy's FP64 product of the originals: the total error is E4M3-sized.
  "$py" - "$work" <<'PY' || fail "C is not A * B^T"
import sys, numpy as np
w = sys.argv[1]
a, b, c = (np.load(f"{w}/{n}.npy").astype(np.float64) for n in "abc")
ref = a @ b.T
assert c.shape == (96, 80)
rel = np.linalg.norm(c - ref) / np.linalg.norm(ref)
assert 1e-3 < rel < 0.1, rel     # E4M3 operand rounding is ~2^-4 per element; averaged down, never zero
PY
}

case_gemm_json_and_sampling() {
  make_gemm_operands
  expect_exit 0 "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --accum bits:16,depth:16,round:rne \
    --promotion 64 --output bf16 --sample-rows 24 --sample-cols 40 --seed 1 --json --out "$work/c.npy"
  "$py" - "$work" <<'PY' || fail "sampled --json report is not as expected: $(cat "$work/out")"
import json, sys, numpy as np
w = sys.argv[1]
r = json.load(open(f"{w}/out"))
assert r["accumulation"] == "bits:16,depth:16,round:rne" and r["promotion"] == "64" and r["output"] == "bf16"
assert r["rows_computed"] == 24 and r["cols_computed"] == 40
for key in ["quantization", "accumulation_error", "total"]:
    lo, hi = r[key]["ci95"]["rel_frobenius"]
    assert lo <= hi, key
assert np.load(f"{w}/c.npy").shape == (24, 40)
PY
}

case_gemm_bad_inputs() {
  make_gemm_operands
  expect_exit 0 "$fp8lab" synth --rows 8 --cols 300 --seed 1 -o "$work/k300.npy"
  expect_one_line_error "must share K" "$fp8lab" gemm --a "$work/a.npy" --b "$work/k300.npy"
  expect_one_line_error "does not divide A's scale extent 128 along K" "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --promotion 256
  expect_one_line_error "promotion interval never does not divide" "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --promotion never
  expect_one_line_error "not a multiple of the instruction depth 32" "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --a-granularity row --b-granularity row --promotion 48
  expect_one_line_error "accumulation model 'tf32'" "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --accum tf32
  expect_one_line_error "B's format (--b-format): format 'e3m4'" "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --b-format e3m4
  expect_one_line_error "missing.npy: cannot open" "$fp8lab" gemm --a "$work/missing.npy" --b "$work/b.npy"
  # Schemes and Blackwell's block-scaled MMA: what each refuses, and why.
  expect_one_line_error "--scheme: scheme 'mxfp9' is not one of deepseek, mxfp8, mxfp4, nvfp4" "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --scheme mxfp9
  expect_one_line_error "excludes" "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --scheme nvfp4 --scale mx
  expect_one_line_error "A's scale rule fp32 gives FP32 scales" "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --accum b200
  expect_one_line_error "(promotion never)" "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --scheme mxfp8 --promotion 32
  expect_one_line_error "the promoted (Hopper-model) GEMMs take e4m3, e5m2" "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --scheme nvfp4 --accum hopper --promotion 16
  expect_one_line_error "one scale per 32 of K" "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --accum b200 --scale mx --a-granularity tile:1x16 --b-granularity tile:1x32
  expect_exit 2 "$fp8lab" gemm --a "$work/a.npy"
  expect_one_line_error "--backend cuda: " "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --backend cuda
  expect_exit 0 "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --backend cpu --json
  grep -q '"backend": "cpu"' "$work/out" || fail "--json does not name the backend"
  # A scheme spells out its format, tiles, rule and accumulator in the report.
  expect_exit 0 "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --scheme nvfp4 --json
  "$py" - "$work/out" <<'PY' || fail "--scheme nvfp4 --json is not as expected: $(cat "$work/out")"
import json, sys
r = json.load(open(sys.argv[1]))
assert (r["scheme"], r["format"], r["scale_rule"]) == ("nvfp4", "e2m1", "nvfp4"), r
assert (r["a_granularity"], r["b_granularity"]) == ("tile:1x16", "block:16x16"), r
assert (r["accumulation"], r["promotion"]) == ("b200", "never"), r
PY
}

case_gemm_rht() {
  make_gemm_operands
  # The transform leaves the product exact, so with it NVFP4's C is still A * B^T to NVFP4 size,
  # and the report says it ran; the bits differ from the run without it.
  expect_exit 0 "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --scheme nvfp4 --rht --json --out "$work/c_rht.npy"
  cp "$work/out" "$work/rht.json"
  expect_exit 0 "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --scheme nvfp4 --json --out "$work/c.npy"
  "$py" - "$work" <<'PY' || fail "--rht run is not as expected: $(cat "$work/rht.json")"
import json, sys, numpy as np
w = sys.argv[1]
r, plain = json.load(open(f"{w}/rht.json")), json.load(open(f"{w}/out"))
assert r["rht"] is True and plain["rht"] is False, (r["rht"], plain["rht"])
a, b = (np.load(f"{w}/{n}.npy").astype(np.float64) for n in "ab")
c_rht, c = np.load(f"{w}/c_rht.npy"), np.load(f"{w}/c.npy")
ref = a @ b.T
rel = np.linalg.norm(c_rht - ref) / np.linalg.norm(ref)
assert 1e-3 < rel < 0.3, rel            # E2M1 elements: ~2^-2 relative per element, averaged down
assert not np.array_equal(c_rht, c)     # the operands were transformed before quantization
assert abs(r["total"]["rel_frobenius"] - rel) < 1e-6 * rel + 1e-12, (r["total"]["rel_frobenius"], rel)
PY
  expect_exit 0 "$fp8lab" gemm --a "$work/a.npy" --b "$work/b.npy" --rht
  grep -q "RHT 16x16 (TE signs) on A and B along K" "$work/out" || fail "the table report does not say --rht ran: $(cat "$work/out")"
  # K = 300 is no multiple of 16: refused with the option named, and no C written.
  expect_exit 0 "$fp8lab" synth --rows 8 --cols 300 --seed 1 -o "$work/k300.npy"
  expect_one_line_error "--rht: K = 300 is not a multiple of 16" "$fp8lab" gemm --a "$work/k300.npy" --b "$work/k300.npy" \
    --rht --out "$work/refused.npy"
  [[ ! -e "$work/refused.npy" ]] || fail "a refused --rht run wrote its output"
}

"case_$case_name"
echo "PASS [$case_name]"
