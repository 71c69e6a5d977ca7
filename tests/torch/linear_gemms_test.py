"""Each of the three GEMMs of a converted linear layer, for every shipped recipe, float32 and
bfloat16 inputs and odd shapes, against an independent way to the same bits:

  fp8 GEMMs     fp8lab.gemm (the NumPy API) on the operands the recipe produces: Fprop X, W;
                Dgrad dY, W^T; Wgrad dY^T, X^T, or, where Wgrad re-quantizes (DeepSeek-V3), the
                transposes of dY and X dequantized from their Dgrad / Fprop quantizations
                (fp8lab.quantize); stochastic rounding with the seed the recipe draws
                (fp8lab.operand_rounding_seed); delayed scaling on operands whose first-step scale
                of 1 a per-tensor fp32 scale reproduces (each holds an element at the format's max).
  plain GEMMs   an ordered sum written here (torch_support.ordered_gemm_nt) of the operands rounded
                as the kind says: fp32 and fp64 exactly, bf16 / fp16 rounded first.

Output: Y, dX, dW in the input's dtype, Y + bias rounded once to it, as nn.Linear gives it.
"""
import unittest

import numpy as np
import torch

import fp8lab
import fp8lab.torch as ft
from torch_support import RECIPES, TorchTestCase, ordered_gemm_nt, rounded

SHAPES = [(64, 256, 96), (1, 200, 3), (33, 130, 17), (48, 272, 40)]  # (tokens M, in K, out N)
DTYPES = [torch.float32, torch.bfloat16]
FORMAT_MAX = {"e4m3": 448.0, "e5m2": 57344.0}


def operands(m, k, n, dtype, seed, saturate=None):
    """X (m x k), W (n x k), dY (m x n), bias: seeded, outliers in a few channels, as the input
    dtype holds them. saturate: formats of (X, W, dY) whose maximum one element of each equals, so
    that a per-tensor fp32 scale is 1 (delayed scaling's first step)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g) * (1 + 20 * (torch.rand(k, generator=g) < 0.05))
    w = torch.randn(n, k, generator=g) / k ** 0.5
    dy = torch.randn(m, n, generator=g) * 1e-3
    bias = torch.randn(n, generator=g)
    if saturate:
        for t, fmt in zip((x, w, dy), saturate):
            t.view(-1)[0] = FORMAT_MAX[fmt]
    return [t.to(dtype) for t in (x, w, dy, bias)]


def fp8_reference(options, a, b, a_source=None, b_source=None):
    """fp8lab.gemm of A (M x K) and B (N x K) as the GEMM's options say. With a_source / b_source
    (re-quantizing Wgrad) A and B are those quantizations dequantized and transposed."""
    kw = {key: options[key] for key in ("format", "b_format", "a_granularity", "b_granularity", "scale", "accum",
                                        "promotion", "rht", "a_rounding", "b_rounding")}
    if kw["b_format"] == kw["format"]:
        kw["b_format"] = None
    if options["delayed_scaling"]:
        kw["scale"] = "fp32"  # the first step's scale is 1; so is fp32's on these operands (amax = max)
    if a_source is not None:
        a, b = a_source.dequantize().T.copy(), b_source.dequantize().T.copy()
    a, b = np.ascontiguousarray(a, dtype=np.float32), np.ascontiguousarray(b, dtype=np.float32)
    for which, operand in (("a", a), ("b", b)):
        if kw[f"{which}_rounding"] == "stochastic":  # seeded by the bits it quantizes (after the RHT)
            seen = fp8lab.hadamard_transform(operand) if kw["rht"] else operand
            kw[f"{which}_seed"] = fp8lab.operand_rounding_seed(seen, which)
    return torch.from_numpy(fp8lab.gemm(a, b, **kw))


def plain_reference(kind, a, b):
    dtype = np.float64 if kind == "fp64" else np.float32
    return torch.from_numpy(ordered_gemm_nt(rounded(a, kind), rounded(b, kind), dtype))


class LinearGemmsTest(TorchTestCase):
    def run_layer(self, recipe, layer_name, m, k, n, dtype, seed=1):
        layer = torch.nn.Linear(k, n, dtype=dtype)
        model = ft.convert(torch.nn.ModuleDict({"layer": layer}), recipe, layer_names={"layer": layer_name})
        plan = ft._ops.layer_plan(layer._fp8lab_layer)
        options = {g: plan.options(g) for g in ("fprop", "dgrad", "wgrad")}
        delayed = options["fprop"]["kind"] == "fp8" and options["fprop"]["delayed_scaling"]
        saturate = (options["fprop"]["format"], options["fprop"]["b_format"], options["dgrad"]["format"]) if delayed else None
        x, w, dy, bias = operands(m, k, n, dtype, seed, saturate)
        with torch.no_grad():
            layer.weight.copy_(w)
            layer.bias.copy_(bias)
        xr = x.clone().requires_grad_(True)
        y = model["layer"](xr)
        y.backward(dy)
        return options, (x, w, dy, bias), (y.detach(), xr.grad, layer.weight.grad)

    def check(self, recipe, layer_name, m, k, n, dtype):
        options, (x, w, dy, bias), (y, dx, dw) = self.run_layer(recipe, layer_name, m, k, n, dtype)
        x32, w32, dy32 = x.float().numpy(), w.float().numpy(), dy.float().numpy()
        gemm_operands = {"fprop": (x32, w32), "dgrad": (dy32, w32.T), "wgrad": (dy32.T, x32.T)}
        want = {}
        for gemm, (a, b) in gemm_operands.items():
            o = options[gemm]
            if o["kind"] != "fp8":
                want[gemm] = plain_reference(o["kind"], a, b)
            elif gemm == "wgrad" and o["requantize_transposed"]:
                fa, fb = options["dgrad"], options["fprop"]
                qdy = fp8lab.quantize(dy32, fa["a_granularity"], format=fa["format"], scale=fa["scale"])
                qx = fp8lab.quantize(x32, fb["a_granularity"], format=fb["format"], scale=fb["scale"])
                want[gemm] = fp8_reference(o, None, None, qdy, qx)
            else:
                want[gemm] = fp8_reference(o, a, b)
        compute = torch.float64 if options["fprop"]["kind"] == "fp64" else torch.float32
        self.assertSameBits(y, (want["fprop"].to(compute) + bias.to(compute)).to(dtype), "Y")
        self.assertSameBits(dx, want["dgrad"].to(dtype), "dX")
        self.assertSameBits(dw, want["wgrad"].to(dtype), "dW")

    def test_every_recipe_every_gemm(self):
        for recipe in RECIPES:
            for m, k, n in SHAPES:
                for dtype in DTYPES:
                    if recipe == "fp64":
                        dtype = torch.float64
                    with self.subTest(recipe=recipe, shape=(m, k, n), dtype=str(dtype)):
                        if recipe == "nvfp4" and m % 16:
                            # Its Wgrad's Hadamard transform runs along the tokens: refused, named.
                            with self.assertRaisesRegex(ValueError, "multiple of 16"):
                                self.run_layer(recipe, "L0.w1", m, k, n, dtype)
                            continue
                        self.check(recipe, "L0.w1", m, k, n, dtype)

    def test_overrides_apply_by_layer_name(self):
        # deepseek_v3 keeps its classifier in BF16, nvfp4 its last block's attention too.
        for recipe, layer, kind in (("deepseek_v3", "classifier", "bf16"), ("deepseek_v3", "L4.wq", "fp8"),
                                    ("nvfp4", "L4.wq", "bf16"), ("nvfp4", "L3.wq", "fp8")):
            with self.subTest(recipe=recipe, layer=layer):
                options, _, _ = self.run_layer(recipe, layer, 32, 64, 16, torch.float32)
                self.assertEqual({g: o["kind"] for g, o in options.items()}, {g: kind for g in options})
                self.check(recipe, layer, 32, 64, 16, torch.float32)

    def test_accumulator_choices_from_a_python_recipe(self):
        # Hopper with N_C = 32 and both zero conventions, a 20-bit RNE model, B200 and FP32 accumulation.
        for accum, promotion in (("hopper", "32"), ("hopper,zero:min", "64"), ("bits:20,depth:16,round:rne", "128"),
                                 ("fp32", "128"), ("hopper", "never")):
            granularity = "tensor" if promotion == "never" else "tile:1x128"
            recipe = ft.Recipe({"name": "mine", "gemm": {"kind": "fp8", "accumulation": accum, "promotion": promotion,
                                                          "a_granularity": granularity, "b_granularity": "tensor"}})
            with self.subTest(accum=accum, promotion=promotion):
                options, _, _ = self.run_layer(recipe, "any", 40, 256, 24, torch.float32)
                self.assertEqual(options["fprop"]["promotion"], promotion)
                self.check(recipe, "any", 40, 256, 24, torch.float32)


if __name__ == "__main__":
    unittest.main()
