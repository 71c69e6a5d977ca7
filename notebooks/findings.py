"""results/findings/: what each study has found, readable without running anything, and checked
by CI against the code that found it.

    /usr/bin/python3 notebooks/findings.py                 # regenerate results/findings/ from results/*.h5
    /usr/bin/python3 notebooks/findings.py --check build/cpu/harness/fp8lab   # CI: have the findings moved?

Regenerating: for every study in STUDIES whose results file exists (results/<study>.h5), its
notebook runs headless on it and writes its figures (PNG) and the numbers each draws (CSV,
notebooks/figure_data.py) into results/findings/<study>/, with the notebook's printed tables
(output.txt) and the run's provenance (provenance.json: commit and dirty flag, spec sha256,
machine, compiler, start, end and wall time, and a digest of the results file's deterministic
numbers). The study's CI-size run (tests/notebook/<study>_small.toml) is made too and its digest
kept (ci_reference.json). results/findings/README.md indexes all of it and names every study whose
results file is missing, with the command that makes it. Nothing else in the folder is touched.

Checking (--check FP8LAB): each study's CI-size spec is run again and its digest compared with the
committed ci_reference.json; for the studies whose full run is short (CI_FULL), the full spec is
run again and compared with provenance.json's digest, so the committed figures' numbers are what
the committed spec gives. Digests cover every numeric and text variable but timings and machine
details (NONDETERMINISTIC): fp8lab's numbers are the same bits on every x86-64 machine and thread
count, so any difference is a change in what the code computes. Exit 1 with a table of what moved.
"""
import argparse
import datetime
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
NONDETERMINISTIC = re.compile(r"seconds|per_second|resident|elapsed|operands|gemm_backend|gemm_fallback")
SIZE_LIMIT = 5 * 1024 * 1024


# A Study.env value that switches the notebook's part off instead of naming a results file.
OFF = "off"


class Study:
    def __init__(self, name, asks, notebook=None, small=None, env=None, ci_full=False, drawn_by=None):
        self.name, self.asks = name, asks
        self.notebook = notebook or name
        self.small = small if small is not None else f"{name}_small"
        self.env = env or {}
        self.ci_full = ci_full
        self.drawn_by = drawn_by  # a study whose figures another study's notebook draws

    def spec(self):
        return f"experiments/{self.name}.toml"

    def command(self):
        return f"build/cpu/harness/fp8lab run {self.spec()}"


STUDIES = [
    Study("default", "DeepSeek-V3's recipe against per-row and per-tensor scaling on DeepSeek-V3 layer shapes", ci_full=True),
    Study("accumulation_k", "accumulation error against K without promotion: where 'nearly 2%' sits", ci_full=True),
    Study("promotion_interval", "how accumulation and total error grow with the promotion interval N_C"),
    Study("tile_size", "error against the activation tile and weight block size"),
    Study("real_layers", "every stories260K linear layer on real activations, weights and gradients", ci_full=True),
    Study("formats", "every scheme and scale rule: error, clipped block maxima, the UE8M0 tax, code differences", ci_full=True),
    Study("recompute", "activation recomputation: memory saved against recompute FLOPs and gradient error"),
    Study("loss_scaling", "what a loss scale does to gradients in each format"),
    Study("scale_trajectory", "the loss scale over an FP16 training run: GradScaler, hysteresis, delayed FP8"),
    Study("fp8_training_power", "does FP8 training end where BF16 ends, with the study's resolving power measured",
          env={"FP8LAB_DIM256_RESULTS": "fp8_training_power_dim256.h5"}),
    Study("fp8_training_power_finetune", "the same from the trained stories260K checkpoint: no plateau to leave",
          notebook="fp8_training_power",
          env={"FP8LAB_DIM256_RESULTS": OFF}),  # the dim256 trade is for the seeded-init study (same init, same steps)
    Study("fp8_training", "the recipe screen: 12 recipes x 3 seeds, final loss against the bf16 seed spread"),
    Study("fp8_training_nvfp4", "NVFP4 beside BF16 at seq_len 127, 3 seeds", notebook="fp8_training"),
    Study("seed_techniques", "the seed techniques against their claims", env={"FP8LAB_ZERO_RESULTS": "zero_memory.h5"}),
    Study("zero_memory", "ZeRO stages 0-3: bytes per rank, what fits on 80 GB", drawn_by="seed_techniques", ci_full=True),
]


# ---- digests -----------------------------------------------------------------------------------

def digest(path):
    """{variable: sha256 of its values} for every variable but timings and machine details."""
    out = {}
    with h5py.File(path, "r") as f:
        for name in sorted(f.keys()):
            item = f[name]
            if not isinstance(item, h5py.Dataset) or NONDETERMINISTIC.search(name):
                continue
            values = item[()]
            if values.dtype.kind in "fiu":
                canonical = np.asarray(values, dtype=np.float64)
                canonical = np.where(np.isnan(canonical), np.nan, canonical)  # one NaN pattern
                data = canonical.tobytes()
            else:
                flat = np.asarray(values, dtype=object).ravel()
                data = "\x1f".join(v.decode() if isinstance(v, bytes) else str(v) for v in flat).encode()
            out[name] = hashlib.sha256(data).hexdigest()
    return out


def run_spec(fp8lab, spec, out):
    subprocess.run([str(fp8lab), "run", str(spec), "-o", str(out), "--quiet"], check=True, stdout=subprocess.DEVNULL)


def moved(want, got):
    return sorted(set(want) ^ set(got)) + sorted(k for k in set(want) & set(got) if want[k] != got[k])


# ---- provenance ---------------------------------------------------------------------------------

def provenance(path):
    with h5py.File(path, "r") as f:
        a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    start, end = a.get("utc_start", ""), a.get("utc_end", "")
    wall = None
    try:
        t = [datetime.datetime.strptime(x, "%Y-%m-%dT%H:%M:%SZ") for x in (start, end)]
        wall = (t[1] - t[0]).total_seconds()
    except ValueError:
        pass
    keep = ["study_name", "study_kind", "spec_file", "spec_sha256", "git_sha", "git_dirty", "host", "device", "cpu_isa",
            "build_march", "compiler", "compiler_flags", "fp8lab_version", "hdf5_version", "complete", "shard"]
    p = {k: str(a[k]) for k in keep if k in a}
    p.update({"utc_start": start, "utc_end": end,
              "wall_seconds_from_start_to_end": wall,
              "wall_note": "utc_end - utc_start of the file; for a merged sharded run, of the first shard's file"})
    return p


def code_since_run(run_sha):
    """The commit the CI reference is made at (HEAD now) and how many source files changed since the
    run's commit: the figures come from the run, the CI reference from HEAD's binary, so a finding
    that moved in between would not fail CI; the index shows both so that a reader can tell."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(git + ["diff", "--name-only", run_sha, "HEAD", "--", "kernels", "harness", "reference"],
                             capture_output=True, text=True)
    count = len(changed.stdout.split()) if changed.returncode == 0 else None
    return {"reference_git_sha": head, "source_files_changed_since_run": count}


# ---- regenerate ---------------------------------------------------------------------------------

def compact_png(path):
    """The figure with a 256-colour palette (plots use a few dozen colours; anti-aliased edges lose a
    little): a third of the size, so that the whole folder stays under SIZE_LIMIT."""
    from PIL import Image
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def run_notebook(study, results_file, figures, results_dir):
    env = dict(os.environ, FP8LAB_RESULTS=str(results_file), FP8LAB_FIGURES=str(figures))
    for name, file in study.env.items():
        env[name] = file if file == OFF else str(results_dir / file)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["jupyter", "nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=1200",
                        "--output-dir", tmp, str(ROOT / "notebooks" / f"{study.notebook}.ipynb")],
                       check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cells = json.load(open(pathlib.Path(tmp) / f"{study.notebook}.ipynb"))["cells"]
    outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    errors = [o for o in outputs if o["output_type"] == "error"]
    if errors:
        raise RuntimeError(f"{study.notebook}.ipynb: {errors[0]['ename']}: {errors[0]['evalue']}")
    return "".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream")


def regenerate(args):
    results_dir, out = pathlib.Path(args.results), pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for study in STUDIES:
        if args.only and study.name not in args.only:
            continue
        results_file = results_dir / f"{study.name}.h5"
        if not results_file.exists():
            print(f"findings: {study.name}: no {results_file} (make it: {study.command()})", file=sys.stderr)
            continue
        folder = out / study.name
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        print(f"findings: {study.name} ...", file=sys.stderr)
        if study.drawn_by is None:
            text = run_notebook(study, results_file, folder, results_dir)
            (folder / "output.txt").write_text(text)
            for png in folder.glob("*.png"):
                compact_png(png)
        p = provenance(results_file)
        p["results_digest"] = digest(results_file)
        p.update(code_since_run(p.get("git_sha", "")))
        p["drawn_by"] = f"notebooks/{study.drawn_by or study.notebook}.ipynb"
        (folder / "provenance.json").write_text(json.dumps(p, indent=1, sort_keys=True) + "\n")
        small = ROOT / "tests" / "notebook" / f"{study.small}.toml"
        if small.exists():
            with tempfile.TemporaryDirectory() as tmp:
                run_spec(args.fp8lab, small, pathlib.Path(tmp) / "small.h5")
                ref = {"spec": str(small.relative_to(ROOT)), "digest": digest(pathlib.Path(tmp) / "small.h5")}
            (folder / "ci_reference.json").write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n")
    # The index lists every study with committed findings (also those not regenerated this time).
    made = [s for s in STUDIES if (out / s.name / "provenance.json").exists()]
    missing = [s for s in STUDIES if s not in made]
    write_index(out, made, missing)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"findings: {len(made)} studies in {out}, {size / 1e6:.2f} MB; missing: "
          + (", ".join(s.name for s in missing) or "none"), file=sys.stderr)
    if size > SIZE_LIMIT:
        sys.exit(f"findings: {out} holds {size / 1e6:.1f} MB, more than the {SIZE_LIMIT / 1e6:.0f} MB it may")


def write_index(out, made, missing):
    lines = ["# What fp8lab's studies have found: figures, their numbers, provenance", "",
             "Generated by `/usr/bin/python3 notebooks/findings.py` from `results/<study>.h5` (do not edit by hand).",
             "Each folder holds the study's figures (PNG), the numbers each draws (CSV beside it), the notebook's",
             "printed tables (`output.txt`) and the run's provenance (`provenance.json`). CI re-runs each study's",
             "CI-size spec and compares it with `ci_reference.json` (and, for the short studies, the full spec with",
             "provenance.json's digest): `ctest --preset cpu -L regression`.", "",
             "'run at' is the commit the results were computed at; 'CI reference at' the commit whose binary made",
             "`ci_reference.json`, with the number of source files (kernels/, harness/, reference/) changed in between:",
             "where it is not 0, the figures predate the reference, and only the short studies' full re-run (which",
             "compares the figures' own numbers) shows they still hold.", "",
             "| study | asks | figures | run at | CI reference at | spec sha256 | wall |", "|---|---|---|---|---|---|---|"]
    for study in STUDIES:
        if study not in made:
            continue
        folder = out / study.name
        p = json.loads((folder / "provenance.json").read_text())
        figures = " ".join(f"[{f.stem}]({study.name}/{f.name})" for f in sorted(folder.glob("*.png"))) or \
            f"drawn by {study.drawn_by}"
        wall = p.get("wall_seconds_from_start_to_end")
        dirty = " (dirty)" if p.get("git_dirty") == "true" else ""
        changed = p.get("source_files_changed_since_run")
        since = "" if changed is None else f" ({changed} files changed)"
        lines.append(f"| `{study.name}` | {study.asks} | {figures} | `{p.get('git_sha', '')[:10]}`{dirty} | "
                     f"`{p.get('reference_git_sha', '')[:10]}`{since} | "
                     f"`{p.get('spec_sha256', '')[:12]}` | {'' if wall is None else f'{wall:.0f} s'} |")
    if missing:
        lines += ["", "Missing (no results file when this was generated), and the command that makes each:", ""]
        lines += [f"- `{s.name}`: `{s.command()}`" for s in missing]
    (out / "README.md").write_text("\n".join(lines) + "\n")


# ---- check ---------------------------------------------------------------------------------------

def check(args):
    out = pathlib.Path(args.out)
    failures, checked, untracked = [], 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for study in STUDIES:
            folder = out / study.name
            if not (folder / "provenance.json").exists():
                untracked.append(study.name)
                continue
            ref_file = folder / "ci_reference.json"
            if ref_file.exists():
                ref = json.loads(ref_file.read_text())
                got_file = pathlib.Path(tmp) / f"{study.name}_small.h5"
                run_spec(args.check, ROOT / ref["spec"], got_file)
                for name in moved(ref["digest"], digest(got_file)):
                    failures.append(f"{study.name} (CI-size run {ref['spec']}): {name} moved")
                checked += 1
            if study.ci_full:
                want = json.loads((folder / "provenance.json").read_text())["results_digest"]
                got_file = pathlib.Path(tmp) / f"{study.name}.h5"
                run_spec(args.check, ROOT / study.spec(), got_file)
                for name in moved(want, digest(got_file)):
                    failures.append(f"{study.name} (the full run behind its figures): {name} moved")
                checked += 1
    for line in failures:
        print("MOVED:", line)
    if failures:
        print(f"findings: {len(failures)} variables moved; if intended, regenerate results/findings/ "
              "(notebooks/findings.py) from new results and say why in the commit")
        sys.exit(1)
    if untracked:  # said, not failed: a study's findings exist only once its long run has been made
        print("findings: no committed findings (so not tracked) for: " + ", ".join(untracked))
    if checked == 0:
        sys.exit(f"findings: nothing to check in {out}")
    print(f"findings: {checked} runs equal the committed findings")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default=str(ROOT / "results"))
    p.add_argument("--out", default=str(ROOT / "results" / "findings"))
    p.add_argument("--fp8lab", default=str(ROOT / "build" / "cpu" / "harness" / "fp8lab"))
    p.add_argument("--only", nargs="*", help="regenerate these studies only (the index is rewritten from all)")
    p.add_argument("--check", metavar="FP8LAB", help="re-run the CI-size specs with this binary and compare")
    args = p.parse_args()
    check(args) if args.check else regenerate(args)


if __name__ == "__main__":
    main()
