"""NVML, when present: device facts and clock/power/throttle sampling while a benchmark runs.

Everything here degrades to "not available, because ..." and never aborts a run.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any, Callable

SAMPLE_INTERVAL_S = 0.02

# nvmlClocksEventReasons bits (nvml.h); names as nvidia-smi prints them.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that mean the clock was held down by power or heat (gpu_idle between launches is benign).
LIMITING_REASONS = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                              "hw_power_brake_slowdown"})


def decode_reasons(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


class Nvml:
    """A thin, failure-tolerant handle on one device. `error` says why NVML is unusable, if it is."""

    def __init__(self, cuda_index: int):
        self.index = cuda_index
        self.error: str | None = None
        self._nv: Any = None
        self._handle: Any = None
        try:
            import pynvml
        except ImportError:
            self.error = "nvidia-ml-py is not installed (pip install 'ceilings[nvml]')"
            return
        try:
            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByPciBusId(_pci_bus_id(cuda_index))
            self._nv = pynvml
        except Exception as exc:  # NVMLError_* for a missing library, driver or device
            self.error = f"NVML unavailable: {exc}"

    @property
    def ok(self) -> bool:
        return self._nv is not None

    def _read(self, fn: Callable[[Any, Any], Any]) -> Any:
        return fn(self._nv, self._handle)

    def facts(self) -> tuple[dict, dict]:
        """(values, probe_errors) of the slowly-changing facts recorded with the device."""
        probes: dict[str, Callable[[Any, Any], Any]] = {
            "sm_clock_hz": lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM) * 1e6,
            "memory_clock_hz": lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM) * 1e6,
            "max_sm_clock_hz": lambda nv, h: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM) * 1e6,
            "max_memory_clock_hz": lambda nv, h: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM) * 1e6,
            "power_limit_w": lambda nv, h: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
            "temperature_c": lambda nv, h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
            "ecc_enabled": lambda nv, h: bool(nv.nvmlDeviceGetEccMode(h)[0]),
            "persistence_mode": lambda nv, h: bool(nv.nvmlDeviceGetPersistenceMode(h)),
            "driver_version": lambda nv, h: text(nv.nvmlSystemGetDriverVersion()),
            "uuid": lambda nv, h: text(nv.nvmlDeviceGetUUID(h)),
            "pci_bus_id": lambda nv, h: text(nv.nvmlDeviceGetPciInfo(h).busId),
        }
        values: dict = {}
        errors: dict = {}
        if not self.ok:
            return values, {"nvml": self.error}
        for name, probe in probes.items():
            try:
                values[name] = self._read(probe)
            except Exception as exc:  # one unsupported query must not hide the others
                errors[f"nvml.{name}"] = str(exc) or type(exc).__name__
        return values, errors

    def sample(self) -> dict:
        nv, h = self._nv, self._handle
        reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nv.nvmlDeviceGetCurrentClocksThrottleReasons
        return {
            "t": time.perf_counter(),
            "sm_hz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM) * 1e6,
            "mem_hz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM) * 1e6,
            "power_w": nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "temperature_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
            "reasons": reasons_fn(h),
        }


class ClockSampler:
    """Samples clocks, power and throttle reasons on a thread for the duration of a `with` block."""

    def __init__(self, nvml: Nvml | None, interval_s: float = SAMPLE_INTERVAL_S):
        self.nvml = nvml if nvml is not None and nvml.ok else None
        self.interval_s = interval_s
        self.samples: list[dict] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self.nvml.sample())
            except Exception as exc:  # stop sampling, keep what we have, say why
                self.error = str(exc) or type(exc).__name__
                return
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "ClockSampler":
        if self.nvml is not None:
            self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def summary(self) -> dict:
        return summarize_samples(self.samples, self.error)


def summarize_samples(samples: list[dict], error: str | None = None) -> dict:
    """Medians of the clocks and power, the hottest temperature and every throttle reason seen."""
    if not samples:
        return {"samples": 0, **({"error": error} if error else {})}
    mask = 0
    for s in samples:
        mask |= int(s["reasons"])
    out = {
        "samples": len(samples),
        "sm_hz_median": statistics.median(s["sm_hz"] for s in samples),
        "sm_hz_min": min(s["sm_hz"] for s in samples),
        "mem_hz_median": statistics.median(s["mem_hz"] for s in samples),
        "power_w_median": statistics.median(s["power_w"] for s in samples),
        "temperature_c_max": max(s["temperature_c"] for s in samples),
        "throttle_reasons": decode_reasons(mask),
    }
    if error:
        out["error"] = error
    return out


def _pci_bus_id(cuda_index: int) -> str:
    """The PCI bus id of CUDA device `cuda_index`. NVML numbers GPUs in PCI order and ignores
    CUDA_VISIBLE_DEVICES, so its index can name another GPU than CUDA's; the bus id names the same one."""
    import cupy

    return cupy.cuda.runtime.deviceGetPCIBusId(cuda_index)


def text(value: Any) -> str:
    """A C string from CUDA or NVML (bytes, maybe NUL-padded) as str."""
    return value.decode(errors="replace").rstrip("\0") if isinstance(value, bytes) else str(value)
