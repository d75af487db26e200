"""Clock-derived peaks against hand arithmetic."""

import pytest

from ceilings.gaps import annotate
from ceilings.peaks import DERIVED_KEYS, clock_derived_peaks, dram_peak, missing_reason
from kernels.arch import ARCHITECTURES

H100_SXM = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sm_count": 132,
            "max_sm_clock_hz": 1.98e9, "memory_clock_hz": 2.619e9, "memory_bus_width_bits": 5120}


def test_h100_sxm_at_max_boost():
    p = clock_derived_peaks(H100_SXM)
    assert p["fp32"] == pytest.approx(132 * 128 * 2 * 1.98e9)  # 66.9 TFLOP/s
    assert p["fp32"] == pytest.approx(66.9e12, rel=1e-3)
    assert p["fp64"] == pytest.approx(132 * 64 * 2 * 1.98e9)  # 33.5
    assert p["fp16"] == pytest.approx(132 * 512 * 1.98e9)  # 133.8
    assert p["tensor.fp64"] == pytest.approx(132 * 256 * 1.98e9)  # 66.9
    assert p["tensor.fp16"] == pytest.approx(132 * 4096 * 1.98e9)  # 1070.5 (datasheet 989.4 is at 1.83 GHz)
    assert p["tensor.fp8"] == pytest.approx(132 * 8192 * 1.98e9)
    assert p["int32"] == pytest.approx(132 * 64 * 2 * 1.98e9)
    assert p["dram"] == pytest.approx(2 * 2.619e9 * 5120 / 8)  # 3352 GB/s
    assert p["dram"] == pytest.approx(3352e9, rel=1e-3)


def test_run_clock_scales_compute_not_dram():
    p = clock_derived_peaks(H100_SXM, sm_clock_hz=1.755e9)
    assert p["fp32"] == pytest.approx(132 * 256 * 1.755e9)
    assert p["dram"] == pytest.approx(2 * 2.619e9 * 5120 / 8)


def test_a100_matches_whitepaper_arithmetic():
    a100 = {"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0", "sm_count": 108,
            "max_sm_clock_hz": 1.41e9, "memory_clock_hz": 1.215e9, "memory_bus_width_bits": 5120}
    p = clock_derived_peaks(a100)
    assert p["fp32"] == pytest.approx(108 * 64 * 2 * 1.41e9)  # 19.5
    assert p["fp16"] == pytest.approx(108 * 512 * 1.41e9)  # 78
    assert p["bf16"] == pytest.approx(108 * 256 * 1.41e9)  # 39
    assert p["tensor.tf32"] == pytest.approx(108 * 1024 * 1.41e9)  # 156
    assert p["tensor.fp16"] == pytest.approx(312e12, rel=1e-3)
    assert p["dram"] == pytest.approx(1555.2e9)  # 2 x 1215 MHz x 640 B
    assert "tensor.fp8" not in p


def test_gddr_dram_uses_cuda_half_data_rate_clock():
    t4 = {"name": "Tesla T4", "compute_capability": "7.5", "sm_count": 40, "max_sm_clock_hz": 1.59e9,
          "memory_clock_hz": 5.001e9, "memory_bus_width_bits": 256}
    assert clock_derived_peaks(t4)["dram"] == pytest.approx(320.064e9)  # 10 Gb/s x 256 bit / 8
    assert clock_derived_peaks(t4)["fp64"] == pytest.approx(40 * 2 * 2 * 1.59e9)


def test_geforce_float_tensor_modes_at_fp32_accumulate_half_rate():
    rtx4090 = {"name": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9", "sm_count": 128,
               "max_sm_clock_hz": 2.52e9, "memory_clock_hz": 10.501e9, "memory_bus_width_bits": 384}
    p = clock_derived_peaks(rtx4090)
    assert p["tensor.fp16"] == pytest.approx(128 * 1024 * 2.52e9 / 2)  # 165.2
    assert p["tensor.fp8"] == pytest.approx(128 * 2048 * 2.52e9 / 2)  # 330.3
    assert p["tensor.int8"] == pytest.approx(128 * 2048 * 2.52e9)  # 660.6, integer: full rate
    assert p["fp32"] == pytest.approx(82.6e12, rel=1e-3)
    assert p["dram"] == pytest.approx(1008.1e9, rel=1e-3)
    pro = clock_derived_peaks({**rtx4090, "name": "NVIDIA L40S"})
    assert pro["tensor.fp16"] == pytest.approx(128 * 1024 * 2.52e9)


def test_unknown_architecture_gives_dram_and_says_why():
    dev = {**H100_SXM, "compute_capability": "11.0"}
    assert set(clock_derived_peaks(dev)) == {"dram"}
    assert "no per-architecture unit table for compute capability 11.0" in missing_reason(dev, "fp32")
    assert missing_reason(dev, "dram") is None


def test_missing_probes_leave_keys_out():
    dev = {**H100_SXM, "memory_clock_hz": None, "max_sm_clock_hz": None}
    assert clock_derived_peaks(dev) == {}
    assert "memory_clock_hz" in missing_reason(dev, "dram")
    assert "max_sm_clock_hz" in missing_reason(dev, "fp32")
    assert clock_derived_peaks(dev, sm_clock_hz=1e9)["fp32"] == pytest.approx(132 * 256 * 1e9)


def test_arch_without_a_mode_says_so():
    v100 = {"compute_capability": "7.0", "sm_count": 80, "max_sm_clock_hz": 1.53e9}
    assert "tensor.tf32" not in clock_derived_peaks(v100)
    assert "has no tensor.tf32 unit" in missing_reason(v100, "tensor.tf32")


def test_keys_no_table_derives_have_no_reason_and_every_rate_has_a_table():
    """L1, L2, the host link and the latency floors have no formula: nothing to explain, even on an unknown
    architecture with no clocks; every DRAM, compute and SFU ceiling's key has one."""
    from kernels.registry import all_benchmarks

    bare = {"compute_capability": "11.0"}
    for key in ("l1", "l2", "host", "launch.stream", "launch.graph", "latency.dram"):
        assert missing_reason(bare, key) is None, key
    assert missing_reason(bare, "fp32") is not None and missing_reason(bare, "dram") is not None
    rates = {b.peak_key for b in all_benchmarks() if b.kind in ("compute", "special")
             or b.kind == "bandwidth" and b.level == "dram"}
    assert rates <= DERIVED_KEYS, sorted(rates - DERIVED_KEYS)


def test_every_arch_row_has_a_source_and_fp32_at_least_fp64():
    for cc, arch in ARCHITECTURES.items():
        assert arch.source, cc
        assert arch.sm_rates["fp32"] >= arch.sm_rates["fp64"]
        assert arch.sm_rates["fp32"] == 2 * arch.fp32_lanes


def test_dram_peak_none_without_inputs():
    assert dram_peak(None, 5120) is None and dram_peak(1e9, None) is None


# --- gaps.annotate ---------------------------------------------------------------------------------------


def _ceiling(key, value, *, kind="compute", pipe="cuda-core", backend="cuda-c", clocks=None, unit="FLOP/s"):
    return {"name": key, "kind": kind, "pipe": pipe, "peak_key": key, "value": value, "unit": unit,
            "backend": backend, "clocks": clocks or {}, "peaks": {}, "valid": True, "notes": []}


H100_DEVICE = {**H100_SXM, "memory_bytes": 85_029_158_912, "nvml": {"ecc_enabled": True}}


def test_annotate_fills_peaks_and_ratios():
    c = _ceiling("fp32", 60e12, clocks={"sm_hz_median": 1.755e9, "throttle_reasons": ["gpu_idle"]})
    out = annotate(c, H100_DEVICE)
    assert c["peaks"] == {} and c["notes"] == []  # the input is not changed
    p = out["peaks"]
    assert p["datasheet"] == pytest.approx(66.9e12)
    assert p["clock_derived_max"] == pytest.approx(132 * 256 * 1.98e9)
    assert p["clock_derived_run"] == pytest.approx(132 * 256 * 1.755e9)
    assert p["of_datasheet"] == pytest.approx(60 / 66.9)
    assert p["of_clock_derived"] == pytest.approx(60e12 / (132 * 256 * 1.755e9))  # vs the run clock
    # 1.755 / 1.98 = 0.886: 11 % below max boost; gpu_idle is not a limiting reason
    assert out["notes"] == ["SM clock during the run (median 1.75 GHz) was 11% below max boost (1.98 GHz)"]
    assert out["valid"] is True


def test_annotate_without_run_clock_uses_max():
    out = annotate(_ceiling("fp32", 60e12), H100_DEVICE)
    assert out["peaks"]["clock_derived_run"] is None
    assert out["peaks"]["of_clock_derived"] == pytest.approx(60e12 / (132 * 256 * 1.98e9))


def test_annotate_throttle_reason_noted():
    out = annotate(_ceiling("fp32", 60e12, clocks={"throttle_reasons": ["sw_power_cap", "gpu_idle"]}), H100_DEVICE)
    assert "clocks were held down during the run: sw_power_cap" in out["notes"]


def test_annotate_ecc_gddr_vs_hbm():
    hbm = annotate(_ceiling("dram", 3e12, kind="bandwidth", pipe="memory", unit="B/s"), H100_DEVICE)
    assert any("HBM keeps ECC bits in sideband" in n for n in hbm["notes"])
    l4 = {"name": "NVIDIA L4", "compute_capability": "8.9", "sm_count": 58, "max_sm_clock_hz": 2.04e9,
          "memory_clock_hz": 6.251e9, "memory_bus_width_bits": 192, "memory_bytes": 23_580_639_232,
          "nvml": {"ecc_enabled": True}}
    out = annotate(_ceiling("dram", 2.5e11, kind="bandwidth", pipe="memory", unit="B/s"), l4)
    assert any("inline ECC on GDDR memory typically lowers DRAM bandwidth by about 10%" in n for n in out["notes"])
    assert out["peaks"]["datasheet"] == pytest.approx(300e9)
    assert out["peaks"]["clock_derived_max"] == pytest.approx(2 * 6.251e9 * 192 / 8)  # 300.0 GB/s


def test_annotate_mma_sync_on_hopper_only_for_hand_written_tensor():
    mma = annotate(_ceiling("tensor.fp16", 6e14, pipe="tensor"), H100_DEVICE)
    assert any(n.startswith("mma.sync is not the Hopper tensor peak (wgmma is)") for n in mma["notes"])
    lib = annotate(_ceiling("tensor.fp16", 7e14, pipe="tensor", backend="library"), H100_DEVICE)
    assert not any("mma.sync" in n for n in lib["notes"])
    wgmma = annotate({**_ceiling("tensor.bf16", 9e14, pipe="tensor"), "name": "wgmma.bf16"}, H100_DEVICE)
    assert not any("mma.sync" in n for n in wgmma["notes"])  # it is the Hopper instruction
    a100 = {**H100_DEVICE, "name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0", "sm_count": 108,
            "max_sm_clock_hz": 1.41e9}
    assert not any("mma.sync" in n for n in annotate(_ceiling("tensor.fp16", 2e14, pipe="tensor"), a100)["notes"])


def test_annotate_flags_value_above_clock_derived_peak():
    # clock-derived fp32 at max boost: 132 x 256 x 1.98e9 = 66.9e12; 70e12 is 4.6 % above -> suspect
    out = annotate(_ceiling("fp32", 70e12), H100_DEVICE)
    assert out["valid"] is False
    assert any(n.startswith("suspect: measured 7e+13 FLOP/s is 5% above") for n in out["notes"])
    # 1 % above is within the tolerance
    assert annotate(_ceiling("fp32", 66.9e12 * 1.01), H100_DEVICE)["valid"] is True


def test_annotate_unknown_device_and_architecture():
    dev = {"name": "NVIDIA Future GPU", "compute_capability": "11.0", "sm_count": 200, "max_sm_clock_hz": 2e9,
           "memory_clock_hz": 4e9, "memory_bus_width_bits": 8192, "memory_bytes": 2**38, "nvml": {}}
    out = annotate(_ceiling("fp32", 1e14), dev)
    assert out["peaks"]["datasheet"] is None and out["peaks"]["clock_derived_max"] is None
    assert out["peaks"]["of_datasheet"] is None and out["peaks"]["of_clock_derived"] is None
    assert any("no datasheet row matches 'NVIDIA Future GPU'" in n for n in out["notes"])
    assert any("no per-architecture unit table for compute capability 11.0" in n for n in out["notes"])
    dram = annotate(_ceiling("dram", 7e12, kind="bandwidth", pipe="memory", unit="B/s"), dev)
    assert dram["peaks"]["clock_derived_max"] == pytest.approx(2 * 4e9 * 8192 / 8)


def test_cache_levels_have_no_peak_and_no_misleading_note():
    from ceilings.gaps import annotate

    c = {"name": "l2.read", "kind": "bandwidth", "level": "l2", "precision": None, "pipe": "memory",
         "peak_key": "l2", "value": 1e13, "unit": "B/s", "backend": "cuda-c", "kernel": "k", "work": {},
         "params": {}, "stats": {}, "clocks": {}, "peaks": {}, "valid": True, "notes": []}
    device = {"name": "NVIDIA H200", "memory_bytes": 150e9, "compute_capability": "9.0", "sm_count": 132,
              "max_sm_clock_hz": 1.98e9, "memory_clock_hz": 3.2e9, "memory_bus_width_bits": 6144}
    out = annotate(c, device)
    assert out["peaks"]["clock_derived_max"] is None and out["notes"] == [] and out["valid"]


def test_dram_above_the_theoretical_peak_is_invalid_and_says_why():
    from ceilings.gaps import annotate

    # H100 SXM: 2 x 2619 MHz x 5120 bit / 8 = 3.352 TB/s; 4.1 TB/s from 64 MiB arrays cannot be DRAM
    device = {"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 80 * 2**30, "compute_capability": "9.0",
              "sm_count": 132, "max_sm_clock_hz": 1.98e9, "memory_clock_hz": 2619e6,
              "memory_bus_width_bits": 5120, "l2_bytes": 50 * 2**20}
    c = {"name": "dram.copy", "kind": "bandwidth", "level": "dram", "precision": None, "pipe": "memory",
         "peak_key": "dram", "value": 4.1e12, "unit": "B/s", "backend": "cuda-c", "kernel": "k", "work": {},
         "params": {"array_bytes": 64 * 2**20}, "stats": {}, "clocks": {}, "peaks": {}, "valid": True,
         "notes": ["a benchmark note"]}
    out = annotate(c, device)
    assert not out["valid"]
    first = out["notes"][0]
    for words in ("4.1 TB/s", "3.35 TB/s", "cache", "64 MiB", "50 MiB", "8x L2"):
        assert words in first
    assert annotate({**c, "value": 3.2e12}, device)["valid"]


def test_cublas_fp64_without_fp64_tensor_cores_is_compared_with_the_fp64_units():
    """L4 (CC 8.9) has no DMMA: cuBLAS fp64 runs on the 2 FP64 lanes per SM, so that is its reference."""
    l4 = {"name": "NVIDIA L4", "compute_capability": "8.9", "sm_count": 58, "max_sm_clock_hz": 2.04e9,
          "memory_clock_hz": 6.251e9, "memory_bus_width_bits": 192, "memory_bytes": 23_580_639_232}
    out = annotate(_ceiling("tensor.fp64", 4e11, pipe="tensor", backend="library"), l4)
    assert out["peaks"]["clock_derived_max"] == pytest.approx(58 * 2 * 2 * 2.04e9)  # 473 GFLOP/s
    assert out["peaks"]["datasheet"] is None  # the L4 datasheet lists no fp64 figure (its CSV cell is empty)
    assert out["notes"][0].startswith("no FP64 tensor cores (DMMA) on this GPU: compared with the fp64 peak")
    assert out["peak_key"] == "fp64"  # what ceilings.compare looks up in a datasheet too
    h100 = annotate(_ceiling("tensor.fp64", 5e13, pipe="tensor", backend="library"), H100_DEVICE)
    assert h100["peaks"]["clock_derived_max"] == pytest.approx(132 * 256 * 1.98e9)  # DMMA: 256 FLOP/clk/SM
    assert not any("DMMA" in n for n in h100["notes"])


def test_annotate_uses_the_kernel_clock_over_nvml_and_notes_their_disagreement():
    # kernel 1.60 GHz, NVML 1.755 GHz: 1.60 / 1.755 = 0.912, 8.8 % apart (> 5 %)
    c = _ceiling("fp32", 50e12, clocks={"sm_hz_kernel_median": 1.60e9, "sm_hz_median": 1.755e9})
    out = annotate(c, H100_DEVICE)
    assert out["peaks"]["clock_derived_run"] == pytest.approx(132 * 256 * 1.60e9)
    assert out["peaks"]["of_clock_derived"] == pytest.approx(50e12 / (132 * 256 * 1.60e9))
    assert out["peaks"]["clock_source"] == "kernel"
    assert ("SM clocks disagree: the clock kernel measured 1.600 GHz, NVML read 1.755 GHz (median); the peak at "
            "the run clock uses the kernel's (NVML: 0 samples, under 5)") in out["notes"]
    # 1.60 / 1.98 = 0.808: 19 % below max boost
    assert "SM clock during the run (kernel-measured median 1.60 GHz) was 19% below max boost (1.98 GHz)" \
        in out["notes"]


def test_annotate_prefers_nvml_with_enough_samples_when_the_clocks_disagree():
    # kernel 1.98 GHz right after the chunks, NVML 1.755 GHz over 12 samples during them: 1.98 / 1.755 = 1.128
    c = _ceiling("fp32", 50e12, clocks={"sm_hz_kernel_median": 1.98e9, "sm_hz_median": 1.755e9, "samples": 12})
    out = annotate(c, H100_DEVICE)
    assert out["peaks"]["clock_derived_run"] == pytest.approx(132 * 256 * 1.755e9)
    assert out["peaks"]["clock_source"] == "nvml"
    assert any(n.startswith("SM clocks disagree: the clock kernel measured 1.980 GHz, NVML read 1.755 GHz "
                            "(median); the peak at the run clock uses NVML's (12 samples") for n in out["notes"])
    assert record_clocks(c["clocks"]).sm_hz == 1.755e9
    # 4 samples are too few: the kernel's clock stands
    few = annotate(_ceiling("fp32", 50e12, clocks={"sm_hz_kernel_median": 1.98e9, "sm_hz_median": 1.755e9,
                                                   "samples": 4}), H100_DEVICE)
    assert few["peaks"]["clock_source"] == "kernel"


def record_clocks(clocks: dict):
    from ceilings.roofs import Clocks

    return Clocks(sm_hz_median=clocks.get("sm_hz_median"), sm_hz_kernel_median=clocks.get("sm_hz_kernel_median"),
                  nvml_samples=clocks.get("samples"))


def test_annotate_kernel_clock_without_nvml_is_the_run_clock_and_close_clocks_are_not_noted():
    alone = annotate(_ceiling("fp32", 60e12, clocks={"sm_hz_kernel_median": 1.98e9}), H100_DEVICE)
    assert alone["peaks"]["clock_derived_run"] == pytest.approx(132 * 256 * 1.98e9)
    assert alone["peaks"]["clock_source"] == "kernel" and alone["notes"] == []
    # 1.90 / 1.98 = 0.960: 4 % apart, under the 5 % disagreement that is noted
    close = annotate(_ceiling("fp32", 60e12, clocks={"sm_hz_kernel_median": 1.90e9, "sm_hz_median": 1.98e9}),
                     H100_DEVICE)
    assert not any(n.startswith("SM clocks disagree") for n in close["notes"])


def test_annotate_clock_source_nvml_then_max():
    nvml = annotate(_ceiling("fp32", 60e12, clocks={"sm_hz_median": 1.98e9}), H100_DEVICE)
    assert nvml["peaks"]["clock_source"] == "nvml"
    assert annotate(_ceiling("fp32", 60e12), H100_DEVICE)["peaks"]["clock_source"] == "max"
    # dram: the memory clock is NVML's alone; the SM clock kernel does not enter its peak
    dram = annotate(_ceiling("dram", 3e12, kind="bandwidth", pipe="memory", unit="B/s",
                             clocks={"sm_hz_kernel_median": 1.98e9}), H100_DEVICE)
    assert dram["peaks"]["clock_source"] == "max"
