"""One decode step of a LLaMA-style transformer (random weights, bf16), after a warm-up step.

    python scripts/apps/decode_step.py [--layers 32] [--d-model 4096] [--batch 4] [--context 4096]
    python scripts/apps/decode_step.py --device cpu --dry-run      # tiny, anywhere torch imports

Each layer: RMSNorm, fused QKV projection, rotary embedding of q and k, the new k and v written into a KV
cache of --context tokens, attention of the new token over the cache (scaled_dot_product_attention),
output projection, RMSNorm, SwiGLU MLP (gate/up fused, then down); then a final norm, the LM head and a
greedy next token. With batch 1-8 every projection is a skinny GEMM (a GEMV per token) that reads all
its weights once: memory-bound, as is reading the KV cache. Defaults: 32 layers x 4096 (LLaMA-7B-like,
about 13 GB of bf16 weights and, at batch 4 and 4096 tokens, 8.6 GB of KV cache). The measured step
runs inside cudaProfilerStart/Stop (scripts/apps/app_common.py). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_common import add_common_args, emit, require_torch, resolve_device, run_steps

from common.errors import CeilingsError, cli_entry
from scripts.outdir_cli import doc_parser

PROG = "decode_step"
HEAD_DIM = 128
FFN_MULTIPLE = 256  # LLaMA rounds 8/3 d_model up to a multiple of 256: 4096 -> 11008
VOCAB = 32000
ROPE_BASE = 10000.0
RMS_EPS = 1e-5
DRY_RUN = {"layers": 2, "d_model": 128, "batch": 2, "context": 16, "vocab": 256}


def ffn_dim(d_model: int) -> int:
    hidden = int(2 * (4 * d_model) / 3)
    return FFN_MULTIPLE * math.ceil(hidden / FFN_MULTIPLE)


def _parser() -> argparse.ArgumentParser:
    p = doc_parser(f"scripts/apps/{PROG}.py", __doc__)
    p.add_argument("--layers", type=int, default=32, help="transformer layers (default 32)")
    p.add_argument("--d-model", type=int, default=4096, help=f"model width, a multiple of {HEAD_DIM} (default 4096)")
    p.add_argument("--batch", type=int, default=4, help="sequences decoded together (default 4)")
    p.add_argument("--context", type=int, default=4096, help="tokens already in the KV cache (default 4096)")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16", help="weights and activations")
    add_common_args(p)
    return p


class Decoder:
    """Weights and KV cache as plain tensors; `step(x)` decodes one token per sequence."""

    def __init__(self, torch, device, dtype, *, layers: int, d_model: int, batch: int, context: int, vocab: int):
        self.torch, self.layers, self.batch, self.context = torch, layers, batch, context
        self.heads = d_model // HEAD_DIM
        ffn = ffn_dim(d_model)
        g = torch.Generator(device=device).manual_seed(0)

        def weight(rows: int, cols: int):
            return (torch.randn(rows, cols, device=device, dtype=dtype, generator=g) / math.sqrt(cols))

        self.w = [{"qkv": weight(3 * d_model, d_model), "o": weight(d_model, d_model),
                   "gate_up": weight(2 * ffn, d_model), "down": weight(d_model, ffn),
                   "norm1": torch.ones(d_model, device=device, dtype=dtype),
                   "norm2": torch.ones(d_model, device=device, dtype=dtype)} for _ in range(layers)]
        self.norm = torch.ones(d_model, device=device, dtype=dtype)
        self.head = weight(vocab, d_model)
        shape = (batch, self.heads, context + 1, HEAD_DIM)  # room for the new token
        self.k = [torch.randn(shape, device=device, dtype=dtype, generator=g) for _ in range(layers)]
        self.v = [torch.randn(shape, device=device, dtype=dtype, generator=g) for _ in range(layers)]
        inv = 1.0 / ROPE_BASE ** (torch.arange(0, HEAD_DIM, 2, device=device, dtype=torch.float32) / HEAD_DIM)
        angle = context * inv
        self.cos, self.sin = torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)

    def rms_norm(self, x, weight):
        t = self.torch
        return (x.float() * t.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + RMS_EPS)).to(x.dtype) * weight

    def rope(self, x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return self.torch.stack((x1 * self.cos - x2 * self.sin, x1 * self.sin + x2 * self.cos), dim=-1).flatten(-2)

    def step(self, x):
        t, F = self.torch, self.torch.nn.functional
        b, pos = self.batch, self.context
        for w, kc, vc in zip(self.w, self.k, self.v):
            h = self.rms_norm(x, w["norm1"])
            q, k, v = (h @ w["qkv"].T).view(b, 3, self.heads, HEAD_DIM).unbind(1)
            q, k = self.rope(q), self.rope(k)
            kc[:, :, pos] = k
            vc[:, :, pos] = v
            attn = F.scaled_dot_product_attention(q.unsqueeze(2), kc, vc)  # (b, heads, 1, head_dim)
            x = x + attn.reshape(b, -1) @ w["o"].T
            h = self.rms_norm(x, w["norm2"])
            gate, up = (h @ w["gate_up"].T).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ w["down"].T
        logits = self.rms_norm(x, self.norm) @ self.head.T
        return t.argmax(logits, dim=-1)


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    torch = require_torch()
    device = resolve_device(torch, args.device)
    sizes = dict(DRY_RUN) if args.dry_run else {"layers": args.layers, "d_model": args.d_model,
                                                "batch": args.batch, "context": args.context, "vocab": VOCAB}
    if sizes["d_model"] % HEAD_DIM or min(sizes.values()) < 1:
        raise CeilingsError(f"--d-model {sizes['d_model']}: must be a positive multiple of {HEAD_DIM}; "
                            f"--layers, --batch and --context must be 1 or more")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    torch.manual_seed(0)  # the input token embeddings; weights and cache use their own seeded generator
    with torch.inference_mode():
        model = Decoder(torch, device, dtype, **sizes)
        x = torch.randn(sizes["batch"], sizes["d_model"], device=device, dtype=dtype)

        def step():
            return model.step(x).sum()

        result = run_steps(torch, device, step, args.warmup, args.profiler_range)
    weights = sum(p.numel() for w in model.w for p in w.values()) + model.head.numel() + model.norm.numel()
    emit({"app": "decode", "device": str(device), **sizes, "dtype": args.dtype, "dry_run": args.dry_run,
          "ffn": ffn_dim(sizes["d_model"]), "weight_bytes": weights * torch.finfo(dtype).bits // 8,
          "kv_cache_bytes": 2 * sum(k.numel() for k in model.k) * torch.finfo(dtype).bits // 8,
          "torch": torch.__version__, "token_sum": result.pop("value"), **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
