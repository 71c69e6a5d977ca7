"""The Python API (harness/python, module fp8lab) with torch CPU tensors through DLPack: results
equal, bit for bit, to the NumPy path on the same values, and float32 tensors read in place.

The module is built for Debian's python3 (harness/python/CMakeLists.txt) and the peers' venv is
made from that same interpreter (setup_venv.sh), so it imports here; the test fails, naming both,
when the module was built for another Python. The venv's NumPy is 2.x, where the CI's Python
tests run under Debian's NumPy 1.24: the module's array handling is checked under both.

  float32, C-contiguous     fp8lab._operand_address(t) == t.data_ptr() (no copy); quantize
                            (codes, scales, dequantize) and gemm equal the NumPy path's
  float32 transposed/strided  read through one copy (address differs); equal to the NumPy path
                            on the same view
  float64, float16          converted as the CLI converts a .npy of that dtype: equal to the
                            NumPy path on tensor.numpy()
  bfloat16, float8, requires_grad   no DLPack export NumPy accepts: the error is recorded (a
                            finding, not a failure), and must be an exception, never a result

usage: pyapi_dlpack_test.py [--build build/cpu] [--results build/cpu/peers-findings]
"""
import importlib.machinery
import sys

import numpy as np
import torch

import peers_common

GRANULARITIES = ["tensor", "row", "tile:1x128", "block:128x128", "tile:1x32"]
FORMATS = ["e4m3", "e5m2"]
GEMM_CONFIGS = [{}, {"a_granularity": "row", "b_granularity": "row", "promotion": "never"},
                {"accum": "hopper,zero:min", "format": "e5m2"}]


def import_fp8lab(build):
    folder = build / "python"
    built = sorted(p.name for p in (folder / "fp8lab").glob("_core*.so"))
    if not any(name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)) for name in built):
        sys.exit(f"FAILED: no fp8lab module in {folder} for this Python {sys.version.split()[0]} "
                 f"(suffixes {importlib.machinery.EXTENSION_SUFFIXES}); built: {built}")
    sys.path.insert(0, str(folder))
    import fp8lab
    return fp8lab


def same(a, b):
    """Bit for bit (NaN-safe): same dtype, shape and bytes."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def operand(rows, cols, seed):
    """Normal values with two outlier columns, as the Python API tests use."""
    x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    x[:, 3] *= 300.0
    x[:, cols // 2] *= 1e-3
    return x


def main():
    args = peers_common.arguments(__doc__.splitlines()[0]).parse_args()
    torch.set_num_threads(1)
    fp8lab = import_fp8lab(args.build)
    failures, rows = [], []

    def check(name, ok, detail="", holds="equal"):
        rows.append({"check": name, "result": holds if ok else f"FAILS {detail}".strip()})
        if not ok:
            failures.append(f"{name}: {detail or 'differs from the NumPy path'}")

    x = operand(96, 384, seed=16)
    t = torch.from_numpy(x.copy())
    address = fp8lab._operand_address(t)
    check("float32 contiguous: read in place (operand address == tensor.data_ptr())", address == t.data_ptr(),
          f"address 0x{address:x}, tensor 0x{t.data_ptr():x}", holds="yes")
    for fmt in FORMATS:
        for g in GRANULARITIES:
            for rule in ("fp32", "pow2"):
                q, r = fp8lab.quantize(t, g, format=fmt, scale=rule), fp8lab.quantize(x, g, format=fmt, scale=rule)
                check(f"quantize float32 {fmt} {g} scale {rule}: codes, scales, dequantize",
                      same(q.codes, r.codes) and same(q.scales, r.scales) and same(q.dequantize(), r.dequantize()))
    b = torch.from_numpy(operand(64, 384, seed=17))
    for config in GEMM_CONFIGS:
        check(f"gemm float32 {config or 'defaults'}", same(fp8lab.gemm(t, b, **config), fp8lab.gemm(x, b.numpy(), **config)))

    # Views torch cannot hand over as C-contiguous: one copy (the address differs), same results.
    for name, view in (("transposed", t.T), ("every other column", t[:, ::2])):
        copied = fp8lab._operand_address(view) != view.data_ptr()
        check(f"float32 {name}: copied once (operand address != tensor.data_ptr())", copied, holds="yes")
        reference = np.ascontiguousarray(view.numpy())
        check(f"quantize float32 {name} tile:1x32", same(fp8lab.quantize(view, "tile:1x32").codes,
                                                         fp8lab.quantize(reference, "tile:1x32").codes))

    for dtype in (torch.float64, torch.float16):
        td = t.to(dtype) if dtype == torch.float64 else (t / 4).to(dtype)   # /4: every value finite in float16
        name = str(dtype).replace("torch.", "")
        for g in ("tile:1x128", "row"):
            q, r = fp8lab.quantize(td, g), fp8lab.quantize(td.numpy(), g)
            check(f"quantize {name} {g}: codes, scales", same(q.codes, r.codes) and same(q.scales, r.scales))
        check(f"gemm {name}", same(fp8lab.gemm(td, td[:32]), fp8lab.gemm(td.numpy(), td[:32].numpy())))

    refused = {}
    for name, tensor in (("bfloat16", t.to(torch.bfloat16)), ("float8_e4m3fn", t.clamp(-448, 448).to(torch.float8_e4m3fn)),
                         ("float32 requires_grad", t.clone().requires_grad_())):
        try:
            result = fp8lab.quantize(tensor, "tile:1x128")
            failures.append(f"{name}: quantize gave {result!r}; expected an exception (NumPy cannot import it)")
            refused[name] = f"ACCEPTED: {result!r}"
        except Exception as e:  # noqa: BLE001 -- the finding is which exception, whatever it is
            refused[name] = f"{type(e).__name__}: {e}"

    equal = sum(not r["result"].startswith("FAILS") for r in rows)
    table = ["| check | result |", "| --- | --- |"] + [f"| {r['check']} | {r['result']} |" for r in rows]
    peers_common.write_finding(args.results, "pyapi_dlpack", {
        "checks": rows, "refused": refused,
        "markdown": [f"The Python API (harness/python) with torch {torch.__version__} CPU tensors through DLPack, under "
                     f"NumPy {np.__version__}: {equal} of {len(rows)} checks hold: results equal to the NumPy path bit for "
                     "bit (codes, scales, dequantized values, GEMM outputs), float32 tensors read in place, strided "
                     "ones copied once.", "",
                     "Under NumPy 2 every float64/float16 input (NumPy arrays too) failed with 'input has 0 values' "
                     "until harness/python/array_conversion.cpp took nbytes from NumPy: Debian's pybind11 2.10 reads "
                     "the NumPy 1 dtype layout (the CI's Python tests, under NumPy 1.24, could not see it).", ""] + table +
                    ["", "Tensors NumPy cannot import through DLPack (an exception, as expected):", ""] +
                    [f"- {k}: {v}" for k, v in refused.items()]})
    print(f"{equal} of {len(rows)} checks hold; refused: {refused}")
    peers_common.verdict(failures)


if __name__ == "__main__":
    main()
