"""The datasheet table: sources, units, internal consistency, device-name matching and fragment lookup."""

import pytest

from ceilings.datasheet import (
    CLOSE_NAMES,
    DATASHEETS_CSV,
    SERVING_CSV,
    find_datasheet,
    load_datasheets,
    load_serving,
    match_device,
)
from common.errors import CeilingsError
from kernels.arch import ARCHITECTURES

ROWS = load_datasheets()
GIB = 2**30
# Datasheet rates whose implied clock is not the max boost, by design (documented in docs/datasheets.md):
# Hopper/Blackwell data-center tensor figures assume a lower clock (H100 SXM: 1.83 of 1.98 GHz, H100/H200
# NVL: 1.545 of 1.785 GHz); NVIDIA's L40 tensor figures are half the AD102 per-SM rate.
TENSOR_RATIO_RANGE = {"default": (0.97, 1.03), "9.0": (0.85, 0.93), "10.0": (0.9, 0.95)}
HALF_RATE_TENSOR_ROWS = {"l40"}


def test_enough_gpus_from_volta_to_blackwell_each_with_a_source():
    assert len(ROWS) >= 25
    assert {r.architecture for r in ROWS} >= {"Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell"}
    for r in ROWS:
        assert r.source and "(" in r.source, f"{r.key}: source needs a title and year"


def test_units_are_plausible():
    for r in ROWS:
        assert 200 <= r.memory_bandwidth_gbs <= 10_000, r.key
        assert 1 <= r.fp32_tflops <= 200, r.key
        assert 10 <= r.memory_gib <= 200, r.key
        if r.fp16_tflops is not None:
            assert r.fp16_tflops >= r.fp32_tflops, r.key
        if r.tensor_fp16_tflops is not None:
            assert r.tensor_fp16_tflops > r.fp32_tflops, r.key


def test_bf16_tensor_equals_fp16_tensor_where_both_are_published():
    both = [r for r in ROWS if r.tensor_bf16_tflops is not None and r.tensor_fp16_tflops is not None]
    assert len(both) >= 20
    for r in both:
        assert r.tensor_bf16_tflops == r.tensor_fp16_tflops, r.key


def test_fp16_non_tensor_is_twice_fp32_where_the_arch_does_2x():
    # A100 whitepaper: FP16 78 = 4 x 19.5; H100: 133.8 = 2 x 66.9; GA10x/Ada/GB20x: 1:1.
    a100 = find_datasheet("a100-sxm4-80gb")
    assert a100.fp16_tflops == pytest.approx(4 * a100.fp32_tflops, rel=0.01)
    assert find_datasheet("H100 SXM").fp16_tflops == pytest.approx(2 * 66.9, rel=0.01)
    assert find_datasheet("RTX 4090").fp16_tflops == find_datasheet("RTX 4090").fp32_tflops


def test_peaks_are_dense_and_in_base_units():
    h100 = find_datasheet("H100 SXM").peaks()
    assert h100["dram"] == pytest.approx(3350e9)
    assert h100["fp32"] == pytest.approx(66.9e12)
    # NVIDIA's 1979 "with sparsity" FP16 halved: 989.4 dense.
    assert h100["tensor.fp16"] == pytest.approx(989.4e12)
    assert "tensor.fp8" not in find_datasheet("a100-sxm4-40gb").peaks()


def test_fp32_matches_sms_x_clock_x_per_sm_rate():
    """Independent check: SMs x boost clock x FP32 FLOP/clk/SM (2 x lanes) within 3 % of the datasheet."""
    for r in ROWS:
        arch = ARCHITECTURES[r.compute_capability]
        derived = r.sm_count * 2 * arch.fp32_lanes * r.boost_clock_mhz * 1e6 / 1e12
        assert derived == pytest.approx(r.fp32_tflops, rel=0.03), r.key
        if r.fp64_tflops is not None:
            derived64 = r.sm_count * 2 * arch.fp64_lanes * r.boost_clock_mhz * 1e6 / 1e12
            assert derived64 == pytest.approx(r.fp64_tflops, rel=0.03), r.key


def test_tensor_fp16_matches_sms_x_clock_x_per_sm_rate():
    """Catches a sparse figure entered as dense (2x) and GeForce FP16- vs FP32-accumulate mixups."""
    for r in ROWS:
        if r.tensor_fp16_tflops is None:
            continue
        per_sm = ARCHITECTURES[r.compute_capability].tensor_flop_per_clk["tensor.fp16"]
        if "GeForce" in r.display_name or r.key in HALF_RATE_TENSOR_ROWS:
            per_sm /= 2
        derived = r.sm_count * per_sm * r.boost_clock_mhz * 1e6 / 1e12
        lo, hi = TENSOR_RATIO_RANGE.get(r.compute_capability, TENSOR_RATIO_RANGE["default"])
        assert lo <= r.tensor_fp16_tflops / derived <= hi, (r.key, r.tensor_fp16_tflops / derived)


def test_h100_sxm_tensor_figure_implies_1_83_ghz():
    # 132 SMs x 4096 FLOP/clk x 1.83 GHz = 989.4 TFLOP/s
    assert 132 * 4096 * 1.83e9 == pytest.approx(find_datasheet("H100 SXM").peaks()["tensor.fp16"], rel=1e-3)


# (CUDA device name, reported bytes or None, expected key)
REAL_DEVICES = [
    ("NVIDIA H100 80GB HBM3", 85_029_158_912, "h100-sxm"),
    ("NVIDIA H100 PCIe", 85_031_714_816, "h100-pcie"),
    ("NVIDIA H100 NVL", 100_485_038_080, "h100-nvl"),
    ("NVIDIA H200", 150_754_820_096, "h200-sxm"),
    ("NVIDIA H200 NVL", 150_754_820_096, "h200-nvl"),
    ("NVIDIA A100-SXM4-40GB", 42_314_694_656, "a100-sxm4-40gb"),
    ("NVIDIA A100-SXM4-80GB", 85_097_971_712, "a100-sxm4-80gb"),
    ("NVIDIA A100-PCIE-40GB", 42_314_694_656, "a100-pcie-40gb"),
    ("NVIDIA A100 80GB PCIe", 85_097_971_712, "a100-pcie-80gb"),
    ("Tesla V100-SXM2-16GB", 16_945_512_448, "v100-sxm2-16gb"),
    ("Tesla V100-SXM2-32GB", 34_089_730_048, "v100-sxm2-32gb"),
    ("Tesla V100-PCIE-32GB", 34_089_730_048, "v100-pcie-32gb"),
    ("Tesla V100S-PCIE-32GB", 34_089_730_048, "v100s-pcie-32gb"),
    ("Tesla T4", 15_843_721_216, "t4"),
    ("NVIDIA L4", 23_580_639_232, "l4"),
    ("NVIDIA L40", 47_697_362_944, "l40"),
    ("NVIDIA L40S", 47_697_362_944, "l40s"),
    ("NVIDIA GeForce RTX 4090", 25_393_692_672, "rtx-4090"),
    ("NVIDIA GeForce RTX 3090", 25_447_170_048, "rtx-3090"),
    ("NVIDIA GeForce RTX 5090", 34_190_458_880, "rtx-5090"),
    ("NVIDIA RTX A6000", 51_041_271_808, "rtx-a6000"),
    ("NVIDIA RTX 6000 Ada Generation", 51_010_207_744, "rtx-6000-ada"),
    ("NVIDIA GH200 480GB", 102_005_473_280, "gh200-96gb"),
    ("NVIDIA GH200 144G HBM3e", 152_000_000_000, "gh200-144gb"),
    ("NVIDIA B200", 191_537_889_280, "b200"),
    ("NVIDIA A10", 23_836_033_024, "a10"),
    ("NVIDIA A30", 25_386_352_640, "a30"),
    ("NVIDIA A40", 47_842_000_896, "a40"),
    ("NVIDIA H100 80GB HBM3", None, "h100-sxm"),
    ("NVIDIA GH200 480GB", None, "gh200-96gb"),
]


@pytest.mark.parametrize(("name", "memory", "key"), REAL_DEVICES)
def test_match_real_device_names(name, memory, key):
    row = match_device(name, memory)
    assert row is not None and row.key == key


@pytest.mark.parametrize(("name", "memory"), [
    ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", 4_972_871_680),  # a MIG slice is not the whole GPU
    ("NVIDIA GeForce RTX 4090 D", 25_393_692_672),  # 114 SMs, not in the table
    ("NVIDIA GeForce RTX 3090 Ti", 25_393_692_672),
    ("NVIDIA GH200", None),  # 96 GB or 144 GB: cannot tell without the memory size
    ("Numba CUDA simulator (not a GPU)", None),
])
def test_no_match(name, memory):
    assert match_device(name, memory) is None


def test_generic_gh200_name_is_told_apart_by_memory():
    assert match_device("NVIDIA GH200", 150 * 10**9).key == "gh200-144gb"
    assert match_device("NVIDIA GH200", 100 * 10**9).key == "gh200-96gb"


@pytest.mark.parametrize(("fragment", "key"), [
    ("H100 SXM", "h100-sxm"), ("h100-sxm", "h100-sxm"), ("A100 80GB SXM", "a100-sxm4-80gb"),
    ("H200", "h200-sxm"), ("h200 nvl", "h200-nvl"), ("L4", "l4"), ("l40", "l40"), ("4090", "rtx-4090"),
    ("RTX 6000 Ada", "rtx-6000-ada"), ("t4", "t4"),
])
def test_find_datasheet(fragment, key):
    assert find_datasheet(fragment).key == key


def test_find_datasheet_ambiguous_lists_candidates():
    with pytest.raises(CeilingsError, match="ambiguous") as info:
        find_datasheet("H100")
    for key in ("h100-sxm", "h100-pcie", "h100-nvl"):
        assert key in str(info.value)


def test_find_datasheet_unknown_lists_close_names():
    with pytest.raises(CeilingsError, match="no datasheet row matches 'H1000 SMX'") as info:
        find_datasheet("H1000 SMX")
    assert "h100-sxm" in str(info.value)


@pytest.mark.parametrize("fragment", ["bogus", "/tmp", "zzzz"])
def test_find_datasheet_unknown_lists_only_a_few_names(fragment):
    with pytest.raises(CeilingsError, match=f"no datasheet row matches '{fragment}'; closest: ") as info:
        find_datasheet(fragment)
    listed = str(info.value).split("closest: ")[1].removesuffix(" (`ceilings datasheets` lists them all)").split(", ")
    assert 1 <= len(listed) == CLOSE_NAMES < len(load_datasheets())
    assert set(listed) <= {r.key for r in load_datasheets()}


def test_bad_csv_names_file_line_and_column(tmp_path):
    text = DATASHEETS_CSV.read_text().splitlines()
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([text[0], text[1].replace(",80,1530,", ",eighty,1530,")]) + "\n")
    with pytest.raises(CeilingsError, match=r"bad.csv:2 column sm_count: 'eighty' is not a number"):
        load_datasheets(bad)


def test_the_h200_l2_is_what_the_device_reports():
    """60 MiB: what PyTorch reported (cudaDevAttrL2CacheSize) on this project's H200 (.library/device/KINDS.md,
    2026-10-28), not the H100 SXM's 50 MB."""
    assert match_device("NVIDIA H200", 150_754_820_096).l2_mib == 60


@pytest.mark.parametrize("edit, message", [
    (lambda row: row.replace(",450,", ",-450,"), r"serving.csv:2 column link_gbs: -450.0 must be a finite positive"),
    (lambda row: row.replace(",450,", ",inf,"), r"serving.csv:2 column link_gbs: inf must be a finite positive"),
    (lambda row: row[:row.index(',"memory:')] + ",", r"serving.csv:2 column source: empty, but"),
    (lambda row: row.replace("h100-sxm,", "h100-smx,", 1), r"serving.csv:2 column key: 'h100-smx' is no key of"),
    (lambda row: row.replace("NVLink 4,", ",", 1), r"serving.csv:2 column link_gbs: give a link's name and its"),
])
def test_a_bad_serving_row_names_file_line_and_column(tmp_path, edit, message):
    """serving.csv goes through the datasheet table's reader: the H100 row (line 2) broken one field at a time."""
    header, h100 = SERVING_CSV.read_text().splitlines()[:2]
    assert h100.startswith("h100-sxm,81559,NVLink 4,450,6,")
    bad = tmp_path / "serving.csv"
    bad.write_text(f"{header}\n{edit(h100)}\n")
    with pytest.raises(CeilingsError, match=message) as info:
        load_serving(bad)
    assert "\n" not in str(info.value)


def test_the_serving_table_reads_as_its_csv_says():
    """Line 2 of serving.csv by hand: h100-sxm, 81559 MiB, NVLink 4 at 450 GB/s, 6 us; the A100's latency empty."""
    rows = load_serving()
    assert (rows["h100-sxm"].visible_memory_mib, rows["h100-sxm"].link, rows["h100-sxm"].link_gbs,
            rows["h100-sxm"].allreduce_latency_us) == (81559, "NVLink 4", 450, 6)
    assert rows["a100-sxm4-80gb"].allreduce_latency_us is None
