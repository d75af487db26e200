"""Llama-shaped decoders for `python -m analysis.predict` (docs/predict.md): built on the meta device, no weights.
Shapes of Llama-2-7B (32 layers, hidden 4096, 32 heads, MLP 11008, vocab 32000) and Llama-3-70B (80 layers, hidden
8192, 64 query and 8 key/value heads, MLP 28672, vocab 128256), per their published config.json files."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d, heads, kv, ff):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv, d // heads
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, kv * self.hd, bias=False)
        self.v = nn.Linear(d, kv * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, ff, bias=False)
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)
    def forward(self, x):
        b, s, d = x.shape
        h = self.n1(x)
        q = self.q(h).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv, self.hd).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv, self.hd).transpose(1, 2)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        h = self.n2(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


class LM(nn.Module):
    def __init__(self, layers, d, heads, kv, ff, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, kv, ff) for _ in range(layers))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
    def forward(self, ids):
        x = self.emb(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def llama7b():
    with torch.device("meta"):
        return LM(32, 4096, 32, 32, 11008, 32000).to(torch.bfloat16), (torch.zeros(1, 2048, dtype=torch.long),)


def llama70b():
    with torch.device("meta"):
        return LM(80, 8192, 64, 8, 28672, 128256).to(torch.bfloat16), (torch.zeros(1, 2048, dtype=torch.long),)
