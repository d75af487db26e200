"""Serving engines' ops (analysis.ops.serving): FLOPs from each op's formula counted by hand here, bytes from
numel x itemsize of the tensors the test writes; torch (CPU) gives the itemsize and numel where it is installed.
The argument lists are those of real vLLM traces (TraceLens tests/traces/b200/eager_trace.json.gz: gpt-oss on
B200, tensor parallel 8) and the engines' op schemas (vLLM csrc/torch_bindings.cpp)."""

from __future__ import annotations

import pytest

from analysis.ncu import kernel_table
from analysis.ops import OPS, op_work
from analysis.roofline.budget import time_budget
from tests.test_torch_trace import trace, x

torch = pytest.importorskip("torch")

BF16, FP8, FLOAT, LONG = "c10::BFloat16", "c10::Float8_e4m3fn", "float", "long int"
T, H = 888, 2880  # tokens, hidden size


def nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def meta(shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def test_fused_add_rms_norm_reads_and_writes_input_and_residual():
    """(input, residual, weight, eps): residual += input (1 FLOP), input = residual * rstd * weight (2 for the
    sum of squares, 1 and 1): 5 an element; input and residual read and written, the weight read."""
    work = op_work("_C::fused_add_rms_norm", [[T, H], [T, H], [H], []], [BF16, BF16, BF16, "Scalar"],
                   ["", "", "", "1e-05"])
    x_, res, w = meta([T, H]), meta([T, H]), meta([H])
    assert work.flops == 5 * T * H
    assert work.bytes == 2 * nbytes(x_, res) + nbytes(w)
    assert work.precision == "bf16"
    # the plain norm, (out, input, weight, eps): input and weight read, out written; 4 an element
    plain = op_work("_C::rms_norm", [[T, H], [T, H], [H], []], [BF16, BF16, BF16, "Scalar"], ["", "", "", "1e-05"])
    assert (plain.flops, plain.bytes) == (4 * T * H, 2 * nbytes(x_) + nbytes(w))


def test_gated_activations_read_twice_the_width_they_write():
    out, inp = meta([T, 1440]), meta([T, 2880])
    for name, per in (("_C::silu_and_mul", 4 + 1), ("sgl_kernel::gelu_and_mul", 5 + 1),
                      ("_C::gelu_tanh_and_mul", 9 + 1)):
        work = op_work(name, [[T, 1440], [T, 2880]], [BF16, BF16], ["", ""])
        assert (work.flops, work.bytes) == (per * T * 1440, nbytes(out, inp)), name


def test_fp8_quantisation_writes_one_byte_an_element():
    """static_scaled_fp8_quant(result, input, scale): a multiply and a clamp (3) an element; the input is a
    strided view of a wider tensor (stride 640 of 512): its elements are what is read. The 0-dim scale is a
    value the kernel takes, not memory it streams (analysis.ops.base's convention): no bytes."""
    work = op_work("_C::static_scaled_fp8_quant", [[T, 512], [T, 512], []], [FP8, BF16, FLOAT], ["", "", ""])
    assert work.flops == 3 * T * 512
    assert work.bytes == nbytes(meta([T, 512], torch.float8_e4m3fn), meta([T, 512]))
    # dynamic: the scale found (abs, max) and written
    dynamic = op_work("_C::dynamic_scaled_fp8_quant", [[T, 512], [T, 512], [1]], [FP8, BF16, FLOAT], ["", "", ""])
    assert dynamic.flops == 5 * T * 512
    assert dynamic.bytes == nbytes(meta([T, 512], torch.float8_e4m3fn), meta([T, 512]), meta([1], torch.float32))


def test_rotary_embedding_rotates_the_cache_width_of_every_head():
    """gpt-oss: 8 query heads and 1 key head of 64 a rank, rot_dim 64; 3 FLOPs a rotated element; reads the
    positions and each token's cache row, reads and writes every rotated element."""
    dims = [[T], [T, 512], [T, 64], [], [131072, 64], []]
    types = [LONG, BF16, BF16, "Scalar", BF16, "Scalar"]
    work = op_work("_C::rotary_embedding", dims, types, ["", "", "", "64", "", "True"])
    rotated = T * (8 + 1) * 64
    assert work.flops == 3 * rotated
    assert work.bytes == nbytes(meta([T], torch.int64), meta([T, 64])) + 2 * nbytes(meta([rotated]))
    # a partial rotary (rot_dim 32 of head 128, as GPT-NeoX): only the rotated part is counted
    partial = op_work("sgl_kernel::rotary_embedding", [[16], [16, 1024], [16, 256], [], [4096, 32], []], types,
                      ["", "", "", "128", "", "True"])
    assert partial.flops == 3 * 16 * (8 + 2) * 32
    # the head size not recorded: the heads are not known, no number
    assert op_work("_C::rotary_embedding", dims, types, None) is None


def test_kv_cache_store_writes_the_new_tokens_in_the_cache_dtype():
    """reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, ...): an fp8 cache held as
    bytes: each new element quantised (1 FLOP) and written as 1 byte; the cache itself is not read."""
    dims = [[T, 1, 64], [T, 1, 64], [4213816, 16, 1, 64], [4213816, 16, 1, 64], [T], [], [], []]
    types = [BF16, BF16, "unsigned char", "unsigned char", LONG, "", FLOAT, FLOAT]
    work = op_work("_C_cache_ops::reshape_and_cache_flash", dims, types, [""] * 8)
    k, slots = meta([T, 1, 64]), meta([T], torch.int64)
    assert work.flops == 2 * T * 64
    assert work.bytes == 2 * nbytes(k) + nbytes(slots) + 2 * nbytes(meta([T, 1, 64], torch.uint8))
    # a bf16 cache: a copy, no FLOPs, 2 bytes an element written
    copy = op_work("sglang::store_cache", [[T, 1024], [T, 1024], [9999, 1024], [9999, 1024], [T], [], []],
                   [BF16, BF16, BF16, BF16, LONG, "Scalar", "Scalar"], [""] * 7)
    assert (copy.flops, copy.bytes) == (0, 4 * nbytes(meta([T, 1024])) + nbytes(slots))


def test_every_serving_op_has_a_model_or_says_what_is_missing(tmp_path):
    """An op is modelled or says what its arguments miss, never both; every op of the vLLM step below but its
    collectives (placed on the link: readers.collectives) is one or the other."""
    import json

    from analysis.ops import NOT_RECORDED
    from analysis.readers.contract import COMMUNICATION
    assert not set(NOT_RECORDED) & set(OPS)
    events = json.loads(vllm_step(tmp_path / "vllm.json").read_text())["traceEvents"]
    ops = {e["name"] for e in events if e.get("cat") == "cpu_op" and not COMMUNICATION.search(e["name"])}
    assert ops == {"vllm::moe_forward"} and ops <= set(OPS) | set(NOT_RECORDED)


def vllm_step(path):
    """A vLLM step of a tensor-parallel 8 run: an all-reduce of T x H bf16 through symmetric memory (100 us),
    and a fused MoE whose kernel (50 us) no argument describes."""
    events = [x("cpu_op", "vllm::all_reduce", 0, 60, **{"External id": 1, "Input Dims": [[T, H], []],
                                                         "Input type": [BF16, ""]}),
              x("cpu_op", "symm_mem::multimem_all_reduce_", 5, 50, **{
                  "External id": 2, "Input Dims": [[T * H], [], []], "Input type": [BF16, "", ""]}),
              x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
              x("cpu_op", "vllm::moe_forward", 100, 50, **{"External id": 3, "Input Dims": [[T, 3072], [T, 128], []],
                                                          "Input type": [BF16, BF16, ""]}),
              x("cuda_runtime", "cudaLaunchKernel", 110, 5, correlation=2),
              x("kernel", "void multimem_all_reduce_kernel<__nv_bfloat16>()", 1000, 100, pid=0, tid=9,
                correlation=1, device=0),
              x("kernel", "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2", 1200, 50, pid=0, tid=9, correlation=2,
                device=0)]
    path = trace(path, events)
    doc = __import__("json").loads(path.read_text())
    doc["distributedInfo"] = {"rank": 0, "world_size": 8}
    path.write_text(__import__("json").dumps(doc))
    return path


def test_a_serving_all_reduce_is_on_the_link_and_a_fused_moe_says_what_is_missing(tmp_path):
    kernels = kernel_table([vllm_step(tmp_path / "vllm.json")])
    comm = kernels[kernels["kernel"].str.contains("multimem")].iloc[0]
    assert comm["comm_bytes"] == pytest.approx(T * H * 2 * 2 * 7 / 8)  # all-reduce: 2(n-1)/n of the message
    assert any("vllm::moe_forward: 0.05 ms of kernels unplaced: a trace does not record the expert weights" in w
               for w in kernels.attrs["warnings"])
    from analysis.roofline import roofline_table, target_roofs
    budget = time_budget(roofline_table(target_roofs("B200"), kernels))
    parts = {(p["class"], p["cause"]): p["time_s"] for _, p in budget.iterrows()}
    assert sum(t for (cls, _), t in parts.items() if cls == "communication") == pytest.approx(100e-6)
    assert parts[("unplaced", "work not recorded")] == pytest.approx(50e-6)


def test_a_padded_kv_store_counts_the_slots_tokens():
    """A CUDA-graph step padded to 1024 rows with 888 slots: 888 tokens stored (vLLM takes slot_mapping's
    length), 1 KV head of 64, bf16 keys into an fp8 cache."""
    dims = [[1024, 1, 64], [1024, 1, 64], [99, 16, 1, 64], [99, 16, 1, 64], [888], [], [], []]
    types = [BF16, BF16, "unsigned char", "unsigned char", LONG, "", FLOAT, FLOAT]
    work = op_work("_C_cache_ops::reshape_and_cache_flash", dims, types, [""] * 8)
    assert work.flops == 2 * 888 * 64
    assert work.bytes == 2 * 888 * 64 * 2 + 888 * 8 + 2 * 888 * 64


def test_vllms_all_gather_records_the_ranks_own_part():
    """vllm::all_gather(tensor [4, 4096] bf16, dim, world_size, group) over 2 ranks: the gathered message is twice
    the tensor, (n - 1)/n of it on the bus."""
    from analysis.readers.collectives import collective
    around = [{"name": "vllm::all_gather", "args": {"Input Dims": [[4, 4096], [], [], []],
                                                   "Input type": [BF16, "Scalar", "Scalar", "Scalar"]}}]
    found = collective({"name": "ncclDevKernel_AllGather_RING_LL", "args": {}}, "vllm::all_gather", around, 2)
    assert found.bus_bytes == 2 * 4 * 4096 * 2 * 1 / 2
