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
# harness/study/recompute_study.cpp, RecomputeStudy::axes(), likewise.
RECOMPUTE_AXES = {"model": "stories260K", "policy": "none", "cache": "policy", "recipe": "fp32", "tokens": "64"}
KIND_AXES = {"gemm": GEMM_AXES, "recompute": RECOMPUTE_AXES}
KIND_METRIC = {"gemm": "total_rel_frobenius", "recompute": "grad_rel_frobenius"}  # one metric each must have
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


def check_other_kind():
    """Study kinds without a KIND_AXES entry (written in the grid layout only): every axis the spec
    lists is a dimension with the spec's values in the spec's order, numbers as int64, the
    per-point variables span the axes, and the grid reads with no reshaping."""
    check("run" not in ds.dims, "a `run` dimension is left")
    spec_axes = spec.get("axes", {})
    for axis, values in spec_axes.items():
        want = [contract_value(axis, v) for v in values]
        if axis in ds.coords and axis not in ds.dims:
            check_parameter_axis(axis, want, spec_axes)
            continue
        got = [v.item() if hasattr(v, "item") else v for v in ds[axis].values] if axis in ds.dims else None
        if got is not None and any("[" in str(v) for v in got):
            check_owner_axis(axis, got, [str(v) for v in values])
            continue
        check(got == want, f"axis {axis}: {got} is not the spec's {want}")
        if got is not None and all(isinstance(v, int) for v in want):
            check(ds[axis].dtype == np.int64, f"numeric axis {axis} is {ds[axis].dtype}, not int64")
    axes = fp8lab_results.axes(ds)
    for name in ("status", "reason", "operands"):
        check(name in ds and list(ds[name].dims) == axes, f"{name} is missing or not over the axes {axes}")
    check(ds.attrs.get("complete") == "true", f"complete = {ds.attrs.get('complete')!r} for a finished run")
    check(len(ds.status.to_dataframe()) == int(np.prod([ds.sizes[a] for a in axes])),
          "to_dataframe() does not have one row per grid point")


def check_parameter_axis(axis, want, spec_axes):
    """A parameter axis (results/README.md, "Axes that apply to some values only") is a
    coordinate along its owner's dimension: every value the spec lists appears where it applies,
    nothing else does, and the owner's labels say the same value."""
    coordinate = ds[axis]
    check(len(coordinate.dims) == 1, f"parameter axis {axis} is not a coordinate along one dimension")
    owner = coordinate.dims[0]
    values = coordinate.values
    present = [int(v) for v in values if not np.isnan(v)]
    check(sorted(set(present)) == sorted(set(want)), f"parameter axis {axis}: values {sorted(set(present))}, spec {want}")
    for label, value in zip(ds[owner].values, values):
        in_label = f"{axis}={int(value)}" in str(label) if not np.isnan(value) else f"{axis}=" not in str(label)
        check(in_label, f"{owner} entry {label!r} disagrees with its {axis} coordinate {value}")


def check_owner_axis(axis, got, want):
    """An axis with parameter axes: each spec value once where no parameter applies, else once per
    combination of its parameters' values, in spec order."""
    bases = [str(v).split("[")[0] for v in got]
    check(list(dict.fromkeys(bases)) == want, f"axis {axis}: entries {got} do not follow the spec's {want}")
    check(len(set(got)) == len(got), f"axis {axis}: an entry is repeated")


kind = ds.attrs.get("study_kind")
if kind not in KIND_AXES:  # kinds with no detailed entry above get the generic check
    check_other_kind()
    if failures:
        print("\n".join(f"FAIL: {results.name}: {f}" for f in failures[:20]), file=sys.stderr)
        sys.exit(1)
    print(f"grid ok: {results.name} ({ds.attrs['study_kind']}), dimensions {dict(ds.sizes)}")
    sys.exit(0)

# The kind has `distribution` and `seed` axes only when every layer is synthetic (a real
# stories260K layer or own `tensors` has no distribution to claim; gemm_study.cpp axes()).
layers = spec["axes"].get("layer", [GEMM_AXES["layer"]])
if kind == "gemm" and any(l.startswith("stories260K/") or l == "tensors" for l in layers):
    KIND_AXES["gemm"] = {axis: default for axis, default in GEMM_AXES.items() if axis not in ("distribution", "seed")}
AXES = KIND_AXES[kind]  # the axes checked below: this kind's, in its order
expected_axes = {axis: [contract_value(axis, v) for v in spec["axes"].get(axis, [default])]
                 for axis, default in AXES.items()}

check("run" not in ds.dims, "a `run` dimension is left")
check(fp8lab_results.axes(ds) == list(AXES), f"axes {fp8lab_results.axes(ds)} are not the kind's order {list(AXES)}")
for axis, values in expected_axes.items():
    got = [v.item() if hasattr(v, "item") else v for v in ds[axis].values]
    check(got == values, f"axis {axis}: {got} is not the spec's {values}")
    if all(isinstance(v, int) for v in values):
        check(ds[axis].dtype == np.int64, f"numeric axis {axis} is {ds[axis].dtype}, not int64")
check(kind != "gemm" or (int(ds.promotion.attrs.get("flag_values", -1)) == 0 and
                         ds.promotion.attrs.get("flag_meanings") == "never"),
      "promotion lacks flag_values = 0 / flag_meanings = never")
for axis in ("a_granularity", "b_granularity") if kind == "gemm" else ():
    for value, rows, cols in zip(ds[axis].values, ds[f"{axis}_tile_rows"].values, ds[f"{axis}_tile_cols"].values):
        # -1 is the whole extent: a row scale spans all of K, a tensor scale everything.
        size = value.split(":")[1].split("x") if ":" in value else ["1", "-1"] if value == "row" else ["-1", "-1"]
        check((int(rows), int(cols)) == (int(size[0]), int(size[1])), f"{axis} {value}: tile {rows}x{cols}")
shape = tuple(len(v) for v in expected_axes.values())
for name in ("status", "reason", "operands", KIND_METRIC[kind]):
    check(name in ds and ds[name].shape == shape, f"{name} is missing or not of shape {shape}")
check(ds.attrs.get("complete") == "true", f"complete = {ds.attrs.get('complete')!r} for a finished run")
# What a notebook writes must work with no reshaping.
first = {axis: values[0] for axis, values in expected_axes.items()}
check(ds.sel(first).status.item() in ("ok", "skipped"), "ds.sel(<first point>) has no status")
per_point = ds.drop_dims([d for d in ds.dims if d not in AXES])  # a metric's extra dimension (block, step) aside
check(len(per_point.to_dataframe()) == int(np.prod(shape)), "to_dataframe() does not have one row per grid point")

flat = xr.open_dataset(results, engine="h5netcdf")
if "run" in flat.dims:
    flat = flat.load()
    renamed = {"skip_reason": "reason", "operand_source": "operands"}
    for i in range(flat.sizes["run"]):
        point = {axis: contract_value(axis, flat[axis].values[i]) for axis in AXES}
        cell = ds.sel(point)
        for name in flat.data_vars:
            if name in AXES or name in ("grid_index", "point_key"):
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
