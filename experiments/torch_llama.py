"""A plain-PyTorch Llama with llama2.c's architecture, the model fp8lab's engine trains
(kernels/train): token embedding, per block RMSNorm -> grouped-query attention with RoPE ->
residual, RMSNorm -> SwiGLU MLP -> residual, a final RMSNorm and a classifier tied to the
embedding. Written as any PyTorch user writes a model; fp8lab.torch.convert(model, recipe) then
runs its linear layers' GEMMs under a recipe.

Its linear layers are named as the engine names them (L0.wq ... L{n-1}.w3, classifier), so the
shipped recipes' per-layer overrides (the classifier in BF16, nvfp4's last block) apply as they
do in `fp8lab train`. The arithmetic of the other ops is the engine's in the math, not in the
bits: RMSNorm eps 1e-5, RoPE theta 1e4 on consecutive pairs (angles in FP64, cos/sin rounded
once), softmax attention scaled by 1/sqrt(head size), SwiGLU w2(silu(w1 x) * w3 x).

    model = Llama.from_fp8lab("checkpoint", "stories260K")       # stories260K.bin, sha256 checked
    model = Llama.from_fp8lab("seeded", preset="dim256", seed=1)  # the engine's seeded init
"""
import math

import torch
import torch.nn.functional as F

import fp8lab

RMS_EPS = 1e-5
ROPE_THETA = 10000.0


class RMSNorm(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * self.weight


def rope_tables(positions, head_size, dtype):
    """cos and sin (positions x head_size/2): angle t * theta^(-2j/hs) in FP64, rounded once."""
    j = torch.arange(head_size // 2, dtype=torch.float64)
    freq = 1.0 / torch.pow(torch.tensor(ROPE_THETA, dtype=torch.float64), 2 * j / head_size)
    angle = torch.arange(positions, dtype=torch.float64)[:, None] * freq[None, :]
    return torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)


def rope(x, cos, sin):
    """Rotates consecutive pairs (2j, 2j+1) of every head of x (batch, T, heads, hs)."""
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)


class Block(torch.nn.Module):
    def __init__(self, dim, hidden_dim, n_heads, n_kv_heads):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_size = n_heads, n_kv_heads, dim // n_heads
        kv_dim = n_kv_heads * self.head_size
        self.attention_norm = RMSNorm(dim)
        self.wq = torch.nn.Linear(dim, dim, bias=False)
        self.wk = torch.nn.Linear(dim, kv_dim, bias=False)
        self.wv = torch.nn.Linear(dim, kv_dim, bias=False)
        self.wo = torch.nn.Linear(dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.w1 = torch.nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = torch.nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = torch.nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x, cos, sin):
        batch, T, _ = x.shape
        h = self.attention_norm(x)
        q = rope(self.wq(h).view(batch, T, self.n_heads, self.head_size), cos, sin)
        k = rope(self.wk(h).view(batch, T, self.n_kv_heads, self.head_size), cos, sin)
        v = self.wv(h).view(batch, T, self.n_kv_heads, self.head_size)
        group = self.n_heads // self.n_kv_heads  # head i reads key/value head i // group
        k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
        scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(self.head_size)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        p = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        o = torch.einsum("bhts,bshd->bthd", p, v).reshape(batch, T, -1)
        x = x + self.wo(o)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(torch.nn.Module):
    def __init__(self, dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len):
        super().__init__()
        self.config = dict(dim=dim, hidden_dim=hidden_dim, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads,
                           vocab_size=vocab_size, seq_len=seq_len)
        self.tok_embeddings = torch.nn.Embedding(vocab_size, dim)
        for layer in range(n_layers):  # named L0..: the engine's layer names (recipe overrides)
            setattr(self, f"L{layer}", Block(dim, hidden_dim, n_heads, n_kv_heads))
        self.norm = RMSNorm(dim)
        self.classifier = torch.nn.Linear(dim, vocab_size, bias=False)
        self.classifier.weight = self.tok_embeddings.weight  # tied, as llama2.c's checkpoints are

    def blocks(self):
        return [getattr(self, f"L{layer}") for layer in range(self.config["n_layers"])]

    def forward(self, tokens):
        x = self.tok_embeddings(tokens)
        cos, sin = rope_tables(tokens.shape[1], self.config["dim"] // self.config["n_heads"], x.dtype)
        for block in self.blocks():
            x = block(x, cos, sin)
        return self.classifier(self.norm(x))

    def loss(self, tokens, targets):
        """Mean cross-entropy over every target (the engine's loss)."""
        logits = self(tokens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    @classmethod
    def from_fp8lab(cls, init="checkpoint", checkpoint="stories260K", preset="stories260K", seed=1):
        """The weights `fp8lab train` starts from: a llama2.c checkpoint (stories260K from the data
        folder, sha256 checked, or a path) or the engine's seeded init of a preset. Returns the
        model (float32) and a description of where its weights came from."""
        start = fp8lab._core._llama_weights(init, checkpoint, preset, seed)
        model = cls(**start["config"])
        w = {name: torch.from_numpy(array) for name, array in start["weights"].items()}
        with torch.no_grad():
            model.tok_embeddings.weight.copy_(w["token_embedding"])
            model.norm.weight.copy_(w["rms_final"])
            for layer, block in enumerate(model.blocks()):
                block.attention_norm.weight.copy_(w["rms_att"][layer])
                block.ffn_norm.weight.copy_(w["rms_ffn"][layer])
                for name in ("wq", "wk", "wv", "wo", "w1", "w2", "w3"):
                    getattr(block, name).weight.copy_(w[name][layer])
        return model, start["description"]
