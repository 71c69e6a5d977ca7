"""What FP8 did inside a PyTorch training run: per converted layer, per GEMM (Fprop, Dgrad,
Wgrad) and per tensor (its operands A and B, its output C), every N steps, written as an HDF5 grid
(dims step x layer x gemm x tensor) that xarray.open_dataset and `fp8lab report` read.

    recorder = fp8lab.torch.Recorder("run_fp8.h5", every=10).attach(model)
    for step in range(steps):
        with recorder.step(step):                  # records on steps 0, 10, 20, ...
            loss = model(batch).loss; loss.backward()
        optimizer.step()
    recorder.close()                               # also writes on every record (recorder.write())

Operands A and B (the GEMM's own quantization, measured by the engine's tally beside the GEMM:
kernels/train/fp8_operand_stats.hpp): SQNR and relative error of the dequantized operand against
its high-precision values, the fractions of elements satfinite clipped (saturated) and flushed to
zero, amax, and the smallest and largest scale in effect. Output C: the SQNR and relative error of
the GEMM's output against an FP32 GEMM (torch.matmul) of the same unquantized operands, and its
amax. A GEMM that quantizes nothing (a BF16 classifier) has NaN operand figures. A recorded step
computes the very bits of an unrecorded one. The recorder runs in eager mode (its bookkeeping is
Python beside the ops; under torch.compile the operands of a re-quantizing Wgrad are not kept).
"""
import contextlib
import math
import os

import torch

from .. import _core
from . import _ops

GEMMS = ("fprop", "dgrad", "wgrad")
TENSORS = ("A", "B", "C")
COLUMNS = [
    ("sqnr_db", "dB", "A, B: SQNR of the dequantized operand against its values; C: of the output against an FP32 GEMM "
                      "of the unquantized operands"),
    ("rel_frobenius", "1", "||y - r|| / ||r|| for the same pairs"),
    ("saturated_fraction", "1", "operand elements satfinite clipped (NaN for C)"),
    ("flushed_fraction", "1", "nonzero operand elements quantized to zero (NaN for C)"),
    ("amax", "1", "max |x| of the operand's high-precision values, or of the output"),
    ("scale_min", "1", "smallest scale in effect over the operand's tiles (x the per-tensor decode; NaN for C)"),
    ("scale_max", "1", "largest scale in effect over the operand's tiles (NaN for C)"),
    ("elements", "1", "elements of the tensor"),
]


class Recorder:
    """Records per-GEMM quantization figures of a converted model every `every` steps into `path`
    (rewritten whole, atomically, on every recorded step). hook(step, layer, gemm, tensors), when
    given, receives each recorded GEMM's operands as it measured them ({"A", "B", "C", "C_fp32"}:
    float32 copies; A and B as the GEMM's NT form reads them) — for tests."""

    def __init__(self, path, every=10, hook=None):
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError(f"Recorder: every must be a whole number >= 1, got {every!r}")
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise ValueError(f"Recorder: {path}: no directory {directory}")
        self.path, self.every, self.hook = os.fspath(path), every, hook
        self.layers = {}  # layer id -> layer name, in attach order
        self.records = {}  # step -> {(layer name, gemm, tensor): {column: value}}
        self._step = None

    def attach(self, model):
        from .linear import Linear
        found = [m for m in model.modules() if isinstance(m, Linear)]
        if not found:
            raise ValueError("Recorder.attach: the model has no fp8lab.torch.Linear layers (fp8lab.torch.convert first)")
        for m in found:
            self.layers[m._fp8lab_layer] = m.fp8lab_layer_name
        return self

    @contextlib.contextmanager
    def step(self, step):
        """Records the GEMMs run inside when step % every == 0; writes the file at the end of such a step."""
        recording = step % self.every == 0
        if recording:
            if _ops._RECORDER is not None:
                raise RuntimeError("Recorder.step: another recorder is recording this step")
            self._step = step
            _ops._RECORDER = self
        try:
            yield recording
        except BaseException:
            if recording:
                _ops._RECORDER = None
                self._step = None
            raise  # the step's own error; the records so far stay for the next write
        if recording:
            _ops._RECORDER = None
            self._step = None
            if step in self.records:
                self.write()

    # Called by the ops on a recorded step.
    def wants(self, layer):
        return layer in self.layers

    def add(self, layer, gemm, operands, output, reference, tensors=None):
        name = self.layers[layer]
        step = self.records.setdefault(self._step, {})
        for tensor, figures in (("A", operands and operands["a"]), ("B", operands and operands["b"])):
            if figures is None:
                step[(name, gemm, tensor)] = {c: math.nan for c, _, _ in COLUMNS}
                continue
            n = figures["elements"]
            step[(name, gemm, tensor)] = {
                "sqnr_db": figures["sqnr_db"],
                "rel_frobenius": math.sqrt(figures["noise"] / figures["signal"]) if figures["signal"] > 0 else math.nan,
                "saturated_fraction": figures["saturated"] / n, "flushed_fraction": figures["flushed"] / n,
                "amax": figures["amax"], "scale_min": figures["scale_min"], "scale_max": figures["scale_max"],
                "elements": float(n)}
        if reference is None:  # a re-quantizing Wgrad whose X was kept in FP8 only (compiled graphs)
            step[(name, gemm, "C")] = {c: math.nan for c, _, _ in COLUMNS}
            return
        # ||y - r|| / ||r|| and the SQNR from it, summed in float64 (fp8lab.error_metrics defines them and
        # is the test's reference; torch's sums here cost a third of its time on a recorded step).
        r = reference.detach()
        error = float(torch.linalg.vector_norm(output.detach() - r, dtype=torch.float64))
        norm = float(torch.linalg.vector_norm(r, dtype=torch.float64))
        rel = error / norm if norm > 0 else math.nan
        step[(name, gemm, "C")] = {
            "sqnr_db": -20 * math.log10(rel) if rel > 0 else math.inf, "rel_frobenius": rel, "saturated_fraction": math.nan,
            "flushed_fraction": math.nan, "amax": float(output.abs().max()) if output.numel() else math.nan,
            "scale_min": math.nan, "scale_max": math.nan, "elements": float(output.numel())}
        if self.hook is not None:  # copies: W is the parameter, which the optimizer changes in place
            given = dict(tensors or {}, C=output, C_fp32=reference)
            self.hook(self._step, name, gemm, {k: v.detach().clone() for k, v in given.items() if v is not None})

    def write(self):
        """Writes every record so far (the grid: steps recorded x layers x GEMMs x tensors)."""
        steps = sorted(self.records)
        if not steps:
            return
        names = list(dict.fromkeys(self.layers.values()))
        data = {c: [] for c, _, _ in COLUMNS}
        for s in steps:
            for name in names:
                for gemm in GEMMS:
                    for tensor in TENSORS:
                        figures = self.records[s].get((name, gemm, tensor))
                        for c, _, _ in COLUMNS:
                            data[c].append(math.nan if figures is None else float(figures[c]))
        axes = [("step", "training step", "integer", [str(s) for s in steps]),
                ("layer", "converted linear layer (fp8lab.torch)", "string", names),
                ("gemm", "GEMM kind: fprop Y = X W^T, dgrad dX = dY W, wgrad dW = dY^T X", "string", list(GEMMS)),
                ("tensor", "A and B: the GEMM's operands; C: its output", "string", list(TENSORS))]
        recipes = sorted({_ops.layer_plan(layer).describe("fprop") for layer in self.layers})
        attributes = {"Conventions": "CF-1.10", "title": "fp8lab.torch recorder: what FP8 did inside a training run",
                      "study_name": os.path.splitext(os.path.basename(self.path))[0], "study_kind": "torch_record",
                      "recorder_every": str(self.every), "complete": "true",
                      "fprop_precisions": "; ".join(recipes), "torch_version": torch.__version__}
        _core._write_grid(self.path, axes, COLUMNS, data, attributes)

    def close(self):
        self.write()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ["Recorder", "GEMMS", "TENSORS", "COLUMNS"]
