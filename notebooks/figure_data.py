"""The numbers a figure draws, read back from the matplotlib figure itself, so that every saved
figure has them beside it as CSV (fp8lab_figures.finish writes FIGURE.csv next to FIGURE.png) and a
reader can check or re-plot a finding without the results file. One row per drawn value:

    axes, axes_title, kind, series, index, x, y

kind: line (Line2D: curves, markers, reference lines), points (scatter), bar (bar heights at their
centres), image (heat maps: x the column, y the row, value in `value`). Bands (fill_between) and
text are not numbers of their own: a band's edges are drawn from the same data as its lines.
"""
import csv

import numpy as np
from matplotlib.collections import PathCollection

FIELDS = ["axes", "axes_title", "kind", "series", "index", "x", "y", "value"]


def _number(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "" if np.isnan(f) else repr(f)


def figure_rows(fig):
    rows = []
    for a, ax in enumerate(fig.axes):
        title = ax.get_title()
        base = {"axes": a, "axes_title": title}
        for line in ax.get_lines():
            x, y = np.atleast_1d(line.get_xdata(orig=True)), np.atleast_1d(line.get_ydata(orig=True))
            for i, (xi, yi) in enumerate(zip(x, y)):
                rows.append({**base, "kind": "line", "series": line.get_label(), "index": i, "x": _number(xi),
                             "y": _number(yi), "value": ""})
        for collection in ax.collections:
            if isinstance(collection, PathCollection):
                for i, (xi, yi) in enumerate(collection.get_offsets()):
                    rows.append({**base, "kind": "points", "series": collection.get_label(), "index": i,
                                 "x": _number(xi), "y": _number(yi), "value": ""})
        for container in ax.containers:
            patches = getattr(container, "patches", None)
            if not patches:
                continue
            for i, p in enumerate(patches):
                rows.append({**base, "kind": "bar", "series": container.get_label(), "index": i,
                             "x": _number(p.get_x() + p.get_width() / 2), "y": _number(p.get_height()), "value": ""})
        for image in ax.get_images():
            values = np.asarray(image.get_array())
            for (r, c), v in np.ndenumerate(values):
                rows.append({**base, "kind": "image", "series": image.get_label(), "index": r * values.shape[1] + c,
                             "x": c, "y": r, "value": _number(v)})
    return rows


def write_figure_csv(fig, path):
    rows = figure_rows(fig)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)
