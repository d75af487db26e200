"""Decoder-only transformer models as the work model needs them: from a Hugging Face config.json or a shipped
name.

Only what sets FLOPs and bytes is kept: sizes, heads, experts, tied embeddings, which projections carry a
bias, the norm and the activation. A field the config lacks takes the default of transformers' config class
for that model_type (what `from_pretrained` would build), never a guess; a field without such a default is an
error naming it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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


_LLAMA_DEFAULTS = {"tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False}
# model_type -> its architecture (transformers 4.4x: modeling_llama/mistral/mixtral/qwen2/olmo.py); every one
# has gated MLPs (gate and up projections, act(gate) * up, down projection) and rotary positions
ARCHITECTURES = {
    "llama": Architecture("rms", True, False, bias_keys={"attention_bias": ("qkv", "o"), "mlp_bias": ("mlp",)},
                          defaults={**_LLAMA_DEFAULTS, "mlp_bias": False}),
    "mistral": Architecture("rms", True, False, defaults=_LLAMA_DEFAULTS),
    "mixtral": Architecture("rms", True, True, defaults={**_LLAMA_DEFAULTS, "num_local_experts": 8,
                                                         "num_experts_per_tok": 2}),
    "qwen2": Architecture("rms", True, False, fixed_bias=("qkv",), defaults=_LLAMA_DEFAULTS),
    "olmo": Architecture("layer", False, False, bias_keys={"attention_bias": ("qkv", "o")},
                         defaults=_LLAMA_DEFAULTS),
}
# the largest value a size may take: a config beyond it is corrupt or hostile (10^12 experts), not a model.
# Each is far above every published model's (hidden 16384, 256 experts, vocab 256k, 10M positions).
SIZE_LIMITS = {"hidden_size": 1 << 18, "intermediate_size": 1 << 20, "num_hidden_layers": 1 << 12,
               "num_attention_heads": 1 << 12, "num_key_value_heads": 1 << 12, "head_dim": 1 << 12,
               "vocab_size": 1 << 24, "num_local_experts": 1 << 14, "num_experts_per_tok": 1 << 14,
               "max_position_embeddings": 1 << 30, "sliding_window": 1 << 30}
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
}


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
    sliding_window: int | None = None  # in effect when set

    @property
    def moe(self) -> bool:
        return self.experts > 1

    @property
    def attention(self) -> str:
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
    fields = {**(arch.defaults or {}), **{k: v for k, v in config.items() if v is not None}}
    for key in FLAGS:
        if key in fields and not isinstance(fields[key], bool):
            raise CeilingsError(f"{source}: {key} = {fields[key]!r} must be true or false (a JSON boolean; a "
                                f"string such as \"false\" would read as true)")

    def size(key: str, value) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise CeilingsError(f"{source}: {key} = {value!r} must be a positive whole number")
        if value > SIZE_LIMITS[key]:
            raise CeilingsError(f"{source}: {key} = {value} is beyond any model (at most {SIZE_LIMITS[key]})")
        return value

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
    experts, per_token = (whole("num_local_experts"), whole("num_experts_per_tok")) if arch.moe else (1, 1)
    if per_token > experts:
        raise CeilingsError(f"{source}: num_experts_per_tok {per_token} exceeds num_local_experts {experts}")
    window = fields.get("sliding_window") if fields.get("use_sliding_window", True) else None
    window = None if window is None else size("sliding_window", window)
    max_context = fields.get("max_position_embeddings")
    max_context = None if max_context is None else size("max_position_embeddings", max_context)
    return Model(name=name, source=source, model_type=model_type, hidden=hidden,
                 intermediate=whole("intermediate_size"), layers=whole("num_hidden_layers"), heads=heads,
                 kv_heads=kv_heads, head_dim=whole("head_dim", hidden // heads), vocab=whole("vocab_size"),
                 tied=bool(fields["tie_word_embeddings"]), norm=arch.norm, norm_weights=arch.norm_weights,
                 activation=activation, biased=frozenset(biased), experts=experts, experts_per_token=per_token,
                 max_context=max_context, sliding_window=window)


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
