"""torch.compile(fullgraph=True) of a converted model: one graph (a graph break is an error under
fullgraph), fp8lab's custom ops inside it, and the same bits as eager for the output and every
gradient, forward and backward, under recipes that keep X in FP8 (deepseek_v3), re-quantize
nothing (mxfp8), or keep plain operands (bf16)."""
import unittest
import warnings

import torch

import fp8lab.torch as ft
from torch_support import TorchTestCase


class Block(torch.nn.Module):
    """A residual MLP block: only ops whose eager and compiled arithmetic agree (add, ReLU, sum),
    so any difference would be fp8lab's."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(128, 256)
        self.down = torch.nn.Linear(256, 128, bias=False)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


class CompileTest(TorchTestCase):
    def run_model(self, model, x):
        xr = x.clone().requires_grad_(True)
        model.zero_grad(set_to_none=True)
        y = model(xr)
        y.square().sum().backward()
        return [y.detach(), xr.grad] + [p.grad for p in model.parameters()]

    def test_compiled_equals_eager(self):
        torch._dynamo.reset()
        for recipe in ("deepseek_v3", "mxfp8", "bf16"):
            with self.subTest(recipe=recipe):
                torch.manual_seed(0)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = ft.convert(torch.nn.Sequential(Block(), Block()), recipe)
                x = torch.randn(2, 64, 128)
                eager = self.run_model(model, x)
                compiled = torch.compile(model, fullgraph=True)
                got = self.run_model(compiled, x)
                for i, (a, b) in enumerate(zip(got, eager)):
                    self.assertSameBits(a, b, f"tensor {i}")
                # The compiled graph holds fp8lab's ops (not a fallback to eager Python).
                graph_ops = torch._dynamo.explain(model)(x)
                self.assertEqual(graph_ops.graph_break_count, 0)

    def test_functional_form_compiles(self):
        torch._dynamo.reset()
        w = torch.randn(64, 128)

        def f(x):
            return ft.linear(x, w, recipe="mxfp8", layer="f") + 1

        x = torch.randn(8, 128)
        eager = f(x)
        compiled = torch.compile(f, fullgraph=True)(x)
        self.assertSameBits(compiled, eager, "y")


if __name__ == "__main__":
    unittest.main()
