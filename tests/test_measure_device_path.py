"""The non-simulated `ceilings.measure` path end to end, with a fake CUDA runtime and pure-Python kernels:
device probe -> planning -> timing -> peaks from the datasheet -> sweeps with plateaus -> roofs file and
figures. On a GPU this path runs for real; here it proves the orchestration without one."""

import dataclasses
import json
import sys
import types

import pytest

from ceilings import harness, measure
from ceilings.roofs import load_roofs
from kernels.base import Axis, Benchmark, Plan, Prepared, Work
from tests.test_device import fake_cupy

L2 = 60 * 2**20


class ScriptedTimer:
    """Each launch 'takes' the time the benchmark's plan says (params['seconds'])."""

    def __init__(self, stream):
        self.stream = stream

    def run(self, launch, n, batch=1):
        return [sum(launch() for _ in range(batch)) / batch for _ in range(n)]


def bench(name, kind, work, seconds, *, level=None, precision=None, pipe="memory", peak_key="dram",
          sweep=None):
    def plans(limits, quick):
        assert limits.sm_count == 132 and limits.l2_bytes == L2  # planned from the probed device
        sizes = sweep or [None]
        return [Plan(grid=264, block=256, work=work(s), params={"seconds": seconds(s), "x": s}) for s in sizes]

    def prepare(plan, runtime):
        return Prepared(launch=lambda: plan.params["seconds"], poison=lambda: None, check=lambda: None)

    return Benchmark(name=name, backend="numba", kind=kind, kernel=name.replace(".", "_"), description=name,
                     plans=plans, prepare=prepare, source=lambda plan: None, level=level, precision=precision,
                     pipe=pipe, peak_key=peak_key,
                     sweep_x=Axis("working set", "B") if sweep else None,
                     sweep_x_of=(lambda plan: plan.params["x"]) if sweep else None)


def benchmarks():
    gib = 2**30
    # 2 GiB moved in 0.5 ms: 4.29 TB/s; 2^36 FLOP in 1.2 ms: 57.3 TFLOP/s
    copy = bench("dram.copy", "bandwidth", lambda s: Work(gib, gib), lambda s: 5e-4, level="dram")
    fma = bench("fp32.fma", "compute", lambda s: Work(flops={"fp32": 2**36}), lambda s: 1.2e-3,
                precision="fp32", pipe="cuda-core", peak_key="fp32")
    sizes = [2**k for k in range(12, 32)]  # 4 KiB .. 2 GiB; three levels of 64 MiB read per launch
    levels = lambda s: 2e13 if s <= 2**17 else 8e12 if s <= L2 // 2 else 4.3e12  # noqa: E731
    sweep = bench("bandwidth.working_set", "bandwidth", lambda s: Work(2**26), lambda s: 2**26 / levels(s),
                  level="dram", sweep=sizes)
    return [copy, fma, sweep]


@pytest.fixture
def fake_gpu(monkeypatch):
    cupy = fake_cupy(props={
        "name": b"NVIDIA H200", "major": 9, "minor": 0, "multiProcessorCount": 132,
        "totalGlobalMem": 150_000_000_000, "l2CacheSize": L2, "maxThreadsPerMultiProcessor": 2048,
        "sharedMemPerMultiprocessor": 233472, "pciDomainID": 0, "pciBusID": 0x1b, "pciDeviceID": 0,
        "uuid": bytes(16)})
    cupy.cuda.runtime.memGetInfo = lambda: (140 * 2**30, 141 * 2**30)
    cupy.cuda.Device = lambda index: types.SimpleNamespace(use=lambda: None)
    cupy.cuda.Stream = lambda non_blocking: types.SimpleNamespace(ptr=0)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML: clocks are not sampled
    monkeypatch.setattr(harness, "EventTimer", ScriptedTimer)
    monkeypatch.setattr("kernels.registry.select", lambda pattern, simulate: benchmarks())
    return cupy


def test_a_device_run_writes_annotated_roofs_sweeps_and_figures(fake_gpu, tmp_path, capsys):
    out = tmp_path / "h200.json"
    assert measure.main(["--out", str(out)]) == 0
    doc = load_roofs(out)
    assert doc["simulated"] is False and doc["complete"] is True
    assert doc["device"]["name"] == "NVIDIA H200" and doc["device"]["sm_count"] == 132
    assert "nvidia-ml-py is not installed" in doc["device"]["probe_errors"]["nvml"]

    copy, fma = doc["ceilings"]
    assert copy["value"] == pytest.approx(2 * 2**30 / 5e-4) and copy["valid"]
    # datasheet row matched by name: H200 SXM 4.8 TB/s; clock-derived DRAM 2 x 3.201 GHz x 6144 bit / 8
    assert copy["peaks"]["datasheet"] == pytest.approx(4.8e12)
    assert copy["peaks"]["clock_derived_max"] == pytest.approx(2 * 3.201e9 * 6144 / 8)
    assert copy["peaks"]["of_datasheet"] == pytest.approx(2 * 2**30 / 5e-4 / 4.8e12)
    # fp32 clock-derived peak at the max clock: 132 SMs x 128 lanes x 2 x 1.98 GHz
    assert fma["peaks"]["clock_derived_max"] == pytest.approx(132 * 128 * 2 * 1.98e9)
    assert fma["value"] == pytest.approx(2**36 / 1.2e-3)

    (sweep,) = doc["sweeps"]
    assert len(sweep["points"]) == 20 and sweep["x"]["unit"] == "B"
    values = sorted(round(p["value"] / 1e12, 1) for p in sweep["plateaus"])
    assert values == [4.3, 8.0, 20.0]
    # named after the roofs file; no compute sweep ran, so no compute figure
    assert (tmp_path / "h200-bandwidth-sweep.png").stat().st_size > 10_000
    assert not (tmp_path / "h200-compute-sweep.png").exists()

    table = capsys.readouterr().out
    assert "| dram.copy" in table and "DRAM roof: 4.29 TB/s from dram.copy" in table
    assert "SIMULATED" not in table


def test_out_dash_writes_json_to_stdout_and_the_table_to_stderr(fake_gpu, capsys):
    assert measure.main(["--out", "-", "--no-plots"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["device"]["name"] == "NVIDIA H200"
    assert "| fp32.fma" in captured.err


def test_default_name_comes_from_the_device_and_never_overwrites(fake_gpu, tmp_path, monkeypatch):
    import datetime as dt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(measure, "_now", lambda: dt.datetime(2026, 11, 29, 10, 5, tzinfo=dt.timezone.utc))
    assert measure.main(["--no-plots"]) == 0
    assert measure.main(["--no-plots"]) == 0
    names = sorted(p.name for p in tmp_path.glob("roofs-*.json"))
    assert names == ["roofs-nvidia-h200-20261129-1005-2.json", "roofs-nvidia-h200-20261129-1005.json"]


def test_every_device_of_device_all_keeps_its_own_roofs_and_figures(fake_gpu, tmp_path, monkeypatch):
    """Two identical GPUs in the same minute, and a figure left from an earlier run under the first default
    name: that name is skipped (its figure kept), device 0 and 1 get the next two."""
    import datetime as dt

    fake_gpu.cuda.runtime.getDeviceCount = lambda: 2
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(measure, "_now", lambda: dt.datetime(2026, 11, 29, 10, 5, tzinfo=dt.timezone.utc))
    stale = tmp_path / "roofs-nvidia-h200-20261129-1005-bandwidth-sweep.png"
    stale.write_text("an earlier run's figure")
    assert measure.main(["--device", "all"]) == 0
    assert stale.read_text() == "an earlier run's figure"
    for index, stem in enumerate(["roofs-nvidia-h200-20261129-1005-2", "roofs-nvidia-h200-20261129-1005-3"]):
        assert load_roofs(tmp_path / f"{stem}.json")["device"]["index"] == index
        assert (tmp_path / f"{stem}-bandwidth-sweep.png").stat().st_size > 10_000


def test_device_all_with_out_writes_one_roofs_file_and_figure_per_device(fake_gpu, tmp_path):
    fake_gpu.cuda.runtime.getDeviceCount = lambda: 2
    assert measure.main(["--device", "all", "--out", str(tmp_path / "h200.json")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "h200-d0-bandwidth-sweep.png", "h200-d0.json", "h200-d1-bandwidth-sweep.png", "h200-d1.json"]


def test_an_existing_figure_is_refused_before_measuring_unless_force(fake_gpu, tmp_path, monkeypatch, capsys):
    figure = tmp_path / "h200-bandwidth-sweep.png"
    figure.write_text("keep me")
    calls = []
    real = harness.measure_plan
    monkeypatch.setattr(harness, "measure_plan", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    assert measure.main(["--out", str(tmp_path / "h200.json")]) == 2
    assert f"{figure} exists; pass --force" in capsys.readouterr().err
    assert calls == [] and figure.read_text() == "keep me" and not (tmp_path / "h200.json").exists()
    assert measure.main(["--out", str(tmp_path / "h200.json"), "--force"]) == 0
    assert figure.stat().st_size > 10_000


def test_ctrl_c_in_a_sweep_keeps_its_measured_points_marked_partial(fake_gpu, tmp_path, monkeypatch):
    real = harness.measure_plan
    calls = []

    def interrupt_in_the_sweep(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2 + 5 + 1:  # dram.copy and fp32.fma (one plan each), 5 sweep points, then Ctrl-C
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(harness, "measure_plan", interrupt_in_the_sweep)
    out = tmp_path / "h200.json"
    assert measure.main(["--out", str(out)]) == 130
    doc = load_roofs(out)
    assert doc["complete"] is False and [c["name"] for c in doc["ceilings"]] == ["dram.copy", "fp32.fma"]
    (sweep,) = doc["sweeps"]
    assert [x for x, _ in sweep["points"]] == [2**k for k in range(12, 17)]  # the first 5 of the 20 sizes
    assert sweep["notes"] == ["partial: interrupted after 5 of 20 points"]


def test_a_benchmark_without_plans_is_skipped_with_its_reason(fake_gpu, tmp_path, monkeypatch, capsys):
    unplanned = dataclasses.replace(benchmarks()[1], name="tensor.fp8", plans=lambda limits, quick: [],
                                    notes=("emulated with fp16 HMMA on this architecture",))
    monkeypatch.setattr("kernels.registry.select", lambda pattern, simulate: [unplanned])
    assert measure.main(["--out", str(tmp_path / "x.json")]) == 0
    assert "skipped tensor.fp8 (numba) on sm_90: emulated with fp16 HMMA on this architecture" in \
        capsys.readouterr().err


def test_a_run_with_an_invalid_ceiling_exits_3_and_keeps_its_file(fake_gpu, monkeypatch, tmp_path):
    """A check that fails makes that ceiling invalid: the run still went through (exit 3, not 1: a crash)."""
    def failing(plan, runtime):  # a check returns what is wrong
        return Prepared(launch=lambda: plan.params["seconds"], poison=lambda: None,
                        check=lambda: "element 7: 2.0 instead of 3.0")

    broken = dataclasses.replace(benchmarks()[1], prepare=failing)
    monkeypatch.setattr("kernels.registry.select", lambda pattern, simulate: [benchmarks()[0], broken])
    out = tmp_path / "h200.json"
    assert measure.main(["--out", str(out), "--no-plots"]) == measure.EXIT_SOME_INVALID == 3
    doc = load_roofs(out)
    fma = next(c for c in doc["ceilings"] if c["name"] == "fp32.fma")
    assert fma["valid"] is False and any("element 7" in n for n in fma["notes"])
