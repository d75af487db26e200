"""Op models of the custom ops LLM serving engines register with torch (vLLM's `_C::` and `_C_cache_ops::`,
SGLang's `sgl_kernel::` and `sglang::`), from the arguments a torch.profiler trace records of them.

These ops write into tensors their caller passes (`out`, the KV cache, `input` in place), so a trace records
every tensor the kernel touches: the bytes are each tensor read and each written, once (a KV-cache store
writes the new tokens' rows, not the cache). FLOPs count as in analysis.ops.elementwise (every + - * / compare
and special function 1; a copy 0), per element of the tensor named in each rule. The signatures are the
engines' op schemas: vLLM csrc/torch_bindings.cpp and csrc/ops.h, SGLang sgl-kernel/csrc/common_extension.cc.

Some serving ops do not take what their work depends on: vLLM's fused MoE gets its layer by name (the expert
weights are not arguments), paged and unified attention get the sequence lengths inside the engine's metadata.
`NOT_RECORDED` names them and what is missing; their kernels stay unplaced, said so, never guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .base import Args, OpWork, flops_of, precision_of, size_of, total_of
from .elementwise import ELEMENTWISE, RMS

# per element, as the aten ops count them: RMS norm's statistics and normalisation, and its weight's multiply
_RMS = RMS["stats"] + RMS["normalise"] + 1
_SILU, _GELU = ELEMENTWISE["silu"].flops, ELEMENTWISE["gelu"].flops
_GELU_TANH = 9  # x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))): the form a trace's gelu cannot tell apart
_QUANT = 3  # x * (1 / scale), clamped to the fp8 range: a multiply, a min, a max
_ABSMAX = 2  # the abs and the max that find a dynamic scale


@dataclass(frozen=True)
class Fused:
    """A fused element-wise kernel: `flops` per element of the tensor at `over`, in the precision of the tensor
    at `computes` (its inputs'); it reads the tensors at `reads` and writes those at `writes`, whole."""

    flops: int
    over: int
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    computes: int

    def work(self, x: Args) -> OpWork | None:
        over, computed = x.operand(self.over), x.operand(self.computes)
        if over is None or computed is None:
            return None
        written = [size_of(t[0], t[1]) if (t := x.operand(i)) is not None else None for i in self.writes]
        return OpWork(flops_of(self.flops, math.prod(over[0]), computed[1]), precision_of(computed[1]),
                      total_of(*(x.read(i) for i in self.reads), *written))


@dataclass(frozen=True)
class CacheStore:
    """A KV-cache store: the new tokens' key and value (positions 0 and 1, [tokens, ...]) written at the slots
    `slots` names into the caches at 2 and 3, in the caches' dtype: as many tokens as there are slots (the key
    and value may be longer, padded for a CUDA graph; vLLM's kernels take slot_mapping's length). A cache of
    another dtype than the keys' (fp8, held as bytes) is a quantisation: one multiply by the scale per element;
    the same dtype a copy."""

    slots: int

    def work(self, x: Args) -> OpWork | None:
        new, caches, slots = [x.operand(0), x.operand(1)], [x.operand(2), x.operand(3)], x.operand(self.slots)
        if None in new or None in caches or any(not t[0] for t in new):
            return None
        tokens = math.prod(slots[0]) if slots is not None and slots[0] else new[0][0][0]
        rows = [tokens * math.prod(t[0][1:]) for t in new]  # elements of the tokens stored
        quantised = any(c[1] != t[1] for c, t in zip(caches, new))
        read = [size_of([n], t[1]) for n, t in zip(rows, new)]
        written = [size_of([n], c[1]) for n, c in zip(rows, caches)]
        return OpWork(flops_of(1 if quantised else 0, sum(rows), new[0][1]), precision_of(new[0][1]),
                      total_of(*read, x.read(self.slots), *written))


@dataclass(frozen=True)
class Rotary:
    """Rotary position embedding in place (vLLM and SGLang's `rotary_embedding(positions, query, key,
    head_size, cos_sin_cache, is_neox)`): the first rot_dim (the cache's width) of each head of query and key
    rotated, 3 FLOPs an element (x1 cos - x2 sin; x2 cos + x1 sin); it reads the positions, each token's row of
    the cache, and reads and writes the rotated elements."""

    def work(self, x: Args) -> OpWork | None:
        positions, cache = x.operand(0), x.operand(4)
        heads = [t for i in (1, 2) if (t := x.operand(i)) is not None]
        head_size = x.value(3)
        if positions is None or cache is None or len(cache[0]) != 2 or not heads or \
                type(head_size) is not int or head_size <= 0:
            return None
        rot_dim, dtype = cache[0][1], heads[0][1]
        rotated = sum(math.prod(t[0]) // head_size for t in heads) * rot_dim
        tokens = math.prod(positions[0])
        return OpWork(flops_of(3, rotated, dtype), precision_of(dtype),
                      total_of(x.read(0), size_of([tokens, rot_dim], cache[1]), 2 * size_of([rotated], dtype)))


_RMS_NORM = Fused(_RMS, over=1, reads=(1, 2), writes=(0,), computes=1)  # (out, input, weight, eps)
# (input, residual, weight, eps): residual += input (1), then input = rms_norm(residual) * weight
_ADD_RMS_NORM = Fused(_RMS + 1, over=0, reads=(0, 1, 2), writes=(0, 1), computes=0)


def _gated(activation: int) -> Fused:
    """(out, input): out = act(input[..., :d]) * input[..., d:], per element of out."""
    return Fused(activation + 1, over=0, reads=(1,), writes=(0,), computes=1)


OPS: dict = {
    "_C::rms_norm": _RMS_NORM,
    "_C::fused_add_rms_norm": _ADD_RMS_NORM,
    "sgl_kernel::rmsnorm": _RMS_NORM,
    "sgl_kernel::fused_add_rmsnorm": _ADD_RMS_NORM,
    "sgl_kernel::gemma_rmsnorm": _RMS_NORM,  # x * rstd * (1 + w): the + 1 folded into the weight's multiply
    "sgl_kernel::gemma_fused_add_rmsnorm": _ADD_RMS_NORM,
    # (result, input, weight, scale, eps); (result, input, residual, weight, scale, eps), residual updated in place:
    # the norm, then fp8
    "_C::rms_norm_static_fp8_quant": Fused(_RMS + _QUANT, over=1, reads=(1, 2, 3), writes=(0,), computes=1),
    "_C::fused_add_rms_norm_static_fp8_quant": Fused(_RMS + 1 + _QUANT, over=1, reads=(1, 2, 3, 4),
                                                     writes=(0, 2), computes=1),
    "_C::silu_and_mul": _gated(_SILU),
    "_C::mul_and_silu": _gated(_SILU),
    "_C::gelu_and_mul": _gated(_GELU),
    "_C::gelu_tanh_and_mul": _gated(_GELU_TANH),
    "sgl_kernel::silu_and_mul": _gated(_SILU),
    "sgl_kernel::gelu_and_mul": _gated(_GELU),
    "sgl_kernel::gelu_tanh_and_mul": _gated(_GELU_TANH),
    # (result, input, scale): the scale given; dynamic: found (abs-max) and written; per token: one per row
    "_C::static_scaled_fp8_quant": Fused(_QUANT, over=1, reads=(1, 2), writes=(0,), computes=1),
    "_C::dynamic_scaled_fp8_quant": Fused(_ABSMAX + _QUANT, over=1, reads=(1,), writes=(0, 2), computes=1),
    "_C::dynamic_per_token_scaled_fp8_quant": Fused(_ABSMAX + _QUANT, over=1, reads=(1, 3), writes=(0, 2),
                                                    computes=1),
    "_C::rotary_embedding": Rotary(),
    "sgl_kernel::rotary_embedding": Rotary(),
    # (key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale, v_scale)
    "_C_cache_ops::reshape_and_cache": CacheStore(slots=4),
    "_C_cache_ops::reshape_and_cache_flash": CacheStore(slots=4),
    "sglang::store_cache": CacheStore(slots=4),  # (k, v, k_cache, v_cache, indices, ...)
}

# serving ops whose arguments do not give their work: what is missing (readers.contract's "work not recorded")
NOT_RECORDED = {
    "vllm::moe_forward": "the expert weights (vLLM passes the MoE layer by name)",
    "vllm::moe_forward_shared": "the expert weights (vLLM passes the MoE layer by name)",
    "vllm::unified_attention": "the sequence lengths (in vLLM's attention metadata)",
    "vllm::unified_attention_with_output": "the sequence lengths (in vLLM's attention metadata)",
}
