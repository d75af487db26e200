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


class ViTBlock(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        b, s, d = x.shape
        h = self.norm1(x)
        q, k, v = (p(h).view(b, s, self.heads, d // self.heads).transpose(1, 2) for p in (self.q, self.k, self.v))
        x = x + self.o(nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    """ViT-Base/16 as Hugging Face's ViTModel runs it (with its pooler): 224 x 224 images, 196 patches and a
    class token, 12 blocks of 768 wide, 12 heads, MLP 3072 (Dosovitskiy et al., arXiv:2010.11929)."""

    def __init__(self, dim=768, depth=12, heads=12, hidden=3072, patch=16, image=224):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, dim))
        self.blocks = nn.ModuleList(ViTBlock(dim, heads, hidden) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.pool = nn.Linear(dim, dim)

    def forward(self, images):
        x = self.patch(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return torch.tanh(self.pool(self.norm(x)[:, 0]))


def vit_base():
    """ViT-Base/16 at batch 4 in bf16 (the model of TraceLens's H100 test trace
    Falconsai_nsfw_image_detection__1016002.json.gz)."""
    return ViT().to(torch.bfloat16).eval(), (torch.randn(4, 3, 224, 224, dtype=torch.bfloat16),)


def linear_relu():
    """A Linear of 64 -> 128 on 32 rows and its relu, fp32: the model of tests/test_predict.py's hand-written
    trace."""
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU()).eval(), (torch.randn(32, 64),)
