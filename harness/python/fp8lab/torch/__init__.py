"""fp8lab.torch: fp8lab's numerics inside any PyTorch model and training loop.

    model = fp8lab.torch.convert(model, "deepseek_v3")      # every nn.Linear, in place
    y = fp8lab.torch.linear(x, weight, bias, recipe="mxfp8")  # the functional form

Each converted layer's Fprop (Y = X W^T), Dgrad (dX = dY W) and Wgrad (dW = dY^T X) run under the
recipe exactly as `fp8lab train --recipe` runs them: its formats, scale granularities and rules,
rounding, Hadamard transform, re-quantized transposes, accumulator model (Hopper's 13-bit
alignment with promotion every N_C, Blackwell's block-scaled MMA, FP32, ...) and output, by the
same C++ (the CPU emulation; bit-identical on any x86-64 and thread count). Recipes: the names and
files fp8lab.recipes() lists, a .toml path, a dict in a recipe file's shape, or a Recipe.

Backward keeps what the recipe keeps (DeepSeek-V3: X's FP8 codes and scales; Linear.saved_bytes).
The GEMMs are torch.library custom ops (fp8lab::fprop, dgrad, wgrad, wgrad_fp8) with fake
implementations: torch.compile(fullgraph=True), DDP and FSDP2 work on converted models. Inputs:
float32, bfloat16, float16 or float64 (FP64 recipe: float64), any leading batch dimensions; the
output has the input's dtype. CPU tensors only in this build: a CUDA tensor is refused naming the
recipe, the GEMM and the device. fp8lab.torch.Recorder writes what FP8 did to every GEMM's
operands and output every N steps (recorder.py); fp8lab.torch.check_gemm names the arithmetic a
user's block-scaled GEMM kernel computes, among fp8lab's models (check_gemm.py).
"""
try:
    import torch  # noqa: F401
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError("fp8lab.torch needs PyTorch (pip install torch); `import fp8lab` alone needs only NumPy") from e

from ._ops import get_num_threads, set_num_threads
from .linear import Linear, convert, linear
from .recipe import Recipe
from .check_gemm import CheckGemmError, check_gemm
from .recorder import Recorder

__all__ = ["CheckGemmError", "Linear", "Recipe", "Recorder", "check_gemm", "convert", "linear", "get_num_threads",
           "set_num_threads"]
