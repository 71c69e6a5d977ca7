"""What the Python API tests share: the CLI binary they compare fp8lab with, a scratch
directory for the .npy files both read, and test operands."""
import os
import subprocess
import tempfile
import unittest

import numpy as np

CLI = os.environ.get("FP8LAB_CLI", "")


class CliTestCase(unittest.TestCase):
    """A test case with a scratch directory and the fp8lab CLI."""

    def setUp(self):
        if not CLI or not os.access(CLI, os.X_OK):
            self.fail("FP8LAB_CLI must name the fp8lab binary (ctest sets it)")
        self._scratch = tempfile.TemporaryDirectory(prefix="fp8lab_python_test_")
        self.dir = self._scratch.name

    def tearDown(self):
        self._scratch.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def save(self, name, array):
        path = self.path(name)
        np.save(path, array)
        return path

    def cli(self, *args):
        """Runs the CLI; returns (exit code, stdout, stderr)."""
        done = subprocess.run([CLI, *args], capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr

    def cli_ok(self, *args):
        code, out, err = self.cli(*args)
        self.assertEqual(code, 0, f"fp8lab {' '.join(args)} failed: {err}")
        return out

    def cli_error(self, *args):
        """The CLI's one-line message for a refused command, without the 'fp8lab: ' prefix."""
        code, _, err = self.cli(*args)
        self.assertEqual(code, 2, f"fp8lab {' '.join(args)}: expected exit 2, got {code}: {err}")
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("fp8lab: "), err)
        return lines[0][len("fp8lab: "):]

    def assertSameArray(self, actual, expected):
        """Same dtype, shape and bytes (bit equality, NaN payloads and signed zeros included)."""
        self.assertEqual(actual.dtype, expected.dtype)
        self.assertEqual(actual.shape, expected.shape)
        self.assertEqual(np.ascontiguousarray(actual).tobytes(), np.ascontiguousarray(expected).tobytes())


def operand(rows, cols, seed, outlier_columns=()):
    """Gaussian float32 values with a few outlier columns (x100) and some exact zeros, so that
    scales differ between tiles and zero codes occur."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    for c in outlier_columns:
        x[:, c] *= 100
    x[rng.random((rows, cols)) < 0.05] = 0
    return x
