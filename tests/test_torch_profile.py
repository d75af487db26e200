"""analysis.torch_profile and `python -m analysis.profile --torch`: the traces of a profiled CPU training run,
read back, against PyTorch's own FLOP counts; the schedule over optimizer steps; running unmodified scripts
and modules; the output folder; the reading side on a real A100 trace. Tests that run torch skip without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
from pathlib import Path

import pytest

from analysis import profile
from analysis.torch_profile import roofline_profile
from common.errors import CeilingsError

TRACES = Path(__file__).resolve().parents[2] / "shared" / "torch-traces"
A100_TRACE = TRACES / "a100_80gb_shapes_rank0.json.gz"
# tensorboard_trace_handler's name: <host>_<pid>.<time in ns>.pt.trace.json; the runs here are in-process
TRACE_NAME = re.compile(rf"{re.escape(socket.gethostname())}_{os.getpid()}\.\d+\.pt\.trace\.json")
TRAIN = """\
import sys, torch
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(int(sys.argv[1])):
    model(torch.randn(4, 8)).square().mean().backward()
    opt.step()
    opt.zero_grad()
"""


def windows(folder: Path) -> list[tuple[list[int], int]]:
    """Per trace, in name (= time) order: the ProfilerStep numbers it holds and how many optimizer steps."""
    out = []
    for path in sorted(folder.iterdir()):
        assert TRACE_NAME.fullmatch(path.name), path.name
        names = [str(e.get("name")) for e in json.loads(path.read_text())["traceEvents"]]
        out.append((sorted(int(n.split("#")[1]) for n in names if n.startswith("ProfilerStep#")),
                    sum(n.startswith("Optimizer.step#SGD.step") for n in names)))
    return out


def run(args, capsys):
    rc = profile.main(args)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def train(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    return script


def test_flops_match_key_averages(tmp_path):
    """A training step on the CPU through roofline_profile: for every (op, input shapes) that PyTorch's
    key_averages(with_flops=True) gives FLOPs, the FLOPs operator_work rebuilds from the exported trace agree;
    the only op PyTorch counts otherwise is aten::add, one FLOP per element of the first input, which
    analysis.ops.elementwise counts per element of the broadcast output (analysis.ops.matrix says why)."""
    torch = pytest.importorskip("torch")
    from analysis.torch_profile import operator_work

    conv, linear = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Linear(4 * 6 * 6, 10)
    w, a = torch.randn(10, 5, requires_grad=True), torch.randn(3, 4, 5, requires_grad=True)
    x, b = torch.randn(2, 3, 6, 6), torch.randn(3, 5, 2)
    opt = torch.optim.SGD([*conv.parameters(), *linear.parameters(), w, a], lr=0.01)
    with roofline_profile(tmp_path / "run", wait=0, warmup=1, active=1) as prof:
        for _ in range(2):  # step 0 warms up, step 1 is recorded and exported
            y = linear(torch.relu(conv(x)).flatten(1))
            (torch.mm(y, w).sum() + torch.bmm(a, b).sum()).backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    [trace] = prof.traces()
    work = operator_work(trace)
    compared, declined = set(), set()
    for avg in prof.profiler.key_averages(group_by_input_shape=True):
        if not avg.flops:
            continue
        same = work[(work["name"] == avg.key) & (work["input_dims"] == str(avg.input_shapes))]
        if avg.key == "aten::add":
            declined.add(avg.key)
            assert not same.empty  # counted, by its own rule
            continue
        assert same["flops"].sum() == avg.flops, (avg.key, avg.input_shapes)
        compared.add(avg.key)
    # forward conv2d, linear's addmm, mm, bmm, and the backward's mm and bmm
    assert compared == {"aten::conv2d", "aten::addmm", "aten::mm", "aten::bmm"} and declined == {"aten::add"}
    # by hand: 2 x batch 2 x weight 4*3*3*3 x output 6*6
    assert work.loc[work["name"] == "aten::conv2d", "flops"].tolist() == [2 * 2 * 108 * 36]


@pytest.mark.parametrize("schedule, expected", [
    # cycle of 4 steps: 0 waits, 1 warms up, 2 and 3 recorded; one cycle, so steps 4-6 are not
    (["--wait", "1", "--warmup", "1", "--active", "2"], [([2, 3], 2)]),
    # cycles of 2, repeated: step 0 (set-up and the first iteration) warms up, 1 is recorded, 2 warms up...;
    # step 6, after the sixth optimizer step, warms up when the script ends: no trace
    (["--wait", "0", "--warmup", "1", "--active", "1", "--repeat", "0"], [([1], 1), ([3], 1), ([5], 1)]),
])
def test_schedule_over_optimizer_steps(schedule, expected, tmp_path, train, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    rc, _, err = run(["--torch", "--out", str(out), *schedule, "--", str(train), "6"], capsys)
    assert rc == 0
    assert windows(out) == expected
    assert f"6 optimizer step(s); {len(expected)} trace(s) in {out}" in err


def test_a_run_without_optimizer_steps_is_one_window(tmp_path, capsys):
    pytest.importorskip("torch")
    script = tmp_path / "infer.py"
    script.write_text("import torch\nm = torch.nn.Linear(8, 2)\nfor _ in range(3):\n    m(torch.randn(4, 8))\n")
    rc, _, err = run(["--torch", "--out", str(tmp_path / "run"), "--", str(script)], capsys)
    assert rc == 0 and windows(tmp_path / "run") == [([0], 0)]
    assert "no optimizer step" in err and "whole run is one window" in err


def test_module_form_sets_argv_and_restores_it(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    (tmp_path / "tinytrain.py").write_text(TRAIN + "open('seen.json', 'w').write(__import__('json').dumps("
                                                   "[__name__, sys.argv[1:]]))\n")
    monkeypatch.chdir(tmp_path)  # `python -m` finds modules in the current folder
    argv, path = sys.argv[:], sys.path[:]
    rc, _, _ = run(["--torch", "--out", "run", "--active", "2", "--", "-m", "tinytrain", "6", "--flag"], capsys)
    assert rc == 0 and sys.argv == argv and sys.path == path
    assert json.loads((tmp_path / "seen.json").read_text()) == ["__main__", ["6", "--flag"]]
    assert windows(tmp_path / "run") == [([2, 3], 2)]


def test_script_exit_status_and_exceptions(tmp_path, capsys):
    pytest.importorskip("torch")
    exits = tmp_path / "exits.py"
    exits.write_text("import sys, torch\ntorch.ones(2) * 2\nsys.exit(3)\n")
    rc, _, err = run(["--torch", "--out", str(tmp_path / "a"), "--", str(exits)], capsys)
    assert rc == 3 and windows(tmp_path / "a") == [([0], 0)] and "1 trace(s)" in err
    raises = tmp_path / "raises.py"
    raises.write_text("raise KeyError('the user code failed')\n")
    with pytest.raises(KeyError, match="the user code failed"):  # as python would show it, not as our error
        profile.main(["--torch", "--out", str(tmp_path / "b"), "--", str(raises)])
    assert len(windows(tmp_path / "b")) == 1  # what ran was still written


def test_non_empty_out_needs_force(tmp_path, train, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "old.pt.trace.json").write_text("{}")
    marker = tmp_path / "ran"
    train.write_text(TRAIN + f"open({str(marker)!r}, 'w')\n")
    rc, _, err = run(["--torch", "--out", str(out), "--", str(train), "6"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "is not empty" in err and "--force" in err
    assert not marker.exists()  # refused before the script ran
    rc, _, _ = run(["--torch", "--out", str(out), "--force", "--active", "2", "--", str(train), "6"], capsys)
    assert rc == 0 and marker.exists()
    assert sorted(p.name for p in out.iterdir() if not TRACE_NAME.fullmatch(p.name)) == ["notes.txt"]


def test_without_torch_one_line_how_to_install(tmp_path, train, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    rc, out, err = run(["--torch", "--out", str(tmp_path / "run"), "--", str(train), "6"], capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("python -m analysis.profile: error: PyTorch is not installed")
    assert "https://pytorch.org/get-started/locally/" in err and "whl/cpu" in err and "CUDA build" in err


@pytest.mark.parametrize("args, message", [
    (["--wait", "2", "--", "./app"], "--wait: a torch.profiler option; add --torch"),
    (["--torch", "-k", "gemm", "--", "train.py"], "-k: an ncu option"),
    (["--torch"], "no script to profile: put it after --"),
    (["--torch", "--", "-m"], "-m without a module name"),
    (["--torch", "--", "missing.py"], "missing.py: no such script"),
    (["--torch", "--", "-m", "no_such_module_here"], "-m no_such_module_here: no such module"),
    (["--torch", "--active", "0", "--", "train.py"], "active 0: must be a whole number of steps, 1 or more"),
])
def test_argument_errors_before_anything_runs(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "torch", None)  # every one is found before torch is needed
    rc, _, err = run(args, capsys)
    assert rc == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "profile").exists()


@pytest.mark.skipif(not A100_TRACE.is_file(), reason="../shared/torch-traces is absent")
def test_reading_side_on_a_real_trace(tmp_path):
    """kernels() and roofline() on a folder holding the A100 trace: aten::mm's FLOPs by hand from its Input
    Dims (5 calls each of [4096, 64] x [64, 2798], [64, 4096] x [4096, 2798], [64, 4096] x [4096, 100])."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    folder = tmp_path / "run"
    folder.mkdir()
    prof = roofline_profile(folder)
    with pytest.raises(CeilingsError, match="no trace written: 0 step"):
        prof.kernels()
    shutil.copy(A100_TRACE, folder / "rank0.pt.trace.json.gz")
    mm = 5 * (2 * 4096 * 64 * 2798 + 2 * 64 * 4096 * 2798 + 2 * 64 * 4096 * 100)
    ops = prof.kernels(by="op").set_index("kernel")
    assert ops.loc["aten::mm", "flops"] == mm
    picture = tmp_path / "ops.png"
    fig, table = prof.roofline("A100 SXM4 80GB", picture, by="op")
    assert picture.stat().st_size > 0 and table.set_index("kernel").loc["aten::mm", "flops"] == mm
    assert any("ALGORITHMIC" in w for w in table.attrs["warnings"])
    assert any("launching operator is not in the trace" in w for w in table.attrs["warnings"])
    with pytest.raises(CeilingsError, match="exists; pass --force"):
        prof.roofline("A100 SXM4 80GB", picture)
    ax = Figure().add_subplot()
    assert prof.roofline("A100 SXM4 80GB", ax)[0] is ax.figure
