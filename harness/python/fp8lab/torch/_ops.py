"""The three GEMMs of a linear layer as torch.library custom ops, one op per GEMM, each with a fake
(meta) implementation and Fprop's autograd: eager, torch.compile (no graph break), DDP and FSDP see
one opaque op per GEMM. Each op computes exactly what the engine computes
(kernels/train/linear_layer.hpp, through fp8lab._core) on memory torch owns, passed by address:
inputs are read in place, outputs written in place.

    fp8lab::fprop(x, w, bias, layer, train) -> (y, x_codes, x_scales, x_tensor_level)   y = x w^T + bias
                                          (train: record into delayed scaling's amax history)
    fp8lab::dgrad(dy, w, layer)           -> dx
    fp8lab::wgrad(dy, x, layer)           -> dw
    fp8lab::wgrad_fp8(dy, x_codes, x_scales, x_tensor_level, x, layer) -> dw   (x: X itself on a recorded step, else None)
    fp8lab::bias_grad(dy)                 -> db   (column sums in FP64, in order of rows)

`layer` indexes the layers fp8lab.torch has made (register_layer): a recipe's three GEMMs for one
module name. Operands are 2-D, contiguous, on the CPU, float32 (float64 under an FP64 recipe); the
Python entry points (linear.py) flatten, convert and check before they call these. Fprop's x_*
outputs are X as Fprop quantized it when the recipe's Wgrad re-quantizes that (DeepSeek-V3's), and
empty tensors otherwise; autograd then saves them instead of X.
"""
import threading
from typing import Optional

import torch

from .. import _core

_LAYERS = []
_LAYERS_LOCK = threading.Lock()
_THREADS = None
_RECORDER = None  # the Recorder of the step in progress, when it records (recorder.py)


def _recording(layer):
    return _RECORDER is not None and _RECORDER.wants(layer)


def register_layer(plan):
    """An int naming `plan` (an fp8lab._core._LinearLayer) in the ops' `layer` argument."""
    with _LAYERS_LOCK:
        _LAYERS.append(plan)
        return len(_LAYERS) - 1


def layer_plan(layer):
    return _LAYERS[layer]


def set_num_threads(n):
    """Threads of fp8lab.torch's GEMMs (None: torch.get_num_threads(), the default). The bits do
    not depend on it."""
    global _THREADS
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise ValueError(f"set_num_threads: a whole number >= 1 or None, got {n!r}")
    _THREADS = n


def get_num_threads():
    return _THREADS if _THREADS is not None else torch.get_num_threads()


def x_fp8_shapes(plan, m, k):
    """Shapes of X kept in FP8: codes (m, k), the scale grid, the per-tensor level (3: decode, encode,
    amax). The grid follows the quantizer's tiles (kernels/quantization.hpp): one scale per 1xT
    tile, per row, per BxB block or per tensor. Written with // so symbolic sizes pass through."""
    g = plan.x_granularity
    kind, size = g["kind"], g["size"]
    if kind == "tile":
        grid = (m, (k + size - 1) // size)
    elif kind == "row":
        grid = (m, 1)
    elif kind == "block":
        grid = ((m + size - 1) // size, (k + size - 1) // size)
    else:
        grid = (1, 1)
    return (m, k), grid, (3,)


def _kept_outputs(plan, x, m, k, make):
    # Three distinct tensors (outputs may not alias); empty where X is kept itself (the GPU path).
    if not plan.keeps_x_fp8 or x.is_cuda:
        return make((0,), torch.uint8), make((0,), torch.float32), make((0,), torch.float32)
    codes, grid, level = x_fp8_shapes(plan, m, k)
    return make(codes, torch.uint8), make(grid, torch.float32), make(level, torch.float32)


def check_operands(name, plan, tensors, device="cpu"):
    """The ops' own preconditions (fp8lab.torch.linear meets them; a direct caller of
    torch.ops.fp8lab.* gets an error, never wrong bits or a crash): 2-D, contiguous, on the
    kernel's device, float32 (float64 under an FP64 recipe)."""
    want = torch.float64 if plan.fp64 else torch.float32
    for label, t in tensors:
        if t.dim() != 2 or not t.is_contiguous() or t.device.type != device or t.dtype != want:
            raise ValueError(f"fp8lab::{name}: {label} must be a contiguous 2-D {want} tensor on {device}, got "
                             f"{tuple(t.shape)} {t.dtype} on {t.device}{'' if t.is_contiguous() else ', not contiguous'}")


@torch.library.custom_op("fp8lab::fprop", mutates_args=())
def fprop(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], layer: int,
          train: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    plan = _LAYERS[layer]
    check_operands("fprop", plan, [("x", x), ("w", w)] + ([("bias", bias[None])] if bias is not None else []))
    m, k = x.shape
    n = w.shape[0]
    if w.shape[1] != k or (bias is not None and bias.shape != (n,)):
        raise ValueError(f"fp8lab::fprop: x {tuple(x.shape)}, w {tuple(w.shape)} and bias "
                         f"{None if bias is None else tuple(bias.shape)} do not fit Y = X W^T + bias")
    plan.set_recording(train)  # a pass that does not train records nothing into delayed scaling's history
    y = torch.empty((m, n), dtype=x.dtype)
    codes, scales, level = _kept_outputs(plan, x, m, k, lambda shape, dtype: torch.empty(shape, dtype=dtype))
    record = _recording(layer)
    # A recorded step measures the GEMM alone and adds the bias after (the same FP32 add, so the same bits).
    plan_bias = 0 if bias is None or record else bias.data_ptr()
    figures = plan.fprop(x.data_ptr(), m, k, w.data_ptr(), n, plan_bias, y.data_ptr(), x.dtype == torch.float64,
                         codes.data_ptr(), scales.data_ptr(), level.data_ptr(), get_num_threads(), record)
    if record:
        _RECORDER.add(layer, "fprop", figures, y, x @ w.T, {"A": x, "B": w})
        if bias is not None:
            y = y + bias
    return y, codes, scales, level


@fprop.register_fake
def _(x, w, bias, layer, train=True):
    plan = _LAYERS[layer]
    m, k = x.shape
    y = x.new_empty((m, w.shape[0]))
    return (y,) + _kept_outputs(plan, x, m, k, lambda shape, dtype: x.new_empty(shape, dtype=dtype))


@torch.library.custom_op("fp8lab::dgrad", mutates_args=())
def dgrad(dy: torch.Tensor, w: torch.Tensor, layer: int) -> torch.Tensor:
    check_operands("dgrad", _LAYERS[layer], [("dy", dy), ("w", w)])
    _LAYERS[layer].set_recording(True)
    m, n = dy.shape
    k = w.shape[1]
    dx = torch.empty((m, k), dtype=dy.dtype)
    record = _recording(layer)
    figures = _LAYERS[layer].dgrad(dy.data_ptr(), m, n, w.data_ptr(), k, dx.data_ptr(), dy.dtype == torch.float64,
                                   get_num_threads(), record)
    if record:
        _RECORDER.add(layer, "dgrad", figures, dx, dy @ w, {"A": dy, "B": w.T})
    return dx


@dgrad.register_fake
def _(dy, w, layer):
    return dy.new_empty((dy.shape[0], w.shape[1]))


@torch.library.custom_op("fp8lab::wgrad", mutates_args=())
def wgrad(dy: torch.Tensor, x: torch.Tensor, layer: int) -> torch.Tensor:
    check_operands("wgrad", _LAYERS[layer], [("dy", dy), ("x", x)])
    _LAYERS[layer].set_recording(True)
    m, n = dy.shape
    k = x.shape[1]
    dw = torch.empty((n, k), dtype=dy.dtype)
    record = _recording(layer)
    figures = _LAYERS[layer].wgrad(dy.data_ptr(), m, n, x.data_ptr(), k, dw.data_ptr(), dy.dtype == torch.float64,
                                   get_num_threads(), record)
    if record:
        _RECORDER.add(layer, "wgrad", figures, dw, dy.T @ x, {"A": dy.T, "B": x.T})
    return dw


@wgrad.register_fake
def _(dy, x, layer):
    return dy.new_empty((dy.shape[1], x.shape[1]))


@torch.library.custom_op("fp8lab::wgrad_fp8", mutates_args=())
def wgrad_fp8(dy: torch.Tensor, x_codes: torch.Tensor, x_scales: torch.Tensor, x_tensor_level: torch.Tensor,
              x: Optional[torch.Tensor], layer: int) -> torch.Tensor:
    check_operands("wgrad_fp8", _LAYERS[layer], [("dy", dy)] + ([("x", x)] if x is not None else []))
    if x_codes.dtype != torch.uint8 or x_codes.dim() != 2 or x_codes.shape[0] != dy.shape[0]:
        raise ValueError(f"fp8lab::wgrad_fp8: x_codes must be uint8 rows x in with dy's rows, got "
                         f"{tuple(x_codes.shape)} {x_codes.dtype}")
    _LAYERS[layer].set_recording(True)
    m, n = dy.shape
    k = x_codes.shape[1]
    dw = torch.empty((n, k), dtype=dy.dtype)
    record = _recording(layer)
    figures = _LAYERS[layer].wgrad_from_fp8(dy.data_ptr(), m, n, x_codes.data_ptr(), x_scales.data_ptr(),
                                            x_tensor_level.data_ptr(), k, dw.data_ptr(), get_num_threads(), record,
                                            0 if x is None else x.data_ptr())
    if record:
        _RECORDER.add(layer, "wgrad", figures, dw, None if x is None else dy.T @ x,
                      None if x is None else {"A": dy.T, "B": x.T})
    return dw


@wgrad_fp8.register_fake
def _(dy, x_codes, x_scales, x_tensor_level, x, layer):
    return dy.new_empty((dy.shape[1], x_codes.shape[1]))


@torch.library.custom_op("fp8lab::bias_grad", mutates_args=())
def bias_grad(dy: torch.Tensor) -> torch.Tensor:
    m, n = dy.shape
    db = torch.empty((n,), dtype=dy.dtype)
    _core._bias_grad(dy.data_ptr(), m, n, db.data_ptr(), dy.dtype == torch.float64)
    return db


@bias_grad.register_fake
def _(dy):
    return dy.new_empty((dy.shape[1],))


def _setup_context(ctx, inputs, output):
    x, w, _bias, layer, _train = inputs
    _, codes, scales, level = output
    ctx.layer = layer
    ctx.kept_fp8 = _LAYERS[layer].keeps_x_fp8 and not x.is_cuda  # the GPU path keeps X (_cuda_ops.py)
    # What the recipe keeps for backward: X's FP8 codes and scales when Wgrad re-quantizes them
    # (about a quarter of X's FP32 bytes), else X. W is the parameter itself (float32) or its cast.
    # A recorded step keeps X beside its FP8 copy, which the recorder measures Wgrad's operands against;
    # never in a compiled graph, whose saved tensors are fixed when it is traced.
    ctx.kept_x_too = ctx.kept_fp8 and _recording(layer) and not torch.compiler.is_compiling()
    if ctx.kept_fp8:
        ctx.save_for_backward(codes, scales, level, w, *((x,) if ctx.kept_x_too else ()))
    else:
        ctx.save_for_backward(x, w)
    ctx.mark_non_differentiable(codes, scales, level)


def _backward(ctx, dy, _codes, _scales, _level):
    saved = ctx.saved_tensors
    w = saved[3] if ctx.kept_fp8 else saved[1]
    dy = dy.contiguous()
    dx = dgrad(dy, w, ctx.layer) if ctx.needs_input_grad[0] else None
    dw = None
    if ctx.needs_input_grad[1]:
        if ctx.kept_fp8:
            dw = wgrad_fp8(dy, *saved[:3], saved[4] if ctx.kept_x_too else None, ctx.layer)
        else:
            dw = wgrad(dy, saved[0], ctx.layer)
    db = bias_grad(dy) if ctx.needs_input_grad[2] else None
    return dx, dw, db, None, None


torch.library.register_autograd("fp8lab::fprop", _backward, setup_context=_setup_context)

if _core._has_cuda:  # a build with the CUDA backend: the ops' CUDA kernels
    from . import _cuda_ops

    _cuda_ops.register()
