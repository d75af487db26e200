"""Device discovery: what the GPU is, from the CUDA runtime (through CuPy) and NVML. A failed probe is
recorded with its reason and never aborts a run; only planning refuses a device whose SM count, compute
capability or L2 size is unknown (kernels sized from a guess would give wrong numbers)."""

from __future__ import annotations

from typing import Any, Callable

from kernels.base import DeviceLimits

from .errors import CeilingsError, MissingDependency, describe
from .nvml import Nvml, text

SIMULATE_HINT = "run `python -m ceilings.measure --simulate` to exercise the pipeline on Numba's simulator"


def require_gpu() -> int:
    """The number of CUDA devices; MissingDependency (one line, with the remedy) when there is none."""
    try:
        import cupy
    except ImportError:
        raise MissingDependency("CuPy is not installed: pip install 'ceilings[cuda13]' (CUDA 13 driver) or "
                                f"'ceilings[cuda12]'; or {SIMULATE_HINT}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver, insufficient driver, no device
        raise MissingDependency(f"no usable NVIDIA GPU: the CUDA runtime says {describe(exc)}; {SIMULATE_HINT}"
                                ) from None
    if count == 0:
        raise MissingDependency(f"no NVIDIA GPU found by the CUDA runtime; {SIMULATE_HINT}")
    return count


def probe_device(index: int) -> dict:
    """Everything the roofs file records about device `index`; failed probes are null with the reason."""
    import cupy

    rt = cupy.cuda.runtime
    device: dict[str, Any] = {"index": index}
    errors: dict[str, str] = {}

    def probe(name: str, fn: Callable[[], Any]) -> None:
        try:
            device[name] = fn()
        except Exception as exc:  # record why, keep going
            device[name] = None
            errors[name] = describe(exc)

    probe("_props", lambda: rt.getDeviceProperties(index))
    props = device.pop("_props")
    if props is None:  # every field read from the properties fails for the same reason
        errors["properties"] = errors.pop("_props")
        props = _Unavailable(errors["properties"])
    probe("name", lambda: text(props["name"]))
    probe("compute_capability", lambda: f"{props['major']}.{props['minor']}")
    probe("sm_count", lambda: int(props["multiProcessorCount"]))
    # CUDA 13 dropped clockRate/memoryClockRate from cudaDeviceProp: read them as attributes (kHz).
    probe("max_sm_clock_hz", lambda: rt.deviceGetAttribute(rt.cudaDevAttrClockRate, index) * 1e3)
    probe("memory_clock_hz", lambda: rt.deviceGetAttribute(rt.cudaDevAttrMemoryClockRate, index) * 1e3)
    probe("memory_bus_width_bits", lambda: int(rt.deviceGetAttribute(rt.cudaDevAttrGlobalMemoryBusWidth, index)))
    probe("ecc_enabled", lambda: bool(rt.deviceGetAttribute(rt.cudaDevAttrEccEnabled, index)))
    probe("memory_bytes", lambda: int(props["totalGlobalMem"]))
    probe("l2_bytes", lambda: int(props["l2CacheSize"]))
    probe("max_threads_per_sm", lambda: int(props["maxThreadsPerMultiProcessor"]))
    probe("shared_bytes_per_sm", lambda: int(props["sharedMemPerMultiprocessor"]))
    probe("driver_version", lambda: _cuda_version(rt.driverGetVersion()))
    probe("runtime_version", lambda: _cuda_version(rt.runtimeGetVersion()))
    probe("pci_bus_id", lambda: f"{props['pciDomainID']:04x}:{props['pciBusID']:02x}:{props['pciDeviceID']:02x}.0")
    probe("uuid", lambda: _uuid(props["uuid"]))

    nvml = Nvml(index)
    facts, nvml_errors = nvml.facts()
    device["nvml"] = facts
    errors.update(nvml_errors)
    device["probe_errors"] = errors
    return device


def simulated_device() -> dict:
    """The device record of a --simulate run: honest about being a simulator."""
    return {"index": 0, "name": "Numba CUDA simulator (not a GPU)", "compute_capability": None,
            "sm_count": 1, "max_sm_clock_hz": None, "memory_clock_hz": None, "memory_bus_width_bits": None,
            "memory_bytes": None, "l2_bytes": None, "driver_version": None, "runtime_version": None,
            "uuid": None, "pci_bus_id": None, "nvml": {},
            "probe_errors": {"all": "simulated run: no device was probed"}}


class _Unavailable(dict):
    """Device properties that could not be read: any field raises with the original reason."""

    def __init__(self, reason: str):
        super().__init__()
        self.reason = reason

    def __missing__(self, key: str):
        raise RuntimeError(f"device properties unavailable ({self.reason})")


PLANNING_FACTS = ("sm_count", "compute_capability", "l2_bytes")  # grids and working sets are sized from them


def limits_of(device: dict, free_bytes: int, *, simulate: bool = False) -> DeviceLimits:
    """What kernel planning needs, from a probed (or simulated) device record. CeilingsError (one line) when
    a fact that sizes grids or working sets is unknown."""
    if simulate:
        return DeviceLimits(sm_count=1, compute_capability=(9, 0), l2_bytes=64 * 1024, free_bytes=free_bytes,
                            simulate=True)
    missing = [f for f in PLANNING_FACTS if not device.get(f)]
    if missing:
        errors = device.get("probe_errors", {})
        why = "; ".join(f"{f}: {errors.get(f, 'not reported')}" for f in missing)
        raise CeilingsError(f"device {device.get('index')}: cannot size the benchmarks without {why}; check the "
                            f"driver with nvidia-smi, or measure another --device")
    major, minor = (int(p) for p in device["compute_capability"].split("."))
    return DeviceLimits(
        sm_count=device["sm_count"],
        compute_capability=(major, minor),
        l2_bytes=device["l2_bytes"],
        free_bytes=free_bytes,
        max_threads_per_sm=device.get("max_threads_per_sm") or 2048,
        shared_bytes_per_sm=device.get("shared_bytes_per_sm") or 100 * 1024,
    )


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _uuid(raw: Any) -> str:
    data = bytes(raw) if not isinstance(raw, str) else raw.encode("latin-1")
    h = data[:16].hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

