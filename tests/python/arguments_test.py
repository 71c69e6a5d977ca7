"""A bad argument raises ValueError (bad value) or TypeError (wrong dtype) with the message the
CLI prints for the same mistake; where the CLI names a file, Python names the argument."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cli_support import CliTestCase, operand  # noqa: E402

import fp8lab  # noqa: E402

# (CLI options, Python keywords): one mistake each.
GEMM_MISTAKES = [
    (["--a-granularity", "tile:1x100"], {"a_granularity": "tile:1x100"}),
    (["--b-granularity", "col"], {"b_granularity": "col"}),
    (["--a-granularity", "block:1024x1024"], {"a_granularity": "block:1024x1024"}),
    (["--format", "e3m4"], {"format": "e3m4"}),
    (["--b-format", "e3m4"], {"b_format": "e3m4"}),
    (["--scale", "pow3"], {"scale": "pow3"}),
    (["--accum", "bits:99,depth:32,round:rz"], {"accum": "bits:99,depth:32,round:rz"}),
    (["--accum", "hopper,zero:max"], {"accum": "hopper,zero:max"}),
    (["--accum", "fp16"], {"accum": "fp16"}),
    (["--promotion", "100"], {"promotion": 100}),
    (["--promotion", "sometimes"], {"promotion": "sometimes"}),
    (["--promotion", "never"], {"promotion": "never"}),  # with 1x128 tiles along K
    (["--promotion", "-128"], {"promotion": -128}),
    (["--output", "fp16"], {"output": "fp16"}),
    (["--backend", "tpu"], {"backend": "tpu"}),
]

QUANTIZE_MISTAKES = [
    (["--granularity", "tile:2x128"], ("tile:2x128",), {}),
    (["--granularity", "block:100x100"], ("block:100x100",), {}),
    (["--granularity", "row", "--format", "e8m0"], ("row",), {"format": "e8m0"}),
    (["--granularity", "row", "--scale", "ue8m0"], ("row",), {"scale": "ue8m0"}),
    (["--granularity", "row", "--scale", "nvfp4"], ("row",), {"scale": "nvfp4"}),
    (["--granularity", "row", "--rounding", "up"], ("row",), {"rounding": "up"}),
    (["--granularity", "row", "--rounding", "stochastic", "--seed", "-1"], ("row",),
     {"rounding": "stochastic", "seed": -1}),
    (["--granularity", "row", "--seed", "3"], ("row",), {"seed": 3}),
]


class SameMessagesAsTheCli(CliTestCase):
    def setUp(self):
        super().setUp()
        self.a, self.b = operand(8, 256, seed=31), operand(4, 256, seed=32)
        self.a_path, self.b_path = self.save("a.npy", self.a), self.save("b.npy", self.b)

    def assertRaisesCliMessage(self, exception, expected, call, *args, **kwargs):
        with self.assertRaises(exception) as raised:
            call(*args, **kwargs)
        self.assertEqual(str(raised.exception), expected)

    def test_gemm_option_mistakes(self):
        for cli_options, keywords in GEMM_MISTAKES:
            with self.subTest(mistake=" ".join(cli_options)):
                expected = self.cli_error("gemm", "--a", self.a_path, "--b", self.b_path, *cli_options)
                self.assertRaisesCliMessage(ValueError, expected, fp8lab.gemm, self.a, self.b, **keywords)

    def test_quantize_option_mistakes(self):
        for cli_options, args, keywords in QUANTIZE_MISTAKES:
            with self.subTest(mistake=" ".join(cli_options)):
                expected = self.cli_error("quantize", self.a_path, *cli_options)
                self.assertRaisesCliMessage(ValueError, expected, fp8lab.quantize, self.a, *args, **keywords)

    def gemm_operand_mistake(self, exception, bad_a):
        """The CLI's message for A = bad_a in a file, with the file's path as Python names it ('a')."""
        path = self.save("bad.npy", bad_a)
        expected = self.cli_error("gemm", "--a", path, "--b", self.b_path).replace(path, "a").replace(self.b_path, "b")
        self.assertRaisesCliMessage(exception, expected, fp8lab.gemm, bad_a, self.b)
        return expected

    def test_operand_values_and_shapes(self):
        nan = self.a.copy()
        nan[1, 2] = np.nan
        inf = self.a.copy()
        inf[3, 0] = -np.inf
        for name, bad in [("NaN", nan), ("inf", inf), ("1-D", self.a[0]), ("3-D", self.a.reshape(2, 4, 256)),
                          ("empty", self.a[:0]), ("other K", self.a[:, :128])]:
            with self.subTest(operand=name):
                self.assertIn("a", self.gemm_operand_mistake(ValueError, bad))

    def test_operand_dtypes(self):
        for name, bad in [("int32", self.a.astype(np.int32)), ("uint8", self.a.astype(np.uint8)),
                          ("uint16", self.a.astype(np.uint16)), ("complex", self.a.astype(np.complex64)),
                          ("bool", self.a > 0), ("big-endian", self.a.astype(">f4"))]:
            with self.subTest(dtype=name):
                self.gemm_operand_mistake(TypeError, bad)

    def test_quantize_operand(self):
        for exception, bad in [(TypeError, self.a.astype(np.int64)), (ValueError, self.a.reshape(-1))]:
            path = self.save("bad.npy", bad)
            expected = self.cli_error("quantize", path, "--granularity", "row").replace(path, "x")
            self.assertRaisesCliMessage(exception, expected, fp8lab.quantize, bad, "row")


class PythonOnlyMistakes(unittest.TestCase):
    def test_promotion_of_another_type(self):
        a = operand(4, 128, seed=33)
        with self.assertRaises(TypeError) as raised:
            fp8lab.gemm(a, a, promotion=128.0)
        self.assertEqual(str(raised.exception), "promotion must be an int (N_C, elements of K) or 'never', got float")

    def test_threads_out_of_range(self):
        a = operand(4, 128, seed=34)
        with self.assertRaises(ValueError) as raised:
            fp8lab.gemm(a, a, threads=-1)
        self.assertEqual(str(raised.exception), "--threads must be 0 (all cores) to 1024, got -1")


if __name__ == "__main__":
    unittest.main()
