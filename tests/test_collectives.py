"""Collectives on the interconnect: bus bytes from what a trace records (analysis.readers.collectives), and a
collective's row judged against the link a direction (analysis.roofline.links). Expected bytes are nccl-tests'
bus-bandwidth factors (its doc/PERFORMANCE.md) applied by hand to the message sizes written in each test."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.ncu import kernel_table
from analysis.readers.collectives import collective
from analysis.roofline import roofline_table, target_roofs
from analysis.roofline.budget import time_budget
from tests.test_torch_trace import trace, x


def test_newer_traces_record_the_message_on_the_kernel():
    kernel = {"name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "args": {
        "Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": 1048576, "Group size": 8,
        "dtype": "BFloat16"}}
    found = collective(kernel, "record_param_comms", [], world_size=None)
    assert found.bus_bytes == pytest.approx(1048576 * 2 * 2 * 7 / 8)


def test_older_traces_record_it_on_c10d_ops_and_nccl_annotations():
    """An all-gather of 8192 x 64 floats a rank over 16 ranks: c10d records the gathered output (65536 x 64)
    and the input; the size is the output, its bus bytes (n-1)/n of it."""
    kernel = {"name": "ncclKernel_AllGather_RING_LL_Sum_int8_t", "args": {}}
    around = [{"name": "c10d::_allgather_base_", "args": {"Input Dims": [[65536, 64], [8192, 64], []],
                                                            "Input type": ["float", "float", ""]}},
              {"name": "nccl:_all_gather_base", "args": {"Input Dims": [[8192, 64]], "Input type": ["float"]}}]
    found = collective(kernel, "c10d::_allgather_base_", around, world_size=16)
    assert found.bus_bytes == pytest.approx(65536 * 64 * 4 * 15 / 16)
    # send/recv and broadcast move their message once
    p2p = collective({"name": "ncclKernel_SendRecv", "args": {}}, "c10d::send",
                     [{"name": "c10d::send", "args": {"Input Dims": [[1000]], "Input type": ["c10::Half"]}}], 2)
    assert p2p.bus_bytes == 2000
    # not a collective: a copy kernel inside an annotation whose name says all-to-all
    assert collective({"name": "copy_kernel", "args": {}}, "aten::copy_",
                      [{"name": "## KJTAllToAllTensorsAwaitable wait() ##", "args": {}}], 16) is None
    # no size recorded: known to be a collective, its bytes unknown (never 0)
    assert collective(kernel, "record_param_comms", [], 16).bus_bytes is None


def comm_trace(path, sized=True):
    """An all-reduce of 4 Mi bf16 elements over 8 ranks, 100 us, launched by record_param_comms; a second one
    with or without its sizes."""
    meta = {"Collective name": "allreduce", "In msg nelems": 4 << 20, "Out msg nelems": 4 << 20, "Group size": 8,
            "dtype": "BFloat16"}
    events = [x("cpu_op", "record_param_comms", 0, 50, **{"External id": 1, **meta}),
              x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
              x("cpu_op", "record_param_comms", 100, 50, **{"External id": 2, **(meta if sized else {})}),
              x("cuda_runtime", "cudaLaunchKernel", 110, 5, correlation=2),
              x("kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 1000, 100, pid=0, tid=9, correlation=1,
                device=0),
              x("kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 1200, 100, pid=0, tid=9, correlation=2,
                device=0)]
    return trace(path, events)


def test_a_collective_is_judged_against_the_link(tmp_path):
    kernels = kernel_table([comm_trace(tmp_path / "ar.json")])
    bus = 2 * (4 << 20) * 2 * 2 * 7 / 8  # two all-reduces of 8 MiB, 2(n-1)/n each
    assert kernels["comm_bytes"].iloc[0] == pytest.approx(bus)
    table = roofline_table(target_roofs("A100 SXM4 80GB"), kernels)
    row = table.iloc[0]
    # A100 SXM4 80GB: NVLink 3, 600 GB/s both directions, 300 a direction (ceilings/data/serving.csv)
    assert row["bound"] == "communication" and row["time_at_roof_s"] == pytest.approx(bus / 300e9)
    assert row["pct_of_roof"] == pytest.approx(100 * bus / 300e9 / 200e-6)
    budget = time_budget(table).set_index("cause")
    assert budget.at["at the interconnect roof (bus bytes over the link)", "time_s"] == pytest.approx(200e-6)
    assert any("judged against NVLink 3" in w for w in table.attrs["warnings"])


def test_all_or_none_of_the_collectives_have_bytes(tmp_path):
    kernels = kernel_table([comm_trace(tmp_path / "half.json", sized=False)])
    assert math.isnan(kernels["comm_bytes"].iloc[0])
    assert any("without a recorded message size" in w for w in kernels.attrs["warnings"])
    table = roofline_table(target_roofs("A100 SXM4 80GB"), kernels)
    assert pd.isna(table.iloc[0]["bound"])  # never judged against DRAM: its bytes are the interconnect's
    assert any("message size the profile does not record" in w for w in table.attrs["warnings"])
    assert time_budget(table)["class"].tolist() == ["communication"]


def test_a_gpu_without_a_link_figure_leaves_collectives_unplaced(tmp_path):
    table = roofline_table(target_roofs("V100 SXM2 16GB"), kernel_table([comm_trace(tmp_path / "ar.json")]))
    assert table.iloc[0]["bound"] != "communication"
    assert any("no interconnect roof for this GPU" in w for w in table.attrs["warnings"])


def test_whatif_home_checks_at_one_with_collectives(tmp_path):
    """On the profiled GPU the projection is the measurement: a collective's time counts as measured as well as
    at the roof, so the home total's speedup is 1."""
    from analysis import whatif

    kernels = kernel_table([comm_trace(tmp_path / "ar.json")])
    home = target_roofs("A100 SXM4 80GB")
    totals = whatif.whatif_totals(whatif.whatif_table(kernels, [target_roofs("H100 SXM")], home=home))
    assert list(totals["time_s"]) == pytest.approx([200e-6, 200e-6])
    assert totals["speedup"].iloc[0] == pytest.approx(1.0)
    # H100 SXM's NVLink 4 moves 450 GB/s a direction against the A100's 300: 1.5x at the same efficiency
    assert totals["speedup"].iloc[1] == pytest.approx(1.5)


def test_every_dtype_name_a_trace_writes_sizes_a_message():
    """An int64 all-reduce recorded by c10d ("Input type" "long int", today's name), by record_param_comms
    ("dtype" "Long") and an fp8 one ("c10::Float8_e4m3fnuz"): 1,000 elements of 8 and 1 bytes, 2(n-1)/n over 4."""
    kernel = {"name": "ncclDevKernel_AllReduce_Sum_i64_RING_LL", "args": {}}
    c10d = [{"name": "c10d::allreduce_", "args": {"Input Dims": [[1000]], "Input type": ["long int"]}}]
    assert collective(kernel, "c10d::allreduce_", c10d, 4).bus_bytes == 1000 * 8 * 2 * 3 / 4
    counted = {"name": kernel["name"], "args": {"Collective name": "allreduce", "In msg nelems": 1000,
                                                "Out msg nelems": 1000, "Group size": 4, "dtype": "Long"}}
    assert collective(counted, "record_param_comms", [], None).bus_bytes == 1000 * 8 * 2 * 3 / 4
    fp8 = [{"name": "c10d::allreduce_", "args": {"Input Dims": [[1000]], "Input type": ["c10::Float8_e4m3fnuz"]}}]
    assert collective(kernel, "c10d::allreduce_", fp8, 4).bus_bytes == 1000 * 2 * 3 / 4


def test_a_kernel_a_collective_launches_is_communication_in_the_table_and_the_budget(tmp_path):
    """A fill kernel launched by c10d::allreduce_ (no message size recorded): the time budget counts it as
    communication, and the roofline's row says the same (not judged for want of a message size), not a
    latency-bound kernel."""
    events = [x("cpu_op", "c10d::allreduce_", 0, 50, **{"External id": 1}),
              x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
              x("kernel", "vectorized_elementwise_kernel<FillFunctor>", 1000, 4, pid=0, tid=9, correlation=1,
                device=0)]
    kernels = kernel_table([trace(tmp_path / "fill.json", events)])
    table = roofline_table(target_roofs("A100 SXM4 80GB"), kernels)
    from analysis.roofline.links import NO_MESSAGE_SIZE
    assert list(table.attrs["why_not_judged"].values()) == [NO_MESSAGE_SIZE]
    budget = time_budget(table)
    assert list(budget["class"]) == ["communication"]
