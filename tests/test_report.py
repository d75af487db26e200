import pytest

from ceilings.gaps import annotate
from ceilings.report import best_per_name, ceilings_table, format_rate, numba_ratio, roofs_summary
from tests.test_roofs import ceiling, doc


def test_format_rate_scales_by_powers_of_1000():
    assert format_rate(4.51e12, "B/s") == "4.51 TB/s"
    assert format_rate(6.69e13, "FLOP/s") == "66.9 TFLOP/s"
    assert format_rate(9.9e14, "FLOP/s") == "990 TFLOP/s"
    assert format_rate(None, "B/s") == "-"


def test_best_per_name_and_numba_ratio():
    cs = [ceiling(value=4.0e12), ceiling(value=3.0e12, backend="numba"), ceiling("dram.read", None, valid=False)]
    best = best_per_name(cs)
    assert [(c["name"], c["value"]) for c in best] == [("dram.copy", 4.0e12), ("dram.read", None)]
    assert numba_ratio(cs, "dram.copy") == 0.75  # 3.0 / 4.0
    assert numba_ratio(cs, "dram.read") is None
    # launch variants: the best valid value of each backend, 3.2 / 3.4, whatever their order
    variants = [ceiling(value=v * 1e12) for v in (3.3, 3.4, 3.0)] + [
        ceiling(value=v * 1e12, backend="numba") for v in (3.2, 2.0)]
    assert numba_ratio(variants, "dram.copy") == pytest.approx(3.2 / 3.4)


def test_table_shows_peaks_ratios_and_invalid_reasons():
    good = ceiling(value=4.3e12, peaks={"datasheet": 4.8e12, "of_datasheet": 4.3 / 4.8,
                                        "clock_derived_max": 4.9e12, "of_clock_derived": 4.3 / 4.9},
                   clocks={"sm_hz_median": 1.98e9}, stats={"rel_iqr": 0.01})
    bad = ceiling("dram.read", 9e12, valid=False, notes=["above the theoretical DRAM peak: the set fit in a cache"])
    text = ceilings_table(doc(ceilings=[good, bad]))
    lines = text.splitlines()
    assert lines[0].startswith("| ceiling") and set(lines[1]) <= {"|", "-"}
    copy_row = next(line for line in lines if line.startswith("| dram.copy"))
    for cell in ("4.3 TB/s", "4.8 TB/s", "90%", "88%", "1980", "±0.5%", "| ok"):
        assert cell in copy_row
    read_row = next(line for line in lines if line.startswith("| dram.read"))
    assert "INVALID: above the theoretical DRAM peak" in read_row


def test_status_shows_every_note_so_the_instruction_path_note_is_not_hidden():
    # An H200 mma.sync ceiling run at 1.5 GHz of a 1.98 GHz max boost: annotate adds a clock note, then the
    # Hopper note that mma.sync cannot reach the tensor peak.
    hopper = {"name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132, "max_sm_clock_hz": 1.98e9}
    tensor = annotate(ceiling("tensor.fp16", 5e14, kind="compute", level=None, precision="fp16", pipe="tensor",
                              peak_key="tensor.fp16", unit="FLOP/s", clocks={"sm_hz_median": 1.5e9}), hopper)
    row = next(line for line in ceilings_table(doc(ceilings=[tensor])).splitlines()
               if line.startswith("| tensor.fp16"))
    assert "| ok: SM clock during the run (median 1.50 GHz)" in row
    assert "; mma.sync is not the Hopper tensor peak (wgmma is)" in row


def test_roofs_summary_names_the_kernel_that_gave_each_roof():
    d = doc(ceilings=[ceiling("dram.read", 4.5e12), ceiling("dram.copy", 4.3e12)])
    assert roofs_summary(d) == "DRAM roof: 4.5 TB/s from dram.read (cuda-c:copy)"


def test_hand_written_tensor_ceilings_show_their_ratio_to_cublas():
    """wgmma 900 and mma.sync 600 TFLOP/s against cuBLAS's 800 on the same peak key: 112% and 75%; an
    fp8 ceiling without a cuBLAS fp8 figure shows none."""
    kw = {"kind": "compute", "level": None, "pipe": "tensor", "unit": "FLOP/s"}
    wgmma = ceiling("wgmma.bf16", 9e14, precision="bf16", peak_key="tensor.bf16", **kw)
    mma = ceiling("tensor.bf16", 6e14, precision="bf16", peak_key="tensor.bf16", **kw)
    cublas = ceiling("cublas.bf16", 8e14, precision="bf16", peak_key="tensor.bf16", backend="library", **kw)
    fp8 = ceiling("wgmma.fp8", 1.8e15, precision="fp8", peak_key="tensor.fp8", **kw)
    rows = {line.split("|")[1].strip(): line for line in
            ceilings_table(doc(ceilings=[wgmma, mma, cublas, fp8])).splitlines()[2:]}
    header = ceilings_table(doc(ceilings=[wgmma])).splitlines()[0]
    column = [c.strip() for c in header.split("|")].index("vs cuBLAS")
    cell = {name: [c.strip() for c in line.split("|")][column] for name, line in rows.items()}
    assert cell == {"wgmma.bf16": "112%", "tensor.bf16": "75%", "cublas.bf16": "-", "wgmma.fp8": "-"}


def test_the_sm_clock_column_is_the_one_the_peak_used_kernel_first():
    """The clock kernel saw 1.50 GHz, NVML 1.98 GHz: the table's SM MHz says 1500, as % clk is computed."""
    c = ceiling(value=4.3e12, clocks={"sm_hz_median": 1.98e9, "sm_hz_kernel_median": 1.5e9})
    row = next(line for line in ceilings_table(doc(ceilings=[c])).splitlines() if line.startswith("| dram.copy"))
    assert "| 1500 " in row and "| 1980 " not in row
