#!/usr/bin/env bash
# The zero_memory study kind driven as a user drives it.
#   small_run: a tiny grid (Llama 3.1 8B and stories260K shapes-only, the paper's params:7.5e9;
#     stages 0..3; 1, 3 and 64 ranks; every state set; policies none and full) runs, and its
#     file works in xarray with no reshaping. Its values are checked against what Python
#     computes on its own: the ZeRO paper's formulas (120 / 31.4 / 16.6 / 1.9 GB for 7.5B on 64
#     ranks), each state set's bytes from the tensor shapes with every scale counted, shares
#     rounded up where 3 ranks do not divide them; activation_bytes against the recompute
#     study's own file for the same step (peak_bytes_total less weights and gradients); totals
#     and fits_80gb from those.
#   bad_specs: an unknown states name, stage 4, 0 ranks, an unknown model, a malformed
#     params:PSI, a policy that does not fit the tokens, a bad [step] setting: each refused with
#     one stderr line naming the spec file and the field, exit 2, no results file.
# Usage: zero_memory_test.sh CASE PATH/TO/fp8lab SOURCE_DIR
set -euo pipefail
case_name="zero memory $1" fp8lab=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/test_lib.sh"

small_run() {
  write_study_spec "$work/z.toml" zero_memory 'model = ["llama3.1-8b", "stories260K", "params:7.5e9"]
zero_stage = [0, 1, 2, 3]
ranks = [1, 3, 64]
states = ["paper", "bf16_moments", "fp8_weights_fp8_moments"]
policy = ["none", "full"]
tokens = [256]'
  expect_exit 0 "$fp8lab" run "$work/z.toml" -o "$work/z.h5" --quiet
  # The same steps in the recompute study (flash attention and bf16, as zero_memory's defaults).
  write_study_spec "$work/r.toml" recompute 'model = ["llama3.1-8b", "stories260K"]
policy = ["none", "full"]
recipe = ["bf16"]
tokens = [256]
[step]
attention = "flash"
shapes_only = 1'
  expect_exit 0 "$fp8lab" run "$work/r.toml" -o "$work/r.h5" --quiet
  "$py" - "$work/z.h5" "$work/r.h5" <<'PY' || fail "the zero_memory file is not as the formulas say"
import math, sys
import numpy as np
import xarray as xr
ds = xr.open_dataset(sys.argv[1], engine="h5netcdf")
rec = xr.open_dataset(sys.argv[2], engine="h5netcdf")
problems = []
def check(ok, message):
    if not ok:
        problems.append(message)

check(set(ds.dims) == {"model", "zero_stage", "ranks", "states", "policy", "tokens"}, f"dims {dict(ds.sizes)}")
check(ds.zero_stage.dtype.kind == "i" and ds.ranks.dtype.kind == "i", "zero_stage and ranks are not integer coordinates")
check((ds.status == "ok").all().item(), "not every point is ok")
check(ds.attrs["attention"] == "flash" and ds.attrs["recipe"] == "bf16", f"attributes {ds.attrs}")
for v in ["weight_bytes_per_rank", "activation_bytes", "total_bytes_per_rank"]:
    check(ds[v].attrs.get("units") == "B" and ds[v].attrs.get("long_name"), f"{v}: units/long_name {ds[v].attrs}")

def ceil_div(a, n):
    return -(-a // n)

def shard(whole, stage, n):
    w, g, o = whole
    return (ceil_div(w, n) if stage >= 3 else w, ceil_div(g, n) if stage >= 2 else g, ceil_div(o, n) if stage >= 1 else o)

def at(**where):
    return ds.sel(tokens=256, **where)

def value(point, name):
    return int(point[name].item())

# The paper (Rajbhandari et al. 2020), 7.5e9 parameters on 64 ranks, K = 12.
psi, K = 7_500_000_000, 12
paper = [(2 + 2 + K) * psi, 2 * psi + 2 * psi + K * psi // 64, 2 * psi + (2 + K) * psi // 64, (2 + 2 + K) * psi // 64]
for stage, (bytes_, gb) in enumerate(zip(paper, [120.0, 31.4, 16.6, 1.9])):
    p = at(model="params:7.5e9", zero_stage=stage, ranks=64, states="paper", policy="none")
    check(value(p, "model_state_bytes_per_rank") == bytes_, f"paper stage {stage}: {value(p, 'model_state_bytes_per_rank')} != {bytes_}")
    check(round(bytes_ / 1e9, 1) == gb, f"paper stage {stage}: {bytes_ / 1e9} GB is not the paper's {gb}")
    check(np.isnan(p.activation_bytes.item()) and np.isnan(p.fits_80gb.item()), "params: point has activation bytes")

# Llama 3.1 8B (separate classifier) and stories260K (tied), tensor by tensor.
def tensors(dim, hidden, layers, heads, kv_heads, vocab, separate):
    kv = kv_heads * (dim // heads)
    t = [(vocab, dim, False)]
    for _ in range(layers):
        t += [(1, dim, False), (dim, dim, True), (kv, dim, True), (kv, dim, True), (dim, dim, True),
              (1, dim, False), (hidden, dim, True), (dim, hidden, True), (hidden, dim, True)]
    t.append((1, dim, False))
    if separate:
        t.append((vocab, dim, False))
    return t

def states(t, name):
    n = sum(r * c for r, c, _ in t)
    if name == "paper":
        return (2 * n, 2 * n, 12 * n)
    if name == "bf16_moments":
        return (2 * n, 2 * n, (4 + 2 + 2) * n)
    w = sum(r * c + 4 * ceil_div(r, 128) * ceil_div(c, 128) if lin else 2 * r * c for r, c, lin in t)
    groups = sum(r * ceil_div(c, 128) for r, c, _ in t)
    return (w, 2 * n, 4 * n + 2 * (n + 4 * groups))

models = {"llama3.1-8b": tensors(4096, 14336, 32, 32, 8, 128256, True),
          "stories260K": tensors(64, 172, 5, 8, 4, 512, False)}
check(sum(r * c for r, c, _ in models["llama3.1-8b"]) == 8_030_261_248, "Llama 3.1 8B is not 8,030,261,248 parameters")
for model, t in models.items():
    n = sum(r * c for r, c, _ in t)
    for policy in ["none", "full"]:
        r = rec.sel(model=model, policy=policy, cache="policy", recipe="bf16", tokens=256)
        activation = int(r.peak_bytes_total) - int(r.peak_bytes_weights) - int(r.peak_bytes_gradients)
        for name in ["paper", "bf16_moments", "fp8_weights_fp8_moments"]:
            whole = states(t, name)
            for stage in range(4):
                for ranks in [1, 3, 64]:
                    p = at(model=model, zero_stage=stage, ranks=ranks, states=name, policy=policy)
                    want = shard(whole, stage, ranks)
                    got = tuple(value(p, v) for v in ["weight_bytes_per_rank", "gradient_bytes_per_rank", "optimizer_bytes_per_rank"])
                    where = f"{model}/{policy}/{name}/stage {stage}/N {ranks}"
                    check(got == want, f"{where}: states {got} != {want}")
                    check(value(p, "parameters") == n, f"{where}: parameters")
                    check(value(p, "model_state_bytes_per_rank") == sum(want), f"{where}: model state sum")
                    check(value(p, "activation_bytes") == activation, f"{where}: activation {value(p, 'activation_bytes')} != recompute's {activation}")
                    check(value(p, "total_bytes_per_rank") == sum(want) + activation, f"{where}: total")
                    check(value(p, "fits_80gb") == int(sum(want) + activation <= 80e9), f"{where}: fits_80gb")
    none = value(at(model=model, zero_stage=0, ranks=1, states="paper", policy="none"), "activation_bytes")
    full = value(at(model=model, zero_stage=0, ranks=1, states="paper", policy="full"), "activation_bytes")
    check(0 < full < none, f"{model}: full recompute keeps {full} bytes, none {none}")
# Llama 3.1 8B's paper states on one rank, 16 x 8.03e9 = 128.5e9 bytes: no fit; on 64 ranks at stage 3 it fits.
check(value(at(model="llama3.1-8b", zero_stage=0, ranks=1, states="paper", policy="full"), "fits_80gb") == 0, "8B fits unsharded")
check(value(at(model="llama3.1-8b", zero_stage=3, ranks=64, states="paper", policy="full"), "fits_80gb") == 1, "8B at stage 3 does not fit")
df = ds.to_dataframe()
check(len(df) == 3 * 4 * 3 * 3 * 2, f"to_dataframe: {len(df)} rows")
if problems:
    sys.exit("\n".join(problems))
PY
}

bad_specs() {
  local spec=$work/bad.toml
  write_study_spec "$spec" zero_memory 'states = ["paper", "fp4"]'
  expect_spec_refused "$spec" "axes.states" "states: 'fp4' is not one of"
  write_study_spec "$spec" zero_memory 'zero_stage = [3, 4]'
  expect_spec_refused "$spec" "axes.zero_stage" "zero_stage: must be 0, 1, 2 or 3"
  write_study_spec "$spec" zero_memory 'ranks = [0]'
  expect_spec_refused "$spec" "axes.ranks" "ranks: must be an integer >= 1"
  write_study_spec "$spec" zero_memory 'model = ["llama3.1-800b"]'
  expect_spec_refused "$spec" "axes.model" "llama3.1-800b"
  write_study_spec "$spec" zero_memory 'model = ["params:1.5"]'
  expect_spec_refused "$spec" "axes.model" "not a whole number"
  write_study_spec "$spec" zero_memory 'policy = ["slices:3"]
tokens = [256]'
  expect_spec_refused "$spec" "axes.policy"
  write_study_spec "$spec" zero_memory 'tokens = [1]'
  expect_spec_refused "$spec" "axes.tokens"
  write_study_spec "$spec" zero_memory '[step]
recipe = "fp7"'
  expect_spec_refused "$spec" "step.recipe"
  write_study_spec "$spec" zero_memory '[step]
attention = "fast"'
  expect_spec_refused "$spec" "step.attention"
  write_study_spec "$spec" zero_memory '[step]
optimizer = "adamw:fp32"'
  expect_spec_refused "$spec" "step.optimizer" "unknown key"
}

case $1 in
  small_run) small_run ;;
  bad_specs) bad_specs ;;
  *) fail "unknown case '$1'" ;;
esac
echo "PASS [$case_name]"
