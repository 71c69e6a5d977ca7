"""Reading an fp8lab results file as the grid of /work/results-grid-contract.md.

`open_study(path)` gives an xarray.Dataset whose dimensions are the study's axes (kind's axis
order, values in spec order), so a notebook writes `ds.sel(layer=..., promotion=128)`.

Two on-disk layouts exist:
  * grid (what fp8lab writes): already the contract's shape; returned as is.
  * flat (what earlier fp8lab versions wrote): one `run` dimension, every axis a string
    variable. Kept readable because such files exist (results of earlier runs, shards,
    baselines): they are converted here to the same grid. Nothing new is written in this layout.

Either way `ds.attrs["complete"]` is "true" or "false" and `ds.attrs["fp8lab_layout"]` says
which layout the file had ("grid" or "flat, converted to grid").
"""
import json
import re
import warnings

import numpy as np
import pandas as pd
import xarray as xr

# The contract's "never" promotion sentinel: N_C = 0 means the partial is never promoted.
PROMOTION_NEVER = 0


def open_study(path):
    """The results file at `path` as a grid Dataset (see the module docstring)."""
    ds = xr.open_dataset(path, engine="h5netcdf")
    if "run" in ds.dims:
        ds = _flat_to_grid(ds)
        ds.attrs["fp8lab_layout"] = "flat, converted to grid"
    else:
        ds.attrs["fp8lab_layout"] = "grid"
    ds.attrs["complete"] = "true" if str(ds.attrs.get("complete", "false")).lower() == "true" else "false"
    # Granularity tile sizes are coordinates along their axis (contract 1), whichever way the
    # writer marked them.
    aux = [v for v in ds.data_vars if re.fullmatch(r".+_granularity_tile_(rows|cols)", v)]
    return ds.set_coords(aux)


def is_complete(ds):
    return ds.attrs.get("complete") == "true"


def axes(ds):
    """The study's axes: the dimensions that are not a metric's extra trailing dimension."""
    return [d for d in ds.dims if "status" in ds and d in ds.status.dims]


def points_done(ds):
    """(finished points, all points): a point is finished when its status is not ""."""
    status = ds.status.values
    return int((status != "").sum()), int(status.size)


def granularity_tile(text):
    """(rows, cols) of one scale of a granularity axis value, as the writer stores them
    (harness/study/runner.cpp): -1 is the whole extent, so "row" is (1, -1), one row by all
    of K, and "tensor" is (-1, -1)."""
    if text == "row":
        return (1, -1)
    match = re.fullmatch(r"(tile|block):(\d+)x(\d+)", text)
    return (int(match.group(2)), int(match.group(3))) if match else (-1, -1)


# ---- the flat layout -------------------------------------------------------------------------

# Columns of the flat layout that the grid renames or no longer needs.
_FLAT_RENAMES = {"skip_reason": "reason", "operand_source": "operands"}
_FLAT_ONLY = ["grid_index", "point_key"]


def _flat_to_grid(flat):
    spec = json.loads(flat.attrs["resolved_spec_json"])
    # Axis order: the kind's, which is the order the flat writer created the axis columns in;
    # values: spec order (the JSON keeps each axis's list as the spec gave it).
    axis_names = [v for v in flat.data_vars if v in spec["axes"]]
    ds = flat.drop_vars([v for v in _FLAT_ONLY if v in flat]).rename(
        {old: new for old, new in _FLAT_RENAMES.items() if old in flat})
    ds = ds.load()
    values = {}
    for axis in axis_names:
        column, spec_values = _axis_numbers(axis, ds[axis].values, spec["axes"][axis])
        ds[axis] = ("run", column)
        values[axis] = spec_values
    with warnings.catch_warnings():
        # xarray fills the (not yet known to be empty) holes of int columns with NaN first
        # and warns about the cast; the filled values are replaced or promoted to float.
        warnings.simplefilter("ignore", RuntimeWarning)
        ds = ds.set_index(run=axis_names).unstack("run")
    # unstack sorts each axis; the contract keeps spec order, and a point never run (an
    # interrupted file) is still a grid element, with status "".
    ds = ds.reindex(values)
    for name, variable in ds.data_vars.items():
        if variable.dtype == object:
            ds[name] = variable.fillna("")
    ds = ds.transpose(*axis_names)
    for axis in axis_names:
        if axis.endswith("_granularity"):
            tiles = [granularity_tile(v) for v in ds[axis].values]
            ds = ds.assign_coords({
                f"{axis}_tile_rows": (axis, np.array([t[0] for t in tiles], dtype=np.int64),
                                      {"long_name": f"rows of one {axis} scale (-1: not a tile or block)", "units": "1"}),
                f"{axis}_tile_cols": (axis, np.array([t[1] for t in tiles], dtype=np.int64),
                                      {"long_name": f"columns of one {axis} scale (-1: not a tile or block)", "units": "1"})})
        if axis == "promotion":
            ds[axis].attrs.update(flag_values=PROMOTION_NEVER, flag_meanings="never",
                                  comment="FP32 promotion interval N_C in elements of K; 0 means never promoted")
    # The flat writer's root `operands` described the synthetic generator even for real layers;
    # the per-point `operands` (its operand_source column) is the true one.
    ds.attrs.pop("operands", None)
    # The on-disk encoding (the unlimited `run` dimension, its chunks) describes the flat
    # file; without clearing it ds.to_netcdf(...) of the grid fails.
    ds.encoding = {"source": flat.encoding.get("source")}
    for variable in ds.variables.values():
        variable.encoding = {}
    ds.attrs.setdefault("study_name", ds.attrs.get("study", ""))
    done = int((ds.status.values != "").sum())
    ds.attrs["points_total"] = str(spec.get("points", ds.status.size))
    ds.attrs["points_done"] = str(done)
    finished = bool(ds.attrs.get("utc_end")) and done == int(ds.attrs["points_total"])
    ds.attrs["complete"] = "true" if finished else "false"
    return ds


def _axis_numbers(axis, column, spec_values):
    """An axis as the contract stores it: "never" promotion -> 0, all-integer axes -> int64."""
    def convert(v):
        return PROMOTION_NEVER if axis == "promotion" and v == "never" else v
    column = [convert(v) for v in column]
    spec_values = [convert(v) for v in spec_values]
    if all(isinstance(v, int) or re.fullmatch(r"-?\d+", str(v)) for v in spec_values):
        return np.array(column, dtype=np.int64), np.array(spec_values, dtype=np.int64)
    return np.array(column, dtype=object), np.array(spec_values, dtype=object)
