"""Clock-derived peaks: what the running device could do at a given SM clock, from per-SM unit counts.

peak = SM count x (FLOP per clock per SM) x SM clock. For FMA-based rates FLOP/clk/SM = 2 x lanes (an FMA
is two FLOP); `int32` counts a multiply-add as 2 operations, like the `int32.mad` ceiling.

DRAM: peak B/s = 2 x memory clock x bus width / 8. CUDA (cudaDevAttrMemoryClockRate, and NVML) reports
  - HBM2/HBM2e/HBM3/HBM3e: the interface clock, and data moves on both edges (V100: 877 MHz x 2 x 4096 bit
    / 8 = 898 GB/s; H100 SXM: 2619 MHz x 2 x 5120 / 8 = 3352 GB/s);
  - GDDR6/GDDR6X/GDDR7: half the per-pin data rate (T4: 5001 MHz for 10 Gb/s, x 2 x 256 / 8 = 320 GB/s;
    RTX 4090: 10501 MHz for 21 Gb/s; RTX 5090: 14001 MHz for 28 Gb/s).
So the same factor 2 applies to every memory type as CUDA reports it. Units per SM and sources:
docs/datasheets.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

DDR_FACTOR = 2  # transfers per reported memory clock (see module docstring)

# Tensor modes that GeForce parts run at half rate with FP32 accumulation (the rate our peak keys use).
GEFORCE_HALF_RATE_KEYS = frozenset({"tensor.tf32", "tensor.fp16", "tensor.bf16", "tensor.fp8"})
GEFORCE_MARKER = "geforce"


@dataclass(frozen=True)
class ArchUnits:
    """Dense per-SM throughput of one architecture (compute capability), in FLOP (or int op) per clock."""

    compute_capability: str
    name: str
    fp32_lanes: int
    fp64_lanes: int
    fp16_flop_per_clk: int  # non-tensor, packed half2 FMA
    bf16_flop_per_clk: int | None  # non-tensor; None where the arch has no bf16 arithmetic
    int32_mad_lanes: int  # IMAD per clock per SM
    tensor_flop_per_clk: Mapping[str, int]  # peak_key -> dense FLOP/clk/SM
    geforce_fp32_accumulate_half_rate: bool
    source: str
    sm_rates: Mapping[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rates = {
            "fp64": 2 * self.fp64_lanes,
            "fp32": 2 * self.fp32_lanes,
            "fp16": self.fp16_flop_per_clk,
            "int32": 2 * self.int32_mad_lanes,
        }
        if self.bf16_flop_per_clk is not None:
            rates["bf16"] = self.bf16_flop_per_clk
        rates.update(self.tensor_flop_per_clk)
        object.__setattr__(self, "sm_rates", MappingProxyType(rates))


_PG = "CUDA C++ Programming Guide, arithmetic instruction throughput table"
ARCHITECTURES: Mapping[str, ArchUnits] = MappingProxyType({a.compute_capability: a for a in (
    ArchUnits("7.0", "Volta GV100", fp32_lanes=64, fp64_lanes=32, fp16_flop_per_clk=256, bf16_flop_per_clk=None,
              int32_mad_lanes=64, tensor_flop_per_clk={"tensor.fp16": 1024},
              geforce_fp32_accumulate_half_rate=False,
              source=f"Volta whitepaper (2017): 8 tensor cores/SM x 64 FMA/clk; {_PG}"),
    ArchUnits("7.5", "Turing TU10x", fp32_lanes=64, fp64_lanes=2, fp16_flop_per_clk=256, bf16_flop_per_clk=None,
              int32_mad_lanes=64, tensor_flop_per_clk={"tensor.fp16": 1024, "tensor.int8": 2048},
              geforce_fp32_accumulate_half_rate=True,
              source=f"Turing whitepaper (2018): 8 tensor cores/SM x 64 FP16 FMA/clk; {_PG}"),
    ArchUnits("8.0", "Ampere GA100", fp32_lanes=64, fp64_lanes=32, fp16_flop_per_clk=512, bf16_flop_per_clk=256,
              int32_mad_lanes=64,
              tensor_flop_per_clk={"tensor.fp64": 128, "tensor.tf32": 1024, "tensor.fp16": 2048,
                                   "tensor.bf16": 2048, "tensor.int8": 4096},
              geforce_fp32_accumulate_half_rate=False,
              source=f"A100 whitepaper (2020): 4 tensor cores/SM x 256 FP16 FMA/clk, FP16 78 / BF16 39 TFLOPS; {_PG}"),
    ArchUnits("8.6", "Ampere GA10x", fp32_lanes=128, fp64_lanes=2, fp16_flop_per_clk=256, bf16_flop_per_clk=256,
              int32_mad_lanes=64,
              tensor_flop_per_clk={"tensor.tf32": 512, "tensor.fp16": 1024, "tensor.bf16": 1024,
                                   "tensor.int8": 2048},
              geforce_fp32_accumulate_half_rate=True,
              source=f"GA102 whitepaper v2.0 (2021): 4 tensor cores/SM x 128 FP16 FMA/clk, FP16 = FP32 rate; {_PG}"),
    ArchUnits("8.9", "Ada Lovelace AD10x", fp32_lanes=128, fp64_lanes=2, fp16_flop_per_clk=256,
              bf16_flop_per_clk=256, int32_mad_lanes=64,
              tensor_flop_per_clk={"tensor.tf32": 512, "tensor.fp16": 1024, "tensor.bf16": 1024,
                                   "tensor.fp8": 2048, "tensor.int8": 2048},
              geforce_fp32_accumulate_half_rate=True,
              source=f"Ada whitepaper v2.1 (2023); L4/L40S datasheets (2023); {_PG}"),
    ArchUnits("9.0", "Hopper GH100", fp32_lanes=128, fp64_lanes=64, fp16_flop_per_clk=512, bf16_flop_per_clk=512,
              int32_mad_lanes=64,
              tensor_flop_per_clk={"tensor.fp64": 256, "tensor.tf32": 2048, "tensor.fp16": 4096,
                                   "tensor.bf16": 4096, "tensor.fp8": 8192, "tensor.int8": 8192},
              geforce_fp32_accumulate_half_rate=False,
              source=f"H100 whitepaper (2022): 4 tensor cores/SM x 512 FP16 FMA/clk, 2x A100 per SM; {_PG}"),
    ArchUnits("10.0", "Blackwell GB100 (B200)", fp32_lanes=128, fp64_lanes=64, fp16_flop_per_clk=512,
              bf16_flop_per_clk=512, int32_mad_lanes=64,
              tensor_flop_per_clk={"tensor.fp64": 128, "tensor.tf32": 4096, "tensor.fp16": 8192,
                                   "tensor.bf16": 8192, "tensor.fp8": 16384, "tensor.int8": 16384},
              geforce_fp32_accumulate_half_rate=False,
              source="HGX B200 per-GPU figures (2025) divided by 148 SMs and clock: 2x Hopper tensor per SM, "
                     "FP64 tensor = FP64 vector; non-tensor FP16 and IMAD assumed as Hopper"),
    ArchUnits("12.0", "Blackwell GB20x (RTX 50)", fp32_lanes=128, fp64_lanes=2, fp16_flop_per_clk=256,
              bf16_flop_per_clk=256, int32_mad_lanes=64,
              tensor_flop_per_clk={"tensor.tf32": 512, "tensor.fp16": 1024, "tensor.bf16": 1024,
                                   "tensor.fp8": 2048, "tensor.int8": 2048},
              geforce_fp32_accumulate_half_rate=True,
              source="RTX Blackwell whitepaper (2025): RTX 5090 figures / (170 SMs x 2.407 GHz); IMAD assumed as Ada"),
)})


def arch_units(compute_capability: str | None) -> ArchUnits | None:
    """The per-SM unit table for a compute capability like "9.0", or None when none is known."""
    return ARCHITECTURES.get(compute_capability or "")


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


# Cache bandwidths have no clock-derived formula here (they depend on per-arch bytes/clk/SM and slices).
CACHE_LEVEL_KEYS = frozenset({"l1", "l2"})


def missing_reason(device: dict, key: str) -> str | None:
    """Why clock_derived_peaks(device) has no `key` (one sentence), or None when it has it or when no
    table derives it (L1/L2 bandwidth: the measurement is the reference)."""
    if key in CACHE_LEVEL_KEYS:
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
