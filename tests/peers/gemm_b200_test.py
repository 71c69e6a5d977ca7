"""GEMM under --accum b200: fp8lab's CPU emulation of Blackwell's block-scaled MMA (the CLI,
`fp8lab gemm --out`; kernels/block_scaled_mma.hpp) against MMA-Sim's own Blackwell models
(`mmasim.nv_ptx.TCGen05MMABlockScale("Blackwell", ...)`, the PyPI package of microsoft/MMA-Sim).

What MMA-Sim models: one tcgen05.mma ... .block_scale instruction, the block scales inside it
and the FP32 accumulator c fused in (kind::mxf8f6f4: MMA_ST_FDPA, 32 products, F = 25,
e_zero = -133; kind::mxf4nvf4: MMA_GST_FDPA, 64 products in groups of 16, F = 35,
e_zero = -139), c carried from one instruction to the next along K. That is all of fp8lab's
b200 accumulator (no promotion), so here C = the chain over K from c = 0, times the epilogue
alpha: 1 for the MX rules, and for nvfp4 Transformer Engine's
fl32(fl32(amax_a * amax_b) * fl32(1 / (2688 * 2688))) (amax = max |x| of the float32 input),
D = fl32(c * alpha) in NumPy float32.

mxf8f6f4: MMA_ST_FDPA.dpa (mmasim 2.1.1) passes the whole alpha/beta to every instruction of its
chain rather than the instruction's own scale ([..., 32] products against [..., K/32] scales:
a RuntimeError for K > 32), so the chain is written here, one dpa() call per 32 of K with that
block's scales; MMA_GST_FDPA.dpa slices its scales itself and takes all of K. FP4 codes go to
MMA-Sim packed two per byte, high nibble first (its unpack_uint8_to_fp4); FP8 as torch
float8 tensors; UE8M0 scales as torch.float8_e8m0fnu, nvfp4's E4M3 block scales as
torch.float8_e4m3fn (both exact: checked).

fp8lab's codes and scales come from `fp8lab quantize --codes --scales` with the GEMM's own
rules on the same inputs (A the scheme's activation operand, B its weight operand). K that
is no multiple of the instruction's 32 / 64 is zero-padded (fp8lab does the same); a padded
block's scale is 1 (its products are zero, which take e_zero whatever the scale).
0 mismatches (FP32 bit patterns) required in every case.
"""
import json
import pathlib
import tempfile

import numpy as np
import torch
from mmasim.arithmetic.helper import decode_uint8_to_fp6_fp4, fp4_value_table
from mmasim.nv_ptx import TCGen05MMABlockScale

import peers_common

# name: (quantize flags of A, of B, gemm flags, MMA-Sim shape_and_type, element dtype for
# MMA-Sim (None: FP4 packed in uint8; uint8: FP6 codes), scale dtype, K per scale, K per instruction)
SCHEMES = {
    "mxfp8": (["--scheme", "mxfp8"], ["--scheme", "mxfp8", "--operand", "weight"], ["--scheme", "mxfp8"],
              "m128n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0", torch.float8_e4m3fn, torch.float8_e8m0fnu, 32, 32),
    "e5m2 mx": (["--format", "e5m2", "--scale", "mx", "--granularity", "tile:1x32"],
                ["--format", "e5m2", "--scale", "mx", "--granularity", "tile:1x32"],
                ["--format", "e5m2", "--scale", "mx", "--a-granularity", "tile:1x32", "--b-granularity", "tile:1x32",
                 "--accum", "b200"],
                "m128n8k32.kind::mxf8f6f4.block32.f32.e5m2.e5m2.ue8m0", torch.float8_e5m2, torch.float8_e8m0fnu, 32, 32),
}
# FP6 (kind::mxf8f6f4 too): codes one per uint8 in bits 5:0, as MMA-Sim decodes them.
for fp6 in ("e3m2", "e2m3"):
    SCHEMES[f"{fp6} mx"] = (["--format", fp6, "--scale", "mx", "--granularity", "tile:1x32"],
                            ["--format", fp6, "--scale", "mx", "--granularity", "tile:1x32"],
                            ["--format", fp6, "--scale", "mx", "--a-granularity", "tile:1x32",
                             "--b-granularity", "tile:1x32", "--accum", "b200"],
                            f"m128n8k32.kind::mxf8f6f4.block32.f32.{fp6}.{fp6}.ue8m0", torch.uint8,
                            torch.float8_e8m0fnu, 32, 32)
SCHEMES |= {
    "mxfp4": (["--scheme", "mxfp4"], ["--scheme", "mxfp4", "--operand", "weight"], ["--scheme", "mxfp4"],
              "m128n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.ue8m0", None, torch.float8_e8m0fnu, 32, 64),
    "nvfp4": (["--scheme", "nvfp4"], ["--scheme", "nvfp4", "--operand", "weight"], ["--scheme", "nvfp4"],
              "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3", None, torch.float8_e4m3fn, 16, 64),
}
NVFP4_L = np.float32(448.0 * 6.0)


# ---- the inputs: each returns A (M x K) and B (N x K) in float32 -------------------------
def case_random(rng, m, n, k):
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)


def case_outlier_channels(rng, m, n, k):
    """A few K channels 2^6 .. 2^10 larger than the rest (LLM activations): their blocks' scales
    are set by the outliers and the rest of the block goes to small codes or zero."""
    a, b = case_random(rng, m, n, k)
    channels = rng.choice(k, max(1, k // 24), replace=False)
    a[:, channels] *= np.exp2(rng.uniform(6, 10, channels.size)).astype(np.float32)
    b[:, channels[::2]] *= np.float32(16.0)
    return a, b


def case_wide_range(rng, m, n, k):
    """Magnitudes over 2^-40 .. 2^40: block scales far from 1 (UE8M0 up to 2^37, down past
    2^-40), most of each block subnormal or zero, products spread over ~80 binades."""
    def draw(rows):
        return (rng.choice([-1.0, 1.0], (rows, k)) * np.exp2(rng.uniform(-40, 40, (rows, k)))).astype(np.float32)
    return draw(m), draw(n)


def case_cancellation(rng, m, n, k):
    """Large terms that cancel pairwise inside an instruction, next to small ones that the
    alignment to the large exponent truncates: the sum is decided by the truncation."""
    a = rng.standard_normal((m, k)).astype(np.float32) * np.float32(2.0**-4)
    b = rng.standard_normal((n, k)).astype(np.float32)
    a[:, 1::16], a[:, 2::16] = 6.0, -6.0
    b[:, 1::16] = b[:, 2::16] = 1.0
    return a, b


def case_two_magnitudes(rng, m, n, k):
    """Every other 32 of K 2^8 larger, the others 2^-8 smaller, in A and in B: products 2^32
    apart inside one instruction, beyond the F = 25 alignment window of kind::mxf8f6f4 (the
    small ones are truncated) and inside kind::mxf4nvf4's F = 35, where the sum needs more than
    FP32's 24 bits and the instruction's RZ to FP32 (not RNE) decides the last bit."""
    a, b = case_random(rng, m, n, k)
    factor = np.exp2(np.where((np.arange(k) // 32) % 2 == 0, 8.0, -8.0)).astype(np.float32)
    return a * factor, b * factor


CASES = {"random": case_random, "outlier_channels": case_outlier_channels, "wide_range": case_wide_range,
         "cancellation": case_cancellation, "two_magnitudes": case_two_magnitudes}
SHAPES = [(8, 16, 64), (8, 16, 96), (8, 16, 256), (4, 8, 4096)]


def per_row_scales(scales, rows, k_blocks, block):
    """The scale grid as [rows, K blocks]: 1 x block tiles have one grid row per row, square
    block x block blocks (nvfp4's 16x16 weights) one per `block` rows."""
    grid = scales.reshape(-1, scales.shape[-1]) if scales.ndim == 2 else scales.reshape(1, -1)
    if grid.shape[0] != rows:
        if grid.shape[0] != -(-rows // block):
            raise SystemExit(f"scale grid {scales.shape} does not map onto {rows} rows")
        grid = grid[np.arange(rows) // block]
    out = np.ones((rows, k_blocks), dtype=np.float32)   # padded blocks: scale 1
    out[:, :grid.shape[1]] = grid
    return out


def to_scale_tensor(values, dtype):
    t = torch.from_numpy(np.ascontiguousarray(values)).to(dtype)
    back = t.float().numpy()
    if not np.array_equal(back.view(np.uint32), values.view(np.uint32)):
        raise SystemExit(f"scales not exact in {dtype}: {values[back != values][:4]}")
    return t


def mmasim_gemm(codes_a, scales_a, codes_b, scales_b, scheme):
    """The accumulator c over all of K (from c = 0) by MMA-Sim's Blackwell block-scaled model,
    and the control: the same operands' exact (float64) dot product rounded once to FP32."""
    _, _, _, shape, elem, scale_dtype, block, depth = SCHEMES[scheme]
    op = TCGen05MMABlockScale("Blackwell", shape)
    m, k = codes_a.shape
    n = codes_b.shape[0]
    kp = -(-k // depth) * depth
    pad = lambda c: np.pad(c, ((0, 0), (0, kp - k)))
    ca, cb = pad(codes_a), pad(codes_b)
    alpha = to_scale_tensor(per_row_scales(scales_a, m, kp // block, block), scale_dtype)
    beta = to_scale_tensor(per_row_scales(scales_b, n, kp // block, block), scale_dtype)
    alpha = alpha[:, None, :].expand(m, n, -1)
    beta = beta[None, :, :].expand(m, n, -1)
    c = torch.zeros((m, n), dtype=torch.float32)
    if elem is None:
        decode = lambda x: fp4_value_table[torch.from_numpy(x).int()]
    elif elem == torch.uint8:
        decode = lambda x: decode_uint8_to_fp6_fp4(torch.from_numpy(x), op.a_type_ptx)
    else:
        decode = lambda x: torch.from_numpy(x).view(elem)
    va = decode(ca).double() * torch.repeat_interleave(alpha[:, 0, :].double(), block, dim=-1)
    vb = decode(cb).double() * torch.repeat_interleave(beta[0, :, :].double(), block, dim=-1)
    exact = (va @ vb.T).float().numpy()
    if elem is None:   # FP4: two codes per byte, high nibble first
        if (ca > 15).any() or (cb > 15).any():
            raise SystemExit("FP4 codes above 15")
        pack = lambda x: torch.from_numpy(np.ascontiguousarray((x[:, 0::2] << 4) | x[:, 1::2]))
        a, b = pack(ca), pack(cb)
        return op.dpa(a[:, None, :].expand(m, n, -1), b[None, :, :].expand(m, n, -1), c, alpha, beta).numpy(), exact
    a = torch.from_numpy(ca).view(elem)[:, None, :].expand(m, n, -1)
    b = torch.from_numpy(cb).view(elem)[None, :, :].expand(m, n, -1)
    for i in range(0, kp, depth):   # one instruction per dpa() call: see the module's docstring
        j = i // block
        c = op.dpa(a[..., i:i + depth], b[..., i:i + depth], c, alpha[..., j:j + 1], beta[..., j:j + 1])
    return c.numpy(), exact


def epilogue_alpha(scheme, a, b):
    if scheme != "nvfp4":
        return np.float32(1.0)
    amax_a, amax_b = np.max(np.abs(a)), np.max(np.abs(b))
    return np.float32(np.float32(amax_a * amax_b) * np.float32(np.float32(1.0) / np.float32(NVFP4_L * NVFP4_L)))


def main():
    args = peers_common.arguments(__doc__.splitlines()[0]).parse_args()
    cli = peers_common.fp8lab_cli(args.build)
    rng = np.random.default_rng(20260601)
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for scheme, (qa, qb, gflags, shape, *_rest) in SCHEMES.items():
            for case, make in CASES.items():
                for m, n, k in SHAPES:
                    a, b = make(rng, m, n, k)
                    np.save(tmp / "a.npy", a)
                    np.save(tmp / "b.npy", b)
                    q = {}
                    for name, flags in (("a", qa), ("b", qb)):
                        peers_common.run([cli, "quantize", tmp / f"{name}.npy", *flags, "--backend", "cpu",
                                          "--codes", tmp / f"q{name}.npy", "--scales", tmp / f"s{name}.npy"])
                        q[name] = (np.load(tmp / f"q{name}.npy"), np.load(tmp / f"s{name}.npy").astype(np.float32))
                    acc, exact = mmasim_gemm(q["a"][0], q["a"][1], q["b"][0], q["b"][1], scheme)
                    alpha = epilogue_alpha(scheme, a, b)
                    theirs = (acc.astype(np.float32) * alpha).astype(np.float32)
                    (tmp / "c.npy").unlink(missing_ok=True)
                    report = json.loads(peers_common.run(
                        [cli, "gemm", "--a", tmp / "a.npy", "--b", tmp / "b.npy", *gflags, "--backend", "cpu",
                         "--out", tmp / "c.npy", "--json"]))
                    ours = np.load(tmp / "c.npy")
                    differ = ours.view(np.uint32) != theirs.view(np.uint32)
                    mismatches = int(np.count_nonzero(differ))
                    control = (exact * alpha).astype(np.float32)
                    differ_exact = int(np.count_nonzero(ours.view(np.uint32) != control.view(np.uint32)))
                    row = {"scheme": scheme, "mmasim": shape.split(".", 1)[1], "case": case, "m": m, "n": n, "k": k,
                           "outputs": m * n, "mismatches": mismatches,
                           "differ_from_exact_rounded": differ_exact, "alpha": float(alpha),
                           "accumulation": report.get("accumulation")}
                    if row["accumulation"] != "b200":
                        failures.append(f"{scheme}: fp8lab gemm ran accumulation {row['accumulation']!r}, not b200")
                    if mismatches:
                        i = np.flatnonzero(differ)[0]
                        row["example"] = {"index": [int(i // n), int(i % n)],
                                          "fp8lab": f"0x{int(ours.view(np.uint32).reshape(-1)[i]):08x}",
                                          "mmasim": f"0x{int(theirs.view(np.uint32).reshape(-1)[i]):08x}"}
                        failures.append(f"{scheme} {case} {m}x{n}x{k}: {mismatches} of {m * n} outputs differ from "
                                        f"MMA-Sim ({shape}), e.g. C{row['example']['index']} fp8lab "
                                        f"{ours.reshape(-1)[i]!r} ({row['example']['fp8lab']}) vs MMA-Sim "
                                        f"{theirs.reshape(-1)[i]!r} ({row['example']['mmasim']})")
                    rows.append(row)
                    print({key: row[key] for key in ("scheme", "case", "m", "n", "k", "outputs", "mismatches",
                                                      "differ_from_exact_rounded")})
    # The control: fp8lab must differ from the once-rounded exact sum somewhere in each scheme
    # (truncation to F bits, RZ per instruction), else agreeing with MMA-Sim would show little.
    for scheme in SCHEMES:
        if sum(r["differ_from_exact_rounded"] for r in rows if r["scheme"] == scheme) == 0:
            failures.append(f"{scheme}: fp8lab equals the exactly-rounded dot product everywhere, so this test cannot "
                            "tell MMA-Sim's truncating model from exact accumulation")
    markdown = ["fp8lab `gemm --accum b200` (MX rules: alpha = 1; nvfp4: TE's alpha) vs MMA-Sim "
                "`TCGen05MMABlockScale('Blackwell', ...)` chained over K from c = 0, times the same alpha; "
                "FP32 bit patterns compared.", "",
                f"Outputs compared: {sum(r['outputs'] for r in rows)}, mismatches: {sum(r['mismatches'] for r in rows)}.", "",
                "| scheme | MMA-Sim instruction | case | M x N x K | outputs | mismatches | differ from exact, rounded once (control) |",
                "| --- | --- | --- | --- | ---: | ---: | ---: |"]
    markdown += [f"| {r['scheme']} | `{r['mmasim']}` | {r['case']} | {r['m']} x {r['n']} x {r['k']} | {r['outputs']} | "
                 f"{r['mismatches']} | {r['differ_from_exact_rounded']} |" for r in rows]
    finding = {"mmasim_model": "TCGen05MMABlockScale('Blackwell', 'm128n8k32.kind::mxf8f6f4.block32.f32.<fmt>.<fmt>.ue8m0'): "
                               "MMA_ST_FDPA F = 25, 32 products, e_zero = -133; "
                               "'m128n8k64.kind::mxf4nvf4.block{32,16}.f32.e2m1.e2m1.{ue8m0,ue4m3}': MMA_GST_FDPA G = 16, "
                               "F = 35, 64 products, e_zero = -139; RZ to FP32; chained over K from c = 0, then "
                               "fl32(c * alpha)",
               "outputs_compared": sum(r["outputs"] for r in rows),
               "mismatches": sum(r["mismatches"] for r in rows),
               "cases": rows, "markdown": markdown}
    peers_common.write_finding(args.results, "gemm_b200_mmasim", finding)
    peers_common.verdict(failures)


if __name__ == "__main__":
    main()
