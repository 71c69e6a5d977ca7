#!/usr/bin/env bash
# The formats study kind, driven as a user drives it: bad specs (one line naming the file and the
# field, exit 2, no results file) and a small run read back with xarray.
# Usage: formats_test.sh CASE PATH/TO/fp8lab SOURCE_DIR
set -euo pipefail
case_name=$1
fp8lab=$2
source_dir=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/test_lib.sh"

case_bad_specs() {
  write_study_spec "$work/a.toml" formats 'quantizer = ["mxfp6"]'
  expect_spec_refused "$work/a.toml" "axes.quantizer" "mxfp6" "deepseek, mxfp8, mxfp4, nvfp4"
  write_study_spec "$work/b.toml" formats 'quantizer = ["e4m3/tile:1x32/mx:floor"]'
  expect_spec_refused "$work/b.toml" "axes.quantizer" "mx:floor"
  # a rule that cannot serve the format
  write_study_spec "$work/c.toml" formats 'quantizer = ["e4m3/tile:1x16/nvfp4"]'
  expect_spec_refused "$work/c.toml" "axes.quantizer" "needs format e2m1"
  # a tile the rule forbids (4over6: TE's 1x16 and 16x16 blocks only), on every tensor
  write_study_spec "$work/d.toml" formats 'quantizer = ["e2m1/tile:1x32/nvfp4:4over6"]'
  expect_spec_refused "$work/d.toml" "axes.quantizer" "tile:1x16 or block:16x16"
  write_study_spec "$work/e.toml" formats 'quantizer = ["e4m3/tile:1x24/mx"]'
  expect_spec_refused "$work/e.toml" "axes.quantizer" "tile:1x24"
  write_study_spec "$work/f.toml" formats 'quantizer = ["e4m3/mx"]'
  expect_spec_refused "$work/f.toml" "axes.quantizer" "FORMAT/GRANULARITY/RULE"
  write_study_spec "$work/g.toml" formats 'tensor = ["L9.wq.W"]'
  expect_spec_refused "$work/g.toml" "axes.tensor" "L9.wq.W"
  write_study_spec "$work/h.toml" formats 'rounding = ["up"]'
  expect_spec_refused "$work/h.toml" "axes.rounding" "up"
  write_study_spec "$work/i.toml" formats 'outlier_scale = [0]'
  expect_spec_refused "$work/i.toml" "axes.outlier_scale"
  write_study_spec "$work/j.toml" formats $'[synthetic]\ncols = 8\noutlier_channels = 9'
  expect_spec_refused "$work/j.toml" "synthetic.outlier_channels"
  write_study_spec "$work/k.toml" formats $'[synthetic]\ndistribution = "cauchy"'
  expect_spec_refused "$work/k.toml" "synthetic.distribution"
  write_study_spec "$work/l.toml" formats $'[synthetic]\nrow = 8'
  expect_spec_refused "$work/l.toml" "synthetic.row"
}

case_small_run() {
  expect_exit 0 "$fp8lab" run "$source_dir/tests/notebook/formats_small.toml" -o "$work/s.h5" --quiet
  "$py" - "$work/s.h5" <<'PY' || fail "formats results are not as expected"
import sys, numpy as np, xarray as xr
ds = xr.open_dataset(sys.argv[1], engine="h5netcdf")
rules = ["fp32", "pow2", "deepgemm", "te", "te-pow2", "div", "mx", "mx:ceil", "mx:even", "mx:rceil",
         "nvfp4", "nvfp4:torchao", "nvfp4:4over6"]  # kernels/scale_rules.hpp, in its order
assert dict(ds.sizes) == {"tensor": 5, "rounding": 2, "quantizer": 8, "versus_rule": 13}, ds.sizes
assert list(ds.tensor.values) == ["L0.wq.W", "L0.w1.X", "L3.w2.dY", "outliers[outlier_scale=1,seed=1]",
                                  "outliers[outlier_scale=100,seed=1]"], ds.tensor.values
assert list(ds.versus_rule.values) == rules
grid = ("tensor", "rounding", "quantizer")
for v in ("rel_frobenius", "sqnr_db", "max_rel", "flushed_fraction", "over_max_block_fraction",
          "clipped_block_fraction", "ue8m0_tax_db", "ue8m0_tax_ratio", "status", "reason", "operands",
          "format", "granularity", "scale_rule", "role", "blocks"):
    assert ds[v].dims == grid, (v, ds[v].dims)
for v in ("code_diff_fraction", "value_diff_fraction", "scale_diff_fraction"):
    assert ds[v].dims == grid + ("versus_rule",), (v, ds[v].dims)
assert ds.sqnr_db.attrs["units"] == "dB" and ds.ue8m0_tax_db.attrs["units"] == "dB"

# Stochastic rounding with 4over6 is the one skipped combination (TE refuses it), with its reason.
st = ds.status.values
skipped = ds.status.sel(rounding="stochastic", quantizer="e2m1/tile:1x16/nvfp4:4over6").values
assert (skipped == "skipped").all(), skipped
assert "stochastic" in str(ds.reason.sel(rounding="stochastic", quantizer="e2m1/tile:1x16/nvfp4:4over6").values[0])
assert (st == "ok").sum() == st.size - 5, st
ok = ds.where(ds.status == "ok")

# A scheme's granularity follows the role: deepseek is 128x128 on the weight, 1x128 elsewhere;
# nvfp4 16x16 on the weight, 1x16 elsewhere.
g = ds.granularity.sel(rounding="nearest")
assert g.sel(tensor="L0.wq.W", quantizer="deepseek").item() == "block:128x128"
assert g.sel(tensor="L0.w1.X", quantizer="deepseek").item() == "tile:1x128"
assert g.sel(tensor="L0.wq.W", quantizer="nvfp4").item() == "block:16x16"
assert g.sel(tensor="L3.w2.dY", quantizer="nvfp4").item() == "tile:1x16"
assert list(ds.role.sel(rounding="nearest", quantizer="mxfp8").values) == ["weight", "activation", "gradient",
                                                                           "activation", "activation"]

# Definitions (harness/metrics/format_metrics.hpp): a clipped block is over max; RCEIL (mxfp8)
# scales amax to at most 448 (up to FP32 rounding) and never clips to nearest; FLOOR on E2M1 (mxfp4) clips some blocks of these
# tensors (FACTS.md: about a third of FP4 groups for the OCP rule).
assert (ok.clipped_block_fraction <= ok.over_max_block_fraction).where(ds.status == "ok", True).all()
assert (ok.clipped_block_fraction.sel(quantizer="mxfp8", rounding="nearest") == 0).all()
assert float(ok.clipped_block_fraction.sel(quantizer="mxfp4", rounding="nearest").mean()) > 0.02

# Code differences: 0 against the point's own rule; NaN for rules that cannot serve its format;
# symmetric between two quantizers with the same format and tiles (mxfp8 = e4m3/tile:1x32/mx:rceil).
cd = ok.code_diff_fraction.sel(rounding="nearest")
for q in ds.quantizer.values:
    own = str(ds.scale_rule.sel(tensor="L0.w1.X", rounding="nearest", quantizer=q).item())
    assert (cd.sel(quantizer=q, versus_rule=own) == 0).all(), q
assert cd.sel(quantizer="deepseek", versus_rule="nvfp4").isnull().all()
assert cd.sel(quantizer="nvfp4", versus_rule="nvfp4:torchao").notnull().all()
x = "L0.w1.X"
a = cd.sel(tensor=x, quantizer="mxfp8", versus_rule="mx").item()
b = cd.sel(tensor=x, quantizer="e4m3/tile:1x32/mx", versus_rule="mx:rceil").item()
assert a == b and 0 < a < 1, (a, b)

# The UE8M0 tax on DeepSeek-V3's 1x128 activations is the SQNR of deepseek (fp32 scales) minus that
# of the same tiles with pow2 scales, both points of this file.
n = ok.sel(rounding="nearest", tensor=x)
tax = n.ue8m0_tax_db.sel(quantizer="deepseek").item()
assert abs(tax - (n.sqnr_db.sel(quantizer="deepseek").item() - n.sqnr_db.sel(quantizer="e4m3/tile:1x128/pow2").item())) < 1e-9
assert np.isfinite(ok.rel_frobenius.values[ds.status.values == "ok"]).all()
op = str(ds.operands.sel(tensor="L0.wq.W").values[0, 0])
assert "L0.wq.W" in op and "sha256 b0a507e7" in op, op
op = str(ds.operands.sel(tensor="outliers[outlier_scale=100,seed=1]").values[0, 0])
assert "outlier_scale=100" in op and "outlier_channels=4" in op, op
# Outlier columns 100x larger flush their tiles' other elements in E2M1 (mxfp4: 1x32 tiles, values
# down to 0.5 X with X near amax / 8, so |x| < amax / 32 reads back as zero): at least a few of the
# 8 tiles of each row hold one of the 4 outlier columns, so the flushed fraction grows by > 0.1.
f = ok.flushed_fraction.sel(rounding="nearest", quantizer="mxfp4").values[3:]
assert f[1] > f[0] + 0.1, f
PY
}

"case_$case_name"
echo "PASS [$case_name]"
