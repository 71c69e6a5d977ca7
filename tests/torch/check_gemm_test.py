"""fp8lab.torch.check_gemm names the arithmetic of kernels written here whose arithmetic is known:
plain torch (FP32 accumulation per 128 with either cuBLASLt fold), fp8lab's own GEMM with other
settings (Hopper N_C = 128, 32, no promotion), one with a deliberate bug in one output tile ("none");
and refuses a kernel that returns the wrong shape or dtype, raises, or returns NaN where the models
have none, with one clear error. On a GPU it names torch._scaled_mm's block-scaled fold."""
import json
import os
import tempfile
import unittest

import numpy as np
import torch

import fp8lab
import fp8lab.torch as ft
from fp8lab.torch.check_gemm import _k_block_scales
from torch_support import TorchTestCase

SETTINGS = {"a_granularity": "tile:1x128", "b_granularity": "block:128x128"}


def codes(t):
    return t.view(torch.uint8).numpy()


def fp8lab_kernel(accum, promotion, a_granularity="tile:1x128", b_granularity="block:128x128"):
    def kernel(a, sa, b, sb):
        return torch.from_numpy(fp8lab._core._gemm_codes(codes(a), sa.numpy(), a_granularity, codes(b), sb.numpy(),
                                                         b_granularity, "e4m3", "e4m3", accum, promotion))
    return kernel


def fp32_folds_kernel(fold):
    """Plain torch: per 128 of K an FP32 partial of the exact products in order of K, then
    acc = fma(p, fl(sa sb), acc) (fold 'p*(sa*sb)') or fma(fl(p sa), sb, acc) (fold 'p*sa*sb'); the
    FMA as one rounding of the exact FP64 value p s + acc (exact products of FP32 numbers; the one
    FP64 rounding of the sum meets FP32's rounding differently only when it lands on an FP32 tie)."""
    def kernel(a, sa, b, sb):
        av, bv = a.float(), b.float()
        m, k = av.shape
        n = bv.shape[0]
        ka = torch.from_numpy(_k_block_scales(sa.numpy(), m, k, SETTINGS["a_granularity"]))
        kb = torch.from_numpy(_k_block_scales(sb.numpy(), n, k, SETTINGS["b_granularity"]))
        acc = torch.zeros(m, n, dtype=torch.float32)
        for j in range(0, k, 128):
            p = torch.zeros(m, n, dtype=torch.float32)
            for i in range(j, j + 128):
                p = p + av[:, i, None] * bv[None, :, i]  # exact FP8 products, FP32 sums in order
            s_a, s_b = ka[:, j // 128, None], kb[None, :, j // 128]
            if fold == "p*(sa*sb)":
                acc = (p.double() * (s_a * s_b).double() + acc.double()).float()
            else:
                acc = ((p * s_a).double() * s_b.double() + acc.double()).float()
        return acc
    return kernel


class CheckGemmTest(TorchTestCase):
    def test_names_each_known_arithmetic(self):
        cases = [("fp8lab hopper N_C=128", fp8lab_kernel("hopper", "128"), SETTINGS, "hopper N_C=128"),
                 ("fp8lab hopper N_C=32", fp8lab_kernel("hopper", "32"), SETTINGS, "hopper N_C=32"),
                 ("fp8lab hopper, no promotion", fp8lab_kernel("hopper", "never", "tensor", "tensor"),
                  {"a_granularity": "tensor", "b_granularity": "tensor"}, "hopper never"),
                 ("torch FP32 partials, fma(p, sa*sb, y)", fp32_folds_kernel("p*(sa*sb)"), SETTINGS, "fp32 N_C=128"),
                 ("torch FP32 partials, fma(p*sa, sb, y)", fp32_folds_kernel("p*sa*sb"), SETTINGS, "fp32 fold p*sa*sb")]
        for label, kernel, settings, expected in cases:
            with self.subTest(kernel=label):
                report = ft.check_gemm(kernel, m=64, n=128, k=256, **settings)
                self.assertEqual(report.equals, expected, report.table())
                self.assertEqual(report.matches, [expected], report.table())

    def test_a_bug_in_one_tile_is_none(self):
        right = fp8lab_kernel("hopper", "128")

        def buggy(a, sa, b, sb):
            c = right(a, sa, b, sb)
            tile = c[:16, :16].contiguous().view(torch.int32) + 1  # one ulp off in one 16x16 output tile
            c[:16, :16] = tile.view(torch.float32)
            return c
        report = ft.check_gemm(buggy, m=64, n=128, k=256, **SETTINGS)
        self.assertEqual(report.equals, "none", report.table())
        self.assertEqual(report.matches, [])
        row = [r for r in report.rows if r["candidate"] == "hopper N_C=128"][0]
        self.assertEqual(row["mismatches"], 4 * 16 * 16)  # the tile, in each of the four operand sets
        self.assertEqual(row["max_ulp"], 1)

    def test_json_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "check.json")
            report = ft.check_gemm(fp8lab_kernel("hopper", "128"), m=32, n=128, k=128, json_path=path, **SETTINGS)
            with open(path) as f:
                written = json.load(f)
        self.assertEqual(written["equals"], "hopper N_C=128")
        self.assertEqual(written["operand_sets"], ["random", "wide-range", "cancelling", "all-codes"])
        self.assertEqual(written, json.loads(report.to_json()))

    def test_bad_kernels_are_one_clear_error(self):
        right = fp8lab_kernel("hopper", "128")

        def with_nan(a, sa, b, sb):
            c = right(a, sa, b, sb)
            c[3, 5] = float("nan")
            return c

        def raising(a, sa, b, sb):
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore lines")
        cases = [(lambda a, sa, b, sb: right(a, sa, b, sb)[:, :-1], r"returned shape \(64, 127\) on the 'random' "
                  r"operands, not \(64, 128\)"),
                 (lambda a, sa, b, sb: right(a, sa, b, sb).double(), r"returned torch.float64 on the 'random' operands"),
                 (lambda a, sa, b, sb: right(a, sa, b, sb).numpy(), r"returned ndarray on the 'random' operands, not a tensor"),
                 (raising, r"raised on the 'random' operands: RuntimeError: CUDA error: an illegal memory access was "
                           r"encountered$"),
                 (with_nan, r"NaN or inf at 1 of 8192 outputs of the 'random' operands where every model is finite")]
        for kernel, pattern in cases:
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(ft.CheckGemmError, pattern):
                    ft.check_gemm(kernel, m=64, n=128, k=256, **SETTINGS)
        with self.assertRaisesRegex(ValueError, "multiple of 128"):
            ft.check_gemm(right, k=200)

    @unittest.skipUnless(torch.cuda.is_available(), "no GPU: torch._scaled_mm's block-scaled mode needs one")
    def test_scaled_mm_block_scaled_on_a_gpu(self):
        def scaled_mm(a, sa, b, sb):
            return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb.t(), out_dtype=torch.float32)
        report = ft.check_gemm(scaled_mm, device="cuda", **SETTINGS)
        print(report.table())
        self.assertIn(report.equals, [c.name for c in ft.check_gemm.__globals__["CANDIDATES"]] + ["none"])


if __name__ == "__main__":
    unittest.main()
