"""Plotting shared by the study notebooks: paths, the figure conventions, captions.

The conventions every figure follows (a numerics paper's reviewer checks them):
  * values on log axes are points or lines, never bars;
  * colour encodes one variable and line style / marker another, each with its own legend,
    and legends sit outside the axes;
  * a 95% interval is drawn wherever the file has one (sampled gemm studies write
    *_ci_low / *_ci_high), and the caption says when errors are exact instead;
  * the DeepSeek-V3 recipe (1x128 activation tiles, 128x128 weight blocks, N_C = 128) is
    highlighted wherever the study contains it;
  * published figures are labelled reference marks inside the axes, cited in the caption
    (numbers from FACTS.md, not measured here);
  * a caption under the figure says what the operands are, where the data came from, and
    a red banner says when the file is incomplete.
"""
import os
import pathlib
import re
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import numpy as np  # noqa: E402

import figure_data  # noqa: E402
import fp8lab_results  # noqa: E402

DEEPSEEK_V3 = {"a_granularity": "tile:1x128", "b_granularity": "block:128x128", "promotion": 128}
DEEPSEEK_V3_LABEL = "DeepSeek-V3 recipe (1x128 / 128x128, N_C 128)"
HIGHLIGHT = "#d62728"  # the recipe's mark; no data series uses this red
REFERENCE = "0.35"     # reference marks: dark grey, dash-dot
INTERVAL_NOTE = ("error bars: 95% intervals of the sampled estimate (ratio estimator, harness/metrics/gemm_errors.hpp; "
                 "a bar running off the axis edge reaches 0)")

# Published figures (FACTS.md, with their sources) and what they become in fp8lab's metrics.
# SQNR = 20 log10(||r|| / ||y - r||) = -20 log10(relative Frobenius error), so torchao's
# 28 dB bound on a blockwise FP8 GEMM is a relative Frobenius error of 10^(-28/20).
TORCHAO_GEMM_SQNR_DB = 28.0
TORCHAO_GEMM_REL_FROBENIUS = 10 ** (-TORCHAO_GEMM_SQNR_DB / 20)
TORCHAO_CITATION = "torchao blockwise FP8 tests: GEMM SQNR >= 28 dB (= relative Frobenius error 0.040)"
DEEPSEEK_V3_ACCUMULATION = {"k": 4096, "max_rel": 0.02}
DEEPSEEK_V3_CITATION = ("DeepSeek-V3 (arXiv 2412.19437): 'nearly 2%' maximum relative error "
                        "at K = 4096 without promotion, random operands of unstated distribution; "
                        "promotion every N_C = 128 elements")


def caller_directory():
    """The directory the user ran the notebook from, which relative FP8LAB_RESULTS /
    FP8LAB_FIGURES paths mean. A kernel runs in notebooks/ (nbconvert and Jupyter start it
    there), so its own working directory is not the user's: the directory is that of the
    process that started the kernel (`jupyter nbconvert` or the Jupyter server, on Linux
    /proc/PPID/cwd), else the shell's $PWD, else the kernel's working directory."""
    try:
        return pathlib.Path(os.readlink(f"/proc/{os.getppid()}/cwd"))
    except OSError:
        pwd = os.environ.get("PWD")
        return pathlib.Path(pwd) if pwd and os.path.isdir(pwd) else pathlib.Path.cwd()


def environment_path(name, default):
    """$name as a path (relative to caller_directory(), absolute as given), else default."""
    value = os.environ.get(name)
    return caller_directory() / value if value else default


def paths(study):
    """(results file, figures folder) of a study: results/<study>.h5 and results/figures/ of
    the repository, or FP8LAB_RESULTS / FP8LAB_FIGURES (how the tests run a small sweep; a
    relative path is relative to the directory the notebook was run from).
    Also sets the plot style all the figures share."""
    root = environment_path("FP8LAB_ROOT", pathlib.Path(__file__).resolve().parent.parent)
    results = environment_path("FP8LAB_RESULTS", root / "results" / f"{study}.h5")
    figures = environment_path("FP8LAB_FIGURES", root / "results" / "figures")
    figures.mkdir(parents=True, exist_ok=True)
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "legend.fontsize": 8,
                         "axes.grid": True, "grid.alpha": 0.25, "grid.linewidth": 0.5})
    return results, figures


def open_and_describe(results):
    """Opens the study as a grid and prints what a reader checks first."""
    ds = fp8lab_results.open_study(results)
    done, total = fp8lab_results.points_done(ds)
    print(f"{ds.attrs.get('study_name')}: layout {ds.attrs['fp8lab_layout']}; "
          f"dimensions {dict(ds.sizes)}")
    print(f"points: {done} of {total} run, {int((ds.status.values == 'skipped').sum())} skipped, "
          f"complete = {ds.attrs['complete']}")
    print("operands:", operands_text(ds))
    return ds


# ---- selecting ------------------------------------------------------------------------------

def squeeze_single(ds, keep=()):
    """Drops every axis of length 1 (the caption names their values) except those in keep."""
    single = [a for a in fp8lab_results.axes(ds) if ds.sizes[a] == 1 and a not in keep]
    return ds.isel({a: 0 for a in single}), {a: ds[a].values[0] for a in single}


def is_deepseek_v3(a_granularity, b_granularity, promotion):
    return (a_granularity, b_granularity, int(promotion)) == tuple(DEEPSEEK_V3.values())


def promotion_label(n_c):
    return "never" if int(n_c) == fp8lab_results.PROMOTION_NEVER else str(int(n_c))


# stories260K (llama2.c) blocks run wq, wk, wv (attention), wo, then w1 and w3 (the two
# SwiGLU inputs) before w2; the classifier is last.
_LLAMA_BLOCK_ORDER = ["wq", "wk", "wv", "wo", "w1", "w3", "w2"]


def model_order(layers):
    """Layers in the order the model runs them (llama2.c names), else as given."""
    def key(name):
        match = re.search(r"L(\d+)\.(w[qkvo123])$", name)
        if match:
            return (int(match.group(1)), _LLAMA_BLOCK_ORDER.index(match.group(2)))
        return (10**9, 0) if name.endswith("classifier") else None
    keys = [key(str(layer)) for layer in layers]
    if any(k is None for k in keys):
        return list(layers)
    return [layer for _, layer in sorted(zip(keys, layers), key=lambda pair: pair[0])]


def short_layer(name):
    return str(name).split("/")[-1]


# ---- drawing --------------------------------------------------------------------------------

def _remember(ax, values):
    """Positive values drawn on ax, for fit_log_axis."""
    values = np.asarray(values, dtype=float).ravel()
    ax.__dict__.setdefault("fp8lab_values", []).extend(values[np.isfinite(values) & (values > 0)])


def points_with_interval(ax, x, y, low=None, high=None, horizontal=False, **style):
    """A series of points (joined when style has a linestyle) on a log value axis, with 95%
    interval bars where low/high are finite. An interval reaching 0 has no end on a log axis:
    its bar runs off the axis edge. Returns the line for legends."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    (line,) = ax.plot(y, x, **style) if horizontal else ax.plot(x, y, **style)
    _remember(ax, y)
    if low is not None and high is not None:
        low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
        has = np.isfinite(low) & np.isfinite(high) & np.isfinite(y)
        if has.any():
            _remember(ax, [low[has], high[has]])
            low = np.where(low > 0, low, y * 1e-6)  # off any sensible axis: the bar is clipped there
            err = np.vstack([y[has] - low[has], high[has] - y[has]])
            bars = {"fmt": "none", "ecolor": line.get_color(), "elinewidth": 1.0, "capsize": 2,
                    "zorder": line.get_zorder()}
            if horizontal:
                ax.errorbar(y[has], x[has], xerr=err, **bars)
            else:
                ax.errorbar(x[has], y[has], yerr=err, **bars)
    return line


def fit_log_axis(axes, horizontal=False, margin=0.06):
    """One log value axis for all of axes, spanning every point, interval end and reference
    value drawn on them plus `margin` of the span (autoscaling would stretch to the clipped
    bars)."""
    axes = list(np.ravel(axes))
    values = np.concatenate([np.asarray(ax.__dict__.get("fp8lab_values", []), dtype=float) for ax in axes] + [[]])
    if values.size == 0:
        return
    low, high = np.log10(values.min()), np.log10(values.max())
    pad = max(margin * (high - low), 0.02)
    limits = (10 ** (low - pad), 10 ** (high + pad))
    # Under two decades the default log axis labels one tick or none: label every tick of a
    # narrow axis, else 1 to 9 (1-2-3-5, 1-3 as the span grows) times a power of ten.
    span = high - low + 2 * pad
    mantissas = (None if span <= 0.3 else tuple(range(1, 10)) if span <= 0.6 else (1, 2, 3, 5) if span <= 1.3 else (1, 3) if span <= 2.5
                 else (1,))
    label = matplotlib.ticker.FuncFormatter(lambda value, _: _log_label(value, mantissas))
    for ax in axes:
        ax.set_xlim(limits) if horizontal else ax.set_ylim(limits)
        axis = ax.xaxis if horizontal else ax.yaxis
        axis.set_major_formatter(label)
        axis.set_minor_formatter(label)


def _log_label(value, mantissas):
    exponent = np.floor(np.log10(value) + 1e-9)
    mantissa = value / 10**exponent
    if mantissas is not None and not any(abs(mantissa - m) < 1e-6 for m in mantissas):
        return ""
    if -4 <= exponent <= 3:
        return f"{value:.4g}"
    return f"${mantissa:.0f}\\times10^{{{int(exponent)}}}$" if abs(mantissa - 1) > 1e-6 else f"$10^{{{int(exponent)}}}$"


def highlight_point(ax, x, y, label=None):
    """Rings the DeepSeek-V3 recipe's point; labels it when label is given."""
    ax.plot([x], [y], marker="o", markersize=13, markerfacecolor="none", markeredgecolor=HIGHLIGHT,
            markeredgewidth=1.8, linestyle="none", zorder=5)
    if label:
        ax.annotate(label, (x, y), xytext=(10, 20), textcoords="offset points", fontsize=7.5, color=HIGHLIGHT,
                    arrowprops={"arrowstyle": "-", "color": HIGHLIGHT, "linewidth": 0.8})


def reference_line(ax, value, label, vertical=False, where=0.02, on_value_axis=True):
    """A published value as a labelled dash-dot line inside the axes; `where` places the
    label along the line (axes fraction). A value on the value axis (an error) widens
    fit_log_axis's range to show it; one on the other axis (an N_C) does not."""
    box = {"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.8}
    if on_value_axis:
        _remember(ax, [value])
    if vertical:
        ax.axvline(value, color=REFERENCE, linestyle="-.", linewidth=1.0, zorder=1)
        ax.text(value, where, " " + label, transform=ax.get_xaxis_transform(), rotation=90, fontsize=7,
                color=REFERENCE, va="bottom", ha="right", bbox=box)
    else:
        ax.axhline(value, color=REFERENCE, linestyle="-.", linewidth=1.0, zorder=1)
        ax.text(where, value, label, transform=ax.get_yaxis_transform(), fontsize=7, color=REFERENCE,
                va="bottom", ha="left", bbox=box)


def reference_point(ax, x, y, label):
    """A published (x, y) claim: a grey star with its label inside the axes."""
    ax.plot([x], [y], marker="*", markersize=13, color=REFERENCE, linestyle="none", zorder=6)
    _remember(ax, [y])
    ax.annotate(label, (x, y), xytext=(8, -10), textcoords="offset points", ha="left", va="top", fontsize=7,
                color=REFERENCE, bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none",
                                        "alpha": 0.8})


def legend_outside(ax, handles, title, anchor_y=1.0):
    """A legend to the right of ax (outside the data); several can stack by anchor_y."""
    legend = ax.legend(handles=handles, title=title, loc="upper left", bbox_to_anchor=(1.02, anchor_y),
                       borderaxespad=0, frameon=False, title_fontsize=8)
    ax.add_artist(legend)
    # savefig's tight box leaves out legends added as artists unless named (finish does)
    ax.figure.__dict__.setdefault("fp8lab_outside", []).append(legend)
    return legend


def short_reason(reason):
    """A skip reason short enough for a label inside the axes."""
    match = re.match(r"promotion interval (\S+) does not divide (\w+)'s scale extent (\d+)", str(reason))
    if match:
        return f"N_C {match.group(1)} does not divide {match.group(2)}'s {match.group(3)}-wide scale"
    return str(reason).split(":")[0][:60]


def skipped_text(ds):
    """The caption's account of the points not run, grouped by reason."""
    reasons = [str(r) for r in np.unique(ds.reason.values[ds.status.values == "skipped"]) if r]
    by_width, other = {}, []
    for reason in reasons:
        match = re.match(r"promotion interval (\S+) does not divide \w+'s scale extent (\d+)", reason)
        if match:
            by_width.setdefault(int(match.group(2)), set()).add(match.group(1))
        else:
            other.append(short_reason(reason))
    def n_c_key(n_c):
        return float("inf") if n_c == "never" else int(n_c)
    parts = [f"N_C {', '.join(sorted(n_cs, key=n_c_key))} with a {width}-element scale extent along K"
             for width, n_cs in sorted(by_width.items())]
    if not parts and not other:
        return ""
    return ("Not run: " + "; ".join(parts + sorted(set(other))) +
            (" (N_C must divide the scale extent, or the scale would change inside one partial)." if parts else "."))


def mark_skipped(ax, position, reason, horizontal=False):
    """Says, at an empty grid position, why the point was not run."""
    text = "skipped: " + short_reason(reason)
    if horizontal:
        ax.text(0.02, position, text, transform=ax.get_yaxis_transform(), fontsize=6.5, color="0.45",
                va="center", ha="left", style="italic")
    else:
        ax.text(position, 0.02, text, transform=ax.get_xaxis_transform(), fontsize=6.5, color="0.45",
                va="bottom", ha="center", rotation=90, style="italic")


def style_handle(label, **style):
    return matplotlib.lines.Line2D([], [], label=label, **style)


# ---- captions -------------------------------------------------------------------------------

def _shorten(text):
    text = re.sub(r"(sha256 [0-9a-f]{12})[0-9a-f]+", r"\1...", text)
    text = re.sub(r"(\d+)\.0+\b", r"\1", text)
    text = re.sub(r'(: "[^"]{0,40})[^"]*"', r'\1..."', text, flags=re.S)
    # A file path (absolute or relative, its last part with an extension) by its file name;
    # "seeds 2/3" or "E4M3/E5M2" are not paths.
    return re.sub(r"(?<![\w/])(?:\.{0,2}/)?(?:[\w.-]+/)+([\w.-]+\.[A-Za-z]\w*)", r"\1", text)


def operands_text(ds):
    """What the operands are, from the per-point `operands` variable (one line)."""
    if "operands" in ds:
        values = [str(v) for v in np.unique(ds.operands.values) if str(v)]
    else:
        values = [str(ds.attrs.get("operands", ""))]
    values = sorted({_shorten(v) for v in values if v})
    if not values:
        return "not recorded"
    kinds = {"real" if re.search(r"\breal\b", v) else "synthetic" if "synthetic" in v else
             "shapes-only" if v.startswith("shapes-only") else "unknown" for v in values}
    kind = kinds.pop() if len(kinds) == 1 else "mixed " + " and ".join(sorted(kinds))
    if len(values) == 1:
        return f"{kind}: {values[0].split(': ', 1)[-1] if values[0].startswith(kind) else values[0]}"
    prefix = os.path.commonprefix(values)
    prefix = prefix[: prefix.rfind(" ")] if " " in prefix else prefix
    return f"{kind}: {prefix} ... ({len(values)} variants, one per point group; e.g. {values[0]})"


def sampling_text(ds):
    """How the errors were estimated: sampled (with the sample sizes) or exact."""
    if "rows_computed" not in ds:
        return ""
    ok = ds.status.values == "ok"
    rows, m = ds.rows_computed.values[ok], ds.m.values[ok]
    cols, n = ds.cols_computed.values[ok], ds.n.values[ok]
    sampled = (rows < m) | (cols < n)
    if not sampled.any():
        return "Errors exact: every output of each GEMM computed (no intervals to draw)."
    sizes = ", ".join(sorted({f"{int(r)} of {int(mm)} rows x {int(c)} of {int(nn)} columns"
                              for r, mm, c, nn in zip(rows[sampled], m[sampled], cols[sampled], n[sampled])})[:3])
    return (f"Errors estimated on a simple random sample of output elements ({sizes}"
            f"{', ...' if sampled.sum() > 3 else ''}); {INTERVAL_NOTE}; sampled maxima are lower bounds.")


def provenance_text(ds, fixed):
    attrs = ds.attrs
    done, total = fp8lab_results.points_done(ds)
    source = attrs.get("source") or f"fp8lab git {str(attrs.get('git_sha', ''))[:12]}" + (
        " (dirty)" if attrs.get("git_dirty") == "true" else "")
    if operands_text(ds).startswith("real"):  # the distribution axis does not apply to real tensors
        fixed = {a: v for a, v in fixed.items() if a != "distribution"}
    fixed_text = ", ".join(f"{a} = {promotion_label(v) if a == 'promotion' else v}" for a, v in fixed.items())
    return (f"Study {attrs.get('study_name')} ({done}/{total} points; {source}; backend {attrs.get('backend', '?')}, "
            f"{attrs.get('cpu_isa', '?')}; file layout {attrs['fp8lab_layout']})" + (f". Fixed: {fixed_text}." if fixed_text else "."))


def finish(fig, ds, out, fixed=None, notes=(), references=()):
    """Adds the caption (operands, sampling, notes, cited references, provenance) and the
    incomplete banner, then saves `out` and, beside it, the numbers it draws (figure_data.py)."""
    width_chars = int(fig.get_figwidth() * 15)
    lines = [f"Operands ({operands_text(ds)})", sampling_text(ds), *notes]
    lines += [f"Reference: {r}." for r in references]
    lines.append(provenance_text(ds, fixed or {}))
    caption = "\n".join(textwrap.fill(line, width_chars) for line in lines if line)
    extra = [fig.text(0.01, 0.0, caption, ha="left", va="top", fontsize=7.5, transform=fig.transFigure)]
    if not fp8lab_results.is_complete(ds):
        done, total = fp8lab_results.points_done(ds)
        extra += [fig.text(0.5, 1.0, f"INCOMPLETE RESULTS: {done} of {total} points finished (complete = false)",
                 ha="center", va="bottom", fontsize=12, color="white", weight="bold",
                 bbox={"facecolor": HIGHLIGHT, "edgecolor": "none", "boxstyle": "round,pad=0.3"})]
        print(f"marked INCOMPLETE: {done} of {total} points")
        for ax in fig.axes:
            ax.text(0.5, 0.5, "INCOMPLETE", transform=ax.transAxes, fontsize=28, color=HIGHLIGHT, alpha=0.15,
                    rotation=25, ha="center", va="center", weight="bold", zorder=0)
    extra += fig.__dict__.get("fp8lab_outside", [])
    figure_data.write_figure_csv(fig, pathlib.Path(out).with_suffix(".csv"))  # the numbers it draws
    fig.savefig(out, dpi=130, bbox_inches="tight", pad_inches=0.15, bbox_extra_artists=extra)
    plt.close(fig)
    print("saved", out)
