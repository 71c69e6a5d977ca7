"""The CUDA kernels of fp8lab.torch's custom ops (_ops.py), registered when this build of fp8lab has
the CUDA backend (fp8lab._core._has_cuda): each GEMM by the GPU's linear GEMMs
(kernels/cuda/linear_gemms_cuda.hpp) on torch's current stream, with the CPU engine's bits. What
the GPU has no kernel for (a recipe, a GEMM, a size) is refused by that entry point before any work
(ValueError: "cuda fprop of recipe 'R' (...) cannot run on DEVICE: why"), never computed another
way. The GPU path keeps X for Wgrad, not its FP8 copy (the GPU re-quantizes X from X, the engine's
own path: the same bits), so backward keeps X's FP32 bytes there (Linear.saved_bytes says so)."""
import torch

from .. import _core
from . import _ops


def _stream():
    return torch.cuda.current_stream().cuda_stream


def register():
    @_ops.fprop.register_kernel("cuda")
    def _(x, w, bias, layer, train=True):
        plan = _ops.layer_plan(layer)
        _ops.check_operands("fprop", plan, [("x", x), ("w", w)], device="cuda")
        m, k = x.shape
        n = w.shape[0]
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)
        _core._cuda_fprop(plan, plan.recipe, x.data_ptr(), w.data_ptr(), y.data_ptr(), m, k, n, _stream())
        if bias is not None:
            y = y + bias  # the FP32 add of the CPU path's, per element
        return (y,) + _ops._kept_outputs(plan, x, m, k, lambda shape, dtype: x.new_empty(shape, dtype=dtype))

    @_ops.dgrad.register_kernel("cuda")
    def _(dy, w, layer):
        plan = _ops.layer_plan(layer)
        _ops.check_operands("dgrad", plan, [("dy", dy), ("w", w)], device="cuda")
        m, n = dy.shape
        k = w.shape[1]
        dx = torch.empty((m, k), dtype=dy.dtype, device=dy.device)
        _core._cuda_dgrad(plan, plan.recipe, dy.data_ptr(), w.data_ptr(), dx.data_ptr(), m, n, k, _stream())
        return dx

    @_ops.wgrad.register_kernel("cuda")
    def _(dy, x, layer):
        plan = _ops.layer_plan(layer)
        _ops.check_operands("wgrad", plan, [("dy", dy), ("x", x)], device="cuda")
        m, n = dy.shape
        k = x.shape[1]
        dw = torch.empty((n, k), dtype=dy.dtype, device=dy.device)
        _core._cuda_wgrad(plan, plan.recipe, dy.data_ptr(), x.data_ptr(), dw.data_ptr(), m, n, k, _stream())
        return dw

    @_ops.bias_grad.register_kernel("cuda")
    def _(dy):
        # FP64 sums rounded once, as on the CPU, but in the GPU reduction's order: a bias gradient
        # can differ from the CPU's in its last bit where the FP64 sums round differently.
        return dy.double().sum(0).to(dy.dtype)
