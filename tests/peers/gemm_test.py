"""GEMM: fp8lab's CPU emulation of the Hopper FP8 GEMM (the CLI, `fp8lab gemm --out`) against
MMA-Sim's own Hopper wgmma model (`mmasim.nv_ptx.WGMMA("Hopper", "m64nNk32.f32.e4m3.e4m3")`,
the PyPI package of microsoft/MMA-Sim, not a copy).

What MMA-Sim models and what is composed here: MMA-Sim models one wgmma instruction, k = 32
FP8 products fused with the incoming FP32 accumulator c (its dpa() chains the instructions
along a longer K, c carried from one to the next: the tensor-core accumulator). It knows
nothing of scales or promotion. fp8lab's GEMM is DESIGN.md section 2's contract: every N_C
elements of K the tensor-core partial p, started from 0, is promoted on the CUDA cores,
  s = fl32(s_a * s_b);  acc = fma32(p, s, acc)
so here p = WGMMA.dpa(codes_a[k0:k0+N_C], codes_b[k0:k0+N_C], c = 0) (MMA-Sim), s is a float32
product (NumPy float32 multiply, round to nearest), and the FMA is MMA-Sim's own float32
fma (mmasim.arithmetic.fma, std::fma). "never" is N_C = K: one partial over all of K.

fp8lab's codes and scales come from `fp8lab quantize --codes --scales` on the same inputs, so
MMA-Sim multiplies exactly the operands fp8lab's GEMM multiplied (the quantizer is the
quantizers test's subject). The zero convention: MMA-Sim gives a zero product the exponent
e_zero = -133, below every nonzero product (DESIGN.md: "MMA-Sim's convention"), which is
fp8lab's `--accum hopper` (= hopper,zero:none): 0 mismatches required, every case. Under
`hopper,zero:min` the mismatches are counted; the zero-times-large case must show some (else
the comparison could not tell the conventions apart).
"""
import pathlib
import tempfile

import ml_dtypes
import numpy as np
import torch
from mmasim.arithmetic.fma import fma as mmasim_fma
from mmasim.nv_ptx import WGMMA

import peers_common

FORMATS = {"e4m3": (ml_dtypes.float8_e4m3fn, torch.float8_e4m3fn, 448.0),
           "e5m2": (ml_dtypes.float8_e5m2, torch.float8_e5m2, 57344.0)}


def finite_codes(fmt):
    """Every code of the format whose value is finite (no NaN, no inf), as uint8."""
    values = np.arange(256, dtype=np.uint8).view(FORMATS[fmt][0]).astype(np.float32)
    return np.flatnonzero(np.isfinite(values)).astype(np.uint8)


def values_of(codes, fmt):
    return codes.view(FORMATS[fmt][0]).astype(np.float32)


def with_max_per_tile(values, fmt, tile=128):
    """Puts +-max at the start of every 1 x tile run of each row, so that every tile, 128x128
    block and row has amax = max and scale fl32(max / max) = 1: the codes are then the values'
    own codes, which lets a case choose exactly the FP8 operands the tensor cores see."""
    out = values.copy()
    out[:, ::tile] = FORMATS[fmt][2] * np.where(np.arange(out.shape[0]) % 2 == 0, 1.0, -1.0)[:, None]
    return out


# ---- the inputs: each returns A (M x K) and B (N x K) in float32 -------------------------
def case_random(rng, fmt, m, n, k):
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)


def case_wide_range(rng, fmt, m, n, k):
    """Magnitudes over 2^-40 .. 2^40: per-tile scaling sends most of a tile to subnormals or 0."""
    def draw(rows):
        return (rng.choice([-1.0, 1.0], (rows, k)) * np.exp2(rng.uniform(-40, 40, (rows, k)))).astype(np.float32)
    return draw(m), draw(n)


def case_subnormal(rng, fmt, m, n, k):
    """Subnormal codes everywhere but one max per tile: subnormal x subnormal products."""
    codes = finite_codes(fmt)
    sub = codes[(values_of(codes, fmt) != 0) & (np.abs(values_of(codes, fmt)) < (2.0**-6 if fmt == "e4m3" else 2.0**-14))]
    def draw(rows):
        return with_max_per_tile(values_of(rng.choice(sub, (rows, k)), fmt), fmt)
    return draw(m), draw(n)


def case_cancellation(rng, fmt, m, n, k):
    """Large terms that cancel pairwise inside an instruction, next to small ones that the
    alignment to the large exponent truncates: the sum is decided by the truncation."""
    big = FORMATS[fmt][2] / 4
    a = rng.standard_normal((m, k)).astype(np.float32) * np.float32(2.0**-4)
    b = rng.standard_normal((n, k)).astype(np.float32)
    a[:, 1::16], a[:, 2::16] = big, -big
    b[:, 1::16] = b[:, 2::16] = 1.0
    return with_max_per_tile(a, fmt), b


def case_zero_times_large(rng, fmt, m, n, k):
    """0 x max in every instruction beside products of magnitude 2^-8 .. 1: a zero given the
    subnormal exponent raises the instruction's E to emin + e_max (2 for E4M3, 1 for E5M2) and
    truncates the low bits of the smaller ones, MMA-Sim's does not. The two zero conventions differ here (README:
    A = [0, 0.140625, 448], B = [448, 0.140625, 0] gives 0x3ca20000 vs 0x3ca00000)."""
    mx = FORMATS[fmt][2]
    def draw(rows):
        return (rng.choice([-1.0, 1.0], (rows, k)) * np.exp2(rng.uniform(-7, 0, (rows, k)))).astype(np.float32)
    a, b = draw(m), draw(n)
    a[:, 0::32], b[:, 0::32] = 0.0, mx        # 0 x max opens every instruction
    a[:, 31::32], b[:, 31::32] = mx, 0.0      # max x 0 closes it
    a[0, :3], b[0, :3] = [0.0, 0.140625, mx], [mx, 0.140625, 0.0]   # the README's example
    a[0, 3:32], b[0, 3:32] = 0.0, 0.0
    return a, b


def case_all_codes(rng, fmt, m, n, k):
    """Every finite code in every row of A and B (shuffled), max at the head of each tile."""
    codes = finite_codes(fmt)
    def draw(rows):
        out = np.empty((rows, k), dtype=np.uint8)
        for r in range(rows):
            out[r] = np.resize(rng.permutation(codes), k)
        return with_max_per_tile(values_of(out, fmt), fmt)
    return draw(m), draw(n)


CASES = {"random": case_random, "wide_range": case_wide_range, "subnormal": case_subnormal,
         "cancellation": case_cancellation, "zero_times_large": case_zero_times_large, "all_codes": case_all_codes}
# (A granularity, B granularity, promotion): DeepSeek-V3's recipe, and per-row without promotion.
CONFIGS = [("tile:1x128", "block:128x128", "128"), ("row", "row", "never")]
SHAPES = [(8, 8, 256), (4, 4, 4096)]   # K up to 4096 (M x N kept small: MMA-Sim is pure torch)


def scale_per_row(scales, granularity, rows, k0):
    """The scale of each row's elements k0.. (constant within one promotion interval)."""
    if granularity == "tensor":
        return np.full(rows, scales.reshape(-1)[0], dtype=np.float32)
    if granularity == "row":
        return scales.reshape(rows, -1)[:, 0]
    size = int(granularity.split("x")[-1])
    grid = scales.reshape(-1, scales.shape[-1]) if scales.ndim == 2 else scales.reshape(1, -1)
    if granularity.startswith("tile"):
        return grid[:, k0 // size]
    return grid[np.arange(rows) // size, k0 // size]


def mmasim_gemm(codes_a, scales_a, ga, codes_b, scales_b, gb, fmt, promotion):
    """C = A * B^T by MMA-Sim's wgmma model per promotion interval, promoted as DESIGN.md says."""
    m, k = codes_a.shape
    n = codes_b.shape[0]
    wgmma = WGMMA("Hopper", f"m64n8k32.f32.{fmt}.{fmt}")
    interval = k if promotion == "never" else int(promotion)
    dtype = FORMATS[fmt][1]
    a = torch.from_numpy(codes_a).view(dtype)
    b = torch.from_numpy(codes_b).view(dtype)
    acc = torch.zeros((m, n), dtype=torch.float32)
    for k0 in range(0, k, interval):
        a_part = a[:, None, k0:k0 + interval].expand(m, n, -1)
        b_part = b[None, :, k0:k0 + interval].expand(m, n, -1)
        partial = wgmma.dpa(a_part, b_part, torch.zeros((m, n), dtype=torch.float32))
        s = (scale_per_row(scales_a, ga, m, k0)[:, None] * scale_per_row(scales_b, gb, n, k0)[None, :]).astype(np.float32)
        acc = mmasim_fma(partial.contiguous(), torch.from_numpy(np.ascontiguousarray(s)), acc)
    return acc.numpy()


def main():
    args = peers_common.arguments(__doc__.splitlines()[0]).parse_args()
    cli = peers_common.fp8lab_cli(args.build)
    rng = np.random.default_rng(20260516)
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for fmt in FORMATS:
            for case, make in CASES.items():
                for m, n, k in SHAPES:
                    a, b = make(rng, fmt, m, n, k)
                    np.save(tmp / "a.npy", a)
                    np.save(tmp / "b.npy", b)
                    for ga, gb, promotion in CONFIGS:
                        q = {}
                        for name, g in (("a", ga), ("b", gb)):
                            peers_common.run([cli, "quantize", tmp / f"{name}.npy", "--format", fmt, "--granularity", g,
                                              "--codes", tmp / f"q{name}.npy", "--scales", tmp / f"s{name}.npy"])
                            q[name] = (np.load(tmp / f"q{name}.npy"), np.load(tmp / f"s{name}.npy").astype(np.float32))
                        theirs = mmasim_gemm(q["a"][0], q["a"][1], ga, q["b"][0], q["b"][1], gb, fmt, promotion)
                        row = {"format": fmt, "case": case, "m": m, "n": n, "k": k, "a_granularity": ga,
                               "b_granularity": gb, "promotion": promotion, "outputs": m * n}
                        for accum in ("hopper", "hopper,zero:min"):
                            (tmp / "c.npy").unlink(missing_ok=True)
                            peers_common.run([cli, "gemm", "--a", tmp / "a.npy", "--b", tmp / "b.npy", "--format", fmt,
                                              "--a-granularity", ga, "--b-granularity", gb, "--accum", accum,
                                              "--promotion", promotion, "--backend", "cpu", "--out", tmp / "c.npy"])
                            ours = np.load(tmp / "c.npy")
                            mismatches = int(np.count_nonzero(ours.view(np.uint32) != theirs.view(np.uint32)))
                            row["mismatches " + accum] = mismatches
                            if accum == "hopper" and mismatches:
                                i = np.flatnonzero(ours.view(np.uint32) != theirs.view(np.uint32))[0]
                                failures.append(f"{fmt} {case} {m}x{n}x{k} {ga}/{gb}/{promotion}: {mismatches} of {m * n} "
                                                f"outputs differ from MMA-Sim under hopper (zero:none), e.g. "
                                                f"{ours.reshape(-1)[i]!r} vs {theirs.reshape(-1)[i]!r}")
                        rows.append(row)
                        print(row)
        # The README's and DESIGN.md's example, K = 3: both conventions' values are stated there.
        np.save(tmp / "a.npy", np.array([[0.0, 0.140625, 448.0]], dtype=np.float32))
        np.save(tmp / "b.npy", np.array([[448.0, 0.140625, 0.0]], dtype=np.float32))
        readme = {}
        for accum in ("hopper", "hopper,zero:min"):
            peers_common.run([cli, "gemm", "--a", tmp / "a.npy", "--b", tmp / "b.npy", "--a-granularity", "row",
                              "--b-granularity", "row", "--accum", accum, "--promotion", "never", "--backend", "cpu",
                              "--out", tmp / f"c{len(readme)}.npy"])
            readme[accum] = f"0x{int(np.load(tmp / f'c{len(readme)}.npy').view(np.uint32)[0, 0]):08x}"
        codes = np.array([[0x00, 0x21, 0x7E]], dtype=np.uint8)   # 0, 0.140625, 448 in E4M3
        one = np.ones((1, 1), dtype=np.float32)
        readme["mmasim"] = f"0x{int(mmasim_gemm(codes, one, 'row', codes[:, ::-1].copy(), one, 'row', 'e4m3', 'never').view(np.uint32)[0, 0]):08x}"
        if readme != {"hopper": "0x3ca20000", "hopper,zero:min": "0x3ca00000", "mmasim": "0x3ca20000"}:
            failures.append(f"README's zero-convention example: {readme}, the README says hopper 0x3ca20000 = MMA-Sim, "
                            "zero:min 0x3ca00000")
    for fmt in FORMATS:
        seen = sum(r["mismatches hopper,zero:min"] for r in rows if r["format"] == fmt and r["case"] == "zero_times_large")
        if seen == 0:
            failures.append(f"{fmt} zero_times_large: hopper,zero:min agrees with MMA-Sim everywhere, so this test "
                            "cannot tell the zero conventions apart")
    total = sum(r["outputs"] for r in rows)
    finding = {"mmasim_model": "WGMMA('Hopper', 'm64n8k32.f32.<fmt>.<fmt>'): F = 13, RZ-E8M13, 32 products per instruction, "
                               "e_zero = -133; promotion composed in Python: fma32(partial, fl32(s_a * s_b), acc)",
               "outputs_compared": total,
               "mismatches_zero_none": sum(r["mismatches hopper"] for r in rows),
               "mismatches_zero_min": sum(r["mismatches hopper,zero:min"] for r in rows),
               "readme_zero_example": readme,
               "cases": rows}
    peers_common.write_finding(args.results, "gemm_mmasim", finding)
    peers_common.verdict(failures)


if __name__ == "__main__":
    main()
