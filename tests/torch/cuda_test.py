"""fp8lab.torch on CUDA tensors (a GPU machine with a CUDA build of fp8lab; skipped elsewhere, and
not yet run: no GPU was lent when it was written): a converted model's output and gradients under
deepseek_v3 equal the CPU emulation's bit for bit, and a recipe the GPU has no kernel for (hybrid's
E5M2 x E4M3 mix) is refused with one line naming the recipe, the GEMM and the device."""
import unittest
import warnings

import torch

import fp8lab
import fp8lab.torch as ft
from torch_support import TorchTestCase

ON_GPU = torch.cuda.is_available() and fp8lab._core._has_cuda


def model(recipe):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 384), torch.nn.ReLU(), torch.nn.Linear(384, 256))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ft.convert(m, recipe)
    return m


@unittest.skipUnless(ON_GPU, "needs a GPU and a build of fp8lab with the CUDA backend")
class CudaTest(TorchTestCase):
    def test_gpu_equals_the_cpu_emulation(self):
        x = torch.randn(512, 256)
        results = []
        for device in ("cpu", "cuda"):
            m = model("deepseek_v3").to(device)
            xr = x.to(device).requires_grad_(True)
            y = m(xr)
            y.square().sum().backward()
            results.append([t.detach().cpu() for t in (y, xr.grad, *[p.grad for p in m.parameters()])])
        for i, (a, b) in enumerate(zip(*results)):
            self.assertSameBits(b, a, f"tensor {i}")

    def test_a_gemm_without_a_gpu_kernel_is_refused(self):
        m = model("hybrid").cuda()
        with self.assertRaisesRegex(RuntimeError, r"cuda fprop of recipe '.*' .* cannot run on"):
            m(torch.randn(128, 256, device="cuda"))


@unittest.skipIf(ON_GPU, "a CUDA build on a GPU runs the GEMMs")
class WithoutGpuKernelsTest(TorchTestCase):
    def test_refused_naming_recipe_gemm_and_device(self):
        if not torch.cuda.is_available():
            self.skipTest("no CUDA device to put a tensor on")
        with self.assertRaisesRegex(RuntimeError, r"recipe deepseek_v3, GEMM fprop on cuda:0: this build of fp8lab"):
            model("deepseek_v3").cuda()(torch.randn(4, 256, device="cuda"))


if __name__ == "__main__":
    unittest.main()
