"""fp8lab's linear layer for PyTorch: torch.nn.Linear's parameters and state_dict, its three GEMMs
computed by fp8lab under a precision recipe (the custom ops of _ops.py)."""
import math
import os
import warnings

import torch

from .. import _core
from . import _ops
from .recipe import Recipe, as_recipe

_FLOAT_INPUTS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def _refuse_device(recipe_name, gemm, tensor):
    if tensor.device.type == "cpu" or (tensor.device.type == "cuda" and _core._has_cuda):
        return
    raise RuntimeError(f"fp8lab.torch: recipe {recipe_name}, GEMM {gemm} on {tensor.device}: this build of fp8lab has "
                       "no kernel for it on that device (the CPU emulation takes CPU tensors; nothing is computed "
                       "another way)")


def _apply(x, weight, bias, layer):
    """Y = X W^T (+ bias) through the fprop op, X flattened to 2-D as nn.Linear does."""
    plan = _ops.layer_plan(layer)
    recipe_name = plan.recipe
    for gemm_input, t in (("x", x), ("weight", weight)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"fp8lab.torch.linear: {gemm_input} must be a tensor, got {type(t).__name__}")
        if t.dtype not in _FLOAT_INPUTS:
            raise TypeError(f"fp8lab.torch.linear: {gemm_input} is {t.dtype}; fp8lab takes float32, bfloat16, float16 "
                            "or float64")
    _refuse_device(recipe_name, "fprop", x)
    _refuse_device(recipe_name, "fprop", weight)
    if weight.dim() != 2:
        raise ValueError(f"fp8lab.torch.linear: weight must be 2-D (out_features x in_features), got {tuple(weight.shape)}")
    if x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"fp8lab.torch.linear: x {tuple(x.shape)} does not end in the weight's in_features "
                         f"{weight.shape[1]}")
    if plan.fp64:
        if x.dtype != torch.float64 or weight.dtype != torch.float64:
            raise TypeError(f"fp8lab.torch: recipe {recipe_name} computes in FP64: x and weight must be float64 "
                            f"(model.double()), got {x.dtype} and {weight.dtype}")
        compute = torch.float64
    else:
        compute = torch.float32  # every other recipe's GEMMs read FP32 operands (the engine's step)
    for label, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.device != x.device:
            raise ValueError(f"fp8lab.torch.linear: x is on {x.device}, the {label} on {t.device}")
    leading = x.shape[:-1]
    tokens = math.prod(leading)
    if plan.wgrad_rht and tokens % 16 and (x.requires_grad or weight.requires_grad) and torch.is_grad_enabled():
        raise ValueError(f"fp8lab.torch: recipe {recipe_name}, layer {plan.layer}: its Wgrad runs the 16x16 Hadamard "
                         f"transform along the tokens, {tokens} here: they must be a multiple of 16")
    x2 = x.reshape(tokens, x.shape[-1]).to(compute).contiguous()
    w2 = weight.to(compute).contiguous()
    if bias is not None:
        _refuse_device(recipe_name, "fprop", bias)
        if bias.shape != (weight.shape[0],):
            raise ValueError(f"fp8lab.torch.linear: bias {tuple(bias.shape)} is not ({weight.shape[0]},), the weight's "
                             "out_features")
        bias = bias.to(compute).contiguous()
    train = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)  # delayed scaling records then
    y = _ops.fprop(x2, w2, bias, layer, train)[0]
    return y.reshape(*leading, weight.shape[0]).to(x.dtype)


class Linear(torch.nn.Linear):
    """torch.nn.Linear with its Fprop, Dgrad and Wgrad computed by fp8lab under a recipe. Made by
    fp8lab.torch.convert (which turns an nn.Linear into one in place: the same object, parameters,
    names, hooks and state_dict) or directly: Linear(in_features, out_features, recipe="deepseek_v3")."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, *, recipe, layer="linear"):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self._fp8lab_attach(as_recipe(recipe), layer, as_recipe(recipe).resolve([layer]))

    def _fp8lab_attach(self, recipe, layer_name, resolved):
        plan = resolved.layer(layer_name)
        self.fp8lab_recipe = recipe
        self.fp8lab_layer_name = layer_name
        self._fp8lab_layer = _ops.register_layer(plan)

    def forward(self, x):
        return _apply(x, self.weight, self.bias, self._fp8lab_layer)

    def gemms(self):
        """{'fprop': ..., 'dgrad': ..., 'wgrad': ...}: what this layer's three GEMMs compute."""
        plan = _ops.layer_plan(self._fp8lab_layer)
        return {g: plan.describe(g) for g in ("fprop", "dgrad", "wgrad")}

    def saved_bytes(self, tokens, device="cpu"):
        """Bytes backward keeps of X for `tokens` rows of input (what the recipe keeps: X's FP8
        codes, scales and per-tensor level when Wgrad re-quantizes them, else X in the GEMMs'
        precision, FP32 or FP64; on CUDA X itself, which the GPU path re-quantizes). W is not
        counted: it is the parameter (or its FP32 cast)."""
        plan = _ops.layer_plan(self._fp8lab_layer)
        if plan.keeps_x_fp8 and torch.device(device).type == "cpu":
            codes, grid, level = _ops.x_fp8_shapes(plan, tokens, self.in_features)
            return codes[0] * codes[1] + 4 * grid[0] * grid[1] + 4 * level[0]
        return tokens * self.in_features * (8 if plan.fp64 else 4)

    def extra_repr(self):
        return super().extra_repr() + f", recipe={self.fp8lab_recipe.name}, layer={self.fp8lab_layer_name}"

    # copy.deepcopy and pickling (torch.save of a whole model, EMA copies): the layer id indexes this
    # process's layers, so a copy gets a layer of its own (its own delayed-scaling state) from the recipe.
    def __getstate__(self):
        state = super().__getstate__() if hasattr(super(), "__getstate__") else self.__dict__.copy()
        state = dict(state)
        state.pop("_fp8lab_layer", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._fp8lab_layer = _ops.register_layer(self.fp8lab_recipe.resolve([self.fp8lab_layer_name]).layer(
            self.fp8lab_layer_name))


def _convertible(module):
    # Exactly nn.Linear: its subclasses (LazyLinear, parametrized or wrapped layers) compute otherwise.
    return type(module) is torch.nn.Linear


def _layer_name(fqn, layer_names):
    if layer_names is None:
        return fqn
    if callable(layer_names):
        return layer_names(fqn)
    return layer_names.get(fqn, fqn)


def convert(module, recipe, *, module_filter=None, layer_names=None):
    """Turns every module of `module` whose type is torch.nn.Linear (module_filter(mod, fqn) -> bool
    chooses; default all; subclasses are left alone) into fp8lab.torch.Linear in place and returns
    `module`. Parameters, their names and the
    state_dict are unchanged, so checkpoints load and save as before. `recipe`: a name or .toml file
    `fp8lab train --recipe` accepts, a recipe dict, or a Recipe.

    The recipe's per-layer overrides apply by layer name: a module's qualified name (fqn), or the
    name layer_names gives it (a dict fqn -> name, or a callable). The shipped recipes name the
    engine's layers ("classifier", "L4.wq", "*.wo"), so a model whose output projection is `lm_head`
    keeps it in BF16 under deepseek_v3 with layer_names={"lm_head": "classifier"}; an override that
    names no converted layer is warned about (UserWarning), not an error. Any error (an unknown
    recipe, a file with an error, a GEMM the recipe cannot run) is raised before anything changes."""
    recipe = as_recipe(recipe)
    if isinstance(module, torch.nn.Linear) and _convertible(module):
        chosen = [("", module)] if module_filter is None or module_filter(module, "") else []
    else:
        chosen = [(name, m) for name, m in module.named_modules()
                  if _convertible(m) and (module_filter is None or module_filter(m, name))]
    names = [_layer_name(name, layer_names) or "linear" for name, _ in chosen]
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"convert: layer_names gave {name!r}, not a str")
    resolved = recipe.resolve(names)
    for pattern in resolved.override_layers:
        if not any(_core._override_matches(pattern, name) for name in names):
            warnings.warn(f"fp8lab.torch.convert: recipe {resolved.name}'s override for layer '{pattern}' names no "
                          f"converted layer, so it applies nowhere (convert(..., layer_names={{fqn: '{pattern}'}}) "
                          "names a module after it)", stacklevel=2)
    plans = [resolved.layer(name) for name in names]  # every layer's GEMMs, before any module changes
    for (_, m), name, plan in zip(chosen, names, plans):
        m.__class__ = Linear
        m.fp8lab_recipe = recipe
        m.fp8lab_layer_name = name
        m._fp8lab_layer = _ops.register_layer(plan)
    return module


_FUNCTIONAL_LAYERS = {}


@torch.compiler.assume_constant_result
def _functional_layer(text, base, layer):
    """The layer id of (recipe name or file, layer name), made once: a constant to torch.compile."""
    key = (text, base, layer)
    if key not in _FUNCTIONAL_LAYERS:
        recipe = Recipe(text, base=base)
        plan = recipe.resolve([layer] if layer else []).layer(layer)
        if plan.delayed_scaling:
            raise ValueError(f"fp8lab.torch.linear: recipe {recipe.name} scales by delayed scaling, which keeps amax "
                             "histories per layer: convert a module (fp8lab.torch.convert) to give each its own")
        _FUNCTIONAL_LAYERS[key] = _ops.register_layer(plan)
    return _FUNCTIONAL_LAYERS[key]


def linear(x, weight, bias=None, recipe="fp32", *, layer=""):
    """The functional form: torch.nn.functional.linear(x, weight, bias) with the three GEMMs under
    `recipe` (a name or .toml path; a Recipe or dict works in eager mode), `layer` naming the layer
    for the recipe's overrides (default: none applies). Every call site with the same recipe and
    layer shares one layer, so recipes with delayed scaling (per-layer state) are refused here."""
    if isinstance(recipe, (str, os.PathLike)):
        text = os.fspath(recipe)
        base = os.getcwd() if text.endswith(".toml") and not os.path.isabs(text) else ""
        return _apply(x, weight, bias, _functional_layer(text, base, layer))
    recipe = as_recipe(recipe)
    key = ("object", id(recipe), layer)
    if key not in _FUNCTIONAL_LAYERS:
        plan = recipe.resolve([layer] if layer else []).layer(layer)
        if plan.delayed_scaling:
            raise ValueError(f"fp8lab.torch.linear: recipe {recipe.name} scales by delayed scaling, which keeps amax "
                             "histories per layer: convert a module (fp8lab.torch.convert) to give each its own")
        _FUNCTIONAL_LAYERS[key] = _ops.register_layer(plan)
    return _apply(x, weight, bias, _FUNCTIONAL_LAYERS[key])
