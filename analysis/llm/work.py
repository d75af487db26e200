"""The work of LLM inference, per op and per phase: FLOPs by the roof they run on, bytes by kind.

One forward pass (`step_ops`) over `tokens` new tokens per sequence of a batch, each sequence with `context`
tokens already in its KV cache: the prefill is tokens = prompt, context = 0; decode step i is tokens = 1,
context = prompt + i. Ops are the kernels a serving engine runs (vLLM's layout: q/k/v and gate/up fused into
one GEMM each), with the residual adds as their own ops. Bytes are each tensor moved once between DRAM and the
chip: the least traffic the op needs (tiles a kernel re-reads from L2 are not counted). docs/llm.md says what
is counted and what is not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from analysis.llm.models import ACTIVATION_FLOPS, Model
from common.errors import CeilingsError

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")
ACTIVATION_DTYPES = ("bf16", "fp16")
KV_DTYPES = ("bf16", "fp16", "fp8")
ATTENTION_KINDS = ("flash", "naive")
PHASES = ("prefill", "decode")
# communication: tensor parallelism's all-reduces, on the interconnect, not the DRAM roof
OP_CLASSES = ("gemm", "attention", "norm", "elementwise", "communication")
BYTE_KINDS = ("weights", "kv_read", "kv_write", "activations", "interconnect")
TP_SIZES = (1, 2, 4, 8)  # GPUs of one NVLink/PCIe node
# CUDA-core work (norms, softmax, rotary, residual adds, activations) runs on this roof: those kernels compute
# in fp32 whatever the tensors' type (PyTorch's opmath, vLLM's and FlashAttention's kernels upcast)
CUDA_CORE = "fp32"

# Quantisation metadata, in the layouts of the common checkpoints:
# int4: per group of `group_size` input weights of one output column, an fp16 scale and a 4-bit zero point
# (GPTQ/AWQ asymmetric); int8: one fp16 scale per output channel (weight-only); fp8: one fp32 scale per
# matrix (per-tensor FP8 checkpoints).
INT4_GROUP_BYTES = 2 + 0.5
INT8_CHANNEL_BYTES = 2
FP8_MATRIX_BYTES = 4
DEFAULT_GROUP_SIZE = 128

# FLOPs per element: the norm's own arithmetic (RMSNorm: square, sum, scale by 1/rms; LayerNorm: sum, subtract
# the mean, square, sum, scale), +1 for a weight vector; the per-token rsqrt and mean are left out
NORM_FLOPS = {"rms": 3, "layer": 5}
SOFTMAX_FLOPS = 5  # per score: max, subtract, exp, sum, divide
ROTARY_FLOPS = 3  # per rotated element: x cos, y sin, add
RESIDUAL_FLOPS = 1
COMBINE_FLOPS = 2  # per routed expert output element: scale by its routing weight, add


@dataclass(frozen=True)
class Setup:
    """What runs: the batch, the request, and the types of weights, activations and KV cache."""

    batch: int = 1
    prompt: int = 2048
    gen: int = 256  # output tokens a sequence (vLLM's output_len): the prefill's, then gen - 1 decode steps
    weights: str = "bf16"
    activations: str = "bf16"
    kv_cache: str = "bf16"
    attention: str = "flash"
    group_size: int = DEFAULT_GROUP_SIZE  # int4 only
    tp: int = 1  # tensor-parallel GPUs: each holds 1/tp of the heads, the MLP and the vocabulary

    @property
    def decode_contexts(self) -> range:
        """The contexts of the decode steps: the prefill produces the first token, each step one more."""
        return range(self.prompt, self.prompt + self.gen - 1)

    @property
    def gemm_type(self) -> str:
        """The tensor-core input type of the quantised GEMMs: fp8 weights run fp8 x fp8 (activations quantised
        on the fly); int8/int4 weights are dequantised to the activation type, so the GEMM is a 16-bit one."""
        return "fp8" if self.weights == "fp8" else self.activations


@dataclass(frozen=True)
class Matrix:
    """A weight matrix of a linear layer; `quantized` when it is stored as --weights says."""

    n_in: int
    n_out: int
    quantized: bool = True
    bias: bool = False


@dataclass(frozen=True)
class Op:
    """One op of a forward pass, `count` times (once per layer, or once): FLOPs by roof key, bytes by kind,
    both for all `count` instances."""

    name: str
    op_class: str  # OP_CLASSES
    count: int
    flops: Mapping[str, float]
    nbytes: Mapping[str, float]  # BYTE_KINDS

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))

    @property
    def total_bytes(self) -> float:
        return float(sum(self.nbytes.values()))


def check_context(model: Model, tokens: int, what: str) -> None:
    """The one check of a sequence's length against the model's max_position_embeddings: `what` names it."""
    if model.max_context is not None and tokens > model.max_context:
        raise CeilingsError(f"{what}: {tokens} tokens exceeds {model.name}'s max_position_embeddings "
                            f"{model.max_context}; keep it within that")


def check_setup(model: Model, setup: Setup) -> None:
    """CeilingsError naming the value when the setup cannot be modelled for this model."""
    for option, value in (("--batch", setup.batch), ("--prompt", setup.prompt), ("--gen", setup.gen),
                          ("--group-size", setup.group_size)):
        if value < 1:
            raise CeilingsError(f"{option} {value}: must be 1 or more")
    if setup.weights in ("bf16", "fp16") and setup.weights != setup.activations:
        raise CeilingsError(f"--weights {setup.weights} with --activations {setup.activations}: 16-bit weights run "
                            f"in their own type; give the same type to both")
    if setup.weights == "int4":
        for name, matrices in layer_matrices(shard(model, setup.tp)).items():
            for m in matrices:
                if m.quantized and m.n_in % setup.group_size:
                    raise CeilingsError(f"--group-size {setup.group_size}: {name} has {m.n_in} input features, not a "
                                        f"multiple of the group; give a group size that divides it")
    if setup.tp not in TP_SIZES:
        raise CeilingsError(f"--tp {setup.tp}: give one of {', '.join(map(str, TP_SIZES))}")
    if setup.tp > 1:
        for what, n in (("num_attention_heads", model.heads), ("intermediate_size", model.intermediate)):
            if n % setup.tp:
                raise CeilingsError(f"--tp {setup.tp}: {model.name}'s {what} {n} does not split over {setup.tp} "
                                    f"GPUs; give a --tp that divides it")
        if model.kv_heads % setup.tp and setup.tp % model.kv_heads:
            raise CeilingsError(f"--tp {setup.tp}: {model.kv_heads} KV heads neither split over nor replicate onto "
                                f"{setup.tp} GPUs; give a --tp that divides it or that it divides")
    longest = setup.prompt + setup.gen
    check_context(model, longest, f"--prompt {setup.prompt} + --gen {setup.gen}")
    if model.sliding_window is not None and longest > model.sliding_window:
        raise CeilingsError(f"{model.name}: sliding-window attention (window {model.sliding_window}) is not "
                            f"modelled; keep --prompt + --gen ({longest}) within the window")


def shard(model: Model, tp: int) -> Model:
    """What one of `tp` tensor-parallel GPUs holds and computes (Megatron's split, as vLLM runs it): 1/tp of the
    query heads and of each expert's MLP, 1/tp of the KV heads (a KV head replicated onto tp / kv_heads GPUs when
    there are fewer KV heads than GPUs) and 1/tp of the vocabulary (embedding table and LM head); the norms and
    the hidden size whole. vLLM's padding of the vocabulary to a multiple of 64 x tp is not counted."""
    if tp == 1:
        return model
    return replace(model, heads=model.heads // tp, kv_heads=max(1, model.kv_heads // tp),
                   intermediate=model.intermediate // tp, vocab=math.ceil(model.vocab / tp))


def layer_matrices(model: Model) -> dict[str, tuple[Matrix, ...]]:
    """The weight matrices of one decoder layer by the GEMM op that reads them (one expert's for experts_*)."""
    h, d, f = model.hidden, model.head_dim, model.intermediate
    mlp_bias = "mlp" in model.biased
    out = {"qkv_proj": tuple(Matrix(h, n * d, bias="qkv" in model.biased)
                             for n in (model.heads, model.kv_heads, model.kv_heads)),
           "o_proj": (Matrix(model.heads * d, h, bias="o" in model.biased),)}
    prefix = "experts_" if model.moe else ""
    if model.moe:  # the router is left in 16 bits by the quantised checkpoints (AWQ, GPTQ, FP8)
        out["router"] = (Matrix(h, model.experts, quantized=False),)
    out[f"{prefix}gate_up_proj"] = (Matrix(h, f, bias=mlp_bias), Matrix(h, f, bias=mlp_bias))
    out[f"{prefix}down_proj"] = (Matrix(f, h, bias=mlp_bias),)
    return out


def matrix_bytes(m: Matrix, setup: Setup) -> float:
    """Stored bytes of a weight matrix with its quantisation metadata and its bias (in the activation type)."""
    a = DTYPE_BYTES[setup.activations]
    bias = m.n_out * a if m.bias else 0
    elements = m.n_in * m.n_out
    if not m.quantized or setup.weights in ("bf16", "fp16"):
        return elements * a + bias
    scales = {"fp8": FP8_MATRIX_BYTES, "int8": m.n_out * INT8_CHANNEL_BYTES,
              "int4": m.n_in // setup.group_size * m.n_out * INT4_GROUP_BYTES}[setup.weights]
    return elements * DTYPE_BYTES[setup.weights] + scales + bias


def _norm_vector(model: Model) -> int:
    return model.hidden if model.norm_weights else 0


def parameters(model: Model) -> int:
    """Every stored parameter (all experts; a tied table once)."""
    per_layer = sum((m.n_in * m.n_out + (m.n_out if m.bias else 0)) * (model.experts if name.startswith("experts_")
                                                                       else 1)
                    for name, ms in layer_matrices(model).items() for m in ms)
    table = model.vocab * model.hidden
    return (table * (1 if model.tied else 2) + model.layers * (per_layer + 2 * _norm_vector(model))
            + _norm_vector(model))


def weights_bytes(model: Model, setup: Setup) -> float:
    """Bytes of every stored weight one GPU holds (1/--tp of them, the norms whole): the layers' matrices at
    --weights (with their metadata), every expert, the norms, the embedding table and the LM head in the
    activation type (quantised checkpoints keep them in 16 bits), a tied table once."""
    model = shard(model, setup.tp)
    a = DTYPE_BYTES[setup.activations]
    per_layer = sum(matrix_bytes(m, setup) * (model.experts if name.startswith("experts_") else 1)
                    for name, ms in layer_matrices(model).items() for m in ms)
    norms = _norm_vector(model) * a
    table = model.vocab * model.hidden * a
    return table * (1 if model.tied else 2) + model.layers * (per_layer + 2 * norms) + norms


def kv_bytes_per_token(model: Model, setup: Setup) -> float:
    """KV-cache bytes one token of one sequence holds on one GPU: K and V of its KV heads in every layer."""
    model = shard(model, setup.tp)
    return model.layers * 2 * model.kv_heads * model.head_dim * DTYPE_BYTES[setup.kv_cache]


def kv_cache_bytes(model: Model, setup: Setup, tokens: int) -> float:
    """The KV cache of the whole batch holding `tokens` tokens per sequence."""
    return setup.batch * tokens * kv_bytes_per_token(model, setup)


def experts_touched(model: Model, tokens: int) -> float:
    """Expected number of distinct experts a layer's `tokens` tokens route to, under uniform routing: each token
    picks k of E experts, so one expert is missed by a token with probability 1 - k/E, by all of them with
    (1 - k/E)^tokens."""
    e, k = model.experts, model.experts_per_token
    return e * (1 - (1 - k / e) ** tokens)


def step_ops(model: Model, setup: Setup, tokens: int, context: int) -> tuple[Op, ...]:
    """The ops of one forward pass of the batch over `tokens` new tokens per sequence with `context` cached, on
    one GPU of --tp (batch_ops of --batch such sequences)."""
    return batch_ops(model, setup, [(tokens, context)] * setup.batch)


def batch_ops(model: Model, setup: Setup, sequences: Sequence[tuple[int, int]],
              logits: int | None = None) -> tuple[Op, ...]:
    """The ops of one forward pass over `sequences`, (new tokens, cached context) each, as a server batches
    prefill chunks and decodes in one step, on one GPU of --tp: its shard of the work, and the two all-reduces
    of the activations a layer (after o_proj and down_proj) when tp > 1; `logits`: the sequences whose last
    token the LM head scores (default all; a prefill chunk that does not end its prompt produces none). The
    embedding's all-reduce and the LM head's gather are not counted."""
    model = shard(model, setup.tp)
    L, h, d = model.layers, model.hidden, model.head_dim
    nh, nkv, f = model.heads, model.kv_heads, model.intermediate
    a, kv = DTYPE_BYTES[setup.activations], DTYPE_BYTES[setup.kv_cache]
    T = sum(tokens for tokens, _ in sequences)  # token rows of every per-token op
    B = len(sequences) if logits is None else logits
    mats = layer_matrices(model)
    norm_flops = NORM_FLOPS[model.norm] + model.norm_weights

    def gemm(name: str, rows: float, matrices, *, copies: float = 1, count: int = L, key: str | None = None):
        n_in, n_out = matrices[0].n_in, sum(m.n_out for m in matrices)
        flops = {key or f"tensor.{setup.gemm_type}": count * 2 * rows * n_in * n_out}
        biased = sum(m.n_out for m in matrices if m.bias)
        if biased:
            flops[CUDA_CORE] = count * rows * biased
        weights = copies * sum(matrix_bytes(m, setup) for m in matrices)
        return Op(name, "gemm", count, flops, {"weights": count * weights,
                                               "activations": count * rows * (n_in + n_out) * a})

    def norm(name: str, count: int = L):
        return Op(name, "norm", count, {CUDA_CORE: count * T * h * norm_flops},
                  {"weights": count * _norm_vector(model) * a, "activations": count * 2 * T * h * a})

    def elementwise(name: str, flops: float, moved: float, count: int = L, **nbytes: float):
        return Op(name, "elementwise", count, {CUDA_CORE: count * flops} if flops else {},
                  {"activations": count * moved, **{k: count * v for k, v in nbytes.items()}})

    ops = [Op("embedding", "elementwise", 1, {}, {"weights": T * h * a, "activations": T * h * a}),  # a row a token
           norm("attn_norm"), gemm("qkv_proj", T, mats["qkv_proj"]),
           elementwise("rotary", ROTARY_FLOPS * T * (nh + nkv) * d, 2 * T * (nh + nkv) * d * a + T * d * a),
           elementwise("kv_cache_write", 0, T * 2 * nkv * d * a, kv_write=T * 2 * nkv * d * kv)]
    ops += _attention(model, setup, sequences)
    # the all-reduce of a layer's T x h activations, twice a layer; a ring all-reduce sends (and receives)
    # 2 (tp - 1) / tp of the tensor from each GPU
    ring = 2 * (setup.tp - 1) / setup.tp
    all_reduce = [Op("all_reduce", "communication", 2 * L, {}, {"interconnect": 2 * L * ring * T * h * a})] \
        if setup.tp > 1 else []
    ops += [gemm("o_proj", T, mats["o_proj"]), *all_reduce,
            elementwise("attn_residual", RESIDUAL_FLOPS * T * h, 3 * T * h * a),
            norm("mlp_norm")]
    act = ACTIVATION_FLOPS[model.activation] + 1  # act(gate) * up
    if model.moe:
        k = model.experts_per_token
        routed, touched = T * k, experts_touched(model, T)
        ops += [gemm("router", T, mats["router"], key=f"tensor.{setup.activations}"),
                gemm("experts_gate_up_proj", routed, mats["experts_gate_up_proj"], copies=touched),
                elementwise("experts_act_mul", act * routed * f, 3 * routed * f * a),
                gemm("experts_down_proj", routed, mats["experts_down_proj"], copies=touched),
                elementwise("moe_combine", COMBINE_FLOPS * routed * h, routed * h * a + T * h * a)]
    else:
        ops += [gemm("gate_up_proj", T, mats["gate_up_proj"]), elementwise("act_mul", act * T * f, 3 * T * f * a),
                gemm("down_proj", T, mats["down_proj"])]
    ops += [elementwise("mlp_residual", RESIDUAL_FLOPS * T * h, 3 * T * h * a), norm("final_norm", count=1),
            # logits of the last token of each sequence only, from the 16-bit table (tied or not)
            gemm("lm_head", B, (Matrix(h, model.vocab, quantized=False),), count=1,
                 key=f"tensor.{setup.activations}")]
    return tuple(ops)


def attention_ops(model: Model, setup: Setup, sequences: Sequence[tuple[int, int]]) -> list[Op]:
    """The attention ops of batch_ops over `sequences` alone, on one GPU of --tp: the only ops whose work depends
    on each sequence's context, not only on the step's token count."""
    return _attention(shard(model, setup.tp), setup, sequences)


def _attention(model: Model, setup: Setup, sequences: Sequence[tuple[int, int]]) -> list[Op]:
    """Attention of each sequence's new queries over its cached keys and themselves (causal), (new tokens,
    context) a sequence. FlashAttention: one kernel, scores never leave the chip, masked pairs skipped; naive:
    the scores and their softmax written to DRAM between two batched GEMMs, every pair of the rectangle
    computed."""
    L, d = model.layers, model.head_dim
    nh, nkv = model.heads, model.kv_heads
    a, kv = DTYPE_BYTES[setup.activations], DTYPE_BYTES[setup.kv_cache]
    key = f"tensor.{setup.activations}"  # an fp8 cache is dequantised to the activation type
    queries = sum(tokens for tokens, _ in sequences)
    keys = sum(context + tokens for tokens, context in sequences)
    q_o = 2 * queries * nh * d * a  # read Q, write O
    k_or_v = keys * nkv * d * kv
    if setup.attention == "flash":
        # query i sees context + i + 1 keys
        pairs = sum(tokens * context + tokens * (tokens + 1) / 2 for tokens, context in sequences)
        return [Op("attention", "attention", L,
                   {key: L * 4 * nh * d * pairs, CUDA_CORE: L * SOFTMAX_FLOPS * nh * pairs},
                   {"kv_read": L * 2 * k_or_v, "activations": L * q_o})]
    scores = nh * sum(tokens * (context + tokens) for tokens, context in sequences)
    # the batched GEMMs of naive attention run as cuBLAS GEMM kernels: class gemm, as the profile will say
    return [Op("attn_scores", "gemm", L, {key: L * 2 * scores * d},
               {"kv_read": L * k_or_v, "activations": L * (q_o / 2 + scores * a)}),
            Op("softmax", "attention", L, {CUDA_CORE: L * SOFTMAX_FLOPS * scores},
               {"activations": L * 2 * scores * a}),
            Op("attn_values", "gemm", L, {key: L * 2 * scores * d},
               {"kv_read": L * k_or_v, "activations": L * (scores * a + q_o / 2)})]
