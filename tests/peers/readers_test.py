"""Tensor readers: fp8lab's .npy and .safetensors readers (data/tensor_io, via
read_tensor_driver.cpp) against files written by numpy.save and safetensors.torch.save_file, in
every dtype fp8lab supports (npy: f32, f64, f16, u8, bf16 as the structured dtype
[('bf16', '<u2')]; safetensors: F32, F64, F16, BF16, F8_E4M3, F8_E5M2, U8), every code of the
16- and 8-bit formats (NaN, inf and subnormals included). Checked: dtype, shape, the bytes as
read, and the FP32 values the quantizers see against torch's own .float() (NaN: both NaN).
Files in dtypes fp8lab does not read (numpy.save of ml_dtypes' bfloat16 / float8, int32) must
be refused with one line and exit 2; what happens is recorded.
"""
import pathlib
import subprocess
import tempfile

import ml_dtypes
import numpy as np
import torch
from safetensors.torch import save_file

import peers_common


def all_codes(bits, shape_cols):
    codes = np.arange(1 << bits, dtype=np.uint32).astype(np.uint8 if bits == 8 else np.uint16)
    return codes.reshape(-1, shape_cols)


def f32_values():
    rng = np.random.default_rng(20260518)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    x.reshape(-1)[:6] = [np.inf, -np.inf, np.nan, 1e-45, -0.0, 3.4e38]
    return x


def torch_cases():
    """safetensors.torch.save_file inputs: name -> (tensor, dtype name fp8lab should report)."""
    return {
        "f32": (torch.from_numpy(f32_values()), "f32"),
        "f64": (torch.from_numpy(f32_values().astype(np.float64) * (1 + 2.0**-40)), "f64"),
        "f16": (torch.from_numpy(all_codes(16, 256).view(np.int16)).view(torch.float16), "f16"),
        "bf16": (torch.from_numpy(all_codes(16, 512).view(np.int16)).view(torch.bfloat16), "bf16"),
        "e4m3": (torch.from_numpy(all_codes(8, 16)).view(torch.float8_e4m3fn), "e4m3"),
        "e5m2": (torch.from_numpy(all_codes(8, 32)).view(torch.float8_e5m2), "e5m2"),
        "u8": (torch.from_numpy(all_codes(8, 64)), "u8"),
        "vector_f32": (torch.from_numpy(f32_values().reshape(-1)[:100].copy()), "f32"),
    }


def numpy_cases():
    """numpy.save inputs: name -> (array, dtype fp8lab should report, or None when it must refuse)."""
    bf16_bits = all_codes(16, 512)
    return {
        "f32": (f32_values(), "f32"),
        "f64": (f32_values().astype(np.float64) * (1 + 2.0**-40), "f64"),
        "f16": (all_codes(16, 256).view(np.float16), "f16"),
        "u8": (all_codes(8, 64), "u8"),
        "bf16_structured": (bf16_bits.view(np.dtype([("bf16", "<u2")])).reshape(bf16_bits.shape), "bf16"),
        "ml_dtypes_bfloat16": (bf16_bits.view(ml_dtypes.bfloat16), None),
        "ml_dtypes_float8_e4m3fn": (all_codes(8, 16).view(ml_dtypes.float8_e4m3fn), None),
        "int32": (np.arange(12, dtype=np.int32).reshape(3, 4), None),
    }


def torch_float(raw_tensor):
    return raw_tensor.float().numpy() if raw_tensor.dtype != torch.uint8 else None


def read(driver, file, name, prefix):
    done = subprocess.run([str(driver), str(file), name, str(prefix)], capture_output=True, text=True)
    if done.returncode != 0:
        # The file's temporary folder is no finding: keep the committed JSON stable.
        return {"exit": done.returncode, "stderr": done.stderr.strip().replace(str(file.parent), "DIR")}
    words = pathlib.Path(f"{prefix}.txt").read_text().split()
    f32 = pathlib.Path(f"{prefix}.f32")
    return {"exit": 0, "dtype": words[0], "shape": [int(w) for w in words[1:]],
            "raw": pathlib.Path(f"{prefix}.raw").read_bytes(),
            "f32": np.fromfile(f32, dtype=np.float32) if f32.exists() else None}


def compare(got, expected_dtype, shape, raw, values):
    """Problems with one read (empty: it agrees)."""
    problems = []
    if got["exit"] != 0:
        return [f"refused: {got['stderr']}"]
    if got["dtype"] != expected_dtype:
        problems.append(f"dtype {got['dtype']}, expected {expected_dtype}")
    if got["shape"] != list(shape):
        problems.append(f"shape {got['shape']}, expected {list(shape)}")
    if got["raw"] != raw:
        problems.append("bytes differ")
    if values is not None:
        ours = got["f32"].view(np.uint32)
        theirs = np.ascontiguousarray(values, dtype=np.float32).reshape(-1).view(np.uint32)
        both_nan = np.isnan(got["f32"]) & np.isnan(theirs.view(np.float32))
        differ = int(np.count_nonzero((ours != theirs) & ~both_nan))
        if differ:
            problems.append(f"{differ} FP32 values differ from torch's .float()")
    return problems


def main():
    args = peers_common.arguments(__doc__.splitlines()[0]).parse_args()
    driver = args.build / "tests" / "peers" / "fp8lab_peers_read_tensor"
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        tensors = torch_cases()
        save_file({name: t for name, (t, _) in tensors.items()}, str(tmp / "all.safetensors"))
        for name, (t, dtype) in tensors.items():
            got = read(driver, tmp / "all.safetensors", name, tmp / name)
            raw = t.contiguous().view(torch.uint8).numpy().tobytes() if t.dtype != torch.uint8 else t.numpy().tobytes()
            problems = compare(got, dtype, t.shape, raw, torch_float(t))
            rows.append({"writer": "safetensors.torch.save_file", "case": name, "torch_dtype": str(t.dtype),
                         "fp8lab_dtype": got.get("dtype"), "elements": t.numel(), "agrees": not problems,
                         "problems": problems})
        for name, (a, dtype) in numpy_cases().items():
            np.save(tmp / f"{name}.npy", a)
            got = read(driver, tmp / f"{name}.npy", "-", tmp / f"np_{name}")
            row = {"writer": "numpy.save", "case": name, "numpy_dtype": str(a.dtype), "elements": int(a.size)}
            if dtype is None:
                problems = [] if got["exit"] == 2 and "\n" not in got.get("stderr", "x") else \
                    [f"expected a one-line refusal (exit 2), got exit {got['exit']} {got.get('stderr', got.get('dtype'))}"]
                row.update(refused=got["exit"] == 2, message=got.get("stderr"), agrees=not problems, problems=problems)
            else:
                values = None
                if a.dtype.kind == "f":
                    values = a.astype(np.float32)
                elif a.dtype.names:
                    values = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).float().numpy()
                problems = compare(got, dtype, a.shape, a.tobytes(), values)
                row.update(fp8lab_dtype=got.get("dtype"), agrees=not problems, problems=problems)
            rows.append(row)
    for r in rows:
        print(r)
        if not r["agrees"]:
            failures.append(f"{r['writer']} {r['case']}: {r['problems']}")
    md = ["Tensor readers against files written by the peers (values: fp8lab's FP32 vs torch's .float()).", "",
          "| writer | case | dtype written | fp8lab reads as | elements | result |", "| --- | --- | --- | --- | ---: | --- |"]
    for r in rows:
        result = "agrees: dtype, shape, bytes, values" if r["agrees"] and "refused" not in r else \
            (f"refused as expected: {r['message']}" if r.get("refused") else "; ".join(r["problems"]))
        md.append(f"| {r['writer']} | {r['case']} | {r.get('torch_dtype', r.get('numpy_dtype'))} | "
                  f"{r.get('fp8lab_dtype') or '-'} | {r['elements']} | {result} |")
    peers_common.write_finding(args.results, "readers", {"cases": rows, "markdown": md})
    peers_common.verdict(failures)


if __name__ == "__main__":
    main()
