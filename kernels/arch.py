"""What each architecture's SM holds: dense per-SM throughput by unit, in operations per clock.

One table for two uses: `kernels/` sizes launches from it (how long a kernel of so many instructions runs) and
`ceilings.peaks` derives each GPU's peaks from it (SM count x per-SM rate x clock). Sources: docs/datasheets.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


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
    # MUFU (special function unit) results per clock per SM: ex2, lg2, rcp, rsqrt, sin, cos. 16 on every
    # architecture from 5.x to 12.0 (CUDA C++ Programming Guide, arithmetic instruction throughput table,
    # "32-bit floating-point reciprocal, reciprocal square root, base-2 logarithm, base-2 exponential,
    # sine, cosine"): 4 per SM sub-partition.
    sfu_lanes: int = 16
    sm_rates: Mapping[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rates = {
            "fp64": 2 * self.fp64_lanes,
            "fp32": 2 * self.fp32_lanes,
            "fp16": self.fp16_flop_per_clk,
            "int32": 2 * self.int32_mad_lanes,
            "sfu": self.sfu_lanes,  # one result per lane per clock (not FLOPs: special-function ops)
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
