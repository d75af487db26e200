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
from collections.abc import Callable, Mapping, Sequence
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
MAX_TOKENS = 1 << 30  # a context every layer of which is windowed never fills memory: this stands for no limit
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
    ep: int = 1  # expert-parallel GPUs (MoE): each holds 1/ep of the experts whole; 1: experts split by --tp

    @property
    def dp(self) -> int:
        """Attention groups of --tp GPUs, each with its own batch, whose tokens one expert-parallel group serves."""
        return self.ep // self.tp if self.ep > 1 else 1

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
    """The one check of a sequence's length against the model: its max_position_embeddings, and a sliding
    window whose layers are not known past the window's length. `what` names the length."""
    if model.max_context is not None and tokens > model.max_context:
        raise CeilingsError(f"{what}: {tokens} tokens exceeds {model.name}'s max_position_embeddings "
                            f"{model.max_context}; keep it within that")
    if model.sliding_window is not None and not model.window_layers and tokens > model.sliding_window:
        raise CeilingsError(f"{what}: {tokens} tokens is past {model.name}'s sliding_window ({model.sliding_window}), "
                            f"and which layers it covers is not known for a {model.model_type} config without "
                            f"layer_types; give layer_types naming the sliding layers, set sliding_window to null "
                            f"where the server runs full attention, or keep within the window")


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
        for name, matrices in layer_matrices(shard(model, setup.tp, setup.ep)).items():
            for m in matrices:
                if m.quantized and m.n_in % setup.group_size:
                    raise CeilingsError(f"--group-size {setup.group_size}: {name} has {m.n_in} input features, not a "
                                        f"multiple of the group; give a group size that divides it")
    if setup.tp not in TP_SIZES:
        raise CeilingsError(f"--tp {setup.tp}: give one of {', '.join(map(str, TP_SIZES))}")
    if setup.ep > 1 and not model.moe:
        raise CeilingsError(f"--ep {setup.ep}: {model.name} has no experts to spread; leave --ep out")
    if setup.ep > 1 and (setup.ep not in TP_SIZES or setup.ep % setup.tp or model.experts % setup.ep):
        raise CeilingsError(f"--ep {setup.ep}: give a multiple of --tp {setup.tp} among "
                            f"{', '.join(map(str, TP_SIZES))} that divides the {model.experts} routed experts")
    if model.mla and setup.attention != "flash":
        raise CeilingsError(f"--attention {setup.attention}: {model.name}'s latent attention runs as one fused "
                            f"kernel (FlashMLA); give --attention flash")
    if setup.tp > 1:
        mlp = (("intermediate_size", model.intermediate),) if setup.ep == 1 else ()
        for what, n in (("num_attention_heads", model.heads), *mlp):
            if n % setup.tp:
                raise CeilingsError(f"--tp {setup.tp}: {model.name}'s {what} {n} does not split over {setup.tp} "
                                    f"GPUs; give a --tp that divides it")
        if model.kv_heads % setup.tp and setup.tp % model.kv_heads:
            raise CeilingsError(f"--tp {setup.tp}: {model.kv_heads} KV heads neither split over nor replicate onto "
                                f"{setup.tp} GPUs; give a --tp that divides it or that it divides")
    check_context(model, setup.prompt + setup.gen, f"--prompt {setup.prompt} + --gen {setup.gen}")


def shard(model: Model, tp: int, ep: int = 1) -> Model:
    """What one of `tp` tensor-parallel GPUs holds and computes (Megatron's split, as vLLM runs it): 1/tp of the
    query heads and of each expert's MLP (whole experts with `ep` > 1: local_experts says how many), of the
    dense and shared MLPs, 1/tp of the KV heads (a KV head replicated onto tp / kv_heads GPUs when there are fewer
    KV heads than GPUs) and 1/tp of the vocabulary (embedding table and LM head); the norms, the hidden size and
    MLA's down-projections and latent whole. vLLM's padding of the vocabulary to a multiple of 64 x tp is not
    counted."""
    if tp == 1:
        return model
    return replace(model, heads=model.heads // tp, kv_heads=max(1, model.kv_heads // tp),
                   intermediate=model.intermediate // (tp if ep == 1 else 1), vocab=math.ceil(model.vocab / tp),
                   dense_intermediate=model.dense_intermediate // tp,
                   shared_intermediate=model.shared_intermediate // tp)


def local_experts(model: Model, setup: Setup) -> int:
    """The routed experts one GPU holds: all of them (each split by --tp), or 1/--ep of them whole."""
    return model.experts // setup.ep


def layer_matrices(model: Model) -> dict[str, tuple[Matrix, ...]]:
    """The weight matrices of a decoder layer by the GEMM op that reads them (one expert's for experts_*; the
    dense MLP's only in the layers that have one, the router's and experts' in the others: layers_holding)."""
    h, d, f, nh = model.hidden, model.head_dim, model.intermediate, model.heads
    mlp_bias = "mlp" in model.biased
    if model.mla:  # vLLM fuses q_a_proj and kv_a_proj_with_mqa; kv_b_proj is absorbed: w_uk, w_uv
        m = model.mla
        kv_a = Matrix(h, m.kv_rank + m.rope, bias="qkv" in model.biased)
        out = {"qkv_a_proj": (Matrix(h, m.q_rank or nh * d, bias="qkv" in model.biased), kv_a)}
        if m.q_rank:
            out["q_b_proj"] = (Matrix(m.q_rank, nh * d, bias="qkv" in model.biased),)
        out["kv_b_proj"] = (Matrix(m.kv_rank, nh * m.nope), Matrix(m.kv_rank, nh * m.v))
        out["o_proj"] = (Matrix(nh * m.v, h, bias="o" in model.biased),)
    else:
        out = {"qkv_proj": tuple(Matrix(h, n * d, bias="qkv" in model.biased) for n in (nh, model.kv_heads,
                                                                                       model.kv_heads)),
               "o_proj": (Matrix(nh * d, h, bias="o" in model.biased),)}
    mlps = [("", model.dense_intermediate)] if model.dense_layers else []
    if model.moe:  # the router is left in 16 bits by the quantised checkpoints (AWQ, GPTQ, FP8)
        out["router"] = (Matrix(h, model.experts, quantized=False, bias=model.router_bias),)
        mlps += [("shared_", model.shared_intermediate)] if model.shared_intermediate else []
        mlps.append(("experts_", f))
    else:
        mlps.append(("", f))
    for prefix, size in mlps:
        out[f"{prefix}gate_up_proj"] = (Matrix(h, size, bias=mlp_bias), Matrix(h, size, bias=mlp_bias))
        out[f"{prefix}down_proj"] = (Matrix(size, h, bias=mlp_bias),)
    return out


def layers_holding(model: Model, name: str) -> int:
    """How many layers hold the layer_matrices entry `name`: an MoE model's dense MLP its dense layers, its
    router, shared and routed experts the others; the rest every layer."""
    if not model.moe or name not in ("gate_up_proj", "down_proj", "router") and not name.startswith(
            ("experts_", "shared_")):
        return model.layers
    return model.dense_layers if name in ("gate_up_proj", "down_proj") else model.layers - model.dense_layers


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


def _layer_vectors(model: Model) -> int:
    """Parameters of a layer outside its matrices: the two norms' weights, MLA's norms of its q and kv latents,
    Qwen3's q and k norms (a head's width each), gpt-oss's sinks (one a head)."""
    return (2 * _norm_vector(model) + (sum(filter(None, (model.mla.q_rank, model.mla.kv_rank))) if model.mla else 0)
            + (2 * model.head_dim if model.qk_norm else 0) + (model.heads if model.sinks else 0))


def parameters(model: Model, active: bool = False) -> int:
    """Every stored parameter (all experts; a tied table once); `active`: those a token is multiplied by, its
    num_experts_per_tok routed experts and the LM head, not the embedding table it only reads a row of (as
    OpenAI counts gpt-oss's 5.1 B)."""
    return _stored(model, model.experts_per_token if active else model.experts, 1 if model.tied or active else 2,
                   lambda m: m.n_in * m.n_out + (m.n_out if m.bias else 0), 1)


def weights_bytes(model: Model, setup: Setup) -> float:
    """Bytes of every stored weight one GPU holds (1/--tp of them, the norms whole): the layers' matrices at
    --weights (with their metadata), every expert, the norms, the embedding table and the LM head in the
    activation type (quantised checkpoints keep them in 16 bits), a tied table once."""
    return _stored(shard(model, setup.tp, setup.ep), local_experts(model, setup), 1 if model.tied else 2,
                   lambda m: matrix_bytes(m, setup), DTYPE_BYTES[setup.activations])


def _stored(model: Model, experts: int, tables: int, matrix: Callable[[Matrix], float], element: float) -> float:
    """The one walk over what a model stores: the layers' matrices, `matrix` each, `experts` copies of an
    expert's; `tables` vocabulary tables (embedding, LM head) and the norms' vectors at `element` each."""
    layers = sum(layers_holding(model, name) * (experts if name.startswith("experts_") else 1)
                 * sum(matrix(m) for m in ms) for name, ms in layer_matrices(model).items())
    return (model.vocab * model.hidden * element * tables + layers + model.layers * _layer_vectors(model) * element
            + _norm_vector(model) * element)


def _kv_elements(model: Model) -> int:
    """KV-cache elements a token holds in one layer of this (sharded) model: K and V of its KV heads, or MLA's
    latent and rope key (every GPU of --tp holds them whole: they serve all heads)."""
    return model.mla.kv_rank + model.mla.rope if model.mla else 2 * model.kv_heads * model.head_dim


def kv_bytes_per_token(model: Model, setup: Setup) -> float:
    """KV-cache bytes one token of one sequence holds on one GPU, in every layer; a sliding-window layer holds
    only the last window of tokens (kv_cache_bytes)."""
    model = shard(model, setup.tp)
    return model.layers * _kv_elements(model) * DTYPE_BYTES[setup.kv_cache]


def kv_cache_bytes(model: Model, setup: Setup, tokens: int) -> float:
    """The KV cache of the whole batch holding `tokens` tokens per sequence: window_layers hold at most the
    window's (vLLM frees the blocks that slide out)."""
    per_layer = kv_bytes_per_token(model, setup) / model.layers
    held = (model.layers - model.window_layers) * tokens
    if model.window_layers:
        held += model.window_layers * min(tokens, model.sliding_window)
    return setup.batch * held * per_layer


def context_fit(model: Model, setup: Setup, room: float) -> int:
    """The most tokens a sequence of the batch can hold within `room` bytes of KV cache (beyond the window only
    the full-attention layers grow)."""
    per_layer = setup.batch * kv_bytes_per_token(model, setup) / model.layers
    within = room / (per_layer * model.layers)
    w, full = model.sliding_window, model.layers - model.window_layers
    if not model.window_layers or within <= w:
        return max(0, math.floor(within))
    if not full:
        return model.max_context or MAX_TOKENS
    return max(0, math.floor((room / per_layer - model.window_layers * w) / full))


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
    model = shard(model, setup.tp, setup.ep)
    L, h, d = model.layers, model.hidden, model.head_dim
    nh, nkv = model.heads, model.kv_heads
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

    def norm(name: str, count: int = L, width: int = h, weights: float = _norm_vector(model)):
        return Op(name, "norm", count, {CUDA_CORE: count * T * width * norm_flops},
                  {"weights": count * weights * a, "activations": count * 2 * T * width * a})

    def elementwise(name: str, flops: float, moved: float, count: int = L, **nbytes: float):
        return Op(name, "elementwise", count, {CUDA_CORE: count * flops} if flops else {},
                  {"activations": count * moved, **{k: count * v for k, v in nbytes.items()}})

    ops = [Op("embedding", "elementwise", 1, {}, {"weights": T * h * a, "activations": T * h * a}),  # a row a token
           norm("attn_norm")]
    if model.mla:
        ops += _latent_projections(model, setup, T, gemm, norm, elementwise)
    else:
        ops.append(gemm("qkv_proj", T, mats["qkv_proj"]))
        if model.qk_norm:  # over each head of q and k, a head's width of weights each
            ops.append(norm("qk_norm", width=(nh + nkv) * d, weights=2 * d))
        ops += [elementwise("rotary", ROTARY_FLOPS * T * (nh + nkv) * d, 2 * T * (nh + nkv) * d * a + T * d * a),
                elementwise("kv_cache_write", 0, T * 2 * nkv * d * a, kv_write=T * 2 * nkv * d * kv)]
    ops += _context_ops(model, setup, sequences)
    # the all-reduce of a layer's T x h activations, twice a layer; a ring all-reduce sends (and receives)
    # 2 (tp - 1) / tp of the tensor from each GPU
    ring = 2 * (setup.tp - 1) / setup.tp
    all_reduce = [Op("all_reduce", "communication", 2 * L, {}, {"interconnect": 2 * L * ring * T * h * a})] \
        if setup.tp > 1 else []
    if model.mla:  # the latent output of each head through its slice of kv_b_proj (W_UV) to v_head_dim
        m = model.mla
        ops.append(_per_head_gemm("w_uv", model, setup, T, m.kv_rank, m.v, mats["kv_b_proj"][1]))
    ops += [gemm("o_proj", T, mats["o_proj"]), *all_reduce,
            elementwise("attn_residual", RESIDUAL_FLOPS * T * h, 3 * T * h * a),
            norm("mlp_norm")]
    act = ACTIVATION_FLOPS[model.activation] + 1  # act(gate) * up

    def mlp(prefix: str, f: int, count: int, rows: float = T, copies: float = 1):
        return [gemm(f"{prefix}gate_up_proj", rows, mats[f"{prefix}gate_up_proj"], copies=copies, count=count),
                elementwise(f"{prefix}act_mul", act * rows * f, 3 * rows * f * a, count=count),
                gemm(f"{prefix}down_proj", rows, mats[f"{prefix}down_proj"], copies=copies, count=count)]

    if model.moe:
        k, Lm = model.experts_per_token, L - model.dense_layers
        ops += mlp("", model.dense_intermediate, model.dense_layers) if model.dense_layers else []
        # with --ep, the routed experts of the expert-parallel group's dp x T tokens spread evenly over its GPUs
        tokens = T * setup.dp
        routed = tokens * k / setup.ep
        touched = experts_touched(model, tokens) / setup.ep
        # all-to-all with dp > 1: each token's hidden vector to the GPUs of its k experts and back, all but the
        # 1/ep that stay on this GPU (k copies: a token routed twice to one GPU is not deduplicated)
        a2a = T * k * (setup.ep - 1) / setup.ep * h * a
        dispatch = [Op(f"ep_{n}", "communication", Lm, {}, {"interconnect": Lm * a2a})
                    for n in ("dispatch", "combine")] if setup.dp > 1 else []
        ops += [gemm("router", T, mats["router"], key=f"tensor.{setup.activations}", count=Lm),
                *(mlp("shared_", model.shared_intermediate, Lm) if model.shared_intermediate else []),
                *dispatch[:1], *mlp("experts_", model.intermediate, Lm, routed, touched), *dispatch[1:],
                elementwise("moe_combine", COMBINE_FLOPS * routed * h, routed * h * a + T * h * a, count=Lm)]
    else:
        ops += mlp("", model.intermediate, L)
    ops += [elementwise("mlp_residual", RESIDUAL_FLOPS * T * h, 3 * T * h * a), norm("final_norm", count=1),
            # logits of the last token of each sequence only, from the 16-bit table (tied or not)
            gemm("lm_head", B, (Matrix(h, model.vocab, quantized=False),), count=1,
                 key=f"tensor.{setup.activations}")]
    return tuple(ops)


def attention_ops(model: Model, setup: Setup, sequences: Sequence[tuple[int, int]]) -> list[Op]:
    """The attention ops of batch_ops over `sequences` alone, on one GPU of --tp: the only ops whose work depends
    on each sequence's context, not only on the step's token count."""
    return _context_ops(shard(model, setup.tp, setup.ep), setup, sequences)


def _context_ops(model: Model, setup: Setup, sequences: Sequence[tuple[int, int]]) -> list[Op]:
    """The attention of the full-attention layers and of the sliding-window ones (`model` already sharded)."""
    full = model.layers - model.window_layers
    ops = _attention(model, setup, sequences, full) if full else []
    if model.window_layers:
        ops += _attention(model, setup, sequences, model.window_layers, model.sliding_window)
    return ops


def _per_head_gemm(name: str, model: Model, setup: Setup, T: int, n_in: int, n_out: int, weights: Matrix) -> Op:
    """A batched GEMM of each head's T x n_in slice by that head's n_in x n_out slice of `weights` (MLA's
    absorbed W_UK and W_UV), every layer."""
    L, a = model.layers, DTYPE_BYTES[setup.activations]
    return Op(name, "gemm", L, {f"tensor.{setup.gemm_type}": L * 2 * T * model.heads * n_in * n_out},
              {"weights": L * matrix_bytes(weights, setup), "activations": L * T * model.heads * (n_in + n_out) * a})


def _latent_projections(model: Model, setup: Setup, T: int, gemm, norm, elementwise) -> list[Op]:
    """MLA up to its attention, as vLLM runs it for decode (the absorbed form): the fused down-projections of q
    and of the kv latent with its rope key, their norms, q's up-projection, each head's no-rope query through
    its slice of kv_b_proj (W_UK) into the latent, rotary on the rope parts, the latent and rope key cached."""
    m, nh = model.mla, model.heads
    mats = layer_matrices(model)
    a, kv = DTYPE_BYTES[setup.activations], DTYPE_BYTES[setup.kv_cache]
    latent = m.kv_rank + m.rope
    ops = [gemm("qkv_a_proj", T, mats["qkv_a_proj"]),
           norm("qkv_a_norm", width=(m.q_rank or 0) + m.kv_rank, weights=(m.q_rank or 0) + m.kv_rank)]
    if m.q_rank:
        ops.append(gemm("q_b_proj", T, mats["q_b_proj"]))
    return [*ops, _per_head_gemm("w_uk", model, setup, T, m.nope, m.kv_rank, mats["kv_b_proj"][0]),
            elementwise("rotary", ROTARY_FLOPS * T * (nh + 1) * m.rope, 2 * T * (nh + 1) * m.rope * a + T * m.rope * a),
            elementwise("kv_cache_write", 0, T * latent * a, kv_write=T * latent * kv)]


def _span(tokens: int, context: int, window: int | None) -> tuple[float, int]:
    """The (query, key) pairs a sequence's new queries score, causal, and the keys they read: query i sees
    context + i + 1 keys, at most `window` of them."""
    first, last = context + 1, context + tokens  # keys seen by the first and the last new query
    if window is None or last <= window:
        return tokens * context + tokens * (tokens + 1) / 2, context + tokens
    if first >= window:
        return tokens * window, window + tokens - 1
    return (first + window) * (window - first + 1) / 2 + (last - window) * window, window + tokens - 1


def _attention(model: Model, setup: Setup, sequences: Sequence[tuple[int, int]], count: int,
               window: int | None = None) -> list[Op]:
    """Attention of each sequence's new queries over its cached keys and themselves (causal), (new tokens,
    context) a sequence, in `count` layers, their span capped at `window` (sliding-window layers: their ops
    named *_sliding). FlashAttention: one kernel, scores never leave the chip, masked pairs skipped; naive:
    the scores and their softmax written to DRAM between two batched GEMMs, every pair of the rectangle
    computed. MLA (absorbed): one latent KV head of kv_rank + rope for every query head, the latent its value."""
    L, d = count, model.head_dim
    nh, nkv = model.heads, model.kv_heads
    a, kv = DTYPE_BYTES[setup.activations], DTYPE_BYTES[setup.kv_cache]
    key = f"tensor.{setup.activations}"  # an fp8 cache is dequantised to the activation type
    suffix = "" if window is None else "_sliding"
    queries = sum(tokens for tokens, _ in sequences)
    spans = [_span(tokens, context, window) for tokens, context in sequences]
    keys = sum(k for _, k in spans)
    pairs = sum(p for p, _ in spans)  # FlashAttention computes only these
    if model.mla:
        m = model.mla
        score, value = m.kv_rank + m.rope, m.kv_rank  # widths of a query-key and a probability-value product
        return [Op(f"attention{suffix}", "attention", L,
                   {key: L * 2 * nh * (score + value) * pairs, CUDA_CORE: L * SOFTMAX_FLOPS * nh * pairs},
                   {"kv_read": L * keys * score * kv, "activations": L * queries * nh * (score + value) * a})]
    q_o = 2 * queries * nh * d * a  # read Q, write O
    k_or_v = keys * nkv * d * kv
    if setup.attention == "flash":
        return [Op(f"attention{suffix}", "attention", L,
                   {key: L * 4 * nh * d * pairs, CUDA_CORE: L * SOFTMAX_FLOPS * nh * pairs},
                   {"kv_read": L * 2 * k_or_v, "activations": L * q_o})]
    scores = nh * sum(tokens * k for (tokens, _), (_, k) in zip(sequences, spans))
    # the batched GEMMs of naive attention run as cuBLAS GEMM kernels: class gemm, as the profile will say
    return [Op(f"attn_scores{suffix}", "gemm", L, {key: L * 2 * scores * d},
               {"kv_read": L * k_or_v, "activations": L * (q_o / 2 + scores * a)}),
            Op(f"softmax{suffix}", "attention", L, {CUDA_CORE: L * SOFTMAX_FLOPS * scores},
               {"activations": L * 2 * scores * a}),
            Op(f"attn_values{suffix}", "gemm", L, {key: L * 2 * scores * d},
               {"kv_read": L * k_or_v, "activations": L * (scores * a + q_o / 2)})]
