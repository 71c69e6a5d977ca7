"""fp8lab.gemm against `fp8lab gemm --out`, bit for bit: defaults, every accumulation model
kind, promotion, format, scale rule, granularity pair and output type (combinations the CLI
refuses must be refused by Python with the same message); errors=True against --json."""
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cli_support import CliTestCase, operand  # noqa: E402

import fp8lab  # noqa: E402

ACCUMULATIONS = ["hopper", "hopper,zero:min", "fp32", "bits:10,depth:16,round:rne",
                 "bits:13,depth:32,round:rz,zero:min", "bits:24,depth:64,round:rz"]
PROMOTIONS = [32, 128, 256, "never"]
GRANULARITY_PAIRS = [("tile:1x128", "block:128x128"), ("row", "row"), ("tensor", "tensor"),
                     ("tile:1x32", "tile:1x64"), ("block:64x64", "row"), ("tile:1x16", "block:16x16"),
                     ("row", "block:512x512")]


class GemmMatchesCli(CliTestCase):
    def setUp(self):
        super().setUp()
        # K = 320: no multiple of 128, so the last tile along K is padded; M, N not multiples of 16.
        self.a = operand(36, 320, seed=11, outlier_columns=(4, 200))
        self.b = operand(28, 320, seed=12)
        self.a_path, self.b_path = self.save("a.npy", self.a), self.save("b.npy", self.b)

    def check(self, cli_options, **kwargs):
        """Same bits as the CLI when it computes; the same refusal when it refuses."""
        out = self.path("c.npy")
        code, _, err = self.cli("gemm", "--a", self.a_path, "--b", self.b_path, "--out", out, *cli_options)
        if code == 0:
            self.assertSameArray(fp8lab.gemm(self.a, self.b, **kwargs), np.load(out))
            return True
        self.assertEqual(code, 2, err)
        with self.assertRaises(ValueError) as refused:
            fp8lab.gemm(self.a, self.b, **kwargs)
        self.assertEqual("fp8lab: " + str(refused.exception), err.strip())
        return False

    def test_defaults_are_the_clis(self):
        self.assertTrue(self.check([]))

    def test_accumulation_promotion_and_format(self):
        computed = refused = 0
        for accum in ACCUMULATIONS:
            for promotion in PROMOTIONS:
                for fmt in ["e4m3", "e5m2"]:
                    with self.subTest(accum=accum, promotion=promotion, format=fmt):
                        ok = self.check(["--accum", accum, "--promotion", str(promotion), "--format", fmt],
                                        accum=accum, promotion=promotion, format=fmt)
                        computed, refused = computed + ok, refused + (not ok)
        # Both paths must have been exercised: 'never' with 1x128 tiles and N_C 32 with depth 64 are refused.
        self.assertGreater(computed, 0)
        self.assertGreater(refused, 0)

    def test_schemes_and_blackwell_block_scaled_mma(self):
        # scheme= and --scheme give the same bits (b200 for the MX/NVFP4 schemes) or the same
        # refusal (FP32-scaled operands under b200, a promotion interval under b200).
        for scheme in ["deepseek", "mxfp8", "mxfp4", "nvfp4"]:
            with self.subTest(scheme=scheme):
                self.assertTrue(self.check(["--scheme", scheme], scheme=scheme))
        self.assertTrue(self.check(["--scheme", "mxfp8", "--accum", "hopper", "--promotion", "32"],
                                   scheme="mxfp8", accum="hopper", promotion=32))
        self.assertFalse(self.check(["--accum", "b200"], accum="b200"))
        self.assertFalse(self.check(["--scheme", "nvfp4", "--promotion", "64"], scheme="nvfp4", promotion=64))
        with self.assertRaisesRegex(ValueError, "scheme= sets format"):
            fp8lab.gemm(self.a, self.b, scheme="mxfp8", format="e4m3")

    def test_rht_is_the_clis(self):
        # rht=True and --rht: the same bits (K = 320 is a multiple of 16), under the Hopper model
        # and NVFP4's b200; it changes what is quantized, so the bits differ from the plain run.
        self.assertTrue(self.check(["--rht"], rht=True))
        self.assertTrue(self.check(["--rht", "--scheme", "nvfp4"], rht=True, scheme="nvfp4"))
        self.assertFalse(np.array_equal(fp8lab.gemm(self.a, self.b, scheme="nvfp4", rht=True),
                                        fp8lab.gemm(self.a, self.b, scheme="nvfp4")))
        # K = 312 is not: refused alike, naming the option.
        self.a, self.b = self.a[:, :312].copy(), self.b[:, :312].copy()
        self.a_path, self.b_path = self.save("a312.npy", self.a), self.save("b312.npy", self.b)
        self.assertFalse(self.check(["--rht"], rht=True))
        with self.assertRaisesRegex(ValueError, "--rht: K = 312 is not a multiple of 16"):
            fp8lab.gemm(self.a, self.b, rht=True)

    def test_mixed_operand_formats(self):
        # B in another format than A (--b-format / b_format): the same bits as the CLI, every
        # pairing; b_format=None (the default) is A's format.
        for fmt, b_fmt in [("e4m3", "e5m2"), ("e5m2", "e4m3"), ("e5m2", "e5m2")]:
            for accum in ["hopper", "hopper,zero:min", "fp32"]:
                with self.subTest(format=fmt, b_format=b_fmt, accum=accum):
                    self.assertTrue(self.check(["--format", fmt, "--b-format", b_fmt, "--accum", accum],
                                               format=fmt, b_format=b_fmt, accum=accum))
        np.testing.assert_array_equal(fp8lab.gemm(self.a, self.b, format="e5m2"),
                                      fp8lab.gemm(self.a, self.b, format="e5m2", b_format="e5m2"))
        # B's format is really used: quantizing B to E5M2 instead of E4M3 changes the result
        # (E5M2 keeps 2 mantissa bits, E4M3 3, so the random B's codes round differently).
        self.assertFalse(np.array_equal(fp8lab.gemm(self.a, self.b), fp8lab.gemm(self.a, self.b, b_format="e5m2")))
        report = json.loads(self.cli_ok("gemm", "--a", self.a_path, "--b", self.b_path, "--format", "e5m2",
                                        "--b-format", "e4m3", "--json"))
        self.assertEqual((report["format"], report["b_format"]), ("e5m2", "e4m3"))
        self.assertFalse(self.check(["--b-format", "e3m4"], b_format="e3m4"))  # refused alike, naming B

    def test_granularities_outputs_and_scale_rules(self):
        for ga, gb in GRANULARITY_PAIRS:
            for promotion in [128, "never"]:
                for output in ["fp32", "bf16"]:
                    for scale in ["fp32", "pow2"]:
                        with self.subTest(a=ga, b=gb, promotion=promotion, output=output, scale=scale):
                            self.check(["--a-granularity", ga, "--b-granularity", gb, "--promotion", str(promotion),
                                        "--output", output, "--scale", scale],
                                       a_granularity=ga, b_granularity=gb, promotion=promotion, output=output,
                                       scale=scale)

    def test_bf16_output_is_representable_in_bf16(self):
        c = fp8lab.gemm(self.a, self.b, output="bf16")
        self.assertTrue(np.all((c.view(np.uint32) & 0xFFFF) == 0))

    def test_errors_equal_the_cli_json_report(self):
        report = json.loads(self.cli_ok("gemm", "--a", self.a_path, "--b", self.b_path, "--json"))
        c, errors = fp8lab.gemm(self.a, self.b, errors=True)
        self.assertEqual(c.shape, (36, 28))
        for name, cli_name in [("quantization", "quantization"), ("accumulation", "accumulation_error"),
                               ("total", "total")]:
            for metric, value in errors[name].items():
                with self.subTest(error=name, metric=metric):
                    # nlohmann::json prints doubles with 17 significant digits: they read back exactly.
                    self.assertEqual(value, report[cli_name][metric])


class GemmInputs(unittest.TestCase):
    def test_views_give_the_copys_result(self):
        big = operand(48, 512, seed=13, outlier_columns=(9,))
        a_view, b_view = big[:20, 128:384], big[20:, ::2][:, :256]  # the second is strided
        self.assertNotEqual(fp8lab._operand_address(a_view), a_view.ctypes.data)  # rows strided by 512: copied
        expected = fp8lab.gemm(np.ascontiguousarray(a_view), np.ascontiguousarray(b_view))
        np.testing.assert_array_equal(fp8lab.gemm(a_view, b_view), expected)
        np.testing.assert_array_equal(fp8lab.gemm(a_view.astype(np.float64), b_view), expected)  # exact widening

    def test_threads_do_not_change_the_bits(self):
        a, b = operand(33, 256, seed=14), operand(17, 256, seed=15)
        np.testing.assert_array_equal(fp8lab.gemm(a, b, threads=1), fp8lab.gemm(a, b))

    def test_result_owns_its_memory(self):
        a, b = operand(8, 128, seed=16), operand(8, 128, seed=17)
        c = fp8lab.gemm(a, b)
        self.assertEqual(c.dtype, np.float32)
        self.assertTrue(c.flags.c_contiguous)
        self.assertFalse(np.shares_memory(c, a) or np.shares_memory(c, b))


if __name__ == "__main__":
    unittest.main()
