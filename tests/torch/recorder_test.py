"""fp8lab.torch.Recorder: its figures for a recorded step equal what fp8lab.quantize /
fp8lab.error_metrics give on the same operands (handed to a test hook), a run with the recorder on
has the bits of one without, and its file is a grid xarray and `fp8lab report` read."""
import contextlib
import math
import os
import subprocess
import tempfile
import unittest
import warnings

import h5py
import numpy as np
import torch

import fp8lab
import fp8lab.torch as ft
from torch_support import BUILD, TorchTestCase, same_bits


def model_and_data(recipe, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(256, 384), torch.nn.ReLU(), torch.nn.Linear(384, 128))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ft.convert(model, recipe)
    x = torch.randn(6, 128, 256, generator=torch.Generator().manual_seed(seed + 1))
    return model, x


def train(recipe, recorder=None, steps=3):
    """Trains a fresh model; the recorder, when given, is attached to it."""
    model, x = model_and_data(recipe)
    if recorder is not None:
        recorder.attach(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(steps):
        context = recorder.step(step) if recorder else contextlib.nullcontext()
        with context:
            optimizer.zero_grad()
            loss = model(x[step % len(x)]).square().mean()
            loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses), [p.detach().clone() for p in model.parameters()]


def expected_operand(values, quantized):
    """An operand's figures from fp8lab.quantize's result and fp8lab.error_metrics, computed here."""
    restored = quantized.dequantize()
    m = fp8lab.error_metrics(restored, values)
    nonzero = values != 0
    return {"sqnr_db": m["sqnr_db"], "rel_frobenius": m["rel_frobenius"],
            "flushed_fraction": float((nonzero & (restored == 0)).sum()) / values.size,
            "amax": float(np.abs(values).max()),
            "scale_min": float(quantized.scales.min() * quantized.tensor_scale),
            "scale_max": float(quantized.scales.max() * quantized.tensor_scale)}


class RecorderTest(TorchTestCase):
    def test_figures_equal_quantize_and_error_metrics(self):
        seen = {}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "rec.h5")
            recorder = ft.Recorder(path, every=2, hook=lambda s, l, g, t: seen.setdefault((s, l, g), t))
            train("deepseek_v3", recorder)
            recorder.close()
            with h5py.File(path, "r") as f:
                steps = list(f["step"][()])
                layers = [v.decode() for v in f["layer"][()]]
                gemms = [v.decode() for v in f["gemm"][()]]
                tensors = [v.decode() for v in f["tensor"][()]]
                cols = {c: f[c][()] for c, _, _ in ft.recorder.COLUMNS}
        self.assertEqual(steps, [0, 2])
        self.assertEqual(gemms, ["fprop", "dgrad", "wgrad"])
        self.assertEqual(tensors, ["A", "B", "C"])
        checked = 0
        for (step, layer, gemm), t in seen.items():
            s, l, g = steps.index(step), layers.index(layer), gemms.index(gemm)
            plan = [ft._ops.layer_plan(i) for i in recorder.layers if recorder.layers[i] == layer][0]
            o = plan.options(gemm)
            a, b = t["A"].detach().contiguous().numpy(), t["B"].detach().contiguous().numpy()
            if gemm == "wgrad":  # DeepSeek-V3 re-quantizes dY and X from their Dgrad / Fprop quantizations
                fa, fb = plan.options("dgrad"), plan.options("fprop")
                first_a = fp8lab.quantize(np.ascontiguousarray(a.T), fa["a_granularity"], format=fa["format"], scale=fa["scale"])
                first_b = fp8lab.quantize(np.ascontiguousarray(b.T), fb["a_granularity"], format=fb["format"], scale=fb["scale"])
                qa = fp8lab.quantize(np.ascontiguousarray(first_a.dequantize().T), o["a_granularity"], format=o["format"], scale=o["scale"])
                qb = fp8lab.quantize(np.ascontiguousarray(first_b.dequantize().T), o["b_granularity"], format=o["b_format"], scale=o["scale"])
            else:
                qa = fp8lab.quantize(a, o["a_granularity"], format=o["format"], scale=o["scale"])
                qb = fp8lab.quantize(np.ascontiguousarray(b), o["b_granularity"], format=o["b_format"], scale=o["scale"])
            for tensor, values, q in (("A", a, qa), ("B", np.ascontiguousarray(b), qb)):
                want = expected_operand(values, q)
                got = {c: float(cols[c][s, l, g, tensors.index(tensor)]) for c in want}
                for c in want:
                    self.assertTrue(math.isclose(got[c], want[c], rel_tol=1e-9, abs_tol=1e-12),
                                    f"step {step} {layer} {gemm} {tensor} {c}: recorded {got[c]}, expected {want[c]}")
                self.assertEqual(float(cols["saturated_fraction"][s, l, g, tensors.index(tensor)]), 0.0)  # current scaling
            # The recorder subtracts in FP32 (y - r: exact where y and r are within a factor 2, else off
            # by at most u |y - r|), so its ||y - r|| is within a relative 2^-24 of error_metrics': its
            # SQNR within 20 log10(1 + 2^-24) = 5.2e-7 dB, a relative 1e-7 of any SQNR above 5 dB.
            c_metrics = fp8lab.error_metrics(t["C"].detach().numpy(), t["C_fp32"].detach().numpy())
            self.assertTrue(math.isclose(float(cols["sqnr_db"][s, l, g, 2]), c_metrics["sqnr_db"], rel_tol=1e-7),
                            (float(cols["sqnr_db"][s, l, g, 2]), c_metrics["sqnr_db"]))
            checked += 1
        # Two recorded steps x (the first layer's Fprop and Wgrad: no Dgrad, its input needs no gradient;
        # the second layer's three GEMMs).
        self.assertEqual(checked, 2 * (2 + 3))

    def test_recorded_run_has_the_bits_of_an_unrecorded_one(self):
        for recipe in ("deepseek_v3", "mxfp8", "fp8_delayed"):
            with self.subTest(recipe=recipe), tempfile.TemporaryDirectory() as tmp:
                plain_losses, plain_weights = train(recipe)
                recorder = ft.Recorder(os.path.join(tmp, "r.h5"), every=1)
                got_losses, got_weights = train(recipe, recorder)
                self.assertEqual(sorted(recorder.records), [0, 1, 2])
                self.assertTrue(same_bits(got_losses, plain_losses))
                for a, b in zip(got_weights, plain_weights):
                    self.assertTrue(same_bits(a, b))

    def test_file_reads_with_xarray_and_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "rec.h5")
            model, x = model_and_data("deepseek_v3")
            with ft.Recorder(path, every=1).attach(model) as recorder:
                with recorder.step(0):
                    model(x[0]).sum().backward()
            code = ("import sys, xarray as xr; ds = xr.open_dataset(sys.argv[1], engine='h5netcdf'); "
                    "v = ds.sqnr_db.sel(gemm='fprop', tensor='A'); assert v.dims == ('step', 'layer'), v.dims; "
                    "print(float(v.isel(step=0, layer=0)))")
            done = subprocess.run(["/usr/bin/python3", "-c", code, path], capture_output=True, text=True,
                                  env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertGreater(float(done.stdout), 20.0)  # E4M3 with 1x128 scales: ~30 dB
            report = subprocess.run([str(BUILD / "harness" / "fp8lab"), "report", path, "--by", "gemm,tensor"],
                                    capture_output=True, text=True)
            self.assertEqual(report.returncode, 0, report.stderr)
            self.assertIn("sqnr_db", report.stdout)

    def test_bad_input(self):
        with self.assertRaisesRegex(ValueError, "every must be a whole number >= 1"):
            ft.Recorder("x.h5", every=0)
        with self.assertRaisesRegex(ValueError, "no directory"):
            ft.Recorder("/nonexistent/dir/x.h5")
        with self.assertRaisesRegex(ValueError, "no fp8lab.torch.Linear layers"):
            ft.Recorder(os.path.join(tempfile.gettempdir(), "x.h5")).attach(torch.nn.Linear(4, 4))


if __name__ == "__main__":
    unittest.main()
