"""A converted model trains under torchrun with DDP and with FSDP2 (fully_shard), 2 processes on
the gloo backend on the CPU, and ends with the very bits of the single-process run with the same
global batch: each step's gradient there is the mean of the two halves' gradients, (g0 + g1) / 2,
which is what both all-reduce (DDP) and reduce-scatter (FSDP2) compute for two ranks: a sum of two
terms has one order, and the division by the world size 2 is exact. So every loss and every final
parameter must be equal bit for bit (distributed_worker.py says how each rank trains)."""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch

import fp8lab.torch as ft
import distributed_worker as worker
from torch_support import TorchTestCase

HERE = pathlib.Path(__file__).resolve().parent


def single_process(recipe):
    torch.set_num_threads(1)
    ft.set_num_threads(1)
    model = worker.build(recipe)
    args = worker.torch_llama_train.arguments(worker.FLAGS)
    data = worker.torch_llama_train.Data(args, 512)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    losses = []
    half = args.batch // 2
    for step in range(args.steps):
        tokens = data.batch(step, 1)
        grads, step_losses = [], []
        for part in range(2):
            optimizer.zero_grad(set_to_none=True)
            chunk = tokens[part * half:(part + 1) * half]
            loss = model.loss(chunk[:, :-1], chunk[:, 1:])
            loss.backward()
            grads.append([p.grad.clone() for p in model.parameters()])
            step_losses.append(loss.detach())
        for p, g0, g1 in zip(model.parameters(), *grads):
            p.grad = (g0 + g1) / 2
        optimizer.step()
        losses.append((step_losses[0] + step_losses[1]) / 2)
    return torch.stack(losses), model.state_dict()


class DistributedTest(TorchTestCase):
    def test_ddp_and_fsdp2_equal_the_single_process_run(self):
        torchrun = shutil.which("torchrun")
        self.assertIsNotNone(torchrun, "torchrun is not on PATH (the venv's bin)")
        for recipe in ("deepseek_v3", "fp32"):
            want_losses, want_state = single_process(recipe)
            for mode in ("ddp", "fsdp2"):
                with self.subTest(recipe=recipe, mode=mode), tempfile.TemporaryDirectory() as tmp:
                    out = os.path.join(tmp, "run.pt")
                    env = dict(os.environ, OMP_NUM_THREADS="1")
                    done = subprocess.run([torchrun, "--standalone", "--nproc_per_node=2", str(HERE / "distributed_worker.py"),
                                           "--mode", mode, "--recipe", recipe, "--out", out],
                                          capture_output=True, text=True, env=env, timeout=600)
                    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
                    got = torch.load(out)
                    self.assertSameBits(got["losses"], want_losses, "losses")
                    self.assertEqual(sorted(got["state"]), sorted(want_state))
                    for name, value in want_state.items():
                        self.assertSameBits(got["state"][name], value, name)


if __name__ == "__main__":
    unittest.main()
