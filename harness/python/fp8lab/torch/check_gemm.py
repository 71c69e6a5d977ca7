"""Your block-scaled GEMM against the hardware models: fp8lab.torch.check_gemm runs a user's kernel
(a callable on torch tensors: DeepGEMM's, torch._scaled_mm, a Triton kernel) on random, wide-range,
cancelling and all-codes operands and compares its output, bit for bit, with each candidate
arithmetic fp8lab models on the same FP8 codes and scales:

  hopper N_C=128        Hopper's tensor cores (13 fraction bits, truncation, 32-deep) promoted every
                        128: acc = fma(p, fl(s_a * s_b), acc) -- DeepGEMM's scheme, and cuBLASLt's
                        fold with 128x128 weight blocks (results/gpu)
  hopper N_C=64, 32     the same, promoted more often
  hopper never          no promotion (per-tensor scales only: the scale must be constant along K)
  hopper zero:min       N_C=128 with an FP8 zero's exponent read as a subnormal's (the model the
                        silicon refuted, kept as a what-if)
  hopper fold p*sa*sb   13-bit partials per 128, acc = fma(fl(p * s_a), s_b, acc): cuBLASLt's fold
                        with 1x128 weight tiles (results/gpu)
  fp32 N_C=128          exact-product FP32 accumulation per 128 (one FMA per product), fold as above
  fp32 fold p*sa*sb     the same partials with cuBLASLt's other fold
  bits:25 N_C=128       a 25-fraction-bit accumulator (Blackwell's tensor cores) promoted every 128

The kernel is called fn(a, a_scales, b, b_scales) with a: float8 (m x k, K-major), a_scales: float32
grid (fp8lab.quantize's: m x k/128 for 1x128 tiles), b: float8 (n x k), b_scales: its grid
(n/128 x k/128 for 128x128 blocks), and returns C = A B^T (m x n) in float32 or bfloat16; wrap your
kernel to this (e.g. lambda a, sa, b, sb: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb.t(), ...)).
The report names every candidate the kernel equals on every operand set, or "none".
"""
import json
import math

import numpy as np
import torch

import fp8lab
from .. import _core

FLOAT8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


class CheckGemmError(ValueError):
    """The kernel could not be checked: it raised, or returned the wrong shape, dtype or NaN where
    the models have none. One line saying which operand set and what."""


class Candidate:
    def __init__(self, name, accum, promotion, fold="promote"):
        self.name, self.accum, self.promotion, self.fold = name, accum, promotion, fold

    def valid(self, a_granularity, b_granularity):
        # A promotion interval must hold the scales constant (1x128 tiles: a divisor of 128).
        tiled = any(g.startswith(("tile:", "block:")) for g in (a_granularity, b_granularity))
        return not (tiled and self.promotion == "never")


CANDIDATES = [
    Candidate("hopper N_C=128", "hopper", "128"),
    Candidate("hopper N_C=64", "hopper", "64"),
    Candidate("hopper N_C=32", "hopper", "32"),
    Candidate("hopper never", "hopper", "never"),
    Candidate("hopper zero:min N_C=128", "hopper,zero:min", "128"),
    Candidate("hopper fold p*sa*sb", "hopper", "128", fold="p_sa_sb"),
    Candidate("fp32 N_C=128", "fp32", "128"),
    Candidate("fp32 fold p*sa*sb", "fp32", "128", fold="p_sa_sb"),
    Candidate("bits:25 N_C=128", "bits:25,depth:32,round:rz", "128"),
]


def _operand_sets(m, n, k, seed):
    """{name: (A, B)} float32 operands (A: m x k, B: n x k) of four kinds."""
    g = np.random.default_rng(seed)
    sets = {"random": (g.standard_normal((m, k)), g.standard_normal((n, k)) / math.sqrt(k))}
    # wide-range: magnitudes over 2^-12..2^12 per element and a few outlier channels, so tiles hold
    # values that flush, subnormals and maxima, and products whose exponents differ widely.
    wide_a = g.standard_normal((m, k)) * np.exp2(g.integers(-12, 13, (m, k)))
    wide_a[:, g.choice(k, 4, replace=False)] *= 100
    sets["wide-range"] = (wide_a, g.standard_normal((n, k)) * np.exp2(g.integers(-6, 7, (n, k))))
    # cancelling: each row's second half of K is minus its first half (up to a small perturbation),
    # so the exact sums nearly cancel and a partial's precision shows in the low bits.
    half = k // 2
    base = g.standard_normal((m, half))
    cancel_a = np.concatenate([base, -base * (1 + 2.0 ** -6 * g.standard_normal((m, half)))], axis=1)
    b_half = g.standard_normal((n, half))
    sets["cancelling"] = (cancel_a, np.concatenate([b_half, b_half], axis=1))
    return {name: (a.astype(np.float32), b.astype(np.float32)) for name, (a, b) in sets.items()}


def _all_codes(m, n, k, fmt, granularities, seed):
    """Codes that run through every non-NaN code of the format, with power-of-two scales."""
    g = np.random.default_rng(seed + 1)
    nan = {0x7F, 0xFF} if fmt == "e4m3" else set(range(0x7D, 0x80)) | set(range(0xFD, 0x100)) | {0x7C, 0xFC}
    codes = np.array([c for c in range(256) if c not in nan], dtype=np.uint8)
    a = codes[(np.arange(m)[:, None] * 7 + np.arange(k)[None, :] * 3) % len(codes)]
    b = codes[(np.arange(n)[:, None] * 11 + np.arange(k)[None, :] * 5 + 1) % len(codes)]
    scales = []
    for rows, granularity in ((m, granularities[0]), (n, granularities[1])):
        shape = fp8lab.quantize(np.ones((rows, k), np.float32), granularity).scales.shape
        scales.append(np.exp2(g.integers(-3, 4, shape)).astype(np.float32))
    return a, scales[0], b, scales[1]


def _k_block_scales(scales, rows, k, granularity, block=128):
    """Each row's scale for each 128-long block of K (rows x K/128), from a scale grid."""
    if granularity == "tensor":
        return np.full((rows, (k + block - 1) // block), scales.reshape(-1)[0], np.float32)
    if granularity == "row":
        return np.repeat(scales.reshape(rows, 1), (k + block - 1) // block, axis=1).astype(np.float32)
    tile = int(granularity.split("x")[-1])
    grid = np.repeat(scales, tile // block, axis=1) if tile > block else scales
    if granularity.startswith("block:"):
        grid = np.repeat(grid, tile, axis=0)[:rows]
    return grid[:, :(k + block - 1) // block].astype(np.float32)


def _candidate_output(c, a, sa, ga, b, sb, gb, fmt, b_fmt):
    if c.fold == "promote":
        return _core._gemm_codes(a, sa, ga, b, sb, gb, fmt, b_fmt, c.accum, c.promotion)
    # cuBLASLt's other fold: per 128 of K, the partial p of the unscaled codes, acc = fma(fl(p * s_a), s_b, acc).
    m, k = a.shape
    n = b.shape[0]
    ka, kb = _k_block_scales(sa, m, k, ga), _k_block_scales(sb, n, k, gb)
    acc = np.zeros((m, n), np.float32)
    ones_a, ones_b = np.ones((1, 1), np.float32), np.ones((1, 1), np.float32)
    for j in range(0, k, 128):
        p = _core._gemm_codes(np.ascontiguousarray(a[:, j:j + 128]), ones_a, "tensor",
                              np.ascontiguousarray(b[:, j:j + 128]), ones_b, "tensor", fmt, b_fmt, c.accum, "never")
        scaled = (p * ka[:, j // 128][:, None]).astype(np.float32)  # fl32(p * s_a): one rounding
        acc = _core._fma32(scaled, np.broadcast_to(kb[:, j // 128][None, :], (m, n)).copy(), acc)
    return acc


def _ulps(x, y):
    """|ULP distance| between float32 arrays (NaN-free), by their ordered bit patterns."""
    def ordered(v):
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(ordered(np.ascontiguousarray(x, np.float32)) - ordered(np.ascontiguousarray(y, np.float32)))


class CheckReport:
    def __init__(self, rows, sets, settings):
        self.rows, self.sets, self.settings = rows, sets, settings
        self.matches = [r["candidate"] for r in rows if r["mismatches"] == 0]
        self.equals = self.matches[0] if self.matches else "none"

    def table(self):
        lines = [f"{'candidate':<26}{'mismatches':>12}{'of':>10}{'max ulp':>12}  per set (mismatches)"]
        for r in self.rows:
            per = ", ".join(f"{s} {v}" for s, v in r["per_set"].items())
            lines.append(f"{r['candidate']:<26}{r['mismatches']:>12}{r['outputs']:>10}{r['max_ulp']:>12}  {per}")
        lines.append(f"the kernel computes: {' = '.join(self.matches) if self.matches else 'none of the candidates'}")
        return "\n".join(lines)

    def to_json(self):
        return json.dumps({"equals": self.equals, "matches": self.matches, "settings": self.settings,
                           "operand_sets": self.sets, "candidates": self.rows}, indent=1)

    def __str__(self):
        return self.table()


def check_gemm(fn, *, m=128, n=256, k=512, a_granularity="tile:1x128", b_granularity="block:128x128", format="e4m3",
               b_format=None, scale="fp32", device="cpu", seed=0, candidates=None, json_path=None):
    """Runs fn(a, a_scales, b, b_scales) -> C (m x n) on the operand sets and names the candidate
    arithmetic(s) it equals bit for bit (CheckReport: .equals, .matches, .table(), .to_json())."""
    b_format = b_format or format
    if format not in FLOAT8 or b_format not in FLOAT8:
        raise ValueError(f"check_gemm: formats e4m3 or e5m2 (torch float8 dtypes), got {format}, {b_format}")
    for name, value in (("m", m), ("n", n), ("k", k)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"check_gemm: {name} must be a whole number >= 1, got {value!r}")
    if k % 128:
        raise ValueError(f"check_gemm: k = {k} must be a multiple of 128 (the folds' block along K)")
    for which, g in (("a_granularity", a_granularity), ("b_granularity", b_granularity)):
        # The candidates promote (and fold) every 128 of K at least: a scale must hold over 128 of K.
        along_k = g.split("x")[-1] if g.startswith(("tile:", "block:")) else None
        if g not in ("tensor", "row") and not (along_k and along_k.isdigit() and int(along_k) % 128 == 0):
            raise ValueError(f"check_gemm: {which} '{g}': the candidates take tensor, row, tile:1xT or block:BxB with "
                             "T, B multiples of 128 (a scale that holds over each 128 of K)")
    chosen = [c for c in (candidates or CANDIDATES) if c.valid(a_granularity, b_granularity)]
    sets = {}
    for name, (a, b) in _operand_sets(m, n, k, seed).items():
        qa = fp8lab.quantize(a, a_granularity, format=format, scale=scale)
        qb = fp8lab.quantize(b, b_granularity, format=b_format, scale=scale)
        sets[name] = (qa.codes, qa.scales, qb.codes, qb.scales)
    sets["all-codes"] = _all_codes(m, n, k, format, (a_granularity, b_granularity), seed)
    rows = {c.name: {"candidate": c.name, "mismatches": 0, "outputs": 0, "max_ulp": 0, "per_set": {}} for c in chosen}
    for set_name, (a, sa, b, sb) in sets.items():
        out = _call(fn, set_name, a, sa, b, sb, format, b_format, device, (m, n))
        models = {c.name: _candidate_output(c, a, sa, a_granularity, b, sb, b_granularity, format, b_format) for c in chosen}
        if out.dtype == torch.bfloat16:
            models = {name: torch.from_numpy(v).to(torch.bfloat16).float().numpy() for name, v in models.items()}
        got = out.float().numpy()
        finite_model = np.logical_and.reduce([np.isfinite(v) for v in models.values()])
        bad = ~np.isfinite(got) & finite_model
        if bad.any():
            raise CheckGemmError(f"check_gemm: the kernel returned NaN or inf at {int(bad.sum())} of {bad.size} outputs of the "
                                 f"'{set_name}' operands where every model is finite")
        for name, want in models.items():
            same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
            r = rows[name]
            wrong = int((~same).sum())
            r["mismatches"] += wrong
            r["outputs"] += same.size
            r["per_set"][set_name] = wrong
            finite = np.isfinite(got) & np.isfinite(want)
            if wrong and finite.any():
                r["max_ulp"] = max(r["max_ulp"], int(_ulps(got[finite], want[finite]).max()))
    settings = {"m": m, "n": n, "k": k, "a_granularity": a_granularity, "b_granularity": b_granularity,
                "format": format, "b_format": b_format, "scale": scale, "seed": seed}
    report = CheckReport(list(rows.values()), list(sets), settings)
    if json_path:
        with open(json_path, "w") as f:
            f.write(report.to_json() + "\n")
    return report


def _call(fn, set_name, a, sa, b, sb, format, b_format, device, shape):
    args = (torch.from_numpy(a).view(FLOAT8[format]).to(device), torch.from_numpy(sa).to(device),
            torch.from_numpy(b).view(FLOAT8[b_format]).to(device), torch.from_numpy(sb).to(device))
    try:
        out = fn(*args)
    except Exception as e:  # the kernel's own failure, said in one line
        raise CheckGemmError(f"check_gemm: the kernel raised on the '{set_name}' operands: {type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}") from e
    if not isinstance(out, torch.Tensor):
        raise CheckGemmError(f"check_gemm: the kernel returned {type(out).__name__} on the '{set_name}' operands, not a tensor")
    if tuple(out.shape) != shape:
        raise CheckGemmError(f"check_gemm: the kernel returned shape {tuple(out.shape)} on the '{set_name}' operands, "
                             f"not {shape} (m x n)")
    if out.dtype not in (torch.float32, torch.bfloat16):
        raise CheckGemmError(f"check_gemm: the kernel returned {out.dtype} on the '{set_name}' operands; float32 or "
                             "bfloat16 is compared")
    try:
        return out.detach().to("cpu").contiguous()
    except Exception as e:  # e.g. a meta tensor: no values to compare
        raise CheckGemmError(f"check_gemm: the kernel's output on the '{set_name}' operands cannot be read on the CPU "
                             f"({out.device}): {type(e).__name__}") from e
