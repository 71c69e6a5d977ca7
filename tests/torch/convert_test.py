"""fp8lab.torch.convert and the converted layer as a PyTorch user meets them: checkpoints, the
functional form, what backward keeps, threads, bad input, delayed scaling across steps."""
import os
import tempfile
import unittest
import warnings

import torch

import fp8lab
import fp8lab.torch as ft
from torch_support import TorchTestCase, same_bits


def mlp(seed=0, bias=True):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(256, 384, bias=bias), torch.nn.ReLU(), torch.nn.Linear(384, 128, bias=bias))


def converted(recipe="deepseek_v3", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deepseek_v3's classifier override: no classifier here
        return ft.convert(mlp(), recipe, **kw)


class ConvertTest(TorchTestCase):
    def test_state_dict_round_trips(self):
        plain, conv = mlp(), converted()
        self.assertEqual(list(plain.state_dict()), list(conv.state_dict()))
        for key, value in plain.state_dict().items():
            self.assertSameBits(conv.state_dict()[key], value, key)
        # A converted model's checkpoint loads into an unconverted one and back.
        trained = converted()
        with torch.no_grad():
            for p in trained.parameters():
                p.mul_(1.5)
        fresh = mlp(seed=7)
        fresh.load_state_dict(trained.state_dict())
        again = converted()
        again.load_state_dict(fresh.state_dict())
        for key, value in trained.state_dict().items():
            self.assertSameBits(fresh.state_dict()[key], value, key)
            self.assertSameBits(again.state_dict()[key], value, key)
        self.assertIsInstance(again[0], ft.Linear)
        self.assertIsInstance(again[0], torch.nn.Linear)

    def test_in_place_and_filtered(self):
        model = mlp()
        first = model[0]
        out = ft.convert(model, "fp8_tensor", module_filter=lambda mod, fqn: fqn != "2")
        self.assertIs(out, model)
        self.assertIs(model[0], first)  # the same object, its class changed
        self.assertIsInstance(model[0], ft.Linear)
        self.assertIs(type(model[2]), torch.nn.Linear)

    def test_functional_form_equals_the_module(self):
        model = converted("fp8_tensor")
        x = torch.randn(4, 9, 256)
        y_module = model[0](x)
        y_functional = ft.linear(x, model[0].weight, model[0].bias, recipe="fp8_tensor")
        self.assertSameBits(y_module, y_functional, "Y")
        self.assertEqual(y_module.shape, (4, 9, 384))  # leading dimensions kept

    def test_saved_bytes_are_what_the_recipe_keeps(self):
        # deepseek_v3 keeps X as FP8 codes + 1x128 scales; fp8_tensor (Wgrad quantizes X^T from
        # X) keeps X itself. Measured by what autograd actually saves, parameters left out.
        for recipe, fp8 in (("deepseek_v3", True), ("fp8_tensor", False), ("bf16", False)):
            with self.subTest(recipe=recipe):
                model = converted(recipe)
                layer = model[0]
                x = torch.randn(100, 256, requires_grad=True)
                params = {p.data_ptr() for p in model.parameters()}
                seen = {}

                def pack(t):
                    if t.data_ptr() not in params:
                        seen[t.data_ptr()] = t.numel() * t.element_size()
                    return t

                with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                    layer(x)
                predicted = layer.saved_bytes(100)
                self.assertEqual(sum(seen.values()), predicted)
                full = 100 * 256 * 4
                if fp8:  # codes (1 byte) + one FP32 scale per 128 + the per-tensor level (3 floats)
                    self.assertEqual(predicted, 100 * 256 + 100 * 2 * 4 + 12)
                    self.assertLess(predicted, full / 3.5)
                else:
                    self.assertEqual(predicted, full)

    def test_same_bits_on_any_thread_count(self):
        model = converted()
        x = torch.randn(200, 256)
        results = []
        for threads in (1, 2, 3):
            ft.set_num_threads(threads)
            xr = x.clone().requires_grad_(True)
            model.zero_grad()
            model(xr).square().sum().backward()
            results.append((model(x).detach(), xr.grad, model[0].weight.grad.clone()))
        ft.set_num_threads(None)
        for other in results[1:]:
            for got, want in zip(other, results[0]):
                self.assertTrue(same_bits(got, want))

    def test_delayed_scaling_moves_its_scale_after_a_step(self):
        # fp8_delayed: the first pass quantizes with scale 1; the next forward takes the amax
        # history's scale (448 / amax), so the same input gives other bits from then on, and the
        # third pass (the history unchanged at its maximum) the second's. One layer, so that its
        # input is the same in every pass.
        model = ft.convert(torch.nn.Sequential(torch.nn.Linear(256, 64)), "fp8_delayed", layer_names={"0": "L0.w1"})
        x = torch.randn(64, 256) * 0.01
        outputs = []
        for _ in range(3):
            xr = x.clone().requires_grad_(True)
            y = model(xr)
            y.sum().backward()
            outputs.append(y.detach())
        self.assertFalse(same_bits(outputs[0], outputs[1]))
        self.assertTrue(same_bits(outputs[1], outputs[2]))

    def test_delayed_scaling_history_only_from_training_passes(self):
        # Forwards that train nothing (no_grad: validation) read the scales and record nothing, and a
        # checkpointed forward recomputed in backward records into the same pass: the training
        # steps' bits are those of a run without either.
        def run(evaluate_between, checkpointed):
            torch.manual_seed(0)
            layer = torch.nn.Linear(256, 64)
            model = ft.convert(torch.nn.Sequential(layer), "fp8_delayed", layer_names={"0": "L0.w1"})
            grads = []
            for step in range(3):
                x = torch.randn(32, 256, generator=torch.Generator().manual_seed(step)).requires_grad_(True)
                y = torch.utils.checkpoint.checkpoint(model, x, use_reentrant=False) if checkpointed else model(x)
                y.square().sum().backward()
                grads.append(layer.weight.grad.clone())
                layer.weight.grad = None
                if evaluate_between:
                    with torch.no_grad():
                        model(torch.randn(32, 256) * 100)  # larger values: recorded, they would move the scales
            return grads
        plain = run(False, False)
        for label, got in (("no_grad forwards between steps", run(True, False)), ("checkpointed", run(False, True))):
            for step, (a, b) in enumerate(zip(got, plain)):
                self.assertTrue(same_bits(a, b), f"{label}: step {step}")

    def test_copies_and_pickles(self):
        import copy
        import io
        model = converted("fp8_delayed")
        x = torch.randn(16, 256)
        twin = copy.deepcopy(model)
        self.assertNotEqual(twin[0]._fp8lab_layer, model[0]._fp8lab_layer)  # its own layer (and history)
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        loaded = torch.load(buffer, weights_only=False)
        for other in (twin, loaded):
            self.assertIsInstance(other[0], ft.Linear)
            self.assertSameBits(other(x), model(x), "a copy's output")

    def test_direct_op_calls_are_checked(self):
        model = converted()
        layer = model[0]._fp8lab_layer
        w = model[0].weight.detach()
        with self.assertRaisesRegex(ValueError, "fp8lab::fprop: x must be a contiguous 2-D torch.float32"):
            torch.ops.fp8lab.fprop(torch.randn(256, 8).t(), w, None, layer)
        with self.assertRaisesRegex(ValueError, "fp8lab::fprop: x must be a contiguous 2-D torch.float32"):
            torch.ops.fp8lab.fprop(torch.randn(8, 256, dtype=torch.float16), w, None, layer)
        with self.assertRaisesRegex(ValueError, "do not fit Y = X W"):
            torch.ops.fp8lab.fprop(torch.randn(8, 255), w, None, layer)

    def test_recipe_dicts_with_any_strings(self):
        recipe = ft.Recipe({"name": "odd", "description": 'two\nlines and a "quote"', "gemm": {"kind": "bf16"}})
        self.assertEqual(recipe.description, 'two\nlines and a "quote"')
        with self.assertRaisesRegex(ValueError, "unknown key"):
            ft.Recipe({"name": "x", 'kind = "bf16"\n#': "y"})

    def test_bad_input_is_one_clear_exception_and_no_partial_conversion(self):
        cases = [("nosuch", ValueError, r"recipe 'nosuch' is not one of .*mxfp8.*nvfp4"),
                 (42, TypeError, "a name, a .toml path, a dict or a Recipe"),
                 ({"name": "x", "gemm": {"kind": "fp7"}}, ValueError, r"field 'gemm.kind'"),
                 ({"name": "x", "gemm": {"promotion": 3.5}}, TypeError, "float is not a value"),
                 ("seed/dp4", ValueError, r"\[training\] table")]
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "bad.toml")
            with open(bad, "w") as f:
                f.write('name = "bad"\n[gemm]\nkind = "fp8"\nscale = "nosuch_rule"\n')
            cases.append((bad, ValueError, r"bad.toml:4:9: field 'gemm.scale'"))
            for recipe, error, pattern in cases:
                with self.subTest(recipe=recipe):
                    model = mlp()
                    with self.assertRaisesRegex(error, pattern):
                        ft.convert(model, recipe)
                    self.assertTrue(all(type(m) is not ft.Linear for m in model.modules()))

    def test_unmatched_override_is_warned_not_silent(self):
        with self.assertWarnsRegex(UserWarning, "override for layer 'classifier' names no converted layer"):
            ft.convert(mlp(), "deepseek_v3")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model = ft.convert(mlp(), "deepseek_v3", layer_names={"2": "classifier"})
        self.assertEqual(model[2].gemms()["fprop"], "bf16")

    def test_wrong_inputs(self):
        model = converted()
        with self.assertRaisesRegex(ValueError, r"does not end in the weight's in_features 256"):
            model(torch.randn(4, 255))
        with self.assertRaisesRegex(TypeError, "torch.int32; fp8lab takes float32"):
            model(torch.ones(4, 256, dtype=torch.int32))
        with self.assertRaisesRegex(TypeError, "recipe fp64 computes in FP64"):
            converted("fp64")(torch.randn(4, 256))
        if torch.cuda.is_available() and not fp8lab._core._has_cuda:  # a CPU build on a GPU machine: refused, named
            with self.assertRaisesRegex(RuntimeError, "recipe deepseek_v3, GEMM fprop on cuda"):
                model.cuda()(torch.randn(4, 256, device="cuda"))

    def test_rht_recipe_refuses_a_token_count_it_cannot_transform(self):
        # nvfp4's Wgrad transforms along the tokens: refused at the forward that would need it,
        # naming the recipe and the layer; a forward that trains nothing runs.
        model = converted("nvfp4")
        x = torch.randn(24, 256, requires_grad=True)
        with self.assertRaisesRegex(ValueError, r"recipe nvfp4, layer 0: .* tokens, 24 here: they must be a multiple of 16"):
            model(x)
        with torch.no_grad():
            self.assertEqual(model(x).shape, (24, 128))

    def test_empty_and_tiny_shapes(self):
        model = converted()
        self.assertEqual(model(torch.randn(0, 256)).shape, (0, 128))
        x = torch.randn(1, 256, requires_grad=True)
        model(x).sum().backward()
        self.assertEqual(x.grad.shape, (1, 256))


if __name__ == "__main__":
    unittest.main()
