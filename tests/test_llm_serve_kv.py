"""analysis.llm --serve's KV cache for sliding-window models, as vLLM's V1 hybrid allocator lays it out: the
groups of layers (vllm/v1/core/kv_cache_utils.py), the pool of blocks they share and the blocks a request holds in
each (vllm/v1/core/single_type_kv_cache_manager.py). Oracles: hand arithmetic from gpt-oss-20b's published config
(24 layers alternating sliding_attention, window 128, and full_attention; 8 KV heads of 64), and vLLM's own
worked example of its grouping rule (12 sliding + 13 full layers padded to 13 + 13)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from analysis.llm import serve
from analysis.llm.models import load_model
from analysis.llm.place import gpu_of
from analysis.llm.work import Setup

GPT_OSS, _ = load_model("gpt-oss-20b")
LLAMA, _ = load_model("Llama-3.1-8B")
H100 = gpu_of("H100 SXM")


def test_gpt_oss_20b_pool_is_blocks_of_one_groups_twelve_layers():
    """12 full + 12 sliding layers: two groups of 12. A block is 16 tokens x 12 layers x 2 (K, V) x 8 KV heads
    x 64 x 2 bytes = 393,216 bytes (half of a token's KV in all 24 layers x 16), so the pool has twice the
    blocks of the every-layer count; vLLM reports blocks // 2 groups x 16 tokens."""
    kv = serve.kv_cache(GPT_OSS, Setup(), H100, serve.Limits(), 0.9)
    assert kv.bytes_per_token == 24 * 2 * 8 * 64 * 2 == 49_152
    assert (kv.full_groups, kv.window_groups, kv.group_layers, kv.window) == (1, 1, 12, 128)
    assert kv.blocks == math.floor(kv.usable_bytes / 393_216)
    every_layer = math.floor(kv.usable_bytes / (16 * 49_152))  # the count before the groups
    assert kv.blocks in (2 * every_layer, 2 * every_layer + 1)
    assert kv.tokens == kv.blocks // 2 * 16


def test_a_request_holds_every_block_in_the_full_group_and_its_window_in_the_sliding_one():
    """The step that computes token 1,000 (999 computed): the full group holds ceil(1000 / 16) = 63 blocks; the
    next token's window is tokens 872-999, which lie in blocks 54 (864-879) to 62: 9 blocks, the 54 before it
    freed. While its 1,000-token prompt is prefilled in one chunk, the sliding group holds all 63."""
    kv = serve.kv_cache(GPT_OSS, Setup(), H100, serve.Limits(), 0.9)
    assert kv.held(999, 1) == 63 + 9
    assert kv.held(0, 1000) == 63 + 63
    assert kv.held(100, 27) == 8 + 8  # within the window nothing is freed


def test_the_refusal_is_vllms_own_bound_on_what_a_request_holds():
    """A request of 5,000 tokens in chunks of 512: the full group 313 blocks (ceil(5000 / 16)); the sliding group
    ceil((128 - 1 + 512) / 16) = 40 blocks and one more where the window starts inside a block: 354. A request of
    1,000 tokens in chunks of 8,192: 63 + (63 + 1) = 127."""
    kv = serve.KvCache(126, 16, 49_152, 1.0, full_groups=1, window_groups=1, window=128, group_layers=12)
    assert kv.need(5000, 512) == 313 + 41
    assert kv.need(1000, 8192) == 127
    with pytest.raises(serve.CeilingsError, match="needs 127 KV blocks; the cache holds 126"):
        serve.simulate([serve.Request(0.0, 1000, 1)], lambda s, n, p: 1e-3, kv, serve.Limits())
    alone = serve.simulate([serve.Request(0.0, 1000, 1)], lambda s, n, p: 1e-3, replace(kv, blocks=127),
                           serve.Limits())
    assert len(alone.token_times[0]) == 1


def test_the_groups_follow_vllms_rule():
    """_get_kv_cache_groups_uniform_page_size: 12 sliding + 13 full layers (its gpt-oss-20b + EAGLE example) are
    padded to two groups of 13; 7 sliding + 21 full: groups of 7, three full and one sliding; 8 sliding + 20
    full: groups of 8 (20 is not under 1.5 x 8), three full (the last padded) and one sliding. Every layer
    sliding, or none: one group of all."""
    assert serve.kv_groups(replace(GPT_OSS, layers=25, window_layers=12)) == (1, 1, 13)
    assert serve.kv_groups(replace(GPT_OSS, layers=28, window_layers=7)) == (3, 1, 7)
    assert serve.kv_groups(replace(GPT_OSS, layers=28, window_layers=8)) == (3, 1, 8)
    assert serve.kv_groups(replace(GPT_OSS, window_layers=24)) == (0, 1, 24)
    assert serve.kv_groups(LLAMA) == (1, 0, 32)
    # a window on layers this toolkit cannot name is not freed (work.py refuses contexts past it)
    assert serve.kv_groups(replace(GPT_OSS, window_layers=0)) == (1, 0, 24)


def test_with_windows_more_requests_run_and_the_peak_stays_within_the_pool():
    """720 blocks of 12 layers, requests of 984 + 17 tokens arriving together: counted in every layer each would
    take 2 x 63 blocks at its end, so 720 // 126 = 5 could run; with the window freed a decoding request holds
    63 + at most 9, so more run at once. No step's blocks exceed the pool, and every request ends."""
    kv = serve.KvCache(720, 16, 49_152, 1.0, full_groups=1, window_groups=1, window=128, group_layers=12)
    result = serve.simulate([serve.Request(0.0, 984, 17)] * 20, lambda s, n, p: 1e-3, kv, serve.Limits())
    assert max(result.timeline.blocks_used) <= 720
    assert max(result.timeline.batch) > 5
    assert all(len(t) == 17 for t in result.token_times)
    m = serve.metrics(result, kv, None)
    assert m["kv_peak_blocks"] <= m["kv_capacity_blocks"] == 720 and m["kv_capacity_tokens"] == 360 * 16
    assert m["kv_groups"] == {"full_attention": 1, "sliding_window": 1, "layers_each": 12, "window": 128}


def test_the_scheduler_under_pressure_never_exceeds_the_pool():
    """gpt-oss-20b on a pool too small for the traffic: requests are preempted, and still no step holds more
    blocks than the pool has."""
    limits = serve.Limits(max_num_seqs=32, max_num_batched_tokens=512)
    kv = serve.KvCache(400, 16, 49_152, 1.0, full_groups=1, window_groups=1, window=128, group_layers=12)
    result = serve.simulate(serve.poisson(500.0, [(600, 200)] * 40, 3), lambda s, n, p: 1e-3, kv, limits)
    assert result.preemptions > 0
    assert max(result.timeline.blocks_used) <= 400
    assert all(len(t) == 200 for t in result.token_times)


@pytest.mark.parametrize("model, hybrid", [("gpt-oss-20b", True), ("Llama-3.1-8B", False)])
def test_the_text_says_how_a_hybrid_pool_counts_its_tokens(capsys, model, hybrid):
    from analysis.llm.__main__ import main

    assert main(["--model", model, "--roofs", "H100 SXM", "--serve", "--rate", "2", "--requests", "20"]) == 0
    head = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("serving on"))
    tokens, blocks = (int(x.replace(",", "")) for x in head.split("KV cache ")[1].split(" blocks")[0].split(
        " tokens in "))
    if hybrid:  # gpt-oss-20b: 12 full + 12 sliding layers, two groups of 12, window 128
        assert "1 full-attention and 1 sliding-window group(s) of 12 layers" in head
        assert "the blocks of a request's last 128 tokens (all of a prompt chunk's while it is prefilled)" in head
        assert tokens == blocks // 2 * 16
    else:
        assert "hybrid" not in head and tokens == blocks * 16


def test_the_window_and_group_rules_at_their_edges():
    """Window 128, blocks of 16. At 143 computed tokens the next token's window starts at token 16: the first
    block (tokens 0-15) is freed, 9 - 1 = 8 held; at 142 it is not yet. vLLM's bound for 5,000 tokens one at a
    time: 313 blocks full, and ceil((128 - 1 + 1) / 16) + 1 = 9 sliding. 20 layers of which 8 slide: 12 is not
    under 1.5 x 8, so groups of 8 (2 full, padded, and 1 sliding); 11 full and 8 sliding: 11 < 12, groups of 11."""
    kv = serve.kv_cache(GPT_OSS, Setup(), H100, serve.Limits(), 0.9)
    assert kv.held(143, 1) == 9 + 8 and kv.held(142, 1) == 9 + 9
    assert kv.need(5000, 1) == 313 + 9
    assert serve.kv_groups(replace(GPT_OSS, layers=20, window_layers=8)) == (2, 1, 8)
    assert serve.kv_groups(replace(GPT_OSS, layers=19, window_layers=8)) == (1, 1, 11)


def test_a_model_whose_every_layer_slides_says_its_window_in_one_group():
    kv = serve.kv_cache(replace(LLAMA, sliding_window=4096, window_layers=LLAMA.layers), Setup(), H100,
                        serve.Limits(), 0.9)
    assert (kv.full_groups, kv.window_groups, kv.group_layers) == (0, 1, 32)
    assert kv.tokens == kv.blocks * 16 and "0 full-attention and 1 sliding-window group(s) of 32 layers" in kv.layout


def test_the_html_page_says_the_hybrid_layout_once_for_every_gpu(tmp_path):
    from analysis.llm.__main__ import main

    out = tmp_path / "serve.html"
    assert main(["--model", "gpt-oss-20b", "--roofs", "H100 SXM", "--roofs", "B200", "--serve", "--rate", "2",
                 "--requests", "20", "--html", str(out)]) == 0
    page = out.read_text()
    assert page.count("vLLM's hybrid layout: 1 full-attention and 1 sliding-window group(s) of 12 layers") == 1
