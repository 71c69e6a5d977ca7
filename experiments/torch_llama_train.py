"""Trains the plain-PyTorch Llama (experiments/torch_llama.py) under fp8lab.torch recipes, as a
user's own training loop would, and writes the runs in the train kind's layout (axes recipe x
seed, the per-step curves along `step`: experiments/README.md) through fp8lab's study runner, so
notebooks/fp8_training.ipynb plots them beside the engine's `fp8lab train` runs.

    PYTHONPATH=build/cpu/python python experiments/torch_llama_train.py --recipe deepseek_v3 --recipe bf16 \\
        --seed 1 --seed 2 --init stories260K --tokens sampled --batch 8 --seq-len 128 --steps 300 \\
        --lr 3e-4 --val-every 25 -o results/torch_llama.h5

Each run starts where `fp8lab train` with the same flags starts: the same initial weights
(--init stories260K | PATH | seeded with --model), the same token streams (the corpus sampled from
stories260K and its validation split, or --tokens FILE), the same batch order and learning rates.
One optimizer step: the mean cross-entropy over batch x seq_len targets, one forward and backward
of the whole batch (the engine runs its sequences one by one and averages their gradients in
FP64: the same sum, other roundings), optional global-norm clipping, torch.optim.AdamW (the
engine's AdamW follows its semantics), FP32 master weights; a step whose loss or gradient is not
finite is recorded as diverged and not applied. --recipe fp64 trains in float64.
"""
import argparse
import contextlib
import json
import math
import os
import pathlib
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import fp8lab  # noqa: E402
import fp8lab.torch as ft  # noqa: E402
from torch_llama import Llama  # noqa: E402


def arguments(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipe", action="append", help="a recipe name or .toml file (repeat for several; default fp32)")
    p.add_argument("--seed", action="append", type=int, help="seed of a seeded init and of the shuffled order (repeat)")
    p.add_argument("--init", default="stories260K", help="stories260K, a llama2.c checkpoint PATH, or 'seeded' (--model)")
    p.add_argument("--model", default="stories260K", help="preset of a seeded init (stories260K, dim256)")
    p.add_argument("--tokens", default="sampled", help="'sampled' (from stories260K) or a token file (.npy, .bin)")
    p.add_argument("--val-tokens", default="", help="validation token file (a sampled corpus has its own split)")
    p.add_argument("--sample-tokens", type=int, default=32768)
    p.add_argument("--val-sample-tokens", type=int, default=4096)
    p.add_argument("--order", default="sequential", choices=["sequential", "shuffled"])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=0.0)
    p.add_argument("--schedule", default="constant", choices=["constant", "cosine"])
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--clip", type=float, default=0.0, help="global gradient-norm clipping (0: off)")
    p.add_argument("--val-every", type=int, default=0, help="validation loss every N steps and at the end (0: never)")
    p.add_argument("--val-sequences", type=int, default=8)
    p.add_argument("--threads", type=int, default=0, help="threads of torch and of fp8lab's GEMMs (0: torch's default)")
    p.add_argument("--record", default="", help="a folder for fp8lab.torch.Recorder files, one per run "
                                                "(RECIPE_seedS.h5: what FP8 did to every GEMM, every --record-every steps)")
    p.add_argument("--record-every", type=int, default=10)
    p.add_argument("-o", "--out", required=True, help="results file (.h5)")
    p.add_argument("--resume", action="store_true", help="complete a results file an interrupted command left")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    a.recipe = a.recipe or ["fp32"]
    for r in a.recipe:
        # FP16 GEMMs need dynamic loss scaling, which `fp8lab train` runs and this script does not.
        if any(g.startswith("fp16") for g in ft.Recipe(r).gemms().values()):
            p.error(f"--recipe {r}: its FP16 GEMMs need dynamic loss scaling; train it with `fp8lab train`")
    a.seed = a.seed or [1]
    for name, value, low in (("--batch", a.batch, 1), ("--seq-len", a.seq_len, 1), ("--steps", a.steps, 1),
                             ("--record-every", a.record_every, 1),
                             ("--val-sequences", a.val_sequences, 1), ("--threads", a.threads, 0)):
        if value < low:
            p.error(f"{name}: must be >= {low}, got {value}")
    if not math.isfinite(a.lr) or a.lr <= 0:
        p.error(f"--lr: must be finite and > 0, got {a.lr}")
    return a


class Data:
    """The token streams and batch order of a run (the train kind's)."""

    def __init__(self, a, vocab):
        if a.tokens == "sampled":
            self.train = fp8lab._core._sampled_corpus(a.sample_tokens, 1.0, 1234)
            self.val = fp8lab._core._sampled_corpus(a.val_sample_tokens, 1.0, 1235) if a.val_every > 0 else None
        else:
            self.train = fp8lab._core._token_file(a.tokens, vocab)
            self.val = fp8lab._core._token_file(a.val_tokens, vocab) if a.val_tokens else None
        self.a = a
        self.tokens = torch.from_numpy(self.train["tokens"]).long()
        self.val_tokens = torch.from_numpy(self.val["tokens"]).long() if self.val else None

    def batch(self, step, seed):
        starts = fp8lab._core._batch_starts(len(self.tokens), self.a.batch, self.a.seq_len, self.a.order, seed, step)
        return torch.stack([self.tokens[s:s + self.a.seq_len + 1] for s in starts])

    def validation(self):
        starts = [fp8lab._core._batch_starts(len(self.val_tokens), 1, self.a.seq_len, "sequential", 0, j)[0]
                  for j in range(self.a.val_sequences)]
        return torch.stack([self.val_tokens[s:s + self.a.seq_len + 1] for s in starts])


def make_model(a, recipe, seed):
    init, checkpoint = ("seeded", "") if a.init == "seeded" else ("checkpoint", a.init)
    model, described = Llama.from_fp8lab(init, checkpoint, a.model, seed)
    if ft.Recipe(recipe)._recipe.fp64:
        model = model.double()
    with warnings.catch_warnings():  # an override for a layer the model lacks (nvfp4's L4 on dim256)
        warnings.simplefilter("ignore")
        ft.convert(model, recipe)
    return model, described


def train_run(a, data, recipe, seed, progress=None):
    """One run: {column: values} in the train kind's columns."""
    torch.manual_seed(seed)
    model, _ = make_model(a, recipe, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=a.weight_decay)
    val = data.validation() if data.val_tokens is not None else None
    recorder = None
    if a.record:
        os.makedirs(a.record, exist_ok=True)
        stem = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in recipe.removesuffix(".toml"))
        recorder = ft.Recorder(os.path.join(a.record, f"{stem}_seed{seed}.h5"), every=a.record_every).attach(model)
    record = {k: [] for k in ("train_loss", "val_loss", "grad_norm", "learning_rate", "loss_scale", "skipped", "diverged",
                              "step_seconds", "tokens_per_second")}
    for step in range(a.steps):
        start = time.perf_counter()
        lr = fp8lab._core._learning_rate(a.schedule, a.lr, a.min_lr, a.warmup, a.steps, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        tokens = data.batch(step, seed)
        optimizer.zero_grad(set_to_none=True)
        with recorder.step(step) if recorder else contextlib.nullcontext():
            loss = model.loss(tokens[:, :-1], tokens[:, 1:])
            loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip if a.clip > 0 else float("inf"))
        diverged = not (math.isfinite(loss.item()) and math.isfinite(norm.item()))
        if not diverged:
            optimizer.step()
        seconds = time.perf_counter() - start
        val_loss = float("nan")
        if val is not None and ((step + 1) % a.val_every == 0 or step == a.steps - 1):
            with torch.no_grad():
                val_loss = float(torch.stack([model.loss(v[None, :-1], v[None, 1:]) for v in val]).mean())
        for key, value in (("train_loss", loss.item()), ("val_loss", val_loss), ("grad_norm", norm.item()),
                           ("learning_rate", lr), ("loss_scale", 1.0), ("skipped", float(diverged)),
                           ("diverged", float(diverged)), ("step_seconds", seconds),
                           ("tokens_per_second", a.batch * a.seq_len / seconds)):
            record[key].append(value)
        if progress:
            progress(step, loss.item())
    if recorder:
        recorder.close()
    record.update({
        "final_train_loss": record["train_loss"][-1],
        "final_val_loss": record["val_loss"][-1],
        "steps_skipped": int(sum(record["skipped"])),
        "steps_diverged": int(sum(record["diverged"])),
        "parameters": sum(p.numel() for p in model.parameters()),
        "median_tokens_per_second": statistics.median(record["tokens_per_second"]),
        "train_tokens": data.train["source"],
    })
    return record


def spec_text(a, layers):
    quoted = lambda s: json.dumps(str(s))  # noqa: E731  (TOML basic strings take JSON's escapes)
    settings = {k: v for k, v in vars(a).items() if k not in ("recipe", "seed", "out", "resume", "quiet", "record")}
    return (f'[study]\nname = "torch_llama"\nkind = "torch_train"\n'
            f'description = {quoted("PyTorch Llama trained under fp8lab.torch recipes (experiments/torch_llama_train.py)")}\n'
            f'[axes]\nrecipe = [{", ".join(quoted(r) for r in a.recipe)}]\nseed = [{", ".join(str(s) for s in a.seed)}]\n'
            f'[torch]\nsteps = {a.steps}\nlayers = {layers}\nsettings = {quoted(json.dumps(settings, sort_keys=True))}\n')


def main(argv=None):
    a = arguments(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    model, _ = make_model(a, "fp32", a.seed[0])  # the shape, and the init checked before the file exists
    data = Data(a, model.config["vocab_size"])
    if data.tokens.numel() < a.batch * a.seq_len + 2:
        sys.exit(f"torch_llama_train: --tokens: {data.tokens.numel()} tokens are fewer than one batch needs")

    def evaluate(recipe, seed):
        def progress(step, loss):
            if not a.quiet and (step % 10 == 0 or step == a.steps - 1):
                print(f"torch_llama_train: {recipe} seed {seed} step {step + 1}/{a.steps} loss {loss:.4f}",
                      file=sys.stderr, flush=True)
        return train_run(a, data, recipe, seed, progress)

    out = fp8lab._core._run_torch_train_study(spec_text(a, model.config["n_layers"]), "torch_llama_train", a.out,
                                              evaluate, a.resume, a.quiet)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
