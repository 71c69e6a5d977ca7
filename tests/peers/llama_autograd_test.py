"""The FP64 Llama reference (reference/llama_fp64_ref.*, hand-written backward) and the
training-step engine under its `fp64` recipe (kernels/train, run_training_step) against torch
autograd in float64 on stories260K with a real prompt: the loss and every weight gradient.

The torch model is written here from the llama2.c architecture (RMSNorm eps 1e-5, rotary
embeddings theta 10000 on consecutive pairs within each head, causal grouped-query attention,
SwiGLU, classifier shared with the token embedding, mean next-token cross-entropy over
positions 0..T-2), not from fp8lab's code; the weights are the checkpoint's, as the driver
(llama_grads_driver.cpp) dumps them, and the tokens come from the prompt below through
llama2.c's BPE encoder written here against tok512.bin.

Tolerance (both sides compute in IEEE float64, u = 2^-53 = 1.1e-16, but in different orders):
a dot product of length n has relative error at most n*u (Higham, Accuracy and Stability, 3.1);
the longest reductions here are n = 512 (vocabulary softmax and classifier), so a stage errs by
at most 512 u = 5.7e-14 relative. The loss and its gradient pass through about
2 * (5 layers * 8 stages + 3) = 86 such stages one after another (forward, then backward), and
the worst-case amplification of a stage's relative error by what follows (RMSNorm, softmax,
SwiGLU on O(1) activations) is taken generously as 100: 5.7e-14 * 86 * 100 = 4.9e-10. Bound used:
1e-9, relative, on the loss and on each gradient tensor in the Frobenius norm. A real bug in a
hand-written backward (a missing term, a transposition) moves a gradient by O(1) relative.
The engine's fp64 recipe is the same kind of computation (IEEE float64 throughout, its own
summation order: index order, where the reference sums in 8 lanes), through the same stages on
the same reductions of at most 512 terms, so the same argument and the same bound hold for it.
"""
import pathlib
import struct
import tempfile

import numpy as np
import torch

import peers_common

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog."
TOLERANCE = 1e-9  # derived in the module docstring
DATA = peers_common.ROOT.parent / "shared" / "data" / "stories260K"


def load_tokenizer(path, vocab_size=512):
    raw = path.read_bytes()
    pos, pieces, scores = 4, [], []
    for _ in range(vocab_size):
        score, length = struct.unpack_from("<fi", raw, pos)
        pos += 8
        pieces.append(raw[pos:pos + length].decode("utf-8", errors="replace"))
        scores.append(score)
        pos += length
    return pieces, scores


def encode(text, pieces, scores):
    """llama2.c's encoder: BOS, a dummy-prefix space, one token per UTF-8 character (bytes + 3
    when absent), then repeatedly merge the adjacent pair whose concatenation scores highest."""
    lookup = {p: i for i, p in enumerate(pieces)}
    tokens = [lookup[" "]]
    for ch in text:
        tokens += [lookup[ch]] if ch in lookup else [b + 3 for b in ch.encode("utf-8")]
    while True:
        best = max(((scores[lookup[pieces[a] + pieces[b]]], i) for i, (a, b) in enumerate(zip(tokens, tokens[1:]))
                    if pieces[a] + pieces[b] in lookup), default=None)
        if best is None:
            break
        i = best[1]
        tokens[i:i + 2] = [lookup[pieces[tokens[i]] + pieces[tokens[i + 1]]]]
    return [1] + tokens


def rmsnorm(x, g):
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-5) * g


def rope(x, heads):
    t, d = x.shape
    hs = d // heads
    i = torch.arange(0, d, 2, dtype=torch.float64) % hs
    angle = torch.arange(t, dtype=torch.float64)[:, None] * (10000.0 ** (-i / hs))[None, :]
    c, s = torch.cos(angle), torch.sin(angle)
    even, odd = x[:, 0::2], x[:, 1::2]
    return torch.stack([even * c - odd * s, even * s + odd * c], dim=-1).reshape(t, d)


def torch_loss(w, tokens, layers=5, heads=8, kv_heads=4):
    ids = torch.tensor(tokens)
    x = w["embedding"][ids]
    t, dim = x.shape
    hs = dim // heads
    mask = torch.full((t, t), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(layers):
        a = rmsnorm(x, w[f"rms_att.{l}"].reshape(-1))
        q = rope(a @ w[f"wq.{l}"].T, heads).reshape(t, heads, hs).transpose(0, 1)
        k = rope(a @ w[f"wk.{l}"].T, kv_heads).reshape(t, kv_heads, hs).transpose(0, 1)
        v = (a @ w[f"wv.{l}"].T).reshape(t, kv_heads, hs).transpose(0, 1)
        k, v = k.repeat_interleave(heads // kv_heads, 0), v.repeat_interleave(heads // kv_heads, 0)
        att = torch.softmax(q @ k.transpose(1, 2) / hs**0.5 + mask, dim=-1)
        x = x + (att @ v).transpose(0, 1).reshape(t, dim) @ w[f"wo.{l}"].T
        b = rmsnorm(x, w[f"rms_ffn.{l}"].reshape(-1))
        x = x + (torch.nn.functional.silu(b @ w[f"w1.{l}"].T) * (b @ w[f"w3.{l}"].T)) @ w[f"w2.{l}"].T
    logits = rmsnorm(x, w["rms_final"].reshape(-1)) @ w["embedding"].T
    return torch.nn.functional.cross_entropy(logits[:-1], ids[1:])


def main():
    args = peers_common.arguments(__doc__.splitlines()[0]).parse_args()
    pieces, scores = load_tokenizer(DATA / "tok512.bin")
    tokens = encode(PROMPT, pieces, scores)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        peers_common.run([args.build / "tests" / "peers" / "fp8lab_peers_llama_grads", tmp] + tokens)
        names = sorted(p.stem for p in tmp.glob("*.npy") if not p.stem.startswith(("grad.", "loss", "engine.")))
        weights = {n: torch.tensor(np.load(tmp / f"{n}.npy"), requires_grad=True) for n in names}
        sides = {side: (float(np.load(tmp / f"{prefix}loss.npy").reshape(-1)[0]),
                        {n: np.load(tmp / f"{prefix}grad.{n}.npy") for n in names if (tmp / f"{prefix}grad.{n}.npy").exists()})
                 for side, prefix in (("reference", ""), ("engine", "engine."))}
    loss = torch_loss(weights, tokens)
    loss.backward()
    finding = {"prompt": PROMPT, "tokens": tokens, "loss_torch": loss.item(), "tolerance": TOLERANCE, "markdown": []}
    what = {"reference": "fp8lab FP64 reference (reference/llama_fp64_ref)",
            "engine": "training-step engine, recipe `fp64` (kernels/train run_training_step)"}
    for side, (loss_ours, ours) in sides.items():
        if sorted(ours) != names:
            failures.append(f"{side}: gradients for {sorted(set(names) - set(ours))} missing")
        rel = {}
        for n in sorted(ours):
            theirs = weights[n].grad.numpy()
            if ours[n].size != theirs.size or ours[n].squeeze().shape != theirs.squeeze().shape:
                failures.append(f"{side} gradient of {n}: shape {ours[n].shape}, torch's {theirs.shape}")
                continue
            # the engine holds an RMSNorm gain as a 1 x dim row, the reference as dim x 1
            rel[n] = float(np.linalg.norm(ours[n].reshape(theirs.shape) - theirs) / np.linalg.norm(theirs))
            if not rel[n] <= TOLERANCE:
                failures.append(f"{side} gradient of {n}: relative Frobenius difference {rel[n]:.3e} > {TOLERANCE:g}")
        loss_rel = abs(loss_ours - loss.item()) / abs(loss.item())
        if not loss_rel <= TOLERANCE:
            failures.append(f"{side} loss: fp8lab {loss_ours!r} vs torch {loss.item()!r}, relative {loss_rel:.3e} > {TOLERANCE:g}")
        worst = max(rel, key=rel.get)
        print(f"{side}: {len(tokens)} tokens, loss {loss_ours:.12f} vs {loss.item():.12f}; worst gradient {worst} {rel[worst]:.2e}")
        key = "" if side == "reference" else "engine_fp64_"
        finding.update({f"{key}loss_fp8lab": loss_ours, f"{key}loss_relative_difference": loss_rel,
                        f"{key}gradient_relative_frobenius": rel})
        finding["markdown"] += [
            f"{what[side]}: loss {loss_ours!r} vs torch float64 autograd {loss.item()!r} (relative difference "
            f"{loss_rel:.2e}); every weight gradient ({len(rel)} tensors) within relative Frobenius {TOLERANCE:g} "
            f"(derived in llama_autograd_test.py); the largest: {worst} at {rel[worst]:.2e}.", ""]
    finding["markdown"] = [f"Prompt {PROMPT!r} ({len(tokens)} tokens).", ""] + finding["markdown"][:-1]
    peers_common.write_finding(args.results, "llama_autograd", finding)
    peers_common.verdict(failures)


if __name__ == "__main__":
    main()
