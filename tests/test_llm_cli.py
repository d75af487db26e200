"""python -m analysis.llm: the table, --json, pictures, --price, --calibrate and one-line errors.

Numbers by hand: tiny-llama's decode step at batch 1, context 100 moves 3,018,960 B (test_llm_work.py) and is
memory-bound on the A100 SXM4 80GB datasheet (2,039 GB/s) and the H100 SXM one (3,350 GB/s).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.llm.__main__ import main
from tests.text_extents import pictures_of, problems

DATA = Path(__file__).parent / "data" / "llm"
TINY = str(DATA / "tiny-llama")
PROFILE = str(DATA / "decode-step.ncu.csv")
TRACES = Path(__file__).resolve().parents[2] / "shared" / "torch-traces"
BASE = ["--model", TINY, "--roofs", "A100 SXM4 80GB", "--prompt", "100", "--gen", "4"]


def run_json(capsys, *args):
    assert main([*BASE, *args, "--json", "-"]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_json_has_the_fields_per_gpu(capsys):
    doc, err = run_json(capsys, "--roofs", "H100 SXM", "--price", "h100 sxm=3.6", "--no-floors")
    a100, h100 = doc["gpus"]
    assert a100["gpu"] == "NVIDIA A100 SXM4 80GB (CC 8.0)" and not a100["measured_roofs"]
    assert a100["decode"]["first_step_time_s"] == pytest.approx(3_018_960 / 2039e9)
    assert h100["decode"]["first_step_time_s"] == pytest.approx(3_018_960 / 3350e9)
    assert a100["prefill"]["tokens"] == 100 and a100["prefill"]["time_s"] > 0
    assert set(a100["decode"]) >= {"first_step_time_s", "mean_time_per_token_s", "tokens_per_s"}
    assert a100["memory"]["weights_bytes"] == 3_385_856 and a100["memory"]["kv_cache_bytes"] == 104 * 1024
    assert a100["memory"]["fits"] is True and a100["memory"]["capacity_bytes"] == 80 * 2 ** 30
    assert a100["cost"] is None and h100["cost"]["usd_per_hour"] == 3.6
    decode_ops = [o for o in a100["ops"] if o["phase"] == "decode"]
    assert len(decode_ops) == 15 and {o["op"] for o in decode_ops} >= {"qkv_proj", "attention", "lm_head"}
    assert sum(o["bytes"] for o in decode_ops) == 3_018_960
    assert doc["setup"]["gemm_roof"] == "tensor.bf16" and doc["model"]["kv_heads"] == 2
    assert doc["setup"]["latency_floors"] is False and a100["launch_floor_s"] is None
    assert "datasheet figures" in err  # the roofs are not measured: said on stderr and in the JSON
    assert any("not measured here" in w for w in doc["warnings"])


def test_the_text_table_names_the_gpus_and_the_roofs_source(capsys):
    assert main([*BASE, "--sweep", "--sweep-max", "4"]) == 0
    out = capsys.readouterr().out
    assert "tiny-llama: 1.69 M parameters" in out
    assert "NVIDIA A100 SXM4 80GB (CC 8.0): roofs datasheet figures for NVIDIA A100 SXM4 80GB (not measured here)" \
        in out
    assert "batch sweep: the decode step at context 100" in out
    assert "ops on NVIDIA A100 SXM4 80GB (CC 8.0)" in out and "qkv_proj" in out


def test_calibration_applies_the_fitted_floors_and_efficiencies(capsys):
    """Floors (test_llm_calibrate): 3 GEMM kernels, 1 attention and 1 norm of 200 ns (the smallest kernel), the
    elementwise kernel's 200 ns less its 18,688 B at the roof; on the H100 the floors stay, the rest shrinks."""
    doc, err = run_json(capsys, "--roofs", "H100 SXM", "--calibrate", PROFILE, "-v")
    a100, h100 = doc["gpus"]
    measured = 4e-6 + 0.8e-6 + 0.3e-6 + 0.2e-6  # gemm, attention, norm, elementwise of the profile
    floors = 3 * 200e-9 + 200e-9 + 200e-9 + (200e-9 - 18_688 / 2039e9)
    assert a100["decode"]["first_step_time_s"] == pytest.approx(measured)
    assert h100["decode"]["first_step_time_s"] == pytest.approx(floors + (measured - floors) * 2039 / 3350)
    classes = {c["op_class"]: c for c in doc["calibration"]["classes"]}
    assert classes["gemm"]["efficiency"] == pytest.approx(2_887_120 / 2039e9 / 3.4e-6)
    assert (classes["gemm"]["floor_s"], classes["gemm"]["kernels"], classes["gemm"]["expected"]) == \
        pytest.approx((200e-9, 3, 9))
    assert "gemm: the profile" in err and "more than 2x off" in err
    assert classes["communication"]["efficiency"] is None  # missing, not 0
    assert doc["calibration"]["gpu"] == "NVIDIA A100 SXM4 80GB (CC 8.0)"
    assert "match no class pattern" in err and "PROFILE FROM ANOTHER GPU" not in err


def test_a_profile_from_another_gpu_than_calibrate_on_is_warned_about(capsys):
    _, err = run_json(capsys, "--calibrate", PROFILE, "--calibrate-on", "H100 SXM")
    assert "PROFILE FROM ANOTHER GPU" in err


def test_pictures_are_written_and_kept_without_force(tmp_path, capsys):
    ops, sweep = tmp_path / "ops.png", tmp_path / "sweep.png"
    assert main([*BASE, "-o", str(ops), "--sweep-plot", str(sweep), "--sweep-max", "8"]) == 0
    assert ops.stat().st_size > 10_000 and sweep.stat().st_size > 10_000
    before = ops.read_bytes()
    assert main([*BASE, "-o", str(ops)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err and ops.read_bytes() == before
    assert main([*BASE, "-o", str(ops), "--force"]) == 0


@pytest.mark.parametrize("gpus", [["H100 SXM"], ["H100 SXM", "A100 80GB SXM"]])
def test_the_pictures_have_no_text_over_another_or_over_the_legend(tmp_path, monkeypatch, capsys, gpus):
    # Llama-3.1-8B's prefill GEMMs sit on the tensor roof at the right: the roof's label once ran out of the
    # axes over the legend's keys; every label, legend entry and title stays apart and in the picture
    pictures = pictures_of(monkeypatch)
    roofs = [a for gpu in gpus for a in ("--roofs", gpu)]
    assert main(["--model", "llama-3.1-8b", *roofs, "-o", str(tmp_path / "llm.png"), "--sweep-plot",
                 str(tmp_path / "sweep.png")]) == 0
    assert len(pictures) == 2
    for path, fig, kwargs in pictures:
        assert problems(fig, **kwargs) == [], path
        for ax in fig.axes:  # every flat the ops run on is labelled
            flats = {ln.get_gid().removeprefix("roof:") for ln in ax.lines if (ln.get_gid() or "").startswith("roof:")}
            labels = {t.get_gid().removeprefix("roof-label:") for t in ax.texts
                      if (t.get_gid() or "").startswith("roof-label:")}
            assert labels == flats


def test_plot_content():
    from analysis.llm.models import load_model
    from analysis.llm.place import evaluate, gpu_of
    from analysis.llm.plot import ops_figure
    from analysis.llm.work import Setup

    model, _ = load_model(TINY)
    result = evaluate(model, Setup(prompt=100, gen=2), gpu_of("A100 SXM4 80GB"))
    ax = ops_figure(model, [result]).axes[0]
    gids = {c.get_gid() for c in ax.collections}
    assert {"kernels:llm:prefill:gemm", "kernels:llm:decode:gemm", "kernels:llm:decode:attention"} <= gids
    assert {ln.get_gid() for ln in ax.lines} >= {"roof:dram", "roof:fp32", "roof:tensor.bf16"}
    assert "not measured here" in ax.get_title(loc="left")
    notes = [t.get_text() for t in ax.texts if t.get_gid() == "note:not-drawn"]
    assert notes and "embedding, kv_cache_write" in notes[0]  # no FLOPs: not on log axes


@pytest.mark.parametrize("args, needle", [
    (["--model", "nope-7b", "--roofs", "H100 SXM"], "no such file and no shipped model"),
    (["--model", TINY], "give --model NAME|config.json and at least one --roofs"),
    ([*BASE, "--price", "B200=2"], "'B200' is none of the --roofs GPUs"),
    ([*BASE, "--price", "A100 SXM4 80GB=free"], "give GPU=USD_PER_HOUR with a positive price"),
    ([*BASE, "--weights", "int4", "--group-size", "100"], "--group-size 100"),
    ([*BASE, "--roofs", "Z999"], "no such roofs file"),
    ([*BASE, "--sweep-plot", "sweep.txt"], "must end in .png"),
    ([*BASE, "--calibrate", str(DATA / "tiny-olmo.json")], "tiny-olmo.json"),
    (["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--prompt", "200000", "--gen", "10"],
     "200010 tokens exceeds Llama-3.1-8B's max_position_embeddings 131072"),
    (["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--step", "2:131071"],
     "--step 2:131071: 131073 tokens exceeds Llama-3.1-8B's max_position_embeddings 131072"),
    (["--model", "Qwen2.5-0.5B", "--roofs", "H100 SXM", "--tp", "4"], "num_attention_heads 14 does not split"),
    ([*BASE, "--memory-fraction", "1.5"], "--memory-fraction 1.5: give a share"),
    ([*BASE, "--step", "5"], "--step 5: give TOKENS:CONTEXT"),
    ([*BASE, "--calibrate", PROFILE, "--calibrate", PROFILE, "--calibrate-batch", "1"],
     "--calibrate-batch: 1 given for 2 --calibrate profiles"),
    # the hand profile's one step said to be 13: 3 / 13 GEMM kernels a step where tiny-llama's step runs 9
    ([*BASE, "--calibrate", PROFILE, "--calibrate-steps", "13"],
     "0.230769 gemm kernels a step where the model runs 9 gemm ops, more than 4x off"),
])
def test_errors_are_one_line(args, needle, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and err.startswith("python -m analysis.llm: error:")


@pytest.mark.skipif(not (TRACES / "alexnet_a100_kernels.json.gz").exists(), reason="shared traces absent")
def test_calibrating_a_llama_on_an_alexnet_trace_exits_2(capsys):
    """It set Llama-3.1-8B's GEMMs to 88.9 % of the roof and exited 0: now a no, with what was looked for."""
    assert main(["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--calibrate",
                 str(TRACES / "alexnet_a100_kernels.json.gz")]) == 2
    out = capsys.readouterr()
    assert not out.out and out.err.count("\n") == 1
    assert "not a decode step of this model: no attention kernel" in out.err


def test_list_models(capsys):
    assert main(["--list-models"]) == 0
    out = capsys.readouterr().out
    assert "Mixtral-8x7B-v0.1  https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json" in out


def test_runs_as_a_module_without_importing_matplotlib():
    code = ("import sys, analysis.llm.__main__; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'matplotlib', 'cupy', 'numba'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"
    help_out = subprocess.run([sys.executable, "-m", "analysis.llm", "--help"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).resolve().parents[1])
    assert "--calibrate" in help_out.stdout
    # the conventions tokens/s and $/M tokens follow
    assert "output tokens a sequence, the first from the prefill" in " ".join(help_out.stdout.split())


def test_floors_add_three_microseconds_a_kernel_unless_dropped(capsys):
    """tiny-llama's decode step is 27 kernels (12 a layer x 2, the embedding, the final norm, the LM head): by
    default (and with --floors) 27 x 3 us are added to its 3,018,960 B at 2,039 GB/s; --no-floors drops them.
    The table, the JSON and the page say which."""
    for args in ((), ("--floors",)):
        doc, _ = run_json(capsys, *args)
        (a100,) = doc["gpus"]
        assert sum(o["count"] for o in a100["ops"] if o["phase"] == "decode") == 27
        assert all(o["floor_s"] == 3e-6 for o in a100["ops"])
        assert a100["decode"]["first_step_time_s"] == pytest.approx(3_018_960 / 2039e9 + 27 * 3e-6)
        assert doc["setup"]["latency_floors"] is True and a100["launch_floor_s"] == 3e-6
    doc, _ = run_json(capsys, "--no-floors")
    assert doc["gpus"][0]["decode"]["first_step_time_s"] == pytest.approx(3_018_960 / 2039e9)
    assert main(BASE) == 0
    assert "latency floor 3 µs a kernel (the default)" in capsys.readouterr().out
    assert main([*BASE, "--no-floors"]) == 0
    assert "no latency floor a kernel (--no-floors): times at the roofs" in capsys.readouterr().out
    assert main([*BASE, "--html", "-"]) == 0
    assert "latency floor 3 µs a kernel" in capsys.readouterr().out


def test_steps_and_the_crossover_flag_are_in_the_json(capsys):
    """--step 1:100 is the decode step at context 100; Llama-3.1-8B's GEMMs cross over at batch 326 on the H100,
    beyond the 197 sequences that fit (test_llm_place), and at 161 on the A100, within its 198."""
    doc, _ = run_json(capsys, "--step", "1:100", "--no-floors")
    assert doc["steps"][0]["time_s"] == pytest.approx(3_018_960 / 2039e9)
    assert main(["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--roofs", "A100 SXM4 80GB", "--json", "-"]) == 0
    out = capsys.readouterr()
    h100, a100 = json.loads(out.out)["gpus"]
    assert (h100["decode"]["weight_gemms_compute_bound_from_batch"], h100["memory"]["max_batch"]) == (326, 197)
    assert h100["decode"]["crossover_beyond_max_batch"] and not a100["decode"]["crossover_beyond_max_batch"]
    assert "turn compute-bound from batch 326, beyond the 197 sequences that fit" in out.err
