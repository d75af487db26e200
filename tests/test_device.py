"""Device discovery against a fake CUDA runtime: failed probes are recorded with the reason, never raised;
no GPU is one line naming the real cause (no driver, a driver too old, no device) and its remedy."""

import ctypes
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from ceilings import device as dev
from common.errors import CeilingsError, MissingDependency


def fake_cupy(props=None, attrs=None, broken=()):
    props = props if props is not None else {
        "name": b"NVIDIA H200", "major": 9, "minor": 0, "multiProcessorCount": 132,
        "totalGlobalMem": 150_000_000_000, "l2CacheSize": 60 * 2**20, "maxThreadsPerMultiProcessor": 2048,
        "sharedMemPerMultiprocessor": 233472, "pciDomainID": 0, "pciBusID": 0x1b, "pciDeviceID": 0,
        "uuid": bytes(range(16))}
    attrs = attrs if attrs is not None else {13: 1_980_000, 36: 3_201_000, 37: 6144, 32: 1}

    def attribute(attr, index):
        if attr in broken:
            raise RuntimeError(f"cudaErrorInvalidValue for attribute {attr}")
        return attrs[attr]

    rt = types.SimpleNamespace(
        getDeviceProperties=lambda i: props, deviceGetAttribute=attribute,
        driverGetVersion=lambda: 13000, runtimeGetVersion=lambda: 13000,
        cudaDevAttrClockRate=13, cudaDevAttrMemoryClockRate=36, cudaDevAttrGlobalMemoryBusWidth=37,
        cudaDevAttrEccEnabled=32, getDeviceCount=lambda: 1)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=rt))


@pytest.fixture
def no_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError


def test_probe_reads_the_runtime(monkeypatch, no_nvml):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    d = dev.probe_device(0)
    assert d["name"] == "NVIDIA H200" and d["compute_capability"] == "9.0" and d["sm_count"] == 132
    assert d["max_sm_clock_hz"] == 1.98e9 and d["memory_clock_hz"] == 3.201e9
    assert d["memory_bus_width_bits"] == 6144 and d["l2_bytes"] == 60 * 2**20
    assert d["driver_version"] == "13.0" and d["pci_bus_id"] == "0000:1b:00.0"
    assert d["uuid"] == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert "nvidia-ml-py is not installed" in d["probe_errors"]["nvml"]


def test_a_failing_probe_is_recorded_and_the_rest_survive(monkeypatch, no_nvml):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(broken=(36,)))
    d = dev.probe_device(0)
    assert d["memory_clock_hz"] is None
    assert "cudaErrorInvalidValue" in d["probe_errors"]["memory_clock_hz"]
    assert d["max_sm_clock_hz"] == 1.98e9


def test_missing_properties_leave_named_gaps(monkeypatch, no_nvml):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(props={"name": "X"}))
    d = dev.probe_device(0)
    assert d["name"] == "X" and d["sm_count"] is None and "sm_count" in d["probe_errors"]
    # kernels sized for a guessed SM count or L2 would give wrong numbers: planning refuses, in one line
    with pytest.raises(CeilingsError, match=r"device 0: cannot size the benchmarks without sm_count: .*"
                                            r"multiProcessorCount.*; compute_capability: .*l2_bytes: .*nvidia-smi"):
        dev.limits_of(d, 2**30)


def test_unreadable_properties_record_the_runtime_error_for_every_field(monkeypatch, no_nvml):
    fake = fake_cupy()

    def fails(index):
        raise RuntimeError("cudaErrorDevicesUnavailable: all CUDA-capable devices are busy")

    fake.cuda.runtime.getDeviceProperties = fails
    monkeypatch.setitem(sys.modules, "cupy", fake)
    d = dev.probe_device(0)
    assert d["sm_count"] is None and d["l2_bytes"] is None
    assert "cudaErrorDevicesUnavailable" in d["probe_errors"]["properties"]
    assert "cudaErrorDevicesUnavailable" in d["probe_errors"]["sm_count"]
    assert d["max_sm_clock_hz"] == 1.98e9  # attributes do not need the properties


def test_limits_of_a_probed_device():
    limits = dev.limits_of({"compute_capability": "8.0", "sm_count": 108, "l2_bytes": 40 * 2**20,
                            "max_threads_per_sm": 2048, "shared_bytes_per_sm": 167936}, 70 * 2**30)
    assert limits.arch == "sm_80" and limits.sm_count == 108 and limits.free_bytes == 70 * 2**30




class FakeCudaRuntimeError(RuntimeError):
    """CuPy's CUDARuntimeError: the cudaError_t in .status, 'cudaErrorName: text' as its message."""

    def __init__(self, status, text):
        super().__init__(text)
        self.status = status


def no_gpu(monkeypatch, status, text, driver, runtime_version=13020, simulator=True):
    """require_gpu()'s message where the CUDA runtime fails with `status` and the probes find `driver`."""
    fake = fake_cupy()

    def fails():
        raise FakeCudaRuntimeError(status, text)

    fake.cuda.runtime.CUDARuntimeError = FakeCudaRuntimeError
    fake.cuda.runtime.getDeviceCount = fails
    fake.cuda.runtime.runtimeGetVersion = lambda: runtime_version
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(dev, "probe_driver", lambda: driver)
    monkeypatch.setattr(dev, "simulator_installed", lambda: simulator)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(MissingDependency) as raised:
        dev.require_gpu()
    message = str(raised.value)
    assert "\n" not in message and message.startswith("no usable NVIDIA GPU: ")
    return message


INSUFFICIENT = (35, "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")
NO_DEVICE = (100, "cudaErrorNoDevice: no CUDA-capable device is detected")
NO_LIBCUDA = "libcuda.so.1: cannot open shared object file: No such file or directory"


@pytest.mark.parametrize("status, text", [INSUFFICIENT, NO_DEVICE])
def test_no_libcuda_and_no_kernel_module_is_no_driver(monkeypatch, status, text):
    message = no_gpu(monkeypatch, status, text, dev.Driver(NO_LIBCUDA, None, None))
    assert "no NVIDIA driver is installed (libcuda.so.1 not found): install the NVIDIA driver" in message
    assert "`python -m ceilings.measure --simulate --quick` runs the kernels on Numba's CUDA simulator" in message


def test_kernel_module_without_libcuda_points_to_the_container_toolkit(monkeypatch):
    message = no_gpu(monkeypatch, *INSUFFICIENT, dev.Driver(NO_LIBCUDA, None, "550.54.15"))
    assert "the NVIDIA kernel driver 550.54.15 is loaded but libcuda.so.1 is not found" in message
    assert "--gpus all" in message and "no NVIDIA driver is installed" not in message


def test_driver_of_an_older_cuda_major_names_both_versions_and_the_extra(monkeypatch):
    message = no_gpu(monkeypatch, *INSUFFICIENT, dev.Driver(None, 12040, "550.54.15"), runtime_version=13020)
    assert "the NVIDIA driver 550.54.15 runs CUDA up to 12.4 but cupy-cuda13x needs CUDA 13.2" in message
    assert "pip uninstall cupy-cuda13x && pip install 'ceilings[cuda12]', or upgrade the driver" in message


def test_driver_of_an_older_minor_version_is_upgraded(monkeypatch):
    message = no_gpu(monkeypatch, *INSUFFICIENT, dev.Driver(None, 13000, None), runtime_version=13020)
    assert "the NVIDIA driver runs CUDA up to 13.0 but cupy-cuda13x needs CUDA 13.2" in message
    assert "upgrade the driver to one that runs CUDA 13.2" in message and "pip install" not in message


def test_driver_older_than_any_extra_is_upgraded(monkeypatch):
    message = no_gpu(monkeypatch, *INSUFFICIENT, dev.Driver(None, 11080, "520.61.05"), runtime_version=12080)
    assert "the NVIDIA driver 520.61.05 runs CUDA up to 11.8 but cupy-cuda12x needs CUDA 12.8" in message
    assert "upgrade the driver to one that runs CUDA 12.8" in message and "pip install" not in message


def test_driver_of_unknown_version_names_both_extras(monkeypatch):
    message = no_gpu(monkeypatch, *INSUFFICIENT, dev.Driver(None, None, None), runtime_version=13020)
    assert "the NVIDIA driver is too old for cupy-cuda13x (CUDA 13.2): upgrade the driver" in message
    assert "'ceilings[cuda12]' or 'ceilings[cuda13]'" in message


def test_driver_without_a_device_names_the_driver(monkeypatch):
    message = no_gpu(monkeypatch, *NO_DEVICE, dev.Driver(None, 12040, "550.54.15"))
    assert "no NVIDIA GPU found (driver 550.54.15 (CUDA 12.4) is installed): check that `nvidia-smi -L`" in message


def test_no_device_names_a_cuda_visible_devices_that_hides_it(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    cause = dev.no_gpu_cause(*NO_DEVICE, 13020, dev.Driver(None, 12040, None))
    assert cause == ("no NVIDIA GPU found (driver for CUDA 12.4 is installed): CUDA_VISIBLE_DEVICES='' may hide "
                     "it: unset it or name a GPU that `nvidia-smi -L` lists")


def test_other_runtime_errors_are_quoted(monkeypatch):
    message = no_gpu(monkeypatch, 999, "cudaErrorUnknown: unknown error", dev.Driver(None, 13000, "580.65.06"))
    assert "the CUDA runtime says cudaErrorUnknown: unknown error; without a GPU" in message


def test_without_numba_cuda_the_hint_says_how_to_get_the_simulator(monkeypatch):
    message = no_gpu(monkeypatch, *INSUFFICIENT, dev.Driver(NO_LIBCUDA, None, None), simulator=False)
    assert "pip install numba-cuda, then `python -m ceilings.measure --simulate --quick`" in message


def test_simulator_installed_follows_the_packages(monkeypatch):
    real = dev.importlib.util.find_spec
    monkeypatch.setattr(dev.importlib.util, "find_spec", lambda name: None if name == "numba_cuda" else real(name))
    assert dev.simulator_installed() is False


def test_cuda_extras_are_the_projects():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    for major, extra in dev.CUDA_EXTRAS.items():
        assert any(req.startswith(f"cupy-cuda{major}x") for req in extras[extra]), extra


class FakeLibcuda:
    def __init__(self, status, version):
        self.status, self.version = status, version

    def cuDriverGetVersion(self, pointer):  # noqa: N802 (the driver API's name)
        pointer._obj.value = self.version
        return self.status


def test_probe_driver_reads_libcuda_and_the_kernel_module(monkeypatch, tmp_path):
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  "
                    "(dvs-builder@U16-I3-B03-4-3)  Thu Jan 23 22:57:24 UTC 2025\nGCC version:  gcc 12.3.0\n")
    monkeypatch.setattr(dev, "NVIDIA_PROC_VERSION", proc)
    monkeypatch.setattr(dev.ctypes, "CDLL", lambda name: FakeLibcuda(0, 12080))
    assert dev.probe_driver() == dev.Driver(None, 12080, "570.86.15")
    monkeypatch.setattr(dev.ctypes, "CDLL", lambda name: FakeLibcuda(34, 0))  # CUDA_ERROR_STUB_LIBRARY
    assert dev.probe_driver() == dev.Driver(None, None, "570.86.15")


def test_probe_driver_without_a_driver(monkeypatch, tmp_path):
    def absent(name):
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(dev, "NVIDIA_PROC_VERSION", tmp_path / "absent")
    monkeypatch.setattr(dev.ctypes, "CDLL", absent)
    assert dev.probe_driver() == dev.Driver(NO_LIBCUDA, None, None)


def _libcuda_loads() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_libcuda_loads() or os.path.exists("/proc/driver/nvidia/version"),
                    reason="this machine has an NVIDIA driver")
def test_measure_on_a_machine_without_a_driver_says_so_in_one_line(tmp_path):
    pytest.importorskip("cupy")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    out = subprocess.run([sys.executable, "-m", "ceilings.measure"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith("python -m ceilings.measure: error: no usable NVIDIA GPU: no NVIDIA driver is "
                               "installed (libcuda.so.1 not found)")
    assert "`python -m ceilings.measure --simulate --quick`" in lines[0]
