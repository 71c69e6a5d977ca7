"""The CUDA kernels of fp8lab.torch's custom ops (_ops.py), registered when this build of fp8lab has
the CUDA backend (fp8lab._core._has_cuda): each GEMM by the GPU's linear GEMMs
(kernels/cuda/linear_gemms_cuda.hpp) on torch's current stream, with the CPU engine's bits. What
the GPU has no kernel for (a recipe, a GEMM, a size) is refused before the op runs (linear.py asks
_cuda_failure for each GEMM), never computed another way. The GPU path keeps X for Wgrad (it
re-quantizes X from X, the engine's own path, the same bits as from the kept FP8 copy)."""
import torch

from .. import _core
from . import _ops


def _stream():
    return torch.cuda.current_stream().cuda_stream


def register():
    @_ops.fprop.register_kernel("cuda")
    def _(x, w, bias, layer):
        plan = _ops.layer_plan(layer)
        m, k = x.shape
        n = w.shape[0]
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)
        _core._cuda_fprop(plan, plan.layer, x.data_ptr(), w.data_ptr(), y.data_ptr(), m, k, n, _stream())
        if bias is not None:
            y = y + bias
        empty = x.new_empty((0,))
        return y, empty.to(torch.uint8), empty, empty

    @_ops.dgrad.register_kernel("cuda")
    def _(dy, w, layer):
        plan = _ops.layer_plan(layer)
        m, n = dy.shape
        k = w.shape[1]
        dx = torch.empty((m, k), dtype=dy.dtype, device=dy.device)
        _core._cuda_dgrad(plan, plan.layer, dy.data_ptr(), w.data_ptr(), dx.data_ptr(), m, n, k, _stream())
        return dx

    @_ops.wgrad.register_kernel("cuda")
    def _(dy, x, layer):
        plan = _ops.layer_plan(layer)
        m, n = dy.shape
        k = x.shape[1]
        dw = torch.empty((n, k), dtype=dy.dtype, device=dy.device)
        _core._cuda_wgrad(plan, plan.layer, dy.data_ptr(), x.data_ptr(), dw.data_ptr(), m, n, k, _stream())
        return dw

    @_ops.bias_grad.register_kernel("cuda")
    def _(dy):
        return dy.double().sum(0).to(dy.dtype)  # FP64 sums rounded once, as on the CPU (another order)


def failure(plan, recipe_name, rows, out, k):
    """The first refusal line of the layer's GEMMs at these sizes on the GPU, or ''."""
    for gemm in ("fprop", "dgrad", "wgrad"):
        why = _core._cuda_failure(plan, gemm, recipe_name, rows, out, k)
        if why:
            return why
    return ""
