"""fp8lab.error_metrics against an independent NumPy float64 computation of each definition
(DESIGN.md section 2), and against the CLI's quantize report."""
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cli_support import CliTestCase, operand  # noqa: E402

import fp8lab  # noqa: E402


def reference_metrics(y, r, rel_floor):
    """The definitions, in float64 NumPy (pairwise sums, another order than fp8lab's)."""
    y, r = np.asarray(y, np.float64).ravel(), np.asarray(r, np.float64).ravel()
    e = y - r  # exact: y and r are float32 values or we compare float64 against itself
    norm_e, norm_r, norm_y = np.linalg.norm(e), np.linalg.norm(r), np.linalg.norm(y)
    above = np.abs(r) > rel_floor
    return {
        "count": y.size,
        "rel_frobenius": norm_e / norm_r,
        "sqnr_db": 20 * np.log10(norm_r / norm_e),
        "deepgemm_diff": np.sum(e * e) / np.sum(y * y + r * r),
        # 0.5 |y/|y| - r/|r||^2: the cancellation-free form of 1 - cos (1 - dot / norms loses
        # all digits when cos is within 1e-16 of 1)
        "one_minus_cosine": 0.5 * np.sum((y / norm_y - r / norm_r) ** 2),
        "max_abs": np.max(np.abs(e)),
        "max_rel": np.max(np.abs(e[above]) / np.abs(r[above])),
        "rel_floor": rel_floor,
        "rel_count": int(np.count_nonzero(above)),
    }


class MetricsMatchNumpy(unittest.TestCase):
    # Each sum over n = 4096 terms carries a relative error of at most n * 2^-53 ~ 4.5e-13 in
    # either implementation (worst-case recursive summation bound; NumPy's pairwise sums are
    # tighter), a ratio of two such sums and a sqrt or log10 add a few units of 2^-53: 1e-11
    # leaves a margin of about 10x. max_abs and the counts are exact in both.
    RTOL = 1e-11

    def setUp(self):
        self.r = operand(64, 64, seed=21, outlier_columns=(3,))
        noise = np.random.default_rng(22).standard_normal(self.r.shape).astype(np.float32)
        self.y = (self.r + 0.01 * noise).astype(np.float32)

    def assertMetricsClose(self, got, expected):
        self.assertEqual(set(got), set(expected))
        for name, value in expected.items():
            with self.subTest(metric=name):
                if name in ("count", "rel_count", "max_abs", "rel_floor"):
                    self.assertEqual(got[name], value)
                else:
                    self.assertLess(abs(got[name] - value), self.RTOL * abs(value))

    def test_float32_pair_with_default_floor(self):
        floor = 0.01 * np.sqrt(np.mean(self.r.astype(np.float64) ** 2))
        got = fp8lab.error_metrics(self.y, self.r)
        # the default floor is 1% of r's RMS, computed in another order: equal to a few ulps
        self.assertLess(abs(got["rel_floor"] - floor), 1e-14 * floor)
        self.assertMetricsClose(got, reference_metrics(self.y, self.r, got["rel_floor"]))

    def test_every_dtype_combination_with_explicit_floor(self):
        for y_type in (np.float32, np.float64):
            for r_type in (np.float32, np.float64):
                with self.subTest(y=y_type.__name__, r=r_type.__name__):
                    y, r = self.y.astype(y_type), self.r.astype(r_type)
                    got = fp8lab.error_metrics(y, r, rel_floor=0.5)
                    self.assertMetricsClose(got, reference_metrics(y, r, 0.5))

    def test_any_shape_compared_in_c_order(self):
        got = fp8lab.error_metrics(self.y.reshape(8, 8, 64), self.r.reshape(8, 8, 64), rel_floor=0.1)
        self.assertMetricsClose(got, reference_metrics(self.y, self.r, 0.1))

    def test_shape_mismatch_is_refused(self):
        with self.assertRaises(ValueError) as refused:
            fp8lab.error_metrics(self.y, self.r.T[:, :32])
        self.assertIn("y has shape (64x64) and r (64x32)", str(refused.exception))


class MetricsMatchCli(CliTestCase):
    def test_quantize_round_trip_metrics_equal_the_cli_report(self):
        x = operand(32, 256, seed=23, outlier_columns=(1,))
        report = json.loads(self.cli_ok("quantize", self.save("x.npy", x), "--granularity", "tile:1x128", "--json"))
        got = fp8lab.error_metrics(fp8lab.quantize(x, "tile:1x128").dequantize(), x)
        self.assertEqual(got, report["results"][0]["metrics"])  # JSON doubles read back exactly


if __name__ == "__main__":
    unittest.main()
