"""Fill a roofs-file ceiling's `peaks` (datasheet, clock-derived, ratios) and note the likely cause of a gap."""

from __future__ import annotations

import copy

from kernels.arch import arch_units
from kernels.base import format_bytes

from .datasheet import match_device
from .nvml import LIMITING_REASONS
from .peaks import clock_derived_peaks, missing_reason
from .roofs import CLOCK_DISAGREEMENT_FRACTION, NVML_MIN_SAMPLES, run_sm_clock

# A run clock this far below max boost is worth a note (NVML medians jitter by a few MHz).
CLOCK_SHORTFALL_NOTE_FRACTION = 0.03
# A measurement this far above the clock-derived peak at max boost cannot be right (work count or timing).
SUSPECT_ABOVE_PEAK_FRACTION = 0.02
# Inline ECC on GDDR stores check bits in ordinary DRAM, costing extra traffic; HBM has sideband ECC bits.
ECC_GDDR_TYPICAL_DRAM_LOSS = 0.10
# A tensor path a GPU lacks: the library runs that precision on the CUDA cores, whose peak is the reference.
PEAK_FALLBACKS = {"tensor.fp64": ("fp64", "no FP64 tensor cores (DMMA) on this GPU: compared with the fp64 peak "
                                          "of the CUDA cores, which cuBLAS uses here")}
# Data-center parts whose tensor peak needs an instruction hand-written mma.sync kernels do not use.
ASYNC_MMA_BY_MAJOR = {"9": ("Hopper", "wgmma"), "10": ("Blackwell data-center", "tcgen05.mma")}
MMA_SYNC_PREFIX = "tensor."  # the names of the hand-written mma.sync ceilings


def _ratio(value: float | None, peak: float | None) -> float | None:
    return value / peak if value is not None and peak else None


def annotate(ceiling: dict, device: dict) -> dict:
    """A copy of `ceiling` with `peaks` filled and gap explanations appended to `notes`.

    peaks: datasheet (matched by device name and memory), clock_derived_max (device max SM clock),
    clock_derived_run (at the run's SM clock: the clock kernel's clocks.sm_hz_kernel_median, else NVML's
    clocks.sm_hz_median; for dram NVML's clocks.mem_hz_median; when known), of_datasheet, of_clock_derived
    (vs the run figure when known, else max), clock_source (which clock: kernel | nvml | max; None without a
    clock-derived peak). A value more than SUSPECT_ABOVE_PEAK_FRACTION above clock_derived_max is marked
    valid=False.
    """
    out = copy.deepcopy(ceiling)
    notes: list[str] = out.setdefault("notes", [])
    key = out.get("peak_key")
    value = out.get("value")
    clocks = out.get("clocks") or {}
    cc = device.get("compute_capability") or ""
    units = arch_units(cc)
    if key in PEAK_FALLBACKS and units is not None and key not in units.sm_rates:
        key, why = PEAK_FALLBACKS[key]
        out["peak_key"] = key  # what it is compared with, here and in ceilings.compare
        notes.append(why)

    row = match_device(device.get("name") or "", device.get("memory_bytes"))
    datasheet = row.peaks().get(key) if row else None
    cd_max = clock_derived_peaks(device).get(key)
    kernel_sm, nvml_sm = clocks.get("sm_hz_kernel_median"), clocks.get("sm_hz_median")
    run_sm, sm_source = run_sm_clock(clocks)
    run_mem = clocks.get("mem_hz_median")
    if key == "dram":
        run_device = {**device, "memory_clock_hz": run_mem} if run_mem else None
        cd_run = clock_derived_peaks(run_device).get(key) if run_device else None
        source = "nvml" if cd_run else "max"
    else:
        cd_run = clock_derived_peaks(device, run_sm).get(key) if run_sm else None
        source = sm_source if cd_run else "max"
    out["peaks"] = {
        "datasheet": datasheet,
        "clock_derived_max": cd_max,
        "clock_derived_run": cd_run,
        "of_datasheet": _ratio(value, datasheet),
        "of_clock_derived": _ratio(value, cd_run if cd_run else cd_max),
        "clock_source": source if cd_max or cd_run else None,
    }

    if row is None:
        notes.append(f"no datasheet row matches {device.get('name')!r}; compare with "
                     f"`python -m ceilings.compare --datasheet NAME`")
    reason = missing_reason(device, key) if cd_max is None else None
    if reason:
        notes.append(reason)

    if kernel_sm and nvml_sm and abs(kernel_sm / nvml_sm - 1) > CLOCK_DISAGREEMENT_FRACTION:
        used = (f"NVML's ({clocks.get('samples')} samples during the timed launches; the kernel reads after them, "
                f"when the GPU has gone light)" if sm_source == "nvml" else
                f"the kernel's (NVML: {clocks.get('samples') or 0} samples, under {NVML_MIN_SAMPLES})")
        notes.append(f"SM clocks disagree: the clock kernel measured {kernel_sm / 1e9:.3f} GHz, NVML read "
                     f"{nvml_sm / 1e9:.3f} GHz (median); the peak at the run clock uses {used}")
    max_sm = device.get("max_sm_clock_hz")
    if out.get("kind") == "compute" and run_sm and max_sm and run_sm < max_sm * (1 - CLOCK_SHORTFALL_NOTE_FRACTION):
        measured = "kernel-measured " if sm_source == "kernel" else ""
        notes.append(f"SM clock during the run ({measured}median {run_sm / 1e9:.2f} GHz) was "
                     f"{(1 - run_sm / max_sm) * 100:.0f}% below max boost ({max_sm / 1e9:.2f} GHz)")
    limiting = [r for r in clocks.get("throttle_reasons") or [] if r in LIMITING_REASONS]
    if limiting:
        notes.append(f"clocks were held down during the run: {', '.join(limiting)}")

    if key == "dram" and (device.get("nvml") or {}).get("ecc_enabled"):
        memory_type = row.memory_type if row else ""
        if memory_type.upper().startswith("HBM"):
            notes.append("ECC is on; HBM keeps ECC bits in sideband, so it should not lower DRAM bandwidth")
        else:
            notes.append(f"ECC is on: inline ECC on GDDR memory typically lowers DRAM bandwidth by about "
                         f"{ECC_GDDR_TYPICAL_DRAM_LOSS * 100:.0f}%")

    major = cc.split(".")[0]
    # the mma.sync kernels (ceilings "tensor.<type>"), not the wgmma ones ("wgmma.<type>") nor cuBLAS
    if (out.get("pipe") == "tensor" and str(out.get("name", "")).startswith(MMA_SYNC_PREFIX)
            and out.get("backend") != "library" and major in ASYNC_MMA_BY_MAJOR):
        arch, instruction = ASYNC_MMA_BY_MAJOR[major]
        notes.append(f"mma.sync is not the {arch} tensor peak ({instruction} is): a hand-written mma.sync "
                     f"kernel cannot reach it")

    if value is not None and cd_max and value > cd_max * (1 + SUSPECT_ABOVE_PEAK_FRACTION):
        out["valid"] = False
        notes.insert(0, _above_peak_note(out, device, value, cd_max, key))  # first: it is why it is invalid
    return out


def _above_peak_note(ceiling: dict, device: dict, value: float, peak: float, key: str) -> str:
    """Why a value above the clock-derived peak is invalid, with its likely cause."""
    if key == "dram":
        sizes, l2 = ceiling.get("params", {}).get("array_bytes"), device.get("l2_bytes")
        where = f"arrays of {format_bytes(sizes)} against an L2 of {format_bytes(l2)}" if sizes and l2 else \
            "the buffer sizes"
        return (f"invalid: {value / 1e12:.3g} TB/s is above the theoretical DRAM bandwidth {peak / 1e12:.3g} TB/s "
                f"(2 x memory clock x bus width); the data most likely fit in a cache ({where}): make the "
                f"buffers larger than 8x L2")
    return (f"suspect: measured {value:.4g} {ceiling.get('unit', '')} is {(value / peak - 1) * 100:.0f}% above the "
            f"clock-derived peak {peak:.4g} at max boost; check the declared work and the timing")
