"""A dense decoder-only LLM as a torch module, built from a Hugging Face config.json read by analysis.llm.models
(no transformers, no weights: on the meta device), for analysis.predict's `hf:CONFIG|NAME` spec.

The module runs what Llama-family models run: embedding, per layer RMSNorm (or LayerNorm), q/k/v projections
(biased where the config says; per-head q/k RMSNorm where it says, as Qwen3), grouped-query causal
scaled-dot-product attention, the output projection, RMSNorm and the gated MLP (act(gate) * up, then down), a
final norm and the LM head (the embedding table when tied). Rotary embedding is left out: a few element-wise
ops a layer that predict's op table would count, not a GEMM.

A mixture-of-experts layer runs its router (and top-k of the scores), then its experts as two batched GEMMs
(gate and up, then down: what grouped-GEMM kernels run) over the tokens routed to them, taken as uniform
random routing leaves them (ROUTING: which tokens go where is in the values, which a meta run does not have):
as many experts as it touches on average (work.experts_touched, the count analysis.llm reads the weights of),
each with tokens x k / that many rows; then the weighted sum of the k outputs,
and the shared experts' MLP where the config has one. Multi-head latent attention and sliding-window models are
not built (analysis.llm models them).
"""

from __future__ import annotations

import math

from common.errors import CeilingsError

from .models import Model
from .work import experts_touched

ROUTING = ("mixture of experts: the tokens routed uniformly at random, spread evenly over the experts that such "
           "routing touches on average (which go where is not known before a run)")


def decoder(model: Model, dtype: str = "bfloat16"):
    """The module of `model` on the meta device, in `dtype` (a torch dtype's name)."""
    import torch
    from torch import nn

    if model.mla or model.sliding_window:
        kind = "latent attention is" if model.mla else "sliding-window layers are"
        raise CeilingsError(f"{model.name}: its {kind} not built as a torch module here: predict it with "
                            f"python -m analysis.llm")
    norm = nn.RMSNorm if model.norm == "rms" else nn.LayerNorm
    act = {"silu": nn.functional.silu}[model.activation]
    d, hd, heads, kv = model.hidden, model.head_dim, model.heads, model.kv_heads

    biased = "mlp" in model.biased

    class Mlp(nn.Module):
        def __init__(self, width: int):
            super().__init__()
            self.gate_proj = nn.Linear(d, width, bias=biased)
            self.up_proj = nn.Linear(d, width, bias=biased)
            self.down_proj = nn.Linear(width, d, bias=biased)

        def forward(self, h):
            return self.down_proj(act(self.gate_proj(h)) * self.up_proj(h))

    class Experts(nn.Module):
        def __init__(self):
            super().__init__()
            e, f = model.experts, model.intermediate
            self.router = nn.Linear(d, e, bias=model.router_bias)
            self.gate_up = nn.Parameter(torch.empty(e, d, 2 * f))
            self.down = nn.Parameter(torch.empty(e, f, d))
            self.shared = Mlp(model.shared_intermediate) if model.shared_intermediate else None

        def forward(self, h):
            b, s, _ = h.shape
            tokens, k = h.reshape(b * s, d), model.experts_per_token
            weights, _ = torch.topk(self.router(tokens).softmax(-1), k)
            used = max(1, round(experts_touched(model, b * s)))  # ROUTING
            rows = math.ceil(b * s * k / used)
            routed = tokens[:1].expand(used, rows, d)
            gate, up = torch.bmm(routed, self.gate_up[:used]).chunk(2, dim=-1)
            out = torch.bmm(act(gate) * up, self.down[:used]).reshape(-1, d)[:b * s * k]
            mixed = (out.view(b * s, k, d) * weights.unsqueeze(-1)).sum(1).view(b, s, d)
            return mixed + self.shared(h) if self.shared is not None else mixed

    class Layer(nn.Module):
        def __init__(self, dense: bool):
            super().__init__()
            qkv, o = ("qkv" in model.biased), ("o" in model.biased)
            self.attn_norm, self.mlp_norm = norm(d), norm(d)
            self.q_proj = nn.Linear(d, heads * hd, bias=qkv)
            self.k_proj = nn.Linear(d, kv * hd, bias=qkv)
            self.v_proj = nn.Linear(d, kv * hd, bias=qkv)
            self.q_norm, self.k_norm = (nn.RMSNorm(hd), nn.RMSNorm(hd)) if model.qk_norm else (None, None)
            self.o_proj = nn.Linear(heads * hd, d, bias=o)
            self.mlp = Mlp(model.dense_intermediate or model.intermediate) if dense else Experts()

        def forward(self, x):
            b, s, _ = x.shape
            h = self.attn_norm(x)
            q = self.q_proj(h).view(b, s, heads, hd)
            k = self.k_proj(h).view(b, s, kv, hd)
            if self.q_norm is not None:
                q, k = self.q_norm(q), self.k_norm(k)
            v = self.v_proj(h).view(b, s, kv, hd)
            a = nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                           is_causal=True, enable_gqa=kv != heads)
            x = x + self.o_proj(a.transpose(1, 2).reshape(b, s, heads * hd))
            return x + self.mlp(self.mlp_norm(x))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(model.vocab, d)
            # an MoE model's dense layers first (DeepSeek's first_k_dense_replace)
            self.layers = nn.ModuleList(Layer(not model.moe or i < model.dense_layers) for i in range(model.layers))
            self.norm = norm(d)
            self.lm_head = nn.Linear(d, model.vocab, bias=False)
            if model.tied:
                self.lm_head.weight = self.embed_tokens.weight

        def forward(self, ids):
            x = self.embed_tokens(ids)
            for layer in self.layers:
                x = layer(x)
            return self.lm_head(self.norm(x))

    with torch.device("meta"):
        return Decoder().to(getattr(torch, dtype))
