"""Device discovery: what the GPU is, from the CUDA runtime (through CuPy) and NVML. A failed probe is
recorded with its reason and never aborts a run; only planning refuses a device whose SM count, compute
capability or L2 size is unknown (kernels sized from a guess would give wrong numbers)."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from common.errors import CeilingsError, MissingDependency, describe
from kernels.base import DeviceLimits

from .nvml import Nvml, text

# pyproject.toml's extras, by the CUDA major version of the CuPy (and NVRTC) each installs.
CUDA_EXTRAS = {12: "cuda12", 13: "cuda13"}
# cudaError_t values that have a cause worth naming; any other is quoted as the runtime says it.
CUDA_ERROR_INSUFFICIENT_DRIVER = 35
CUDA_ERROR_NO_DEVICE = 100
# The loaded kernel module's version ("... Kernel Module  550.54.15  ..." or "... Kernel Module for x86_64
# 570.86.15 ..."): there whenever the driver is loaded, even where libcuda.so.1 is not (a container without
# the NVIDIA Container Toolkit).
NVIDIA_PROC_VERSION = Path("/proc/driver/nvidia/version")
SIMULATE_COMMAND = "python -m ceilings.measure --simulate --quick"


@dataclass(frozen=True)
class Driver:
    """What is installed of the NVIDIA driver, probed without raising."""

    libcuda_error: str | None  # why libcuda.so.1 did not load; None when it did
    cuda_version: int | None  # cuDriverGetVersion: the newest CUDA the driver runs, e.g. 12040 for 12.4
    module_version: str | None  # the kernel module's version, e.g. "550.54.15"; None when none is loaded


def probe_driver() -> Driver:
    """libcuda.so.1 and the kernel module, looked at directly: the CUDA runtime's error alone does not say
    whether the driver is missing or too old."""
    cuda_version, libcuda_error = None, None
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        libcuda_error = describe(exc)
    else:
        version = ctypes.c_int(0)
        # cuDriverGetVersion needs no cuInit: it answers on a machine with no (visible) GPU as well.
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
            cuda_version = version.value
    try:
        found = re.search(r"Kernel Module.*?\s(\d+\.\d+(?:\.\d+)?)\s", NVIDIA_PROC_VERSION.read_text())
    except OSError:  # no driver loaded (or no /proc: not Linux)
        found = None
    return Driver(libcuda_error, cuda_version, found.group(1) if found else None)


def simulator_installed() -> bool:
    """Whether `--simulate` can run: it needs numba and numba-cuda, not CuPy or a driver. Looked up without
    importing them (numba reads NUMBA_ENABLE_CUDASIM once, when first imported)."""
    return all(importlib.util.find_spec(name) is not None for name in ("numba", "numba_cuda"))


def simulate_hint() -> str:
    if simulator_installed():
        return (f"without a GPU, `{SIMULATE_COMMAND}` runs the kernels on Numba's CUDA simulator "
                "(the numbers mean nothing)")
    return (f"to run without a GPU on Numba's CUDA simulator, pip install numba-cuda, then `{SIMULATE_COMMAND}`"
            " (the numbers mean nothing)")


def no_gpu_cause(status: int | None, runtime_text: str, runtime_version: int | None, driver: Driver) -> str:
    """The real cause of the CUDA runtime's error `status` (cudaError_t), with its remedy, in one phrase."""
    if driver.libcuda_error is not None and status in (CUDA_ERROR_NO_DEVICE, CUDA_ERROR_INSUFFICIENT_DRIVER):
        if driver.module_version:  # the kernel side is there: its user-space library is not visible here
            return (f"the NVIDIA kernel driver {driver.module_version} is loaded but libcuda.so.1 is not found "
                    f"({driver.libcuda_error}): in a container, start it with the NVIDIA Container Toolkit "
                    "(docker run --gpus all); elsewhere, reinstall the NVIDIA driver")
        return "no NVIDIA driver is installed (libcuda.so.1 not found): install the NVIDIA driver to measure"
    if status == CUDA_ERROR_INSUFFICIENT_DRIVER:
        return _driver_too_old(runtime_version, driver)
    if status == CUDA_ERROR_NO_DEVICE:
        hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
        remedy = (f"CUDA_VISIBLE_DEVICES={hidden!r} may hide it: unset it or name a GPU that `nvidia-smi -L` lists"
                  if hidden is not None else "check that `nvidia-smi -L` lists one")
        return f"no NVIDIA GPU found (driver {_driver_name(driver)} is installed): {remedy}"
    return f"the CUDA runtime says {runtime_text}"


def _driver_too_old(runtime_version: int | None, driver: Driver) -> str:
    """The driver runs CUDA up to `driver.cuda_version`; this CuPy was built for `runtime_version`: the
    remedy is the extra built for the driver's CUDA, where there is one, or a newer driver."""
    needs = f"CUDA {_cuda_version(runtime_version)}" if runtime_version else "a newer CUDA"
    cupy_name = f"cupy-cuda{runtime_version // 1000}x" if runtime_version else "the installed CuPy"
    name = f"the NVIDIA driver {driver.module_version}" if driver.module_version else "the NVIDIA driver"
    if driver.cuda_version is None:  # libcuda loaded but did not say its version
        extras = " or ".join(f"'ceilings[{e}]'" for e in CUDA_EXTRAS.values())
        return (f"{name} is too old for {cupy_name} ({needs}): upgrade the driver, or install in place of "
                f"{cupy_name} the extra of the CUDA version `nvidia-smi` shows: {extras}")
    major = driver.cuda_version // 1000
    extra = CUDA_EXTRAS.get(major)
    if extra is not None and (runtime_version is None or major < runtime_version // 1000):
        swap = (f"pip uninstall {cupy_name} && pip install 'ceilings[{extra}]'" if runtime_version else
                f"install 'ceilings[{extra}]' in place of {cupy_name}")
        remedy = f"{swap}, or upgrade the driver"
    else:  # the same CUDA major version (an older minor one), or older than any extra is built for
        remedy = f"upgrade the driver to one that runs {needs}"
    return f"{name} runs CUDA up to {_cuda_version(driver.cuda_version)} but {cupy_name} needs {needs}: {remedy}"


def _driver_name(driver: Driver) -> str:
    """'550.54.15 (CUDA 12.4)', or as much of it as was found."""
    cuda = f"CUDA {_cuda_version(driver.cuda_version)}" if driver.cuda_version else None
    if driver.module_version:
        return f"{driver.module_version} ({cuda})" if cuda else driver.module_version
    return f"for {cuda}" if cuda else "(version unknown)"


def require_gpu() -> int:
    """The number of CUDA devices; MissingDependency (one line: the real cause and its remedy) when there is
    none."""
    try:
        import cupy
    except ImportError:
        raise MissingDependency("CuPy is not installed: pip install 'ceilings[cuda13]' (CUDA 13 driver) or "
                                f"'ceilings[cuda12]'; {simulate_hint()}") from None
    rt = cupy.cuda.runtime
    try:
        count = rt.getDeviceCount()
    except rt.CUDARuntimeError as exc:  # no driver, a driver too old for this CuPy, no device, ...
        try:
            runtime_version = rt.runtimeGetVersion()
        except rt.CUDARuntimeError:
            runtime_version = None
        cause = no_gpu_cause(exc.status, describe(exc), runtime_version, probe_driver())
        raise MissingDependency(f"no usable NVIDIA GPU: {cause}; {simulate_hint()}") from None
    if count == 0:
        raise MissingDependency(f"no NVIDIA GPU found by the CUDA runtime; {simulate_hint()}")
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

