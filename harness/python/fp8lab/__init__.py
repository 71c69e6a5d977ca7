"""fp8lab: FP8 quantization (tile/block/row/tensor scales, E4M3/E5M2, the MX and NVFP4 formats) and
the bit-exact CPU emulation of the FP8 tensor-core GEMMs (Hopper's, Blackwell's block-scaled MMA),
on NumPy arrays: the numbers the `fp8lab` command line computes, with its defaults and messages.

    fp8lab.quantize, fp8lab.dequantize, fp8lab.gemm, fp8lab.error_metrics   (NumPy; this module)
    fp8lab.torch                                                            (PyTorch; imports torch)

`import fp8lab` needs NumPy only. fp8lab.torch runs a recipe's three GEMMs inside any PyTorch model
(fp8lab.torch.convert) and needs torch; see its help.
"""
import pathlib as _pathlib

from . import _core
from ._core import *  # noqa: F401,F403  quantize, dequantize, gemm, error_metrics, ...
from ._core import __version__, _operand_address  # noqa: F401

__doc__ = (__doc__ or "") + "\n" + (_core.__doc__ or "")

# An installed package carries the shipped recipe files (experiments/recipes/) beside this file;
# a build tree's package reads them from the source tree instead (the folder compiled in).
_packaged_recipes = _pathlib.Path(__file__).with_name("recipes")
if _packaged_recipes.is_dir():
    _core._set_recipe_folder(str(_packaged_recipes))


def recipes():
    """Every precision recipe a name can give (as `fp8lab recipes` lists them): a list of
    (name, description, file) tuples, file '' for the built-in ones."""
    return [tuple(r) for r in _core._list_recipes()]
