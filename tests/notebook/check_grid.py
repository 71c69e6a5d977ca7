"""Checks that notebooks/fp8lab_results.open_study gives a results file as the grid of the
results contract (/work/results-grid-contract.md), independently of how it gets there.

Usage: check_grid.py RESULTS.h5 SOURCE_DIR
Expectations come from the spec text the file carries (its [axes] table, read with tomllib)
and from the gemm kind's axis order in harness/study/gemm_study.cpp, not from the code under
test. For a flat (`run`) file every row is also looked up in the grid by its axis values and
compared variable by variable, and a truncated copy must come back as complete = "false"
with its missing points' status "".
"""
import math
import pathlib
import sys
import tempfile
import tomllib

import numpy as np
import xarray as xr

results, source_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
sys.path.insert(0, str(source_dir / "notebooks"))
import fp8lab_results  # noqa: E402

# harness/study/gemm_study.cpp, GemmStudy::axes(), with each axis's default value.
GEMM_AXES = {"layer": "shape:1024x1024", "gemm": "fprop", "format": "e4m3", "a_granularity": "tile:1x128",
             "b_granularity": "block:128x128", "scale": "fp32", "accum": "hopper", "promotion": "128",
             "distribution": "gaussian", "seed": "1"}
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def contract_value(axis, text):
    """An axis value as the contract stores it (numbers as int64, "never" promotion as 0)."""
    text = str(text)
    if axis == "promotion" and text == "never":
        return 0
    return int(text) if text.lstrip("-").isdigit() else text


def same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


ds = fp8lab_results.open_study(results)
spec = tomllib.loads(ds.attrs["spec_toml"])
expected_axes = {axis: [contract_value(axis, v) for v in spec["axes"].get(axis, [default])]
                 for axis, default in GEMM_AXES.items()}

check(ds.attrs.get("study_kind") == "gemm", f"study_kind {ds.attrs.get('study_kind')!r}, the check knows gemm only")
check("run" not in ds.dims, "a `run` dimension is left")
check(fp8lab_results.axes(ds) == list(GEMM_AXES), f"axes {fp8lab_results.axes(ds)} are not the kind's order {list(GEMM_AXES)}")
for axis, values in expected_axes.items():
    got = [v.item() if hasattr(v, "item") else v for v in ds[axis].values]
    check(got == values, f"axis {axis}: {got} is not the spec's {values}")
    if all(isinstance(v, int) for v in values):
        check(ds[axis].dtype == np.int64, f"numeric axis {axis} is {ds[axis].dtype}, not int64")
check(int(ds.promotion.attrs.get("flag_values", -1)) == 0 and ds.promotion.attrs.get("flag_meanings") == "never",
      "promotion lacks flag_values = 0 / flag_meanings = never")
for axis in ("a_granularity", "b_granularity"):
    for value, rows, cols in zip(ds[axis].values, ds[f"{axis}_tile_rows"].values, ds[f"{axis}_tile_cols"].values):
        size = value.split(":")[1].split("x") if ":" in value else ["-1", "-1"]
        check((int(rows), int(cols)) == (int(size[0]), int(size[1])), f"{axis} {value}: tile {rows}x{cols}")
shape = tuple(len(v) for v in expected_axes.values())
for name in ("status", "reason", "operands", "total_rel_frobenius"):
    check(name in ds and ds[name].shape == shape, f"{name} is missing or not of shape {shape}")
check(ds.attrs.get("complete") == "true", f"complete = {ds.attrs.get('complete')!r} for a finished run")
# What a notebook writes must work with no reshaping.
first = {axis: values[0] for axis, values in expected_axes.items()}
check(ds.sel(first).status.item() in ("ok", "skipped"), "ds.sel(<first point>) has no status")
check(len(ds.to_dataframe()) == int(np.prod(shape)), "to_dataframe() does not have one row per grid point")

flat = xr.open_dataset(results, engine="h5netcdf")
if "run" in flat.dims:
    flat = flat.load()
    renamed = {"skip_reason": "reason", "operand_source": "operands"}
    for i in range(flat.sizes["run"]):
        point = {axis: contract_value(axis, flat[axis].values[i]) for axis in GEMM_AXES}
        cell = ds.sel(point)
        for name in flat.data_vars:
            if name in GEMM_AXES or name in ("grid_index", "point_key"):
                continue
            want, got = flat[name][i].item(), cell[renamed.get(name, name)].item()
            check(same(want, got), f"run {i} {name}: flat {want!r}, grid {got!r}")
    # An interrupted run: the first rows only, no end time.
    truncated = flat.isel(run=slice(0, max(flat.sizes["run"] - 3, 1)))
    truncated.attrs["utc_end"] = ""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "truncated.h5"
        truncated.to_netcdf(path, engine="h5netcdf")
        partial = fp8lab_results.open_study(path)
        done, total = fp8lab_results.points_done(partial)
        check(partial.attrs["complete"] == "false", "a truncated file is not marked complete = false")
        check((done, total) == (truncated.sizes["run"], int(np.prod(shape))), f"truncated: {done} of {total} points")
        check(partial.status.shape == shape, "a truncated file is not the full grid")

if failures:
    print("\n".join(f"FAIL: {results.name}: {f}" for f in failures[:20]), file=sys.stderr)
    sys.exit(1)
print(f"grid ok: {results.name} ({ds.attrs['fp8lab_layout']}), dimensions {dict(ds.sizes)}")
