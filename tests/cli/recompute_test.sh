#!/usr/bin/env bash
# The recompute study kind driven as a user drives it: the small spec of its notebook test runs,
# and its file works in xarray with no reshaping (ds.sel(policy="full"), the per-block array
# along `block`), with values checked against what holds independently of the code:
#   - `full` recompute is deterministic: its gradients are bit-identical to `none`'s
#     (grad_rel_frobenius equal, grad_rel_frobenius_vs_none exactly 0) under every recipe;
#   - `full` keeps only each block's input x_in, T x dim at 2 bytes in shapes-only points:
#     Megatron's 2sbh per layer (b = 1, h = dim), here 1024 x 4096 x 2 bytes for Llama-3.1 8B;
#   - the block dimension spans the largest model (32 blocks): stories260K's 5 are finite, the
#     rest NaN; shapes-only points have memory figures but no loss;
# the same under [step] attention = "flash" (full bit-identical to none, the log-sum-exp kept in
# place of the probabilities); and a bad cache or attention value is refused (one line naming the
# file and the field, exit 2, no file).
# Usage: recompute_test.sh PATH/TO/fp8lab SOURCE_DIR
set -euo pipefail
fp8lab=$1 source_dir=$2 case_name=recompute
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/test_lib.sh"

"$fp8lab" run "$source_dir/tests/notebook/recompute_small.toml" -o "$work/r.h5" --quiet >/dev/null
"$py" - "$work/r.h5" <<'PY' || fail "the results file does not read as the recompute grid"
import sys
import numpy as np
import xarray as xr
ds = xr.open_dataset(sys.argv[1], engine="h5netcdf")
problems = []
def check(ok, message):
    if not ok:
        problems.append(message)
full = ds.sel(policy="full", cache="policy")
none = ds.sel(policy="none", cache="policy")
real = dict(model="stories260K", tokens=64)
for recipe in ds.recipe.values:
    f, n = full.sel(recipe=recipe, **real), none.sel(recipe=recipe, **real)
    check(f.status.item() == "ok", f"full/{recipe}: status {f.status.item()!r}")
    check(f.grad_rel_frobenius.item() == n.grad_rel_frobenius.item(), f"full/{recipe}: error differs from none's")
    check(f.grad_rel_frobenius_vs_none.item() == 0, f"full/{recipe}: not bit-identical to none")
    blocks = f.grad_rel_frobenius_per_block
    check(blocks.dims == ("block",) and blocks.sizes["block"] == 32, f"per-block array {blocks.dims} {dict(blocks.sizes)}")
    check(bool(np.isfinite(blocks.sel(block=slice(0, 4))).all()), f"full/{recipe}: blocks 0..4 not finite")
    check(bool(np.isnan(blocks.sel(block=slice(5, None))).all()), f"full/{recipe}: blocks beyond 4 not NaN")
big = full.sel(model="llama3.1-8b", tokens=1024, recipe="fp32")
check(big.status.item() == "ok" and np.isnan(big.loss.item()), "llama3.1-8b: not an ok shapes-only point")
check(str(big.operands.item()).startswith("shapes-only llama3.1-8b"), f"operands {big.operands.item()!r}")
per_block = big.saved_activation_bytes_per_block.values
check(bool((per_block == 1024 * 4096 * 2).all()), f"full, llama3.1-8b: per-block saved bytes {set(per_block)} != 2sbh")
check(ds.sel(model="stories260K", tokens=1024, policy="none", cache="policy", recipe="fp32").status.item() == "skipped",
      "stories260K at 1024 positions is not skipped")
check("sha256 " in str(none.sel(recipe="fp32", **real).operands.item()), "the real points' operands name no sha256")
if problems:
    sys.exit("\n".join(problems))
PY

# [step] attention = "flash": the attribute says so, full is still bit-identical to none, and a
# block of Llama-3.1 8B keeps the log-sum-exp (heads x T) instead of the probabilities (heads T x T):
# 2 bytes x (T (6 dim + 2 kv_dim + 3 hidden) + heads T) at T = 64.
printf '[study]\nname = "f"\nkind = "recompute"\n[axes]\nmodel = ["stories260K", "llama3.1-8b"]\npolicy = ["none", "full"]\n[step]\nattention = "flash"\n' >"$work/flash.toml"
"$fp8lab" run "$work/flash.toml" -o "$work/f.h5" --quiet >/dev/null
"$py" - "$work/r.h5" "$work/f.h5" <<'PY' || fail "the flash recompute file is not as expected"
import sys
import xarray as xr
naive, flash = (xr.open_dataset(f, engine="h5netcdf") for f in sys.argv[1:])
assert naive.attrs["attention"] == "naive" and flash.attrs["attention"] == "flash"
point = dict(cache="policy", recipe="fp32", tokens=64)
full, none = flash.sel(policy="full", model="stories260K", **point), flash.sel(policy="none", model="stories260K", **point)
assert full.grad_rel_frobenius_vs_none.item() == 0, full.grad_rel_frobenius_vs_none.item()
assert 0 < none.grad_rel_frobenius.item() < 1e-4, none.grad_rel_frobenius.item()
block = flash.sel(policy="none", model="llama3.1-8b", **point).saved_activation_bytes_per_block.values[0]
T = 64
assert block == 2 * (T * (6 * 4096 + 2 * 1024 + 3 * 14336) + 32 * T), block
PY

printf '[study]\nname = "t"\nkind = "recompute"\n[step]\nattention = "fast"\n' >"$work/bad_attention.toml"
expect_one_line_error "step.attention" "$fp8lab" run "$work/bad_attention.toml" -o "$work/bad.h5" --quiet
grep -qF -- "$work/bad_attention.toml" "$work/err" || fail "stderr does not name the file: $(cat "$work/err")"
[[ ! -e "$work/bad.h5" ]] || fail "a results file was written for a refused spec"

printf '[study]\nname = "t"\nkind = "recompute"\n[step]\noptimizer = "adam"\n' >"$work/bad_optimizer.toml"
expect_one_line_error "step.optimizer" "$fp8lab" run "$work/bad_optimizer.toml" -o "$work/bad.h5" --quiet
[[ ! -e "$work/bad.h5" ]] || fail "a results file was written for a refused spec"

# Optimizer states in the ledger: Llama-3.1 8B shapes-only, 16-bit, AdamW with FP32 moments adds
# 12 bytes a parameter (FP32 masters + two moments) to the whole step's peak.
printf '[study]\nname = "t"\nkind = "recompute"\n[axes]\nmodel = ["llama3.1-8b"]\nrecipe = ["bf16"]\ntokens = [256]\n[step]\nattention = "flash"\noptimizer = "%s"\n' none >"$work/o0.toml"
printf '[study]\nname = "t"\nkind = "recompute"\n[axes]\nmodel = ["llama3.1-8b"]\nrecipe = ["bf16"]\ntokens = [256]\n[step]\nattention = "flash"\noptimizer = "%s"\n' adamw:fp32 >"$work/o1.toml"
expect_exit 0 "$fp8lab" run "$work/o0.toml" -o "$work/o0.h5" --quiet
expect_exit 0 "$fp8lab" run "$work/o1.toml" -o "$work/o1.h5" --quiet
"$py" - "$work/o0.h5" "$work/o1.h5" <<'PY' || fail "optimizer states are not counted as expected"
import sys
import xarray as xr
a, b = (xr.open_dataset(f, engine="h5netcdf").squeeze() for f in sys.argv[1:])
params = 128256 * 4096 + 32 * (2 * 4096 + 2 * 4096 ** 2 + 2 * 1024 * 4096 + 3 * 14336 * 4096) + 4096
assert b.attrs["optimizer"] == "adamw:fp32" and a.attrs["optimizer"] == "none"
assert int(b.peak_bytes_optimizer_state) == 12 * params and int(a.peak_bytes_optimizer_state) == 0
assert int(b.peak_bytes_total) - int(a.peak_bytes_total) == 12 * params
PY

printf '[study]\nname = "t"\nkind = "recompute"\n[axes]\ncache = ["bf8"]\n' >"$work/bad.toml"
expect_one_line_error "axes.cache" "$fp8lab" run "$work/bad.toml" -o "$work/bad.h5" --quiet
grep -qF -- "$work/bad.toml" "$work/err" || fail "stderr does not name the file: $(cat "$work/err")"
[[ ! -e "$work/bad.h5" ]] || fail "a results file was written for a refused spec"
echo "PASS [recompute small spec]"
