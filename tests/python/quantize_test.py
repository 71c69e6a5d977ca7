"""fp8lab.quantize / dequantize against `fp8lab quantize --codes --scales --dequant`, bit for
bit, for every granularity kind, format and scale rule; inputs read in place; DLPack."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cli_support import CliTestCase, operand  # noqa: E402

import fp8lab  # noqa: E402

# Every granularity kind the CLI accepts, at the smallest, the DeepSeek-V3 and the largest
# size (16, 128, 512); 40 x 300 makes every tile grid ragged (300 is no multiple of 16).
GRANULARITIES = ["tensor", "row", "tile:1x16", "tile:1x128", "tile:1x512",
                 "block:16x16", "block:128x128", "block:512x512"]
FORMATS = ["e4m3", "e5m2", "e2m1", "e3m2", "e2m3"]
SCALE_RULES = ["fp32", "pow2", "deepgemm", "te", "te-pow2", "div", "mx", "mx:ceil", "mx:even", "mx:rceil", "nvfp4",
               "nvfp4:torchao"]
TWO_LEVEL = {"nvfp4", "nvfp4:torchao"}  # e2m1 only


class QuantizeMatchesCli(CliTestCase):
    def cli_quantize(self, x_path, granularity, *options):
        codes, scales, dequant = self.path("codes.npy"), self.path("scales.npy"), self.path("dequant.npy")
        self.cli_ok("quantize", x_path, "--granularity", granularity, "--codes", codes, "--scales", scales,
                    "--dequant", dequant, *options)
        return np.load(codes), np.load(scales), np.load(dequant)

    def assertMatchesCli(self, q, cli_outputs):
        codes, scales, dequant = cli_outputs
        self.assertSameArray(q.codes, codes)
        self.assertSameArray(q.scales, scales)
        self.assertSameArray(fp8lab.dequantize(q), dequant)
        self.assertSameArray(q.dequantize(), dequant)

    def test_every_granularity_format_and_scale_rule(self):
        x = operand(40, 300, seed=1, outlier_columns=(3, 170))
        x_path = self.save("x.npy", x)
        for granularity in GRANULARITIES:
            for fmt in FORMATS:
                for rule in SCALE_RULES:
                    if rule in TWO_LEVEL and fmt != "e2m1":
                        continue
                    with self.subTest(granularity=granularity, format=fmt, scale=rule):
                        q = fp8lab.quantize(x, granularity, format=fmt, scale=rule)
                        self.assertMatchesCli(q, self.cli_quantize(x_path, granularity, "--format", fmt,
                                                                   "--scale", rule))
                        self.assertEqual((q.format, q.granularity, q.scale_rule), (fmt, granularity, rule))
                        self.assertEqual(q.shape, x.shape)

    def test_stochastic_rounding_matches_the_cli(self):
        x = operand(24, 200, seed=6, outlier_columns=(11,))
        x_path = self.save("x.npy", x)
        for fmt, rule in [("e4m3", "fp32"), ("e5m2", "mx"), ("e2m1", "nvfp4")]:
            for seed in (0, 2 ** 64 - 1):
                with self.subTest(format=fmt, scale=rule, seed=seed):
                    q = fp8lab.quantize(x, "tile:1x16", format=fmt, scale=rule, rounding="stochastic", seed=seed)
                    self.assertMatchesCli(q, self.cli_quantize(x_path, "tile:1x16", "--format", fmt, "--scale", rule,
                                                               "--rounding", "stochastic", "--seed", str(seed)))
                    self.assertEqual((q.rounding, q.seed), ("stochastic", seed))
        nearest = fp8lab.quantize(x, "tile:1x16")
        self.assertEqual((nearest.rounding, nearest.seed), ("nearest", 0))
        self.assertFalse(np.array_equal(nearest.codes, fp8lab.quantize(x, "tile:1x16", rounding="stochastic").codes))

    def test_defaults_are_the_clis(self):
        x = operand(8, 256, seed=2)
        self.assertMatchesCli(fp8lab.quantize(x, "tile:1x128"),
                              self.cli_quantize(self.save("x.npy", x), "tile:1x128"))

    def test_other_dtypes_convert_as_the_cli_converts_files(self):
        x = operand(16, 96, seed=3, outlier_columns=(5,))
        bf16 = (x.view(np.uint32) >> 16).astype(np.uint16).view([("bf16", "<u2")]).reshape(x.shape)
        for name, array in [("f64", x.astype(np.float64) * (1 + 2.0 ** -30)), ("f16", x.astype(np.float16)),
                            ("bf16", bf16)]:
            with self.subTest(dtype=name):
                self.assertMatchesCli(fp8lab.quantize(array, "tile:1x32"),
                                      self.cli_quantize(self.save(name + ".npy", array), "tile:1x32"))


class QuantizeMemory(unittest.TestCase):
    def test_c_contiguous_float32_is_read_in_place(self):
        x = operand(8, 64, seed=4)
        self.assertEqual(fp8lab._operand_address(x), x.ctypes.data)
        row_slice = x[2:6]  # a C-contiguous view into x
        self.assertEqual(fp8lab._operand_address(row_slice), row_slice.ctypes.data)

    def test_other_layouts_are_copied_once_and_give_the_copy_s_result(self):
        big = operand(64, 96, seed=5, outlier_columns=(7,))
        for name, view in [("strided columns", big[:, ::2]), ("transposed", big.T),
                           ("strided rows", big[::3])]:
            with self.subTest(view=name):
                copy = np.ascontiguousarray(view)
                self.assertNotEqual(fp8lab._operand_address(view), view.ctypes.data)
                from_view, from_copy = fp8lab.quantize(view, "tile:1x16"), fp8lab.quantize(copy, "tile:1x16")
                np.testing.assert_array_equal(from_view.codes, from_copy.codes)
                np.testing.assert_array_equal(from_view.scales, from_copy.scales)

    def test_codes_and_scales_are_views_into_the_result(self):
        q = fp8lab.quantize(operand(4, 32, seed=6), "tile:1x16")
        self.assertTrue(np.shares_memory(q.codes, q.codes))  # two reads, one buffer: no copy per access
        self.assertTrue(np.shares_memory(q.scales, q.scales))
        self.assertEqual(q.codes.dtype, np.uint8)
        self.assertEqual(q.scales.dtype, np.float32)
        self.assertEqual(q.scales.shape, (4, 2))
        before = q.dequantize()[0, 0]
        q.codes[0, 0] = 0  # the view writes into q: dequantize sees it
        self.assertEqual(q.dequantize()[0, 0], 0.0)
        self.assertNotEqual(before, 0.0)


class Dlpack(unittest.TestCase):
    class OnlyDlpack:
        """An object that offers nothing but the DLPack protocol (as a foreign tensor would)."""

        def __init__(self, array):
            self._array = array

        def __dlpack__(self, stream=None):
            return self._array.__dlpack__()

        def __dlpack_device__(self):
            return self._array.__dlpack_device__()

    def test_dlpack_objects_are_read_without_a_copy(self):
        x = operand(8, 64, seed=7)
        wrapped = self.OnlyDlpack(x)
        self.assertEqual(fp8lab._operand_address(wrapped), x.ctypes.data)
        np.testing.assert_array_equal(fp8lab.quantize(wrapped, "block:16x16").codes,
                                      fp8lab.quantize(x, "block:16x16").codes)

    def test_torch_tensors(self):
        try:
            import torch
        except ImportError as e:
            print(f"\nskipping the torch test: torch is not installed ({e})", file=sys.stderr)
            self.skipTest(f"torch is not installed ({e})")
        x = operand(8, 64, seed=8)
        t = torch.from_numpy(x.copy())
        self.assertEqual(fp8lab._operand_address(t), t.data_ptr())
        np.testing.assert_array_equal(fp8lab.quantize(t, "tile:1x32").codes, fp8lab.quantize(x, "tile:1x32").codes)
        np.testing.assert_array_equal(fp8lab.gemm(t, t), fp8lab.gemm(x, x))


if __name__ == "__main__":
    unittest.main()
