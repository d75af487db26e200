"""Decoder-only transformer models as the work model needs them: from a Hugging Face config.json or a shipped
name.

Only what sets FLOPs and bytes is kept: sizes, heads, experts, tied embeddings, which projections carry a
bias, the norm and the activation. A field the config lacks takes the default of transformers' config class
for that model_type (what `from_pretrained` would build), never a guess; a field without such a default is an
error naming it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ceilings.inputs import loads_json
from common.errors import CeilingsError

CONFIG_NAME = "config.json"
NORMS = ("rms", "layer")
# the projections that may carry a bias: q/k/v (fused), the attention output, the MLP's three matrices
BIASED = ("qkv", "o", "mlp")


@dataclass(frozen=True)
class Architecture:
    """How transformers' modeling_<model_type>.py builds a decoder layer, as far as work goes."""

    norm: str  # NORMS
    norm_weights: bool  # the norm has a weight vector (OLMo's LayerNorm has none)
    moe: bool  # the MLP is a top-k routed mixture of experts
    fixed_bias: tuple[str, ...] = ()  # BIASED projections that always have a bias
    bias_keys: Mapping[str, tuple[str, ...]] | None = None  # config keys that add biases when true
    # the config class's defaults for fields a config.json may leave out
    defaults: Mapping[str, object] | None = None
    experts_key: str = "num_local_experts"  # the config key of the routed experts' number
    # the config keys of the experts a token is routed to, the first found taken (gpt-oss's config may name it
    # experts_per_token alone)
    per_token_keys: tuple[str, ...] = ("num_experts_per_tok",)
    expert_size_key: str = "intermediate_size"  # an expert's MLP size (moe_intermediate_size where dense layers
    # have their own intermediate_size)
    shared_experts_key: str | None = None  # the config key of the experts every token runs beside its routed ones
    mla: bool = False  # DeepSeek's multi-head latent attention (kv_lora_rank ...)
    qk_norm: bool = False  # an RMSNorm over each head of q and of k (Qwen3)
    sinks: bool = False  # a learned logit a head in the softmax's denominator (gpt-oss)
    router_bias: bool = False
    # how many layers of an MoE model have a dense MLP, from (config fields, layers, source); None: none has
    dense_rule: Callable[[Mapping, int, str], int] | None = None
    # how many layers a sliding_window covers in a config without layer_types, from (config fields, layers,
    # source); None: not known here, so the window is refused past its length
    window_layout: Callable[[Mapping, int, str], int] | None = None


def _whole(key: str, value, source: str, least: int = 1) -> int:
    """`value` of config field `key` as a whole number from `least` (1: a size; 0: a number of layers or shared
    experts) to SIZE_LIMITS[key]; CeilingsError naming the field when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        what = "a positive whole number" if least == 1 else f"a whole number, {least} or more"
        raise CeilingsError(f"{source}: {key} = {value!r} must be {what}")
    if value > SIZE_LIMITS[key]:
        raise CeilingsError(f"{source}: {key} = {value} is beyond any model (at most {SIZE_LIMITS[key]})")
    return value


def _count(fields: Mapping, key: str, source: str, default: int | None = None) -> int:
    """A whole number that may be 0 (a number of layers or shared experts)."""
    return _whole(key, fields.get(key, default), source, least=0)


def _deepseek_dense(fields: Mapping, layers: int, source: str) -> int:
    """DeepSeek's MoE layers are those from first_k_dense_replace on, every moe_layer_freq-th; the rest dense."""
    first = _count(fields, "first_k_dense_replace", source)
    freq = _count(fields, "moe_layer_freq", source) or 1
    return sum(1 for i in range(layers) if i < first or i % freq)


def _qwen3_moe_dense(fields: Mapping, layers: int, source: str) -> int:
    """Qwen3-MoE's dense layers: those in mlp_only_layers or off every decoder_sparse_step-th (layer i is MoE
    when (i + 1) % step == 0)."""
    step = _count(fields, "decoder_sparse_step", source) or 1
    only = fields["mlp_only_layers"]
    if not isinstance(only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in only):
        raise CeilingsError(f"{source}: mlp_only_layers = {only!r} must be a list of layer numbers")
    return sum(1 for i in range(layers) if i in only or (i + 1) % step)


def _every_layer(fields: Mapping, layers: int, source: str) -> int:
    """Mistral's and Mixtral's attention applies the config's sliding_window in every layer."""
    return layers


def _even_layers(fields: Mapping, layers: int, source: str) -> int:
    """GptOssConfig without layer_types: sliding on the even layers, full on the odd."""
    return (layers + 1) // 2


def _past_max_window_layers(fields: Mapping, layers: int, source: str) -> int:
    """Qwen2Config without layer_types: layer i slides when i >= max_window_layers."""
    return layers - min(layers, _count(fields, "max_window_layers", source))


_LLAMA_DEFAULTS = {"tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False}
# model_type -> its architecture (transformers 4.4x: modeling_llama/mistral/mixtral/qwen2/olmo.py); every one
# has gated MLPs (gate and up projections, act(gate) * up, down projection) and rotary positions
ARCHITECTURES = {
    "llama": Architecture("rms", True, False, bias_keys={"attention_bias": ("qkv", "o"), "mlp_bias": ("mlp",)},
                          defaults={**_LLAMA_DEFAULTS, "mlp_bias": False}),
    "mistral": Architecture("rms", True, False, defaults={**_LLAMA_DEFAULTS, "sliding_window": 4096},
                            window_layout=_every_layer),
    "mixtral": Architecture("rms", True, True, defaults={**_LLAMA_DEFAULTS, "num_local_experts": 8,
                                                         "num_experts_per_tok": 2}, window_layout=_every_layer),
    "qwen2": Architecture("rms", True, False, fixed_bias=("qkv",), window_layout=_past_max_window_layers,
                          defaults={**_LLAMA_DEFAULTS, "use_sliding_window": False, "max_window_layers": 28,
                                    "sliding_window": 4096}),
    "olmo": Architecture("layer", False, False, bias_keys={"attention_bias": ("qkv", "o")},
                         defaults=_LLAMA_DEFAULTS),
    # Qwen3's MoE (modeling_qwen3_moe.py): q/k norms, layers in mlp_only_layers or off decoder_sparse_step dense;
    # which layers its sliding window covers changed between transformers versions (max_window_layers, then all)
    "qwen3_moe": Architecture("rms", True, True, bias_keys={"attention_bias": ("qkv", "o")}, qk_norm=True,
                              experts_key="num_experts", expert_size_key="moe_intermediate_size",
                              dense_rule=_qwen3_moe_dense,
                              defaults={**_LLAMA_DEFAULTS, "decoder_sparse_step": 1, "mlp_only_layers": [],
                                        "use_sliding_window": False, "sliding_window": 4096}),
    # gpt-oss (modeling_gpt_oss.py): biases on attention (attention_bias), the router and every expert, attention
    # sinks
    "gpt_oss": Architecture("rms", True, True, fixed_bias=("mlp",), bias_keys={"attention_bias": ("qkv", "o")},
                            sinks=True, router_bias=True, window_layout=_even_layers,
                            per_token_keys=("num_experts_per_tok", "experts_per_token"),
                            defaults={**_LLAMA_DEFAULTS, "attention_bias": True, "head_dim": 64}),
    # DeepSeek-V2/V3 (their modeling_deepseek.py): MLA, shared experts, first_k_dense_replace dense layers
    **{t: Architecture("rms", True, True, bias_keys={"attention_bias": ("qkv", "o")}, mla=True,
                       experts_key="n_routed_experts", expert_size_key="moe_intermediate_size",
                       shared_experts_key="n_shared_experts", dense_rule=_deepseek_dense,
                       defaults={**_LLAMA_DEFAULTS, "moe_layer_freq": 1})
       for t in ("deepseek_v3", "deepseek_v2")},
}
# the largest value a size may take: a config beyond it is corrupt or hostile (10^12 experts), not a model.
# Each is far above every published model's (hidden 16384, 256 experts, vocab 256k, 10M positions).
SIZE_LIMITS = {"hidden_size": 1 << 18, "intermediate_size": 1 << 20, "num_hidden_layers": 1 << 12,
               "num_attention_heads": 1 << 12, "num_key_value_heads": 1 << 12, "head_dim": 1 << 12,
               "vocab_size": 1 << 24, "num_local_experts": 1 << 14, "num_experts_per_tok": 1 << 14,
               "experts_per_token": 1 << 14,
               "max_position_embeddings": 1 << 30, "sliding_window": 1 << 30, "moe_intermediate_size": 1 << 20,
               "num_experts": 1 << 14, "n_routed_experts": 1 << 14, "n_shared_experts": 1 << 10,
               "kv_lora_rank": 1 << 16, "q_lora_rank": 1 << 16, "qk_nope_head_dim": 1 << 12,
               "qk_rope_head_dim": 1 << 12, "v_head_dim": 1 << 12, "first_k_dense_replace": 1 << 12,
               "moe_layer_freq": 1 << 12, "decoder_sparse_step": 1 << 12, "max_window_layers": 1 << 12}
NULL_MEANS_NONE = ("sliding_window",)  # config keys whose null is a value, not "take the default"
FLAGS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window")  # JSON booleans only
# hidden_act -> FLOPs per element of act(gate) * up: silu(x) = x / (1 + exp(-x)) is exp, add, divide (3),
# then the product with up (1)
ACTIVATION_FLOPS = {"silu": 4}

# Shipped models: (where every value below comes from, the config.json fields as published there). Fields the
# published file does not have (head_dim before Llama 3.2) are derived as transformers does.
SHIPPED: dict[str, tuple[str, dict]] = {
    "Llama-3.1-8B": ("https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json", {
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False,
        "rms_norm_eps": 1e-05, "hidden_act": "silu", "max_position_embeddings": 131072,
        "attention_bias": False, "mlp_bias": False}),
    "Llama-3.1-70B": ("https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json", {
        "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
        "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False,
        "rms_norm_eps": 1e-05, "hidden_act": "silu", "max_position_embeddings": 131072,
        "attention_bias": False, "mlp_bias": False}),
    "Llama-3.2-1B": ("https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json", {
        "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256,
        "tie_word_embeddings": True, "rms_norm_eps": 1e-05, "hidden_act": "silu",
        "max_position_embeddings": 131072, "attention_bias": False, "mlp_bias": False}),
    "Mistral-7B-v0.3": ("https://huggingface.co/mistralai/Mistral-7B-v0.3/blob/main/config.json", {
        "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32768, "tie_word_embeddings": False,
        "rms_norm_eps": 1e-05, "hidden_act": "silu", "max_position_embeddings": 32768, "sliding_window": None}),
    "Mixtral-8x7B-v0.1": ("https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json", {
        "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "tie_word_embeddings": False,
        "rms_norm_eps": 1e-05, "hidden_act": "silu", "max_position_embeddings": 32768, "sliding_window": None,
        "num_local_experts": 8, "num_experts_per_tok": 2}),
    "Qwen2.5-7B": ("https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json", {
        "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False,
        "rms_norm_eps": 1e-06, "hidden_act": "silu", "max_position_embeddings": 131072,
        "sliding_window": 131072, "use_sliding_window": False}),
    "Qwen2.5-0.5B": ("https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json", {
        "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
        "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True,
        "rms_norm_eps": 1e-06, "hidden_act": "silu", "max_position_embeddings": 32768,
        "sliding_window": 32768, "use_sliding_window": False}),
    # The four below were read from copies of those files quoted in public repositories, not from huggingface.co
    # itself: Qwen3-30B-A3B's and gpt-oss-20b's whole; DeepSeek-V3's from the file of DeepSeek-R1 (the same
    # architecture and sizes), cross-checked against V3's sizes quoted elsewhere; gpt-oss-120b's as gpt-oss-20b's
    # but num_hidden_layers 36 and num_local_experts 128 (GptOssConfig's defaults, which are 120b's). Their
    # parameter counts match the model cards (tests/test_llm_models2026.py).
    # DeepSeek-V3: its num_nextn_predict_layers (the multi-token-prediction module, 14 B more in the checkpoint)
    # is not modelled, as the 671 B the card says leave it out; its fp8 checkpoint: run it with --weights fp8
    "DeepSeek-V3": ("https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json (values read from "
                    "DeepSeek-R1's file: the same architecture and sizes)", {
        "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432, "num_hidden_layers": 61,
        "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 129280, "tie_word_embeddings": False,
        "rms_norm_eps": 1e-06, "hidden_act": "silu", "max_position_embeddings": 163840, "attention_bias": False,
        "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
        "v_head_dim": 128, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048, "first_k_dense_replace": 3, "moe_layer_freq": 1,
        "num_nextn_predict_layers": 1, "quantization_config": {
            "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}}),
    "Qwen3-30B-A3B": ("https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json", {
        "model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 48,
        "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936,
        "tie_word_embeddings": False, "rms_norm_eps": 1e-06, "hidden_act": "silu", "max_position_embeddings": 40960,
        "attention_bias": False, "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
        "decoder_sparse_step": 1, "mlp_only_layers": [], "sliding_window": None, "use_sliding_window": False}),
    # gpt-oss keeps its experts in MXFP4 (quantization_config quant_method mxfp4), not a --weights type; the
    # layer_types, as published, alternate sliding_attention and full_attention from layer 0
    **{f"gpt-oss-{size}": (f"https://huggingface.co/openai/gpt-oss-{size}/blob/main/config.json" + derived, {
        "model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": layers,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 201088,
        "tie_word_embeddings": False, "rms_norm_eps": 1e-05, "hidden_act": "silu", "max_position_embeddings": 131072,
        "attention_bias": True, "num_local_experts": experts, "num_experts_per_tok": 4, "experts_per_token": 4,
        "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * (layers // 2),
        "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}})
       for size, layers, experts, derived in (
           ("120b", 36, 128, " (values as gpt-oss-20b's, with GptOssConfig's 36 layers and 128 experts)"),
           ("20b", 24, 32, ""))},
}


@dataclass(frozen=True)
class Mla:
    """Multi-head latent attention (DeepSeek-V2/V3): q through a rank-q_rank bottleneck (none: a plain q_proj),
    k and v from a kv_rank latent that the cache holds with one shared rope key of `rope`; a head's query and key
    are nope + rope wide, its value v."""

    q_rank: int | None
    kv_rank: int
    nope: int
    rope: int
    v: int


@dataclass(frozen=True)
class Model:
    """One decoder-only model. MLP sizes are per expert for a mixture of experts (experts > 1)."""

    name: str
    source: str  # the config.json it was read from
    model_type: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool  # the LM head is the embedding table
    norm: str
    norm_weights: bool
    activation: str
    biased: frozenset[str]  # BIASED projections with a bias
    experts: int = 1
    experts_per_token: int = 1
    max_context: int | None = None  # max_position_embeddings
    sliding_window: int | None = None  # the window of the window_layers layers (with 0 of them: on layers not
    # known here, refused past the window)
    window_layers: int = 0  # layers whose attention slides: as layer_types names them, else as the architecture
    mla: Mla | None = None
    shared_intermediate: int = 0  # the MLP size of the shared experts every token runs (all of them together)
    dense_layers: int = 0  # layers of an MoE model whose MLP is dense, of dense_intermediate
    dense_intermediate: int = 0
    qk_norm: bool = False
    sinks: bool = False
    router_bias: bool = False

    @property
    def moe(self) -> bool:
        return self.experts > 1

    @property
    def attention(self) -> str:
        if self.mla:
            return f"multi-head latent (a {self.mla.kv_rank} + {self.mla.rope} cache a token)"
        if self.kv_heads == self.heads:
            return "multi-head"
        return "multi-query" if self.kv_heads == 1 else f"grouped-query ({self.heads // self.kv_heads} per KV head)"


def model_from_config(config: Mapping, name: str, source: str) -> Model:
    """A Model from the fields of a config.json; CeilingsError naming the field that is missing or wrong."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise CeilingsError(f"{source}: model_type = {model_type!r} must be a string such as \"llama\"")
    arch = ARCHITECTURES.get(model_type)
    if arch is None:
        hint = (" and it has no text_config: a multimodal config needs its decoder's" if "vision_config" in config
                else "")
        raise CeilingsError(f"{source}: model_type {model_type!r} is not modelled{hint}; supported: "
                            f"{', '.join(ARCHITECTURES)} (or give a shipped name: --list-models)")
    # null is the config class's default, but a null sliding_window is no window (Mistral-7B-v0.3's)
    fields = {**(arch.defaults or {}), **{k: v for k, v in config.items() if v is not None or k in NULL_MEANS_NONE}}
    for key in FLAGS:
        if key in fields and not isinstance(fields[key], bool):
            raise CeilingsError(f"{source}: {key} = {fields[key]!r} must be true or false (a JSON boolean; a "
                                f"string such as \"false\" would read as true)")

    def size(key: str, value) -> int:
        return _whole(key, value, source)

    def whole(key: str, default: int | None = None) -> int:
        value = fields.get(key, default)
        if value is None:
            hint = " (a multimodal config keeps its decoder under text_config: give that part)" \
                if "text_config" in config else ""
            raise CeilingsError(f"{source}: {key} is missing{hint}")
        return size(key, value)

    hidden, heads = whole("hidden_size"), whole("num_attention_heads")
    kv_heads = whole("num_key_value_heads", heads)  # transformers: absent means one KV head per query head
    if heads % kv_heads:
        raise CeilingsError(f"{source}: num_attention_heads {heads} is not a multiple of num_key_value_heads "
                            f"{kv_heads}")
    if "head_dim" not in fields and hidden % heads:
        raise CeilingsError(f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}; "
                            f"the config needs a head_dim")
    activation = fields["hidden_act"]
    if not isinstance(activation, str) or activation not in ACTIVATION_FLOPS:
        raise CeilingsError(f"{source}: hidden_act {activation!r} is not modelled; supported: "
                            f"{', '.join(ACTIVATION_FLOPS)}")
    biased = set(arch.fixed_bias)
    for key, projections in (arch.bias_keys or {}).items():
        if fields.get(key):
            biased.update(projections)
    layers = whole("num_hidden_layers")
    experts, per_token, intermediate = 1, 1, whole("intermediate_size")
    moe = {}
    if arch.moe:
        per_token_key = next((k for k in arch.per_token_keys if k in fields), arch.per_token_keys[0])
        experts, per_token = whole(arch.experts_key), whole(per_token_key)
        if per_token > experts:
            raise CeilingsError(f"{source}: {per_token_key} {per_token} exceeds {arch.experts_key} {experts}")
        dense = arch.dense_rule(fields, layers, source) if arch.dense_rule else 0
        moe = {"dense_layers": dense, "dense_intermediate": intermediate if dense else 0,
               "shared_intermediate": _count(fields, arch.shared_experts_key, source, 0) * whole(arch.expert_size_key)
               if arch.shared_experts_key else 0}
        intermediate = whole(arch.expert_size_key)
    window = fields.get("sliding_window") if fields.get("use_sliding_window", True) else None
    window = None if window is None else size("sliding_window", window)
    covered = None if window is None else _window_layers(arch, fields, layers, source)
    window = None if covered == 0 else window  # no layer slides
    max_context = fields.get("max_position_embeddings")
    max_context = None if max_context is None else size("max_position_embeddings", max_context)
    head_dim, mla = whole("head_dim", hidden // heads), None
    if arch.mla:
        if "q_lora_rank" not in config:
            raise CeilingsError(f"{source}: q_lora_rank is missing (null when q has no low-rank bottleneck)")
        q_rank = config["q_lora_rank"]
        mla = Mla(None if q_rank is None else size("q_lora_rank", q_rank), whole("kv_lora_rank"),
                  whole("qk_nope_head_dim"), whole("qk_rope_head_dim"), whole("v_head_dim"))
        head_dim = mla.nope + mla.rope
    return Model(name=name, source=source, model_type=model_type, hidden=hidden, intermediate=intermediate,
                 layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, vocab=whole("vocab_size"),
                 tied=bool(fields["tie_word_embeddings"]), norm=arch.norm, norm_weights=arch.norm_weights,
                 activation=activation, biased=frozenset(biased), experts=experts, experts_per_token=per_token,
                 max_context=max_context, sliding_window=window, window_layers=covered or 0, mla=mla,
                 qk_norm=arch.qk_norm, sinks=arch.sinks, router_bias=arch.router_bias, **moe)


def _window_layers(arch: Architecture, fields: Mapping, layers: int, source: str) -> int | None:
    """The layers a sliding window covers: those layer_types names sliding_attention, else the architecture's
    layout; None when neither says (then the window is kept and refused past its length)."""
    kinds = fields.get("layer_types")
    if kinds is None:
        return arch.window_layout(fields, layers, source) if arch.window_layout else None
    known = ("sliding_attention", "full_attention")
    if not isinstance(kinds, list) or len(kinds) != layers or any(k not in known for k in kinds):
        raise CeilingsError(f"{source}: layer_types must list {layers} entries, each one of {', '.join(known)}")
    return kinds.count("sliding_attention")


def read_config(path: str | Path) -> tuple[dict, Path]:
    """The fields of a config.json (a file, or a folder holding one) and the file read."""
    path = Path(path)
    file = path / CONFIG_NAME if path.is_dir() else path
    if file.exists() and not file.is_file():  # a FIFO or device would block the read
        raise CeilingsError(f"--model {path}: {file} is not a regular file; give a config.json")
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise CeilingsError(f"--model {path}: cannot read {file} ({exc.strerror or exc})") from None
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise CeilingsError(f"--model {path}: {file} is UTF-16 text; save it as UTF-8, as Hugging Face writes it")
    try:
        config = loads_json(raw.decode("utf-8-sig"), f"--model {path}: {file}", "Hugging Face config.json")
    except UnicodeDecodeError as exc:
        raise CeilingsError(f"--model {path}: {file} is not UTF-8 text (byte {exc.start}); save it as UTF-8") \
            from None
    except json.JSONDecodeError as exc:
        raise CeilingsError(f"--model {path}: {file} is not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise CeilingsError(f"--model {path}: {file} holds no JSON object; give a Hugging Face config.json")
    return config, file


def shipped_name(spec: str) -> str:
    """The shipped model `spec` names: its name in any case, or a fragment of exactly one name."""
    wanted = spec.strip().lower()
    exact = [n for n in SHIPPED if n.lower() == wanted]
    matches = exact or [n for n in SHIPPED if wanted and wanted in n.lower()]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(matches or SHIPPED)
    raise CeilingsError(f"--model {spec}: {'ambiguous' if matches else 'no such file and no shipped model'}: "
                        f"{listed}; give one of those or a config.json path")


def load_model(spec: str) -> tuple[Model, list[str]]:
    """The model of `spec` (a config.json, a folder holding one, or a shipped name) and warnings about what the
    config says but the model leaves out (a quantization_config)."""
    path = Path(spec)
    if path.exists() or spec.endswith(".json"):
        config, file = read_config(path)
        name, source = config.get("_name_or_path") or file.parent.name or file.stem, str(file)
    else:
        name = shipped_name(spec)
        source, config = SHIPPED[name]
    warnings = []
    text = config.get("text_config")
    if isinstance(text, dict) and config.get("model_type") not in ARCHITECTURES:
        # a multimodal config (LLaVA, Mllama, ...): the decoder is its text_config; the vision tower is left out
        warnings.append(f"{source}: a multimodal config ({config.get('model_type')}): its text_config "
                        f"({text.get('model_type')}) is modelled, the vision encoder and image tokens are not")
        config = {"max_position_embeddings": config.get("max_position_embeddings"), **text}
    quant = config.get("quantization_config")
    if isinstance(quant, dict):
        said = ", ".join(f"{k} {quant[k]}" for k in ("quant_method", "bits", "group_size") if k in quant)
        warnings.append(f"{source} has a quantization_config ({said}): the weights are as --weights says, not "
                        f"as the checkpoint stores them; pass the matching --weights and --group-size")
    return model_from_config(config, name, source), warnings
