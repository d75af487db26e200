"""The measurement path with a pure-Python benchmark and a mocked timer: no GPU, no Numba."""

import pytest

from ceilings.harness import Budget, ceiling_record, measure_plan, sweep_points
from kernels.base import Axis, Benchmark, Plan, Prepared, Runtime, Work


class FakeTimer:
    """Returns scripted per-launch times and really calls launch, so the kernel's effect is observable."""

    def __init__(self, per_launch_s):
        self.per_launch_s = per_launch_s
        self.calls = []  # (samples, launches per sample), or samples alone where a sample is one launch
        self.launched = 0

    def run(self, launch, n, batch=1):
        self.calls.append(n if batch == 1 else (n, batch))
        for _ in range(n * batch):
            launch()
            self.launched += 1
        return [self.per_launch_s(i) for i in range(n)]


def copy_benchmark(corrupt=False, fail_prepare=False, n=1000, notes=()):
    state = {}

    def prepare(plan, runtime):
        if fail_prepare:
            raise RuntimeError("out of memory")
        src = list(range(plan.params["n"]))
        state["dst"] = None

        def launch():
            state["dst"] = list(src)
            if corrupt:
                state["dst"][7] = -1

        def poison():
            state["dst"] = [float("nan")] * plan.params["n"]

        def check():
            return None if state["dst"] == src else f"dst[7] = {state['dst'][7]}, expected 7"

        return Prepared(launch=launch, poison=poison, check=check)

    return Benchmark(
        name="dram.copy", backend="numba", kind="bandwidth", kernel="copy", description="test copy",
        plans=lambda limits, quick: [Plan(grid=4, block=256, work=Work(8 * n, 8 * n), params={"n": n},
                                          notes=notes)],
        prepare=prepare, source=lambda plan: None, level="dram")


BUDGET = Budget(warmup_s=0.01, measure_s=0.1, min_reps=5, max_reps=50)


def test_reps_follow_the_time_budget_and_rate_comes_from_declared_work():
    bench = copy_benchmark()
    plan = bench.plans(None, False)[0]
    timer = FakeTimer(lambda i: 2e-3)
    m = measure_plan(bench, plan, Runtime(simulate=True), timer, BUDGET)
    # two probe launches, then warm-up 0.01/0.002 = 5 launches, then 0.1/0.002 = 50 timed launches
    assert timer.calls == [2, 5, 50]
    assert m.problem is None and m.stats.n == 50
    record = ceiling_record(bench, m, simulated=False)
    assert record["value"] == pytest.approx(16000 / 2e-3)  # (8000 read + 8000 written) bytes / 2 ms
    assert record["valid"] and record["unit"] == "B/s"
    assert record["work"] == {"bytes_read": 8000, "bytes_written": 8000, "flops": {}}
    assert record["params"] == {"grid": 4, "block": 256, "n": 1000}
    assert record["stats"]["launches_per_sample"] == 1  # a 2 ms launch fills a sample (SAMPLE_S) alone


def test_short_launches_are_timed_many_to_a_sample():
    """0.1 ms launches: 2 ms / 0.1 ms = 20 back-to-back launches per sample, and 0.1 s / 2 ms = 50 samples."""
    bench = copy_benchmark()
    timer = FakeTimer(lambda i: 1e-4)
    m = measure_plan(bench, bench.plans(None, False)[0], Runtime(simulate=True), timer, BUDGET)
    # probes and warm-up (0.01 s / 0.1 ms = 100, capped at max_reps = 50) one launch at a time, then 50
    # samples of 20 launches
    assert timer.calls == [2, 50, (50, 20)] and timer.launched == 2 + 50 + 50 * 20
    record = ceiling_record(bench, m, simulated=False)
    assert record["stats"]["n"] == 50 and record["stats"]["launches_per_sample"] == 20
    assert record["value"] == pytest.approx(16000 / 1e-4)  # per launch, from the per-launch samples


def test_launches_per_sample_bounds():
    from ceilings.harness import MAX_LAUNCHES_PER_SAMPLE, launches_per_sample

    assert [launches_per_sample(t) for t in (5e-3, 2e-3, 1.9e-3, 1e-5, 0.0)] == [
        1, 1, 2, MAX_LAUNCHES_PER_SAMPLE, MAX_LAUNCHES_PER_SAMPLE]


def test_event_timer_puts_one_event_between_samples(monkeypatch):
    """n samples of `batch` launches: n + 1 events on the stream, none between the launches of a sample,
    and each sample's elapsed time divided by its launches."""
    import sys
    import types

    from ceilings.harness import EventTimer

    order = []

    class Event:
        def __init__(self):
            self.at = None

        def record(self, stream):
            self.at = len([o for o in order if o == "launch"])  # 1 ms per launch so far
            order.append("event")

        def synchronize(self):
            order.append("sync")

    class Stream:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Event=Event, get_elapsed_time=lambda start, end: float(end.at - start.at)))  # milliseconds
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    samples = EventTimer(Stream()).run(lambda: order.append("launch"), 3, batch=4)
    assert samples == [1e-3, 1e-3, 1e-3]
    assert order == ["event"] + (["launch"] * 4 + ["event"]) * 3 + ["sync"]


def test_plan_notes_reach_the_record():
    bench = copy_benchmark(notes=("arrays of 512 MiB (10.2x L2), not >= 8x L2",))
    m = measure_plan(bench, bench.plans(None, False)[0], Runtime(simulate=True), FakeTimer(lambda i: 1e-3), BUDGET)
    record = ceiling_record(bench, m, simulated=False)
    assert record["valid"] and record["notes"] == ["arrays of 512 MiB (10.2x L2), not >= 8x L2"]


def test_a_wrong_output_makes_the_ceiling_invalid_visibly():
    bench = copy_benchmark(corrupt=True)
    m = measure_plan(bench, bench.plans(None, False)[0], Runtime(simulate=True), FakeTimer(lambda i: 1e-3), BUDGET)
    record = ceiling_record(bench, m, simulated=False)
    assert not record["valid"]
    assert record["notes"][0] == "output check failed: dst[7] = -1, expected 7"
    assert record["value"] == pytest.approx(16000 / 1e-3)  # kept for the eye, flagged invalid


def test_prepare_failure_is_recorded_not_raised():
    bench = copy_benchmark(fail_prepare=True)
    m = measure_plan(bench, bench.plans(None, False)[0], Runtime(simulate=True), FakeTimer(lambda i: 1e-3), BUDGET)
    record = ceiling_record(bench, m, simulated=False)
    assert record["value"] is None and not record["valid"]
    assert "could not prepare: out of memory" in record["notes"][0]


def test_noisy_samples_are_flagged_with_a_remedy():
    bench = copy_benchmark()
    # alternate 1 ms and 2 ms: relative IQR far above the 5% threshold
    m = measure_plan(bench, bench.plans(None, False)[0], Runtime(simulate=True),
                     FakeTimer(lambda i: 1e-3 if i % 2 else 2e-3), BUDGET)
    record = ceiling_record(bench, m, simulated=False)
    assert record["stats"]["noisy"] and record["valid"]
    assert any(n.startswith("noisy: relative IQR") for n in record["notes"])


def test_simulated_records_say_so():
    bench = copy_benchmark()
    m = measure_plan(bench, bench.plans(None, False)[0], Runtime(simulate=True), FakeTimer(lambda i: 1e-3), BUDGET)
    assert "means nothing" in ceiling_record(bench, m, simulated=True)["notes"][-1]


def test_sweep_points_use_the_declared_x_and_drop_failed_points():
    ok = copy_benchmark()
    sweep = Benchmark(name="bandwidth.working_set", backend="numba", kind="bandwidth", kernel="copy",
                      description="", plans=ok.plans, prepare=ok.prepare, source=ok.source, level="dram",
                      sweep_x=Axis("working set", "B"), sweep_x_of=lambda plan: plan.params["n"] * 8)
    plan = sweep.plans(None, False)[0]
    good = measure_plan(sweep, plan, Runtime(simulate=True), FakeTimer(lambda i: 4e-3), BUDGET)
    bad = measure_plan(copy_benchmark(corrupt=True), plan, Runtime(simulate=True), FakeTimer(lambda i: 4e-3), BUDGET)
    assert sweep_points(sweep, [good, bad]) == [[8000.0, pytest.approx(16000 / 4e-3)]]


def test_sweeps_get_a_fraction_of_the_budget():
    from ceilings.harness import SWEEP_BUDGET_FRACTION, budget_for

    plain = copy_benchmark()
    sweep = Benchmark(name="s", backend="numba", kind="bandwidth", kernel="k", description="",
                      plans=plain.plans, prepare=plain.prepare, source=plain.source,
                      sweep_x=Axis("working set", "B"), sweep_x_of=lambda plan: 1.0)
    assert budget_for(plain, BUDGET) is BUDGET
    b = budget_for(sweep, BUDGET)
    assert b.measure_s == BUDGET.measure_s * SWEEP_BUDGET_FRACTION and b.min_reps == 3


class FakeProbe:
    """The clock kernel's place in the harness: counts its launches, reports a fixed clock."""

    def __init__(self):
        self.launches = 0

    def launch(self):
        self.launches += 1

    def summary(self):
        return {"sm_hz_kernel_median": 1.9e9, "sm_hz_kernel_readings": self.launches}


def test_the_clock_kernel_follows_each_chunk_of_timed_samples(monkeypatch):
    from ceilings import harness

    probe = FakeProbe()
    monkeypatch.setattr(harness, "_clock_probe", lambda runtime: (probe, {}))
    timer = FakeTimer(lambda i: 2e-3)
    m = measure_plan(copy_benchmark(), copy_benchmark().plans(None, False)[0], Runtime(simulate=False), timer,
                     BUDGET)
    # 2 probes, 5 warm-up (0.01 s / 2 ms), then 50 samples (0.1 s / 2 ms) in 4 chunks of 13, 13, 12, 12
    assert timer.calls == [2, 5, 13, 13, 12, 12]
    assert probe.launches == 4
    assert m.clocks["sm_hz_kernel_median"] == 1.9e9 and m.stats.n == 50


def test_a_clock_kernel_that_cannot_be_made_is_recorded_and_the_benchmark_still_measured(monkeypatch):
    import kernels.clock

    def broken(runtime):
        raise RuntimeError("nvrtc: no such arch")

    monkeypatch.setattr(kernels.clock, "ClockProbe", broken)
    m = measure_plan(copy_benchmark(), copy_benchmark().plans(None, False)[0],
                     Runtime(simulate=False, cupy_stream=object()), FakeTimer(lambda i: 2e-3), BUDGET)
    assert m.problem is None and m.stats.n == 50
    assert m.clocks["sm_hz_kernel_error"] == "clock kernel unavailable: nvrtc: no such arch"


def test_the_simulator_records_no_kernel_clock():
    m = measure_plan(copy_benchmark(), copy_benchmark().plans(None, False)[0], Runtime(simulate=True),
                     FakeTimer(lambda i: 2e-3), BUDGET)
    assert not any(k.startswith("sm_hz_kernel") for k in m.clocks)
