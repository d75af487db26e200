"""Clock-derived peaks: what the running device could do at a given SM clock, from per-SM unit counts.

peak = SM count x (FLOP per clock per SM) x SM clock. For FMA-based rates FLOP/clk/SM = 2 x lanes (an FMA
is two FLOP); `int32` counts a multiply-add as 2 operations, like the `int32.mad` ceiling.

DRAM: peak B/s = 2 x memory clock x bus width / 8. CUDA (cudaDevAttrMemoryClockRate, and NVML) reports
  - HBM2/HBM2e/HBM3/HBM3e: the interface clock, and data moves on both edges (V100: 877 MHz x 2 x 4096 bit
    / 8 = 898 GB/s; H100 SXM: 2619 MHz x 2 x 5120 / 8 = 3352 GB/s);
  - GDDR6/GDDR6X/GDDR7: half the per-pin data rate (T4: 5001 MHz for 10 Gb/s, x 2 x 256 / 8 = 320 GB/s;
    RTX 4090: 10501 MHz for 21 Gb/s; RTX 5090: 14001 MHz for 28 Gb/s).
So the same factor 2 applies to every memory type as CUDA reports it. Units per SM: `kernels.arch` (which also
sizes the launches); sources: docs/datasheets.md.
"""

from __future__ import annotations

from kernels.arch import ARCHITECTURES, arch_units

DDR_FACTOR = 2  # transfers per reported memory clock (see module docstring)

# Tensor modes that GeForce parts run at half rate with FP32 accumulation (the rate our peak keys use).
GEFORCE_HALF_RATE_KEYS = frozenset({"tensor.tf32", "tensor.fp16", "tensor.bf16", "tensor.fp8"})
GEFORCE_MARKER = "geforce"


def dram_peak(memory_clock_hz: float | None, bus_width_bits: int | None) -> float | None:
    """B/s = 2 x memory clock x bus width / 8 (CUDA's memory clock convention; module docstring)."""
    if not memory_clock_hz or not bus_width_bits:
        return None
    return DDR_FACTOR * memory_clock_hz * bus_width_bits / 8


def clock_derived_peaks(device: dict, sm_clock_hz: float | None = None) -> dict[str, float]:
    """Peaks keyed by peak_key (FLOP/s; `dram` in B/s) at `sm_clock_hz` (default: the device max SM clock).

    Keys that cannot be derived are absent: an unknown architecture gives only `dram`; `missing_reason`
    says why a key is absent. GeForce parts get the FP32-accumulate (half) tensor rate for float modes.
    """
    peaks: dict[str, float] = {}
    dram = dram_peak(device.get("memory_clock_hz"), device.get("memory_bus_width_bits"))
    if dram is not None:
        peaks["dram"] = dram
    arch = arch_units(device.get("compute_capability"))
    clock = sm_clock_hz if sm_clock_hz is not None else device.get("max_sm_clock_hz")
    sm_count = device.get("sm_count")
    if arch is None or not clock or not sm_count:
        return peaks
    geforce = arch.geforce_fp32_accumulate_half_rate and GEFORCE_MARKER in (device.get("name") or "").lower()
    for key, per_clk in arch.sm_rates.items():
        rate = sm_count * per_clk * clock
        peaks[key] = rate / 2 if geforce and key in GEFORCE_HALF_RATE_KEYS else rate
    return peaks


# The keys a clock-derived peak exists for on some architecture: DRAM's and the unit table's. The others (L1, L2,
# the host link, the latency floors) have no formula here: their measurement is the reference.
DERIVED_KEYS = frozenset({"dram"}.union(*(arch.sm_rates for arch in ARCHITECTURES.values())))


def missing_reason(device: dict, key: str) -> str | None:
    """Why clock_derived_peaks(device) has no `key` (one sentence), or None when it has it or when no
    table derives it (DERIVED_KEYS)."""
    if key not in DERIVED_KEYS:
        return None
    if key == "dram":
        if dram_peak(device.get("memory_clock_hz"), device.get("memory_bus_width_bits")) is None:
            return "no clock-derived DRAM peak: memory_clock_hz or memory_bus_width_bits is unknown"
        return None
    cc = device.get("compute_capability")
    arch = arch_units(cc)
    if arch is None:
        return (f"no per-architecture unit table for compute capability {cc}: only DRAM is clock-derived "
                f"(known: {', '.join(ARCHITECTURES)})")
    if not device.get("sm_count") or not device.get("max_sm_clock_hz"):
        return "no clock-derived compute peaks: sm_count or max_sm_clock_hz is unknown"
    if key not in arch.sm_rates:
        return f"{arch.name} (compute capability {cc}) has no {key} unit"
    return None
