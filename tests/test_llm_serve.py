"""analysis.llm --serve: requests through a vLLM-like scheduler on the step model. Oracles: the step model's own
single-request prefill and batch-1 decode (analysis.llm.place.evaluate), hand arithmetic of the KV cache from
the published Llama-3.1-8B config, Little's law on the simulated queue, and the scheduler's limits checked on
every step it takes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from analysis.llm import serve
from analysis.llm.__main__ import main
from analysis.llm.models import load_model
from analysis.llm.place import Cost, batch_sweep, evaluate, gpu_of
from analysis.llm.work import Setup

LLAMA, _ = load_model("Llama-3.1-8B")
H100 = gpu_of("H100 SXM")
FLOORS = {phase: {c: Cost(H100.roofs.floor[0]) for c in ("gemm", "attention", "norm", "elementwise")}
          for phase in ("prefill", "decode")}


DEFAULTS = serve.Limits()


def served(rate, n=300, prompt=512, gen=64, limits=DEFAULTS, kv=None, clock=None, seed=1):
    setup = Setup(prompt=prompt, gen=gen)
    kv = kv or serve.kv_cache(LLAMA, setup, H100, limits, 0.9)
    clock = clock or serve.StepClock(LLAMA, setup, H100, FLOORS)
    return serve.simulate(serve.poisson(rate, [(prompt, gen)] * n, seed), clock, kv, limits), kv


def test_at_a_low_rate_a_request_is_served_alone_at_the_step_models_times():
    """Requests 100 s apart never overlap: TTFT is the single-request prefill, TPOT the batch-1 decode step of the
    step model (analysis.llm without --serve) at the same lengths."""
    result, kv = served(0.01, n=20)
    m = serve.metrics(result, kv, 0.01)
    alone = evaluate(LLAMA, Setup(batch=1, prompt=512, gen=64), H100, FLOORS)
    assert m["ttft_s"]["p50"] == pytest.approx(alone.ttft_s, rel=1e-9)
    assert m["tpot_s"]["p50"] == pytest.approx(alone.mean_step_s, rel=1e-9)
    assert m["max_batch"] == 1 and m["preemptions"] == 0


def test_kv_capacity_is_the_memory_left_in_blocks():
    """Llama-3.1-8B in bf16 on the H100 SXM (81,559 MiB as nvidia-smi shows it) at 0.9: less 8,030,261,248
    parameters x 2 bytes, 1 GiB of workspace and the largest activation of an 8,192-token step (its gated
    activation: gate and up read, their product written, 3 x 8192 x 14336 x 2 bytes), in blocks of 16 tokens of
    32 layers x 2 x 8 KV heads x 128 x 2 bytes = 131,072 bytes a token."""
    usable = 0.9 * 81559 * 2**20 - 8_030_261_248 * 2 - 2**30 - 3 * 8192 * 14336 * 2
    kv = serve.kv_cache(LLAMA, Setup(), H100, serve.Limits(), 0.9)
    assert kv.bytes_per_token == 32 * 2 * 8 * 128 * 2 == 131_072
    assert kv.usable_bytes == pytest.approx(usable, rel=1e-12)
    assert kv.blocks == math.floor(usable / (16 * 131_072)) == 28_195
    assert kv.tokens == kv.blocks * 16


def test_throughput_rises_with_rate_then_saturates_below_the_best_decode():
    rates = (2, 8, 32, 128)
    runs = [serve.metrics(*served(r, n=400), r) for r in rates]
    throughput = [m["output_tokens_per_s"] for m in runs]
    assert throughput == sorted(throughput)
    p99 = [m["ttft_s"]["p99"] for m in runs]
    assert p99 == sorted(p99)
    # the step model's decode throughput at the largest batch the server runs (max_num_seqs, all of which fit)
    best = batch_sweep(LLAMA, Setup(prompt=512, gen=64), H100, [256], FLOORS["decode"])["tokens_per_s"].iloc[0]
    assert throughput[-1] <= best
    assert runs[-1]["max_batch"] == 256


def test_littles_law_holds_on_the_simulated_queue():
    """The time-average of requests in the system, integrated from arrivals and last tokens on a fine grid, is
    the Poisson rate x the mean latency (Little's law), within 5 %."""
    rate = 40.0
    result, _ = served(rate, n=2000)
    arrivals = np.array([r.arrival_s for r in result.requests])
    ends = np.array([t[-1] for t in result.token_times])
    grid = np.linspace(0.0, ends.max(), 200_001)
    in_system = (np.searchsorted(np.sort(arrivals), grid, side="right")
                 - np.searchsorted(np.sort(ends), grid, side="right"))
    assert in_system.mean() == pytest.approx(rate * (ends - arrivals).mean(), rel=0.05)


class Spy:
    """A clock that records each step's sequences and answers 1 ms a step."""

    def __init__(self):
        self.steps = []

    def __call__(self, sequences, logits, prefill):
        self.steps.append((list(sequences), logits, prefill))
        return 1e-3


def test_the_scheduler_keeps_its_limits_and_preempts_when_blocks_run_out():
    """A cache of 40 blocks of 16 for requests of 64 + 64 tokens (8 blocks each at the end): five fit, more
    are admitted while blocks last, and the last admitted is preempted and recomputed; every request still
    produces all its tokens, no step exceeds the token budget or the running limit."""
    limits = serve.Limits(max_num_seqs=8, max_num_batched_tokens=100, block_size=16)
    spy = Spy()
    result, _ = served(1000.0, n=30, prompt=64, gen=64, limits=limits,
                       kv=serve.KvCache(40, 16, 131072, 40 * 16 * 131072), clock=spy)
    assert result.preemptions > 0
    assert all(len(t) == 64 for t in result.token_times)
    assert all(sum(n for n, _ in seqs) <= 100 and len(seqs) <= 8 for seqs, _, _ in spy.steps)
    assert max(result.timeline.blocks_used) <= 40
    # contexts are what each sequence had computed: never beyond its prompt and produced tokens
    assert all(c + n <= 64 + 64 for seqs, _, _ in spy.steps for n, c in seqs)


def test_without_chunked_prefill_prompts_run_whole_in_steps_of_their_own():
    limits = serve.Limits(max_num_batched_tokens=2048, chunked_prefill=False)
    spy = Spy()
    served(50.0, n=40, prompt=300, gen=8, limits=limits, clock=spy)
    for seqs, _, prefill in spy.steps:
        assert all(n == 300 for n, _ in seqs) if prefill else all(n == 1 for n, _ in seqs)
    chunked = Spy()
    served(50.0, n=40, prompt=300, gen=8, limits=serve.Limits(max_num_batched_tokens=512), clock=chunked)
    assert any(n == 1 for seqs, _, _ in chunked.steps for n, _ in seqs if any(m > 1 for m, _ in seqs))


def test_serve_cli_json_and_the_picture(tmp_path, capsys):
    out, png, html = tmp_path / "serve.json", tmp_path / "serve.png", tmp_path / "serve.html"
    assert main(["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--serve", "--rate", "2", "--rate", "16",
                 "--requests", "100", "--prompt", "512", "--gen", "32", "--slo-ttft", "0.5", "--slo-tpot", "0.05",
                 "--price", "H100 SXM=3", "--json", str(out), "--serve-plot", str(png), "--html", str(html)]) == 0
    page = html.read_text()
    assert "time to first token against the request rate" in page and "KV cache: NVIDIA H100" in page
    gpu = json.loads(out.read_text())["gpus"][0]
    assert [m["rate"] for m in gpu["serve"]] == [2.0, 16.0]
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        assert set(gpu["serve"][0][key]) == {"p50", "p90", "p99", "mean"}
    assert {"output_tokens_per_s", "requests_per_s", "kv_capacity_tokens", "kv_capacity_blocks", "max_batch",
            "preemptions", "goodput_rps"} <= set(gpu["serve"][1])
    assert gpu["serving"]["slo_rate_rps"] == pytest.approx(16.0)  # both rates meet so loose an SLO
    tokens_per_s = gpu["serve"][1]["output_tokens_per_s"]
    assert gpu["serving"]["usd_per_million_output_tokens"] == pytest.approx(3 / 3600 / tokens_per_s * 1e6)
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize("argv, said", [
    (["--rate", "0"], "--rate 0.0: give requests a second above 0"),
    (["--rate", "-3"], "--rate -3.0: give requests a second above 0"),
    ([], "--serve: give --rate QPS"),
    (["--rate", "1", "--prompt", "200000"], "200256 tokens exceeds Llama-3.1-8B's max_position_embeddings"),
    (["--rate", "1", "--max-num-seqs", "0"], "--max-num-seqs 0: give 1 or more"),
    (["--rate", "1", "--slo-ttft", "inf"], "--slo-ttft inf: give seconds above 0"),
])
def test_bad_traffic_is_one_line(argv, said, capsys):
    assert main(["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--serve", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0]


@pytest.mark.parametrize("content, said", [
    ("prompt_tokens,gen\n10,5\n", "no column output_tokens"),
    ('{"prompt_tokens": 10, "output_tokens": -5}\n', ":1: output_tokens -5: give a whole number"),
    ('{"prompt_tokens": 10, "output_tokens": 5}\nnot json\n', ":2: not a JSON object"),
    ("prompt_tokens,output_tokens,arrival_s\n10,5,1.0\n10,5,0.5\n", ":3: arrival_s '0.5': give seconds"),
    ("prompt_tokens,output_tokens\n131000,100\n", ":2: prompt_tokens + output_tokens: 131100 tokens exceeds"),
    ("prompt_tokens,output_tokens\n10,5\n10,5,7\n", ":3: more fields than the header names"),
])
def test_bad_workload_files_name_the_line(tmp_path, capsys, content, said):
    workload = tmp_path / "w.csv"
    workload.write_text(content)
    assert main(["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--serve", "--rate", "1", "--workload",
                 str(workload)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and str(workload) in err[0]


def test_a_workload_with_arrival_times_is_served_as_it_came(tmp_path):
    workload = tmp_path / "w.jsonl"
    workload.write_text("".join(json.dumps({"prompt_tokens": 100 + i, "output_tokens": 10, "arrival_s": i * 0.5})
                                + "\n" for i in range(20)))
    lengths, arrivals = serve.read_workload(str(workload), LLAMA)
    assert lengths[3] == (103, 10) and arrivals[3] == 1.5
    out = tmp_path / "o.json"
    assert main(["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--serve", "--workload", str(workload),
                 "--json", str(out)]) == 0
    run = json.loads(out.read_text())["gpus"][0]["serve"][0]
    assert run["rate"] is None and run["requests"] == 20
    assert math.isclose(run["duration_s"], 9.5 + run["e2e_s"]["p50"], rel_tol=0.2)


def test_a_step_no_roof_places_is_refused_not_looped_on(capsys):
    """--tp 2 on the A100, whose all-reduce latency serving.csv does not cite: the step has no time; --serve says
    which op and why instead of simulating with it (a NaN clock never advances)."""
    assert main(["--model", "Llama-3.1-8B", "--roofs", "A100 SXM4 80GB", "--tp", "2", "--serve", "--rate", "5",
                 "--requests", "20", "--prompt", "300", "--gen", "20"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "all_reduce cannot be placed" in err[0]
    with pytest.raises(serve.CeilingsError, match="has no time on these roofs"):
        serve.simulate([serve.Request(0.0, 10, 3), serve.Request(1.0, 10, 3)], lambda s, n, p: math.nan,
                       serve.KvCache(100, 16, 1.0, 1.0), serve.Limits())


def test_one_token_requests_peak_blocks_and_the_last_tokens_kv():
    """A request of 16 + 1 tokens holds 16 tokens of KV at most (its last token is produced, never computed):
    one block of 16 is enough, and the peak counts it though the request finishes in that step."""
    result = serve.simulate([serve.Request(0.0, 16, 1)], Spy(), serve.KvCache(1, 16, 1.0, 1.0), serve.Limits())
    assert result.token_times[0] == (1e-3,) and max(result.timeline.blocks_used) == 1
    m = serve.metrics(result, serve.KvCache(1, 16, 1.0, 1.0), 1.0, (0.5, 0.05))
    assert m["kv_peak_blocks"] == 1 and m["tpot_s"]["p99"] is None and m["goodput_rps"] > 0
    # no TPOT meets a TPOT target in the search, as goodput counts it
    assert serve.highest_rate(lambda rate: m, (0.5, 0.05), 1.0, 2.0) == 2.0


def test_a_workload_timed_on_some_lines_only_is_refused(tmp_path):
    workload = tmp_path / "w.jsonl"
    workload.write_text('{"prompt_tokens": 10, "output_tokens": 5}\n'
                        '{"prompt_tokens": 10, "output_tokens": 5, "arrival_s": 1}\n')
    with pytest.raises(serve.CeilingsError, match=r"w.jsonl:1: arrival_s None"):
        serve.read_workload(str(workload), LLAMA)


def test_the_serve_plot_with_one_token_requests_says_there_is_no_tpot(tmp_path, monkeypatch):
    from analysis.llm import plot

    drawn = []
    real = plot.serve_figure
    monkeypatch.setattr(plot, "serve_figure", lambda *a, **k: drawn.append(real(*a, **k)) or drawn[-1])
    png = tmp_path / "s.png"
    assert main(["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--serve", "--rate", "1", "--rate", "4",
                 "--requests", "30", "--prompt", "100", "--gen", "1", "--serve-plot", str(png)]) == 0
    ttft, tpot = drawn[0].axes[:2]
    assert [t.get_text() for t in tpot.texts] == ["no time per output token: no request produced more than one token"]
    assert not ttft.texts and [list(line.get_xdata()) for line in ttft.lines] == [[1, 4], [1, 4]]  # P50, P99
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_closed_loop_keeps_its_clients_busy():
    """Three clients, eight requests, 1 ms a step: never more than three in the system, and each request after
    the first three arrives when one finishes (its client sends the next)."""
    requests = [serve.Request(99.0, 20, 4)] * 8  # their own arrival times are not used
    result = serve.simulate(requests, Spy(), serve.KvCache(1000, 16, 1.0, 1.0), serve.Limits(), concurrency=3)
    arrivals = [r.arrival_s for r in result.requests]
    ends = sorted(t[-1] for t in result.token_times)
    assert arrivals[:3] == [0.0] * 3
    assert all(any(a == pytest.approx(e) for e in ends) for a in arrivals[3:])
    assert max(result.timeline.batch) <= 3 and all(len(t) == 4 for t in result.token_times)
    # one client: the requests one after another, each arriving as the previous one's last token comes
    one = serve.simulate(requests[:4], Spy(), serve.KvCache(1000, 16, 1.0, 1.0), serve.Limits(), concurrency=1)
    assert [r.arrival_s for r in one.requests[1:]] == pytest.approx([t[-1] for t in one.token_times[:-1]])


def test_serve_cli_at_fixed_concurrency(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--serve", "--concurrency", "1", "--concurrency",
                 "8", "--requests", "40", "--prompt", "256", "--gen", "16", "--json", str(out)]) == 0
    runs = json.loads(out.read_text())["gpus"][0]["serve"]
    assert [(m["rate"], m["concurrency"]) for m in runs] == [(None, 1), (None, 8)]
    assert runs[0]["max_batch"] == 1 and runs[1]["output_tokens_per_s"] > runs[0]["output_tokens_per_s"]
    assert main(["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--serve", "--concurrency", "4", "--rate",
                 "2"]) == 2
    assert "--rate and --concurrency" in capsys.readouterr().err


def test_steps_pay_the_floors_as_single_steps_do(tmp_path):
    """--no-floors: each kernel at its roofs alone, so every served token comes sooner than with the latency floor a
    kernel (the step model's costs, the same for single steps and served ones); the page shows the closed loop."""
    runs = {}
    for flag in ("--floors", "--no-floors"):
        out = tmp_path / f"{flag}.json"
        assert main(["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--serve", "--concurrency", "4", "--requests",
                     "20", "--prompt", "256", "--gen", "16", flag, "--json", str(out), "--html",
                     str(tmp_path / f"{flag}.html")]) == 0
        runs[flag] = json.loads(out.read_text())["gpus"][0]["serve"][0]
        assert "clients (closed loop)" in (tmp_path / f"{flag}.html").read_text()
    assert runs["--no-floors"]["tpot_s"]["p50"] < runs["--floors"]["tpot_s"]["p50"]
    assert runs["--no-floors"]["ttft_s"]["p50"] < runs["--floors"]["ttft_s"]["p50"]
