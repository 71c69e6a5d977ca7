"""Quantizers: fp8lab's 1xT / BxB / per-row / per-tensor quantization (the CLI: `fp8lab quantize
--codes --scales`) against the same computation written in torch the way the users' reference
code writes it, and against torchao's own blockwise reference functions (they run on the CPU).

The recipes (each read in its library's source, written here in our own words):
  fp8lab     DESIGN.md section 2: sf = fl32(amax / 448); codes = satfinite(fl32(x * fl32(1 / sf)))
             (an all-zero tile gets sf = 1; sf >= 2^-126)
  deepgemm   DeepGEMM's per_token_cast_to_fp8 / per_block_cast_to_fp8 (its tests' reference):
             amax = max|x| in float32, clamped to >= 1e-4; codes = e4m3(fl32(x * fl32(448 / amax)));
             scale = fl32(amax / 448)
  torchao    torchao.prototype.blockwise_fp8_training.kernels.torch_blockwise_scale_act_quant_lhs
             (1 x 128) and torch_blockwise_scale_weight_quant (128 x 128), called as they are:
             amax to float64, clamped to >= 1e-12; s = fl32(448 / amax); codes =
             e4m3(clamp(fl32(x * s), -448, 448)); they return the scale as fl32(1 / s)
Where the arithmetic is the same (fp8lab's recipe written in torch, every granularity; and the
DeepGEMM scale, fl32(amax / 448), for tiles with amax >= 1e-4) codes and scales must agree bit
for bit. Where it differs (x * fl32(448 / amax) against x * fl32(1 / fl32(amax / 448)); the 1e-4
and 1e-12 clamps; torchao's reciprocal scale) the differing codes and scales are counted.
"""
import pathlib
import tempfile

import numpy as np
import torch
from torchao.prototype.blockwise_fp8_training.kernels import (torch_blockwise_scale_act_quant_lhs,
                                                              torch_blockwise_scale_weight_quant)

import peers_common

FP8_MAX = 448.0
GRANULARITIES = ["tile:1x128", "block:128x128", "row", "tensor"]


def tiles(x, granularity):
    """x (rows x cols) as (tiles, elements) and a function putting per-tile values back into the grid."""
    rows, cols = x.shape
    if granularity == "tensor":
        return x.reshape(1, -1), lambda v: v.reshape(1, 1), lambda t: t.reshape(rows, cols)
    if granularity == "row":
        return x, lambda v: v.reshape(rows, 1), lambda t: t
    if granularity.startswith("tile"):
        t = int(granularity.split("x")[1])
        return x.reshape(-1, t), lambda v: v.reshape(rows, cols // t), lambda q: q.reshape(rows, cols)
    b = int(granularity.split("x")[1])
    blocked = x.reshape(rows // b, b, cols // b, b).permute(0, 2, 1, 3).reshape(-1, b * b)
    return (blocked, lambda v: v.reshape(rows // b, cols // b),
            lambda q: q.reshape(rows // b, cols // b, b, b).permute(0, 2, 1, 3).reshape(rows, cols))


def fp8lab_recipe_in_torch(x, granularity):
    t, grid, back = tiles(x, granularity)
    amax = t.abs().amax(dim=1, keepdim=True)
    sf = torch.where(amax == 0, torch.ones_like(amax), (amax / FP8_MAX).clamp(min=2.0**-126))
    q = (t * (1.0 / sf)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)   # clamp = satfinite
    return back(q).view(torch.uint8).numpy(), grid(sf).numpy()


def deepgemm_recipe(x, granularity):
    t, grid, back = tiles(x, granularity)
    amax = t.abs().float().amax(dim=1, keepdim=True).clamp(1e-4)
    q = (t * (FP8_MAX / amax)).to(torch.float8_e4m3fn)
    return back(q).view(torch.uint8).numpy(), grid(amax / FP8_MAX).numpy()


def torchao_functions(x, granularity):
    if granularity == "tile:1x128":
        q, s = torch_blockwise_scale_act_quant_lhs(x.contiguous(), 128)
    elif granularity == "block:128x128":
        q, s = torch_blockwise_scale_weight_quant(x.contiguous(), 128)
    else:
        return None
    return q.view(torch.uint8).numpy(), s.contiguous().numpy()


INPUTS = {
    "normal": lambda rng, shape: rng.standard_normal(shape),
    "outlier_channels": lambda rng, shape: rng.standard_normal(shape) * np.where(np.arange(shape[1]) % 97 == 0, 100.0, 1.0),
    "heavy_tail_t3": lambda rng, shape: rng.standard_t(3, shape),
    "small_amax": lambda rng, shape: rng.standard_normal(shape) * 1e-6,   # below DeepGEMM's 1e-4 clamp
    "wide_exponents": lambda rng, shape: rng.choice([-1, 1], shape) * np.exp2(rng.uniform(-30, 30, shape)),
}
SHAPE = (256, 1024)


def compare(ours, theirs):
    (q0, s0), (q1, s1) = ours, theirs
    s1 = s1.astype(np.float32).reshape(s0.shape)
    return {"codes": int(q0.size), "codes_differ": int(np.count_nonzero(q0 != q1.reshape(q0.shape))),
            "scales": int(s0.size), "scales_differ": int(np.count_nonzero(s0.view(np.uint32) != s1.view(np.uint32)))}


def main():
    args = peers_common.arguments(__doc__.splitlines()[0]).parse_args()
    cli = peers_common.fp8lab_cli(args.build)
    rng = np.random.default_rng(20260517)
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for name, draw in INPUTS.items():
            x_np = draw(rng, SHAPE).astype(np.float32)
            x_np[:128, :128] = 0.0   # an all-zero tile and block: scale 1 in fp8lab, clamped amax in the others
            np.save(tmp / "x.npy", x_np)
            x = torch.from_numpy(x_np)
            for g in GRANULARITIES:
                peers_common.run([cli, "quantize", tmp / "x.npy", "--format", "e4m3", "--granularity", g, "--scale", "fp32",
                                  "--codes", tmp / "q.npy", "--scales", tmp / "s.npy"])
                ours = (np.load(tmp / "q.npy"), np.load(tmp / "s.npy").astype(np.float32))
                row = {"input": name, "granularity": g}
                row["fp8lab recipe in torch"] = same = compare(ours, fp8lab_recipe_in_torch(x, g))
                if same["codes_differ"] or same["scales_differ"]:
                    failures.append(f"{name} {g}: fp8lab's own recipe written in torch differs: {same}")
                dg_codes, dg_scales = deepgemm_recipe(x, g)
                row["deepgemm recipe"] = dg = compare(ours, (dg_codes, dg_scales))
                # Same arithmetic for the scale wherever the clamp did not act: must agree there.
                t, _, _ = tiles(x, g)
                unclamped = (t.abs().amax(dim=1) >= 1e-4).numpy().reshape(-1)
                s_ours = ours[1].reshape(-1)[unclamped].view(np.uint32)
                s_dg = dg_scales.reshape(-1).astype(np.float32)[unclamped].view(np.uint32)
                dg["scales_differ_where_amax_ge_1e-4"] = int(np.count_nonzero(s_ours != s_dg))
                if dg["scales_differ_where_amax_ge_1e-4"]:
                    failures.append(f"{name} {g}: DeepGEMM's scale fl32(amax / 448) differs from fp8lab's: {dg}")
                ao = torchao_functions(x, g)
                if ao is not None:
                    row["torchao functions"] = compare(ours, ao)
                rows.append(row)
                print(row)
    totals = {}
    for peer in ("fp8lab recipe in torch", "deepgemm recipe", "torchao functions"):
        keys = ("codes", "codes_differ", "scales", "scales_differ")
        totals[peer] = {k: sum(r[peer][k] for r in rows if peer in r) for k in keys}
    peers_common.write_finding(args.results, "quantizers", {
        "shape": list(SHAPE), "format": "e4m3", "totals": totals, "cases": rows,
        "markdown": quantizers_markdown(totals, rows)})
    peers_common.verdict(failures)


def quantizers_markdown(totals, rows):
    out = ["Quantizers (E4M3, 256 x 1024 per input, fixed seed): differing codes and scales against fp8lab.", "",
           "| peer | codes differing | scales differing |", "| --- | ---: | ---: |"]
    for peer, t in totals.items():
        out.append(f"| {peer} | {t['codes_differ']} of {t['codes']} | {t['scales_differ']} of {t['scales']} |")
    out += ["", "| input | granularity | fp8lab recipe in torch (codes / scales) | DeepGEMM recipe (codes / scales) "
            "| torchao functions (codes / scales) |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        cell = lambda k: f"{r[k]['codes_differ']} / {r[k]['scales_differ']}" if k in r else "n/a (no such function)"
        out.append(f"| {r['input']} | {r['granularity']} | {cell('fp8lab recipe in torch')} | {cell('deepgemm recipe')} "
                   f"| {cell('torchao functions')} |")
    return out


if __name__ == "__main__":
    main()
