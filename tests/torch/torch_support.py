"""What the fp8lab.torch tests share: the fp8lab package of the build under test, seeded operands,
bitwise comparison, and the plain-kind references."""
import os
import pathlib
import unittest

import numpy as np
import torch

import fp8lab
import fp8lab.torch as ft

BUILD = pathlib.Path(os.environ.get("FP8LAB_BUILD", "build/cpu")).resolve()
if not pathlib.Path(fp8lab.__file__).resolve().is_relative_to(BUILD):
    raise SystemExit(f"FAILED: fp8lab imported from {fp8lab.__file__}, not from the build under test {BUILD}")

# Every recipe a name gives that fp8lab.torch takes: the built-in ones and the shipped files but
# the seed techniques' (their [training] tables belong to the train study kind).
RECIPES = [name for name, _, _ in fp8lab.recipes() if not name.startswith("seed/")]


def same_bits(a, b):
    """Bit for bit, NaN-safe: same dtype, shape and bytes."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.contiguous().view(torch.uint8).equal(
        b.contiguous().view(torch.uint8))


def describe_difference(a, b):
    a, b = torch.as_tensor(a).detach().double(), torch.as_tensor(b).detach().double()
    if a.shape != b.shape:
        return f"shapes {tuple(a.shape)} vs {tuple(b.shape)}"
    d = (a - b).abs()
    return f"{int((d != 0).sum())} of {d.numel()} differ, max |diff| {float(d.max()):.3g}"


def ordered_gemm_nt(a, b, dtype):
    """C = A B^T with each output's K products summed in order of K from 0, one rounding per
    product and per addition, in `dtype` (float32 or float64): the engine's plain kinds
    (kernels/train/linear_gemm.hpp), written independently here, vectorized over the outputs."""
    a = np.asarray(a, dtype=dtype)
    b = np.asarray(b, dtype=dtype)
    c = np.zeros((a.shape[0], b.shape[0]), dtype=dtype)
    for j in range(a.shape[1]):
        c = (c + np.outer(a[:, j], b[:, j]).astype(dtype)).astype(dtype)
    return c


def rounded(x, kind):
    """The operand a plain kind reads: bf16 / fp16 round (RNE, overflow to inf), else itself."""
    t = torch.as_tensor(x)
    if kind == "bf16":
        return t.to(torch.bfloat16).float().numpy()
    if kind == "fp16":
        return t.to(torch.float16).float().numpy()
    return t.numpy()


class TorchTestCase(unittest.TestCase):
    def assertSameBits(self, got, want, what):
        self.assertTrue(same_bits(got, want), f"{what}: {describe_difference(got, want)}")
