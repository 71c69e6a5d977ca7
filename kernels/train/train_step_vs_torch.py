"""One training step, fp8lab's engine beside PyTorch eager, in one script run (the engine's speed
target: fp32 step >= 1.5x PyTorch eager fp32, the emulated FP8 step >= 1.0x PyTorch's fp32 step,
same threads), for stories260K at 256 tokens (--model stories260K, the default) or the dim256
preset at 1024 tokens (--model dim256).

PyTorch side: the same model as the engine (llama2.c's: RMSNorm eps 1e-5, RoPE theta 1e4 on
consecutive pairs, grouped KV heads, SwiGLU, classifier tied to the embedding), stories260K's
checkpoint (dim256: seeded normal weights of the preset's shapes; the values do not change the
work) and the bench's tokens ((t * 37 + 1) mod vocab: T - 1 targets), fp32, forward with
F.scaled_dot_product_attention(is_causal=True), mean cross-entropy, loss.backward(); timed as
the median of --steps steps after 3 warm-up steps. fp8lab side: fp8lab_bench_train_step's
fp32_none and fp8_none (dim256_fp32_none and dim256_fp8_none), the same step, real time per
iteration. The two alternate --rounds
times and each ratio is of medians over the rounds.

Usage (the peers venv has torch):
  OMP_NUM_THREADS=2 build/peers-venv/bin/python kernels/train/train_step_vs_torch.py \\
      build/cpu/kernels/train/fp8lab_bench_train_step --threads 2
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("bench", help="path to fp8lab_bench_train_step")
parser.add_argument("--model", choices=["stories260K", "dim256"], default="stories260K")
parser.add_argument("--threads", type=int, default=os.cpu_count())
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--checkpoint", default=None, help="stories260K.bin (default: FP8LAB_DATA_DIR or ../shared/data)")
args = parser.parse_args()
torch.set_num_threads(args.threads)
root = pathlib.Path(__file__).resolve().parents[2]
checkpoint = pathlib.Path(args.checkpoint or pathlib.Path(os.environ.get("FP8LAB_DATA_DIR", root.parent / "shared" / "data"))
                          / "stories260K" / "stories260K.bin")

if args.model == "stories260K":
    # llama2.c legacy export: 7 int32 header, then float32 arrays (data/README.md).
    raw = checkpoint.read_bytes()
    dim, hidden, layers, heads, kv_heads, vocab, _ = (int(x) for x in np.frombuffer(raw[:28], np.int32))
    vocab = abs(vocab)
    floats = np.frombuffer(raw[28:], np.float32)
    T, case = 256, ""
else:  # kernels/train/model_config.cpp's dim256 preset
    dim, hidden, layers, heads, kv_heads, vocab = 256, 768, 4, 8, 4, 512
    floats = None
    T, case = 1024, "dim256_"
hs, kv_dim = dim // heads, dim // heads * kv_heads
shapes = [("emb", (vocab, dim)), ("rms_att", (layers, dim)), ("wq", (layers, dim, dim)), ("wk", (layers, kv_dim, dim)),
          ("wv", (layers, kv_dim, dim)), ("wo", (layers, dim, dim)), ("rms_ffn", (layers, dim)),
          ("w1", (layers, hidden, dim)), ("w2", (layers, dim, hidden)), ("w3", (layers, hidden, dim)), ("rms_final", (dim,))]
w, at = {}, 0
for name, shape in shapes:
    n = int(np.prod(shape))
    if floats is None:
        values = np.random.default_rng(1).normal(0.0, 0.02, shape).astype(np.float32)
        if name.startswith("rms"):
            values = np.ones(shape, np.float32)
    else:
        values = floats[at:at + n].reshape(shape).copy()
    w[name] = torch.tensor(values, requires_grad=True)
    at += n

tokens = torch.tensor([(t * 37 + 1) % vocab for t in range(T)])
freq = 1.0 / (10000.0 ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs))
angle = torch.arange(T, dtype=torch.float64)[:, None] * freq[None, :]
cos, sin = angle.cos().float(), angle.sin().float()


def rmsnorm(x, g):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * g


def rope(x):  # x: T x H x hs, rotating consecutive pairs
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)


def step():
    x = w["emb"][tokens]
    for l in range(layers):
        a = rmsnorm(x, w["rms_att"][l])
        q = rope((a @ w["wq"][l].T).view(T, heads, hs)).transpose(0, 1)
        k = rope((a @ w["wk"][l].T).view(T, kv_heads, hs)).transpose(0, 1)
        v = (a @ w["wv"][l].T).view(T, kv_heads, hs).transpose(0, 1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + o.transpose(0, 1).reshape(T, dim) @ w["wo"][l].T
        b = rmsnorm(x, w["rms_ffn"][l])
        x = x + (F.silu(b @ w["w1"][l].T) * (b @ w["w3"][l].T)) @ w["w2"][l].T
    logits = rmsnorm(x, w["rms_final"]) @ w["emb"].T
    loss = F.cross_entropy(logits[:-1], tokens[1:])
    for p in w.values():
        p.grad = None
    loss.backward()
    return float(loss)


def torch_seconds():
    for _ in range(3):
        step()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fp8lab_seconds():
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory() as work:
        out = pathlib.Path(work) / "bench.json"
        subprocess.run([args.bench, f"--benchmark_filter=BM_Step/{case}(fp32|fp8)_none/", "--benchmark_min_time=1",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"], env=env, check=True, capture_output=True)
        runs = json.loads(out.read_text())["benchmarks"]
    return {r["name"].split("/")[1].removeprefix(case): r["real_time"] / 1e3 for r in runs}  # ms -> s


print(f"{args.model}, {T} tokens, {args.threads} threads; torch {torch.__version__}; loss {step():.4f}", file=sys.stderr)
rounds = []
for r in range(args.rounds):
    ours = fp8lab_seconds()
    theirs = torch_seconds()
    rounds.append((ours["fp32_none"], ours["fp8_none"], theirs))
    print(f"round {r}: fp8lab fp32 {ours['fp32_none'] * 1e3:.1f} ms, fp8lab fp8 {ours['fp8_none'] * 1e3:.1f} ms, "
          f"torch fp32 {theirs * 1e3:.1f} ms", file=sys.stderr)
fp32, fp8, eager = (statistics.median(c) for c in zip(*rounds))
print(json.dumps({"model": args.model, "tokens": T, "threads": args.threads, "fp8lab_fp32_ms": fp32 * 1e3, "fp8lab_fp8_ms": fp8 * 1e3,
                  "torch_fp32_ms": eager * 1e3, "fp32_speed_vs_torch": eager / fp32, "fp8_speed_vs_torch_fp32": eager / fp8,
                  "targets": {"fp32_speed_vs_torch": 1.5, "fp8_speed_vs_torch_fp32": 1.0}}, indent=1))
