"""Small models for tests/test_predict.py: each function returns (model, inputs), as analysis.predict's SPEC
FILE.py:FUNCTION asks."""

import torch
from torch import nn


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


def cnn():
    return CNN().eval(), (torch.randn(4, 3, 8, 8),)


def encoder():
    return nn.TransformerEncoderLayer(64, 4, 128, batch_first=True).eval(), (torch.randn(2, 16, 64),)


class GQADecoder(nn.Module):
    """One decoder block with grouped-query attention (8 query heads sharing 2 key/value heads), causal, bf16."""

    def __init__(self, dim=64, heads=8, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.head = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.head, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.norm = nn.RMSNorm(dim)
        self.up = nn.Linear(dim, 4 * dim, bias=False)
        self.down = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.norm(x)
        q = self.q(h).view(b, s, self.heads, self.head).transpose(1, 2)
        k, v = self.kv(h).view(b, s, 2, self.kv_heads, self.head).unbind(2)
        k = k.transpose(1, 2).repeat_interleave(self.heads // self.kv_heads, 1)
        v = v.transpose(1, 2).repeat_interleave(self.heads // self.kv_heads, 1)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        return x + self.down(nn.functional.silu(self.up(x)))


def decoder():
    return GQADecoder().to(torch.bfloat16), (torch.randn(2, 16, 64, dtype=torch.bfloat16),)
