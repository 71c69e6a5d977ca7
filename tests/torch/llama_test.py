"""The plain-PyTorch Llama (experiments/torch_llama.py) under fp8lab.torch against fp8lab's own
engine and against torch itself:

  fp64    the converted model in float64 (fp8lab's FP64 GEMMs) against the same model in plain
          torch float64 autograd: loss and every gradient equal to 1e-12 (relative to the tensor's
          largest element): both are FP64 evaluations, whose orders differ by a few ulps of 2^-53.
  fp32    20 training steps of the PyTorch script (experiments/torch_llama_train.py) against
          `fp8lab train` with the same flags (same init, corpus, batches, learning rates): the loss
          per step within a bound derived below from the engine's own FP64 run.
  deepseek_v3  over seeds 1-3 (shuffled orders), the PyTorch curve's seed mean lies inside the
          engine's seed band [min, max] at every evaluated step.
"""
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np
import torch

import fp8lab.torch as ft
from torch_support import BUILD, TorchTestCase

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))
import torch_llama  # noqa: E402
import torch_llama_train  # noqa: E402

CLI = BUILD / "harness" / "fp8lab"
U32 = 2.0 ** -24


def engine_run(tmp, flags, name):
    out = pathlib.Path(tmp) / f"{name}.h5"
    subprocess.run([str(CLI), "train", *flags, "--attention", "naive", "--quiet", "-o", str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    with h5py.File(out, "r") as f:
        return {k: np.asarray(f[k]).reshape(-1, np.asarray(f[k]).shape[-1]) for k in ("train_loss", "val_loss")}


def torch_runs(flags, recipes, seeds):
    a = torch_llama_train.arguments(flags + ["-o", "unused.h5"])
    model, _ = torch_llama_train.make_model(a, "fp32", seeds[0])
    data = torch_llama_train.Data(a, model.config["vocab_size"])
    return {(r, s): torch_llama_train.train_run(a, data, r, s) for r in recipes for s in seeds}


class LlamaTest(TorchTestCase):
    def test_fp64_equals_torch_float64_autograd(self):
        plain, _ = torch_llama.Llama.from_fp8lab("checkpoint", "stories260K")
        plain = plain.double()
        converted, _ = torch_llama.Llama.from_fp8lab("checkpoint", "stories260K")
        converted = converted.double()
        ft.convert(converted, "fp64")
        tokens = torch.randint(0, 512, (2, 65), generator=torch.Generator().manual_seed(3))
        losses = []
        for model in (plain, converted):
            loss = model.loss(tokens[:, :-1], tokens[:, 1:])
            loss.backward()
            losses.append(loss.detach())
        self.assertLessEqual(abs(float(losses[0] - losses[1])), 1e-12 * abs(float(losses[0])))
        for (name, p), q in zip(plain.named_parameters(), converted.parameters()):
            scale = float(p.grad.abs().max())
            self.assertLessEqual(float((p.grad - q.grad).abs().max()), 1e-12 * scale, name)

    def test_fp32_follows_the_engine(self):
        flags = ["--init", "stories260K", "--tokens", "sampled", "--batch", "4", "--seq-len", "64", "--steps", "20",
                 "--lr", "1e-3"]
        with tempfile.TemporaryDirectory() as tmp:
            engine32 = engine_run(tmp, flags + ["--recipe", "fp32"], "fp32")["train_loss"][0]
            engine64 = engine_run(tmp, flags + ["--recipe", "fp64"], "fp64")["train_loss"][0]
        ours = np.array(torch_runs(flags, ["fp32"], [1])[("fp32", 1)]["train_loss"])
        # The bound. Both runs evaluate the same function in FP32 with sums of the same lengths in
        # other orders (the engine in order of K, torch blocked or pairwise), so each deviates from
        # the exact trajectory (the engine's FP64 run) by rounding of the same origin; the engine's
        # in-order sums have the largest worst-case error of the two (gamma_K against
        # gamma_{log K}), so its deviation D_s = |L32_s - L64_s| stands for torch's too. By the
        # triangle inequality |L_torch - L_engine| <= 2 max_{s' <= s} D_s' (the max: a deviation
        # made earlier travels on in the weights), plus 32 u L_s for the loss's own final
        # reduction over 256 targets in another order (|error| <= log2(256) u per level, 8 levels,
        # both sides, doubled for the softmax's exp and log).
        deviation = np.maximum.accumulate(np.abs(engine32 - engine64))
        bound = 2 * deviation + 32 * U32 * np.abs(engine32)
        diff = np.abs(ours - engine32)
        self.assertTrue(np.all(diff <= bound), f"|torch - engine| {diff} above the bound {bound}")
        self.assertGreater(float(diff.max()), 0.0)  # two implementations: not the same bits by accident

    def test_deepseek_v3_within_the_engine_seed_spread(self):
        flags = ["--init", "stories260K", "--tokens", "sampled", "--order", "shuffled", "--batch", "4", "--seq-len", "64",
                 "--steps", "40", "--lr", "1e-3", "--val-every", "10"]
        seeds = [1, 2, 3]
        with tempfile.TemporaryDirectory() as tmp:
            engine = np.stack([engine_run(tmp, flags + ["--recipe", "deepseek_v3", "--seed", str(s)], f"s{s}")["val_loss"][0]
                               for s in seeds])
        runs = torch_runs(flags, ["deepseek_v3"], seeds)
        ours = np.stack([np.array(runs[("deepseek_v3", s)]["val_loss"]) for s in seeds])
        evaluated = np.isfinite(engine[0])
        low, high = engine[:, evaluated].min(axis=0), engine[:, evaluated].max(axis=0)
        mean = ours[:, evaluated].mean(axis=0)
        self.assertTrue(np.all((low <= mean) & (mean <= high)),
                        f"torch seed mean {mean} outside the engine's band {low} .. {high}")


if __name__ == "__main__":
    unittest.main()
