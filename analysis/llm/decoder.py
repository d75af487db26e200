"""A dense decoder-only LLM as a torch module, built from a Hugging Face config.json read by analysis.llm.models
(no transformers, no weights: on the meta device), for analysis.predict's `hf:CONFIG|NAME` spec.

The module runs what Llama-family models run: embedding, per layer RMSNorm (or LayerNorm), q/k/v projections
(biased where the config says; per-head q/k RMSNorm where it says, as Qwen3), grouped-query causal
scaled-dot-product attention, the output projection, RMSNorm and the gated MLP (act(gate) * up, then down), a
final norm and the LM head (the embedding table when tied). Rotary embedding is left out: a few element-wise
ops a layer that predict's op table would count, not a GEMM. Mixture-of-experts and multi-head latent attention
models are not built: their routing needs values a meta run does not have (analysis.llm models them).
"""

from __future__ import annotations

from common.errors import CeilingsError

from .models import Model


def decoder(model: Model, dtype: str = "bfloat16"):
    """The module of `model` on the meta device, in `dtype` (a torch dtype's name)."""
    import torch
    from torch import nn

    if model.moe or model.mla or model.sliding_window:
        kind = "mixture of experts" if model.moe else "latent attention" if model.mla else "sliding-window layers"
        raise CeilingsError(f"{model.name}: its {kind} is not built as a torch module here (routing and windows "
                            f"need values a meta run does not have): predict it with python -m analysis.llm")
    norm = nn.RMSNorm if model.norm == "rms" else nn.LayerNorm
    act = {"silu": nn.functional.silu}[model.activation]
    d, hd, heads, kv = model.hidden, model.head_dim, model.heads, model.kv_heads

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            qkv, o, mlp = ("qkv" in model.biased), ("o" in model.biased), ("mlp" in model.biased)
            self.attn_norm, self.mlp_norm = norm(d), norm(d)
            self.q_proj = nn.Linear(d, heads * hd, bias=qkv)
            self.k_proj = nn.Linear(d, kv * hd, bias=qkv)
            self.v_proj = nn.Linear(d, kv * hd, bias=qkv)
            self.q_norm, self.k_norm = (nn.RMSNorm(hd), nn.RMSNorm(hd)) if model.qk_norm else (None, None)
            self.o_proj = nn.Linear(heads * hd, d, bias=o)
            self.gate_proj = nn.Linear(d, model.intermediate, bias=mlp)
            self.up_proj = nn.Linear(d, model.intermediate, bias=mlp)
            self.down_proj = nn.Linear(model.intermediate, d, bias=mlp)

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
            h = self.mlp_norm(x)
            return x + self.down_proj(act(self.gate_proj(h)) * self.up_proj(h))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(model.vocab, d)
            self.layers = nn.ModuleList(Layer() for _ in range(model.layers))
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
