"""The ceilings beyond FLOPs and bytes (docs/latency.md): launch and memory-latency floors, the SFU, their proofs
from SASS and their place in the roofs file. The kernels themselves run on a GPU only (tests/gpu.py)."""

import copy
import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest

from ceilings.roofs import record, validate
from common.errors import CeilingsError
from kernels import latency, sass, sass_chase, sfu
from kernels.base import REFERENCE_LIMITS, Work
from kernels.registry import select

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "tests" / "data" / "roofs" / "h100.json"


def _sass(text: str) -> list[sass.Instruction]:
    return sass.parse_cuobjdump("Function : k\n" + text)["k"]


# The pointer chase's loop as ptxas 13.0 compiles kernels/cuda/latency.cu for sm_90 (cuobjdump -sass).
CHASE_LOOP = """
        /*0090*/                   UIADD3 UR4, UR4, 0x1, URZ ;
        /*00a0*/                   IMAD.WIDE.U32 R4, R5, 0x4, R6 ;
        /*00b0*/                   ISETP.LE.AND P0, PT, R0, UR4, PT ;
        /*00c0*/                   LDG.E R5, desc[UR6][R4.64] ;
"""
# The same loop unrolled by two with the second load's address from the loop counter: independent loads.
INDEPENDENT_LOOP = """
        /*0090*/                   IMAD.WIDE.U32 R4, R5, 0x4, R6 ;
        /*00a0*/                   LDG.E R5, desc[UR6][R4.64] ;
        /*00b0*/                   IMAD.WIDE.U32 R8, R0, 0x4, R6 ;
        /*00c0*/                   LDG.E R9, desc[UR6][R8.64] ;
"""
# One load whose address register is overwritten from the counter before use: not dependent on the load.
OVERWRITTEN_LOOP = """
        /*0090*/                   IMAD.WIDE.U32 R4, R5, 0x4, R6 ;
        /*00a0*/                   IMAD.WIDE.U32 R4, R0, 0x4, R6 ;
        /*00b0*/                   LDG.E R5, desc[UR6][R4.64] ;
"""


def test_the_compiled_chase_is_one_dependent_load_per_trip():
    assert sass_chase.chase_problem(_sass(CHASE_LOOP)) is None


@pytest.mark.parametrize("loop, words", [(INDEPENDENT_LOOP, "this loop 2"), (OVERWRITTEN_LOOP, "independent")])
def test_independent_loads_are_no_chase(loop, words):
    problem = sass_chase.chase_problem(_sass(loop))
    assert problem is not None and words in problem


def test_mufu_functions_are_special_work_and_fp64_seeds_are_not():
    ex2, rcp64 = _sass("/*0000*/ MUFU.EX2 R11, R11 ;\n/*0010*/ MUFU.RCP64H R3, R5 ;")
    assert sass.classify(ex2).special == "ex2" and sass.classify(ex2).is_work
    assert sass.classify(rcp64).special is None and not sass.classify(rcp64).is_work
    tally = sass.Tally.of(_sass("/*0000*/ MUFU.SIN R0, R8 ;\n/*0010*/ MUFU.SIN R6, R10 ;\n"
                                "/*0020*/ LDG.E R5, desc[UR6][R4.64] ;"))
    assert tally.special == {"sin": 2}


@pytest.mark.parametrize("name, f", [("ex2", lambda x: 2.0**-x), ("rsqrt", lambda x: 1 / math.sqrt(x)),
                                     ("sin", lambda x: 2 * math.sin(x))])
def test_sfu_fixed_points_are_fixed_and_the_start_values_are_far_from_them(name, f):
    fn = sfu.FUNCTIONS[name]
    assert abs(f(fn.fixed_point) - fn.fixed_point) < 1e-12
    starts = sfu.start_values(64)
    assert sfu.converged(fn, starts) is not None  # a launch that did not run fails the check
    assert sfu.converged(fn, np.full((sfu.CHAINS, 64), fn.fixed_point * (1 + 5e-5), np.float32)) is None
    one_step = np.vectorize(f)(starts.astype(np.float64)).astype(np.float32)
    assert sfu.converged(fn, one_step) is not None  # nor does one that ran a single step
    nan = np.full((sfu.CHAINS, 64), fn.fixed_point, np.float32)
    nan[2, 5] = np.nan
    assert "1 of 256" in sfu.converged(fn, nan)


def test_sfu_plan_declares_one_mufu_result_per_step():
    limits = REFERENCE_LIMITS["sm_90"]
    p = sfu.plan(sfu.FUNCTIONS["sin"], limits, quick=False)
    threads = 132 * 8 * 256  # 8 blocks of 256 per SM on 132 SMs
    steps = threads * 4 * 8 * p.params["trips"]  # chains x unroll x trips per thread
    assert p.threads == threads
    assert p.work.special == {"sin": steps} and p.work.flops == {"fp32": 2 * steps}
    assert p.work.bytes_read == p.work.bytes_written == threads * 4 * 4  # 4 floats per thread, in and out
    # ~2 ms at 1.7 GHz with 16 results per clock per SM: 132 x 16 x 1.7e9 x 2e-3 results
    assert steps == pytest.approx(132 * 16 * 1.7e9 * 2e-3, rel=0.01)


def test_a_launch_count_that_differs_is_named():
    assert latency.count_mismatch("launch.stream", 5, 5) is None
    assert latency.count_mismatch("launch.graph", 64, 128) == \
        "launch.graph: the device counted 64 launches, the host made 128"


def test_a_gap_launch_queued_slower_than_its_spin_fails():
    shortest = latency.SPIN_CYCLES / 5e9  # 2^22 cycles at the fastest plausible 5 GHz: 839 us
    assert latency.queue_problem([1e-4, 2e-4]) is None
    problem = latency.queue_problem([1e-4, shortest * 1.5])
    assert problem.startswith("launch.gap: the host took up to 1258 us to queue 32 kernels in 1 of 2 launches")


def test_a_launch_that_times_itself_gives_the_samples():
    """measure_plan takes a launch's own times (launch.gap's events around its kernels), not the timer's."""
    from dataclasses import replace

    from ceilings.harness import SIMULATED_BUDGET, WallTimer, measure_plan
    from kernels.base import Prepared, Runtime

    own = [[9.0], [1e-4, 2e-4, 6e-4]]  # the probes' (drained, not timed), then the timed launches'
    prepared = Prepared(launch=lambda: None, poison=lambda: None, check=lambda: None,
                        own_times=lambda: own.pop(0))
    bench = replace(next(iter(select("launch.gap"))), prepare=lambda plan, runtime: prepared)
    (plan,) = bench.plans(REFERENCE_LIMITS["sm_90"], False)
    m = measure_plan(bench, plan, Runtime(simulate=True), WallTimer(), SIMULATED_BUDGET)
    assert m.problem is None and m.stats.samples_s == (1e-4, 2e-4, 6e-4) and m.launches_per_sample == 1
    assert bench.rate(plan.work, m.stats.median_s) == pytest.approx(2e-4 / 32)  # per kernel of the 32


def test_the_chase_walks_one_cycle_through_every_line():
    order = latency.cycle_order(1000)
    chain = latency.chain_of(order)
    j, seen = int(order[0]) * latency.STRIDE, set()
    for _ in range(1000):
        seen.add(j)
        j = int(chain[j])
    assert j == int(order[0]) * latency.STRIDE  # back at the start after exactly one lap
    assert len(seen) == 1000 and all(k % latency.STRIDE == 0 for k in seen)
    for steps in (1, 7, 999, 2500):  # the host's shortcut is the walk
        j = int(order[0]) * latency.STRIDE
        for _ in range(steps):
            j = int(chain[j])
        assert latency.chase_position(order, steps) == j


def test_chase_plans_fit_their_levels():
    limits = REFERENCE_LIMITS["sm_90"]  # 50 MiB L2, 130 GiB free
    sizes = {level: latency.chase_plan(level, limits, False).params["working_set_bytes"]
             for level in ("l1", "l2", "dram")}
    assert sizes == {"l1": 16384, "l2": 50 * 2**20 // 8, "dram": 400 * 2**20}
    p = latency.chase_plan("dram", limits, False)
    assert p.work.steps == p.loop_trips == 8192 and p.threads == 1
    assert p.work.bytes_read == 8192 * 4 + 8 and p.work.bytes_written == 8


def test_latency_is_seconds_per_step_and_the_graph_floor_is_per_kernel():
    graph = next(b for b in select("launch.graph"))
    p = graph.plans(REFERENCE_LIMITS["sm_90"], False)[0]
    assert p.kernels == 64 and p.work.steps == 64
    assert graph.rate(p.work, 1.6e-4) == pytest.approx(2.5e-6)  # 160 us for 64 kernels
    assert graph.unit == "s"
    ex2 = next(b for b in select("sfu.ex2"))
    assert ex2.unit == "op/s" and ex2.rate(Work(special={"ex2": 10}), 2.0) == 5.0
    assert Work(special={"ex2": 3}, steps=2).as_dict() == {"bytes_read": 0, "bytes_written": 0, "flops": {},
                                                           "special": {"ex2": 3}, "steps": 2}
    assert "special" not in Work().as_dict() and "steps" not in Work().as_dict()  # 1.3 files unchanged


def test_the_new_benchmarks_are_in_the_registry_and_need_a_gpu():
    names = {b.name for b in select("latency,special")}
    assert names == {"launch.stream", "launch.sync", "launch.graph", "launch.gap", "latency.l1", "latency.l2",
                     "latency.dram",
                     "sfu.ex2", "sfu.rsqrt", "sfu.sin"}
    assert not {b.name for b in select("latency,special", simulate=True)}  # CUDA C: no simulator run


# --- the roofs file, schema 1.4 --------------------------------------------------------------------------------

def floor(name, value, level=None, pipe="launch"):
    return {"name": name, "kind": "latency", "level": level, "precision": None, "pipe": pipe, "peak_key": name,
            "value": value, "unit": "s", "backend": "cuda-c", "kernel": "launch_count",
            "work": {"bytes_read": 4, "bytes_written": 4, "flops": {}, "steps": 1}, "params": {}, "stats": {},
            "clocks": {}, "peaks": {}, "valid": True, "notes": []}


def newer_file() -> dict:
    """The 1.0 H100 file of tests/data as a 1.4 one: a launch object, latency and SFU ceilings."""
    doc = json.loads(H100.read_text())
    assert "schema_minor" not in doc  # it is a 1.0 file: the old one still loads (below, and everywhere)
    doc = copy.deepcopy(doc)
    doc["schema_minor"] = 4
    doc["launch"] = {k: None for k in ("launcher", "job_id", "node", "rank", "local_rank", "world_size",
                                       "local_size", "cuda_visible_devices", "gpu_index", "mode", "gpus_at_once")}
    doc["ceilings"] += [floor("launch.stream", 4.0e-6), floor("launch.stream", 3.0e-6),
                        floor("latency.dram", 6.5e-7, level="dram", pipe="memory"),
                        {**floor("sfu.ex2", 3.5e12, pipe="sfu"), "kind": "special", "unit": "op/s",
                         "precision": "fp32", "peak_key": "sfu"}]
    return doc


def test_a_1_4_file_validates_and_its_best_latency_is_the_lowest():
    r = record(newer_file())
    assert r.schema_minor == 4
    assert r.best_by_name()["launch.stream"].value == 3.0e-6
    assert r.best(kind="latency", pipe="launch").value == 3.0e-6
    assert r.best(kind="special").value == 3.5e12
    old = record(json.loads(H100.read_text()))
    assert old.best(kind="latency") is None  # an old file has no floor: None, not 0


@pytest.mark.parametrize("mutate, words", [
    (lambda c: c.update(unit="us"), "a latency ceiling is in s"),
    (lambda c: c.update(level="l3"), "(a memory latency) or null"),
    (lambda c: c.update(pipe="pcie"), "pipe"),
])
def test_a_bad_latency_ceiling_is_named(mutate, words):
    doc = newer_file()
    mutate(doc["ceilings"][-4])
    with pytest.raises(CeilingsError, match=r"launch\.stream"):
        validate(doc)
    with pytest.raises(CeilingsError) as err:
        validate(doc)
    assert words in str(err.value)


# --- compare and fleet show the floors ---------------------------------------------------------------------------

def test_compare_shows_the_floors_beside_an_old_file(tmp_path, capsys):
    from ceilings import compare
    from ceilings.roofs import save_roofs

    new = save_roofs(newer_file(), tmp_path / "new.json")
    assert compare.main([str(new), str(H100), "-o", str(tmp_path / "c.png"), "--csv", str(tmp_path / "c.csv"),
                         "--html", str(tmp_path / "c.html")]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[3:]}
    assert lines["launch.stream"][1:4] == ["us", "3", "-"]  # the best (lowest) of 4 and 3 us; the old file has none
    assert lines["latency.dram"][1:3] == ["us", "0.65"]
    assert lines["sfu.ex2"][1:3] == ["Gop/s", "3500"]
    page = (tmp_path / "c.html").read_text()  # the HTML has the PNG's panels, in the table's units
    assert "Latency floors (lower is better)" in page and "Special functions (MUFU)" in page
    assert "3 us" in page and "3500 Gop/s" in page


def test_compare_shows_a_slower_latency_as_worse():
    """A GPU whose launch takes 6 us against the first's 3 us performs at 3 / 6 = 0.5, as one with half the
    first's bandwidth (1500 / 3000 GB/s) does; the other way round, 6 / 3 = 2. Not 6 / 3 = 2 for the slow one."""
    from ceilings.compare import VERSUS_FIRST, compare_page, compare_table, format_table

    slow = newer_file()
    slow["ceilings"] = [c for c in slow["ceilings"] if c["name"] not in ("launch.stream", "dram.read")] + \
        [floor("launch.stream", 6.0e-6), {**slow["ceilings"][0], "value": 1.5e12}]
    fast_first = compare_table({"fast": record(newer_file()), "slow": record(slow)})
    assert fast_first.loc["launch.stream", "slow" + VERSUS_FIRST] == pytest.approx(0.5)
    assert fast_first.loc["dram.read", "slow" + VERSUS_FIRST] == pytest.approx(0.5)
    assert fast_first.loc["latency.dram", "slow" + VERSUS_FIRST] == pytest.approx(1.0)  # 0.65 us in both
    slow_first = compare_table({"slow": record(slow), "fast": record(newer_file())})
    assert slow_first.loc["launch.stream", "fast" + VERSUS_FIRST] == pytest.approx(2.0)
    launch_line = next(line for line in format_table(fast_first).splitlines() if line.startswith("launch.stream"))
    assert launch_line.split()[1:] == ["us", "3", "6", "0.50x"]
    page = compare_page(fast_first)
    assert '"launch.stream: slow",[["value","6 us"],["vs the first","0.50x"]]' in page


def test_fleet_judges_a_slow_launch_as_a_shortfall(tmp_path):
    from ceilings.fleet import BELOW, analyze, load_gpus
    from ceilings.roofs import save_roofs

    paths = []
    for i, launch_s in enumerate((3.0e-6, 3.1e-6, 6.0e-6)):  # median 3.1 us: the third performs at 3.1 / 6
        doc = newer_file()
        doc["device"]["uuid"] = f"GPU-{i}"
        doc["meta"]["host"] = f"node{i}"
        doc["ceilings"] = [c for c in doc["ceilings"] if c["name"] != "launch.stream"] + \
            [floor("launch.stream", launch_s)]
        paths.append(save_roofs(doc, tmp_path / f"r{i}.json"))
    fleet = analyze(load_gpus(paths), min_ratio=0.9)
    below = [(Path(o.gpu.path).name, o.ceiling, round(o.ratio, 4)) for o in fleet.outliers if o.reason == BELOW]
    assert below == [("r2.json", "launch.stream", round(3.1 / 6.0, 4))]


# --- analysis.roofline: the latency-bound kernels ----------------------------------------------------------------

ROOFLINE_DATA = ROOT / "tests" / "data" / "roofline"
SHAPES_TRACE = ROOT.parent / "shared" / "torch-traces" / "a100_80gb_shapes_rank0.json.gz"  # ../shared


def tiny_kernels():
    """Four fixture kernels (tests/data/roofline/kernels.csv's columns): against dram 1e12 B/s and fp32 1e13,
    with a 2 us floor (x 1.5 = 3 us a launch):
    tiny    10 launches, 25 us: 2.5 us a launch, 4 KB and 0 FLOPs (at the roofs 4 ns) -> latency, floor 20 us,
            saving 5 us, 80 %;
    edge    1 launch, 3 us: exactly 1.5x -> latency;
    busy    1 launch, 2.9 us but 2.8e6 B (2.8 us at the roofs, above the 2 us floor) -> the roofs judge it;
    long    1 launch, 10 us, 4 KB (4 ns at the roofs): 5x the floor, yet no launch beats the floor -> latency,
            at the roof 2 us, saving 8 us (not 10 us - 4 ns)."""
    import pandas as pd

    base = pd.read_csv(ROOFLINE_DATA / "kernels.csv").iloc[:1]
    rows = []
    for name, launches, time_s, nbytes in (("tiny", 10, 25e-6, 4e3), ("edge", 1, 3e-6, 4e3),
                                           ("busy", 1, 2.9e-6, 2.8e6), ("long", 1, 10e-6, 4e3)):
        rows.append(base.assign(kernel=name, launches=launches, time_s=time_s, flops_fp32=0.0, flops=0.0,
                                dram_bytes=nbytes, l2_bytes=nbytes, l1_bytes=nbytes))
    return pd.concat(rows, ignore_index=True)


def roofs_with_floor(floor_s: float | None):
    from analysis import roofline

    doc = json.loads((ROOFLINE_DATA / "roofs.json").read_text())
    if floor_s is not None:
        doc["schema_minor"] = 4
        doc.setdefault("launch", newer_file()["launch"])
        doc["ceilings"].append(floor("launch.stream", floor_s))
    return roofline.Roofs.from_doc(doc, "roofs.json")


def test_kernels_near_the_measured_floor_are_latency_bound_and_saved_against_it():
    from analysis.roofline import roofline_table

    table = roofline_table(roofs_with_floor(2e-6), tiny_kernels()).set_index("kernel")
    assert list(table["bound"][["tiny", "edge", "busy", "long"]]) == ["latency", "latency", "memory", "latency"]
    assert table.at["long", "time_at_roof_s"] == pytest.approx(2e-6)
    assert table.at["long", "time_saved_s"] == pytest.approx(8e-6)
    assert table.at["tiny", "time_at_roof_s"] == pytest.approx(20e-6)
    assert table.at["tiny", "time_saved_s"] == pytest.approx(5e-6)
    assert table.at["tiny", "pct_of_roof"] == pytest.approx(80.0)
    assert table.at["busy", "time_at_roof_s"] == pytest.approx(2.8e-6)  # 2.8e6 B / 1e12 B/s: the roofs
    warning = next(w for w in table.attrs["warnings"] if "latency-bound" in w)
    assert "3 kernel(s)" in warning and "launch.stream measured" in warning
    from analysis.roofline.report import render_report

    report = render_report(roofs_with_floor(2e-6), roofline_table(roofs_with_floor(2e-6), tiny_kernels()))
    assert "- launch floor: 2 µs a kernel (launch.stream measured" in report
    assert report.count("| latency |") == 3


def test_a_kernel_quicker_than_the_floor_is_latency_bound_not_above_a_roof():
    """The floor is the launch rate: a kernel's own time can be under it (10 launches in 10 us against 2 us a
    launch). It is latency-bound with nothing to save, and no roof is said to be exceeded."""
    from analysis.roofline import roofline_table

    kernels = tiny_kernels()
    kernels.loc[kernels["kernel"] == "tiny", "time_s"] = 10e-6
    table = roofline_table(roofs_with_floor(2e-6), kernels).set_index("kernel")
    assert table.at["tiny", "bound"] == "latency" and table.at["tiny", "time_saved_s"] == 0.0
    assert not any("above their roof" in w for w in table.attrs["warnings"])


def test_without_a_floor_in_the_roofs_the_default_is_used_and_named():
    from analysis.roofline import DEFAULT_LAUNCH_FLOOR_S, roofline_table

    roofs = roofs_with_floor(None)
    assert roofs.floor[0] == DEFAULT_LAUNCH_FLOOR_S == 3e-6
    table = roofline_table(roofs, tiny_kernels()).set_index("kernel")
    # tiny runs 2.5 us a launch on the device, under the 3 us host-side floor: the floor is then 2.5 us (x 1.5 =
    # 3.75 us a launch): tiny and edge (3 us) are latency-bound; busy's 2.8 us at the roofs is above 2.5 us, so
    # the roofs judge it; long (10 us, 4 ns at the roofs) is held to the 2.5 us floor
    assert list(table["bound"][["tiny", "edge", "busy", "long"]]) == ["latency", "latency", "memory", "latency"]
    assert table.at["long", "time_saved_s"] == pytest.approx(7.5e-6)
    assert table.at["tiny", "time_saved_s"] == 0.0 and table.at["tiny", "pct_of_roof"] == pytest.approx(100.0)
    assert table.at["edge", "pct_of_roof"] == pytest.approx(100 * 2.5 / 3)
    assert (table["pct_of_roof"] <= 100.0 + 1e-9).all()
    floor = next(w for w in table.attrs["warnings"] if "latency-bound" in w)
    assert "the profile's shortest kernel, tiny at 2.5 µs a launch" in floor and "default 3 us" in floor


def test_no_kernel_is_judged_above_100_percent_of_the_floor():
    """A kernel of 1.5 us on the device against the 3 us default floor (the host's launch rate) was said to run
    at 200 % of it: the device time is below the floor, so the floor is the profile's shortest launch."""
    from analysis.roofline import roofline_table

    kernels = tiny_kernels()
    kernels.loc[kernels["kernel"] == "edge", "time_s"] = 1.5e-6
    table = roofline_table(roofs_with_floor(None), kernels).set_index("kernel")
    assert table.at["edge", "bound"] == "latency" and table.at["edge", "pct_of_roof"] == pytest.approx(100.0)
    assert (table["pct_of_roof"].dropna() <= 100.0 + 1e-9).all()
    assert table.attrs["floor"][0] == pytest.approx(1.5e-6)


def _launches_in(trace: Path) -> dict[str, list[float]]:
    """Kernel name -> its launches' `dur` (us), read off the trace by hand: `cat: kernel` events, without those
    launched before the trace began (a correlation id older than its first runtime call), which the reader
    leaves out of every figure."""
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    first = min(e["args"]["correlation"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and "correlation" in e.get("args", {}))
    launches: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") == "kernel" and e["args"]["correlation"] >= first:
            launches.setdefault(e["name"], []).append(e["dur"])
    return launches


@pytest.mark.skipif(not SHAPES_TRACE.is_file(), reason="../shared/torch-traces is absent")
def test_the_report_of_a_real_trace_holds_every_kernel_to_the_floor():
    """A100 trace with 6,080 kernels (5,375 launched after it began), 85 names, most without FLOPs: against the
    A100 datasheet (no floor: the default 3 us) no row's time at the roof is below launches x 3 us (x its
    coverage: the share whose work is known), so no saving is more than time - launches x 3 us. The 25 kernels
    whose mean launch, read off the trace, takes at most 1.5 x 3 = 4.5 us are latency-bound, and so is
    reduce_kernel's float sum (310 launches in 1.70 ms, 7.5 us at the roofs): its saving is 1.70 ms - 310 x 3 us,
    not 1.70 ms. The report lists every latency-bound kernel among its 50 rows (with fbgemm's ops modelled
    some rank below them)."""
    from analysis import roofline
    from analysis.roofline import inputs, report

    launches = _launches_in(SHAPES_TRACE)
    near = {name for name, durations in launches.items() if sum(durations) / len(durations) <= 1.5 * 3}
    assert len(launches) == 85 and len(near) == 25
    roofs = roofline.target_roofs("A100 SXM4 80GB")
    table = roofline.roofline_table(roofs, inputs.read_kernels([SHAPES_TRACE]))
    assert dict(zip(table["kernel"], table["launches"])) == {name: len(d) for name, d in launches.items()}
    latency = set(table.loc[table["bound"] == "latency", "kernel"])
    assert near <= latency
    placed = table[table["time_at_roof_s"].notna()]
    # a row with no known work is placed by the floor alone, on all of its launches
    floor_time = placed["launches"] * placed["coverage"].where(placed["coverage"] > 0, 1.0) * 3e-6
    assert (placed["time_at_roof_s"] >= floor_time * (1 - 1e-9)).all()
    sums = [name for name in launches if "reduce_kernel<512, 1, at::native::ReduceOp<float" in name
            and "sum_functor" in name and len(launches[name]) == 310]
    assert len(sums) == 1
    row = table.set_index("kernel").loc[sums[0]]
    time = sum(launches[sums[0]]) * 1e-6
    assert row["bound"] == "latency" and row["coverage"] == 1.0
    assert row["time_saved_s"] == pytest.approx(time - 310 * 3e-6)
    listed = table.head(report.REPORT_MAX_ROWS)
    assert report.render_report(roofs, table).count("| latency |") == (listed["bound"] == "latency").sum() > 30


# --- analysis.llm: --floors takes the GPU's measured floor ---------------------------------------------------------

def test_llm_floors_take_the_roofs_files_launch_floor(tmp_path, capsys):
    """tiny-llama's decode step is 27 kernels (tests/test_llm_cli.py): the floors (on unless --no-floors) add
    27 x the floor, here the roofs file's launch.stream (5 us, the better of 5 and 6 us) beside a datasheet GPU's
    default 3 us; the JSON says which floor each GPU's times include."""
    from analysis.llm.__main__ import main
    from ceilings.roofs import save_roofs

    doc = newer_file()
    doc["ceilings"] = [c for c in doc["ceilings"] if c["name"] != "launch.stream"] + \
        [floor("launch.stream", 6e-6), floor("launch.stream", 5e-6)]
    roofs = save_roofs(doc, tmp_path / "h100-floors.json")
    base = ["--model", str(ROOT / "tests" / "data" / "llm" / "tiny-llama"), "--roofs", str(roofs), "--roofs",
            "A100 SXM4 80GB", "--prompt", "100", "--gen", "4", "--activations", "fp16", "--json", "-"]

    def first_steps(*extra):
        assert main([*base, *extra]) == 0
        gpus = json.loads(capsys.readouterr().out)["gpus"]
        assert [g["launch_floor_s"] for g in gpus] == ([None, None] if extra else [5e-6, 3e-6])
        return [g["decode"]["first_step_time_s"] for g in gpus]

    (measured, datasheet), (measured_floors, datasheet_floors) = first_steps("--no-floors"), first_steps()
    assert measured_floors - measured == pytest.approx(27 * 5e-6)
    assert datasheet_floors - datasheet == pytest.approx(27 * 3e-6)


# --- energy: NVML's power over a ceiling long enough to say -------------------------------------------------------

@pytest.mark.parametrize("clocks, samples_s, batch, want", [
    # 20 samples of 10 launches of 10 ms: timed 2 s; 500 W x 10 ms = 5 J a launch, over its 8192 loads
    ({"power_w_median": 500.0, "samples": 100}, [0.01] * 20, 10, {"joules_per_launch": 5.0,
                                                                   "j_per_step": 5.0 / 8192}),
    ({"power_w_median": 500.0, "samples": 100}, [0.01] * 5, 10, {"why_none": "timed 0.50 s, under the 1 s"}),
    ({"power_w_median": 500.0, "samples": 3}, [0.01] * 20, 10, {"why_none": "3 NVML power samples, under 5"}),
    ({"samples": 0}, [0.01] * 20, 10, {"why_none": "no NVML power samples"}),
])
def test_energy_per_unit_of_work_only_when_the_ceiling_ran_long_enough(clocks, samples_s, batch, want):
    from ceilings.harness import Measurement, ceiling_record
    from ceilings.stats import summarize

    bench = next(iter(select("latency.dram")))
    plan = bench.plans(REFERENCE_LIMITS["sm_90"], False)[0]  # 8192 dependent loads a launch
    energy = ceiling_record(bench, Measurement(plan, summarize(samples_s), clocks, None, batch),
                            simulated=False)["energy"]
    assert energy["timed_s"] == pytest.approx(sum(samples_s) * batch) and energy["samples"] == clocks["samples"]
    for key, value in want.items():
        assert (energy[key] == pytest.approx(value)) if isinstance(value, float) else value in energy[key]
    assert ("joules_per_launch" in energy) == ("why_none" not in energy)


# --- the host link ------------------------------------------------------------------------------------------------

def test_host_link_copies_declare_their_bytes_once_and_check_every_byte():
    from kernels import hostlink

    benches = {b.name: b for b in select("host")}
    assert set(benches) == {"host.h2d.pinned", "host.d2h.pinned", "host.h2d.pageable", "host.d2h.pageable"}
    p = benches["host.h2d.pinned"].plans(REFERENCE_LIMITS["sm_90"], False)[0]
    assert p.work.bytes == 256 * 2**20 and benches["host.h2d.pinned"].source(p) is None  # a copy: no SASS
    assert benches["host.d2h.pinned"].rate(p.work, 256 * 2**20 / 55e9) == pytest.approx(55e9)
    small = hostlink.plan(hostlink.COPIES[0], REFERENCE_LIMITS["sm_90"].__class__(
        sm_count=1, compute_capability=(9, 0), l2_bytes=2**20, free_bytes=400 * 2**20), False)
    assert small.work.bytes == 100 * 2**20 and "a quarter of the free memory" in small.notes[0]
    want = hostlink.pattern(1000)
    assert set(np.unique(want)) == set(range(251)) and hostlink.POISON not in want
    got = want.copy()
    got[300:302] = hostlink.POISON
    assert hostlink.mismatch("x", got, want) == \
        "x: 2 of 1000 values differ (first at index 300: got 255, expected 49)"  # 300 mod 251 = 49
    assert hostlink.mismatch("x", want.copy(), want) is None


# --- on a GPU: each floor runs, its check passes, and catches what it must ------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["launch.stream", "launch.sync", "launch.graph", "launch.gap", "latency.l1",
                                  "latency.l2",
                                  "latency.dram", "sfu.ex2", "sfu.rsqrt", "sfu.sin", "host.h2d.pinned",
                                  "host.d2h.pinned", "host.h2d.pageable", "host.d2h.pageable"])
def test_each_new_ceiling_runs_and_checks_on_the_gpu(name, gpu_limits, gpu_runtime):
    from tests.gpu import run_checked

    bench = next(b for b in select(name) if b.name == name)
    (plan,) = bench.plans(gpu_limits, True)
    # the SFU's and the host link's checks read the output the poison replaced: they must see it
    run_checked(bench, plan, gpu_runtime, poison_is_caught=bench.kind == "special" or bench.level == "host")
