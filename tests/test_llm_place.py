"""analysis.llm.place: phase totals, memory fit, the decode crossover batch, the batch sweep and the cost of a
token, worked out by hand. Hand roofs and tiny-llama as in test_llm_work.py (DRAM 1e12 B/s, fp32 1e13,
tensor.bf16 1e14: the bf16 ridge is at 100 FLOP/B)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from analysis.llm.models import load_model
from analysis.llm.place import TargetGpu, batch_sweep, crossover_batch, evaluate, gpu_of, memory
from analysis.llm.work import Setup
from analysis.roofline import Roof, Roofs

DATA = Path(__file__).parent / "data" / "llm"
ROOFS = Roofs(device="Hand GPU", bandwidths=(Roof("dram", 1e12, "hand"),), flats=(Roof("fp32", 1e13, "hand"),),
              tensor_flats=(Roof("tensor.bf16", 1e14, "hand"),), sm_clock_hz=None)
GIB = 2 ** 30
# tiny-llama's weight GEMMs in a decode step: sum of in x out over qkv, o, gate_up, down (2 layers) and the LM
# head, and of in + out (the activation elements a row reads and writes)
N = 2 * (256 * 512 + 256 * 256 + 256 * 1024 + 512 * 256) + 256 * 1000
IN_OUT = 2 * ((256 + 512) + (256 + 256) + (256 + 1024) + (512 + 256)) + (256 + 1000)


@pytest.fixture
def tiny():
    return load_model(str(DATA / "tiny-llama"))[0]


def test_prefill_and_decode_totals_by_hand(tiny):
    """Prompt 100, 4 output tokens (the prefill's, then 3 decode steps at contexts 100-102), batch 1: every op
    is memory-bound (the GEMMs' intensities are 56-67 FLOP/B,
    under the ridge of 100), so each phase takes its bytes / 1e12."""
    prefill_bytes = (2 * 100 * 256 * 2  # embedding: 100 rows read, written
                     + 5 * (256 * 2 + 2 * 100 * 256 * 2)  # 5 norms: weight, read, write
                     + 2 * (256 * 512 * 2 + 100 * 768 * 2)  # qkv
                     + 2 * (2 * 100 * 6 * 64 * 2 + 100 * 64 * 2)  # rotary
                     + 2 * (100 * 256 * 2 + 100 * 256 * 2)  # KV-cache write: read K V, write the cache
                     + 2 * (100 * 256 * 2 + 2 * 100 * 256 * 2)  # attention: K V of 100 keys, Q, O
                     + 2 * (256 * 256 * 2 + 100 * 512 * 2)  # o
                     + 4 * 3 * 100 * 256 * 2  # residual adds
                     + 2 * (256 * 1024 * 2 + 100 * 1280 * 2)  # gate_up
                     + 2 * 3 * 100 * 512 * 2  # act(gate) * up
                     + 2 * (512 * 256 * 2 + 100 * 768 * 2)  # down
                     + 256 * 1000 * 2 + 1256 * 2)  # the LM head, the last token only
    assert prefill_bytes == 6_895_568
    result = evaluate(tiny, Setup(prompt=100, gen=4), TargetGpu("hand", ROOFS, None, "unknown"))
    assert result.ttft_s == pytest.approx(prefill_bytes / 1e12, rel=1e-12)
    # decode at context 100 moves 3,018,960 B (test_llm_work); each later step reads one more K and V a layer
    steps = [3_018_960 + i * 2 * 2 * 2 * 64 * 2 for i in range(3)]
    assert result.step_times == pytest.approx([s / 1e12 for s in steps], rel=1e-12)
    assert result.first_step_s == pytest.approx(3_018_960 / 1e12)
    assert result.mean_step_s == pytest.approx(sum(steps) / 3 / 1e12)
    assert result.tokens_per_s == pytest.approx(1 / (sum(steps) / 3 / 1e12))
    assert result.usd_per_million_tokens is None


def test_cost_per_million_generated_tokens(tiny):
    """At 3.6 $/h (0.001 $/s): the request (the prefill's 6,895,568 B and 3 decode steps of 3,018,960 B + 1,024 B a
    step later, all at 1e12 B/s, test_prefill_and_decode_totals_by_hand) x 0.001 over the 4 output tokens it
    produces (the prefill's first and one a step), x 1e6."""
    priced = TargetGpu("hand", ROOFS, None, "unknown", usd_per_hour=3.6)
    result = evaluate(tiny, Setup(batch=1, prompt=100, gen=4), priced)
    request = (6_895_568 + sum(3_018_960 + i * 1024 for i in range(3))) / 1e12
    assert result.usd_per_million_tokens == pytest.approx(0.001 * request / 4 * 1e6, rel=1e-9)


def test_one_output_token_is_the_prefill_alone(tiny):
    result = evaluate(tiny, Setup(prompt=100, gen=1), TargetGpu("hand", ROOFS, None, "unknown"))
    assert result.step_times == () and math.isnan(result.mean_step_s)
    assert result.request_s == result.ttft_s and result.first_step_s == pytest.approx(3_018_960 / 1e12)


def test_memory_fit_max_batch_and_max_context_on_a_datasheet_gpu():
    """Llama-3.1-8B bf16 on the A100 40GB datasheet (40 GiB, marketed: serving.csv has no visible figure): 0.9 of
    it, less 1 GiB of workspace and the prefill's largest activations (act_mul of 2048 tokens: gate and up read,
    the product written, 3 x 2048 x 14336 x 2 B), holds weights 2 x 8,030,261,248 B and sequences of 2304 tokens
    of 2304 x 131,072 B of KV cache."""
    llama, _ = load_model("Llama-3.1-8B")
    gpu = gpu_of("A100 SXM4 40GB")
    assert gpu.memory_bytes == 40 * GIB and "marketed" in gpu.memory_source
    usable = 0.9 * 40 * GIB - GIB - 3 * 2048 * 14336 * 2
    room = usable - 2 * 8_030_261_248
    assert math.floor(room / (2304 * 131_072)) == 70
    at_70 = memory(llama, Setup(batch=70, prompt=2048, gen=256), gpu.memory_bytes)
    assert (at_70.fits, at_70.max_batch, at_70.weights_bytes) == (True, 70, 2 * 8_030_261_248)
    assert at_70.usable_bytes == pytest.approx(usable) and at_70.transient_bytes == 3 * 2048 * 14336 * 2
    assert at_70.kv_cache_bytes == 70 * 2304 * 131_072
    assert memory(llama, Setup(batch=71, prompt=2048, gen=256), gpu.memory_bytes).fits is False
    # at batch 1 the memory would hold floor(room / 131072) tokens: more than the model's 131,072
    one = memory(llama, Setup(batch=1), gpu.memory_bytes)
    assert (one.max_context, one.context_capped) == (131_072, True)
    two = memory(llama, Setup(batch=2), gpu.memory_bytes)
    assert (two.max_context, two.context_capped) == (math.floor(room / (2 * 131_072)), False)


def test_an_h100_holds_what_a_server_gets_of_the_81559_mib_it_shows():
    """vLLM at gpu_memory_utilization 0.9 on an H100 80GB: 0.9 x 81,559 MiB less 1 GiB and 176,160,768 B of
    activations leaves room for 197 sequences of 2304 tokens beside Llama-3.1-8B's weights (vLLM: about 196);
    the full 80 GiB would have said 231. --memory-fraction 1 holds more."""
    llama, _ = load_model("Llama-3.1-8B")
    gpu = gpu_of("H100 SXM")
    assert gpu.memory_bytes == 81_559 * 2**20
    room = 0.9 * 81_559 * 2**20 - GIB - 3 * 2048 * 14336 * 2 - 2 * 8_030_261_248
    assert math.floor(room / (2304 * 131_072)) == 197
    assert memory(llama, Setup(), gpu.memory_bytes).max_batch == 197
    assert memory(llama, Setup(), gpu.memory_bytes, fraction=1.0).max_batch == math.floor(
        (81_559 * 2**20 - GIB - 3 * 2048 * 14336 * 2 - 2 * 8_030_261_248) / (2304 * 131_072))


def test_naive_attention_at_32k_needs_its_scores_in_memory():
    """A 32k prompt's naive attention writes 32 heads x 32768^2 scores x 2 B = 68.7 GB a layer: no H100 holds
    it beside the weights, while FlashAttention at 32k fits."""
    llama, _ = load_model("Llama-3.1-8B")
    gpu = gpu_of("H100 SXM")
    naive = memory(llama, Setup(prompt=32768, gen=1, attention="naive"), gpu.memory_bytes)
    assert naive.transient_bytes >= 32 * 32768 ** 2 * 2 == 68_719_476_736
    assert naive.fits is False
    assert memory(llama, Setup(prompt=32768, gen=1), gpu.memory_bytes).fits is True


def test_a_model_larger_than_the_gpu_does_not_fit():
    llama70, _ = load_model("Llama-3.1-70B")
    m = memory(llama70, Setup(), gpu_of("H100 SXM").memory_bytes)
    assert m.weights_bytes == 2 * 70_553_706_496 > 80 * GIB
    assert (m.fits, m.max_batch, m.max_context) == (False, 0, 0)


def test_unknown_memory_is_unknown_not_zero(tiny):
    m = memory(tiny, Setup(), None)
    assert (m.fits, m.max_batch, m.max_context) == (None, None, None)


def ai(batch: int) -> float:
    """The decode GEMMs' intensity at a batch: 2 B N FLOPs over 2 N weight bytes + 2 B IN_OUT activation bytes."""
    return 2 * batch * N / (2 * N + 2 * batch * IN_OUT)


def test_decode_turns_compute_bound_where_the_gemms_intensity_reaches_the_ridge(tiny):
    """Compute 2 B N / 1e14 >= memory (2 N + 2 B IN_OUT) / 1e12 from B = N / (N / 100 - IN_OUT) = 222.8: batch
    223, where the GEMMs' intensity first reaches the ridge (100 FLOP/B)."""
    assert ai(222) < ROOFS.ridge("tensor.bf16") == 100 <= ai(223)
    assert crossover_batch(tiny, Setup(prompt=100), ROOFS) == 223


def test_the_batch_sweep_shows_the_crossover(tiny):
    """tokens/s = batch / step time; KV cache of 104 tokens a sequence x 1,024 B against 4 MB usable: the GPU
    shows (4 MB + 1 GiB of workspace + the prefill's act_mul, 3 x 100 x 512 x 2 B) / 0.9."""
    gpu = TargetGpu("hand", ROOFS, (4e6 + GIB + 3 * 100 * 512 * 2) / 0.9, "hand")
    sweep = batch_sweep(tiny, Setup(prompt=100, gen=4), gpu, [1, 128, 223, 256])
    assert list(sweep["gemms"]) == ["memory", "memory", "compute", "compute"]
    assert sweep["tokens_per_s"].iloc[0] == pytest.approx(1 / (3_018_960 / 1e12))
    assert list(sweep["tokens_per_s"]) == pytest.approx(list(sweep["batch"] / sweep["step_time_s"]))
    # the tiny model's weights (layers, norms, table and head) leave room for 5 sequences of 104 tokens
    weights = memory(tiny, Setup(), None).weights_bytes
    assert weights == 2 * 2 * (256 * 512 + 256 * 256 + 256 * 1024 + 512 * 256) + 5 * 256 * 2 + 2 * 256_000 * 2 \
        == 3_385_856
    assert math.floor((4e6 - weights) / (104 * 1024)) == 5
    assert list(sweep["fits"]) == [True, False, False, False]


def test_roofs_that_cannot_place_the_gemms_have_no_crossover(tiny):
    no_bf16 = Roofs(device="x", bandwidths=ROOFS.bandwidths, flats=ROOFS.flats, sm_clock_hz=None)
    assert crossover_batch(tiny, Setup(), no_bf16) is None
    result = evaluate(tiny, Setup(prompt=16, gen=2), TargetGpu("x", no_bf16, None, "unknown"))
    assert math.isnan(result.ttft_s) and math.isnan(result.first_step_s) and math.isnan(result.tokens_per_s)


def test_llama_8b_decode_step_on_h100_datasheet_is_its_bytes_over_bandwidth():
    """The worked example of docs/llm.md: batch 1, context 2048, bf16. Memory-bound in every op."""
    llama, _ = load_model("Llama-3.1-8B")
    weights = 2 * 8_030_261_248 - 128256 * 4096 * 2 + 4096 * 2  # every weight but the table, of which one row
    kv_read = 32 * 2049 * 2 * 8 * 128 * 2
    kv_write = 32 * 2 * 8 * 128 * 2
    activations = (32 * ((4096 + 6144) + (4096 + 4096) + (4096 + 28672) + (14336 + 4096)) * 2 + (4096 + 128256) * 2
                   + 32 * 2 * 32 * 128 * 2  # attention: Q, O
                   + 65 * 2 * 4096 * 2  # 65 norms
                   + 4096 * 2  # embedding row written
                   + 32 * (2 * 40 * 128 * 2 + 128 * 2)  # rotary of 32 + 8 heads, cos/sin
                   + 32 * 2 * 8 * 128 * 2  # KV-cache write reads K, V
                   + 32 * 2 * 3 * 4096 * 2 + 32 * 3 * 14336 * 2)  # residual adds, act(gate) * up
    total = weights + kv_read + kv_write + activations
    assert total == 15_289_993_728
    for spec, bandwidth in (("H100 SXM", 3350e9), ("A100 SXM4 80GB", 2039e9)):
        result = evaluate(llama, Setup(batch=1, prompt=2048, gen=1), gpu_of(spec))
        assert set(result.decode["bound"]) == {"memory"}
        assert result.first_step_s == pytest.approx(total / bandwidth, rel=1e-12)


def test_a_roofs_file_gives_its_device_memory_and_only_its_own_tensor_types():
    """examples/published/roofs.json has a tensor.fp16 roof (989.4 TFLOP/s) and no bf16 one; its device has
    85,520,809,984 B. bf16 work is not placed on the fp16 roof: its totals are missing."""
    llama, _ = load_model("Llama-3.1-8B")
    gpu = gpu_of(str(Path(__file__).parents[1] / "examples" / "published" / "roofs.json"))
    assert gpu.memory_bytes == 85_520_809_984 and gpu.memory_source == "device memory recorded in the roofs file"
    bf16 = evaluate(llama, Setup(gen=1), gpu)
    assert math.isnan(bf16.ttft_s) and math.isnan(bf16.first_step_s)
    fp16 = evaluate(llama, Setup(gen=1, weights="fp16", activations="fp16", kv_cache="fp16"), gpu)
    assert fp16.first_step_s == pytest.approx(15_289_993_728 / 3350e9, rel=1e-12)


def test_llama_70b_on_two_h100s_splits_its_weights_and_pays_two_all_reduces_a_layer():
    """--tp 2, bf16, batch 1, context 2048 on 'H100 SXM'. Each GPU holds half of every layer matrix (qkv
    8192 x 10240, o 8192 x 8192, gate_up 8192 x 57344, down 28672 x 8192: 855,638,016 a layer), half of the
    embedding table and of the LM head (128256 x 8192 each) and every norm (161 of 8192): 35,277,512,704
    parameters, 70.6 GB. Decode reads them (the table but one row), 4 KV heads' cache of 2049 positions in 80
    layers, and runs 160 all-reduces of 8192 x 2 B: 6 us each on NVLink 4 (serving.csv) plus the ring's
    2 x 1/2 of the tensor over 450 GB/s."""
    llama70, _ = load_model("Llama-3.1-70B")
    setup = Setup(batch=1, prompt=2048, gen=256, tp=2)
    result = evaluate(llama70, setup, gpu_of("H100 SXM"))
    per_gpu = 80 * 855_638_016 // 2 + 128256 * 8192 + 161 * 8192
    assert per_gpu == 35_277_512_704
    assert result.memory.weights_bytes == 2 * per_gpu
    assert result.memory.fits is True
    all_reduce = result.decode[result.decode["op"] == "all_reduce"]
    assert int(all_reduce["count"].iloc[0]) == 160
    assert all_reduce["time_s"].iloc[0] == pytest.approx(160 * 6e-6 + 160 * 8192 * 2 / 450e9)
    # at the roof only the bytes on the wire; the latency is a floor, paid beside it, never scaled by an efficiency
    assert all_reduce["time_at_roof_s"].iloc[0] == pytest.approx(160 * 8192 * 2 / 450e9)
    assert all_reduce["floor_s"].iloc[0] == pytest.approx(6e-6)
    read = 2 * per_gpu - 2 * 64128 * 8192 + 2 * 8192 + 80 * 2 * 4 * 128 * 2 * 2049
    assert 20e-3 < result.first_step_s < 24e-3
    # the rest is activations (well under 1 % of the bytes)
    assert result.first_step_s == pytest.approx(read / 3350e9 + 160 * 6e-6 + 160 * 8192 * 2 / 450e9, rel=0.01)


def test_tensor_parallelism_over_an_unknown_link_is_missing_not_free():
    """The A100 SXM4 80GB row of serving.csv has NVLink's bandwidth but no cited all-reduce latency."""
    llama, _ = load_model("Llama-3.1-8B")
    result = evaluate(llama, Setup(gen=2, tp=2), gpu_of("A100 SXM4 80GB"))
    assert math.isnan(result.first_step_s)
    assert "latency" in result.decode.set_index("op").loc["all_reduce", "why"]


def test_a_step_of_t_tokens_at_context_c(tiny):
    """--step: 1 token at context 100 is the decode step (3,018,960 B), 100 tokens at context 0 the prefill
    (6,895,568 B, above); per token, the step over batch x T."""
    from analysis.llm.place import steps_table

    gpu = TargetGpu("hand", ROOFS, None, "unknown")
    steps = steps_table(tiny, Setup(batch=1, prompt=100), gpu, [(1, 100), (100, 0)])
    assert list(steps["time_s"]) == pytest.approx([3_018_960 / 1e12, 6_895_568 / 1e12], rel=1e-12)
    assert steps["time_per_token_s"].iloc[1] == pytest.approx(6_895_568 / 1e12 / 100, rel=1e-12)
