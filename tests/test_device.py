"""Device discovery against a fake CUDA runtime: failed probes are recorded with the reason, never raised."""

import sys
import types

import pytest

from ceilings import device as dev
from ceilings.errors import CeilingsError, MissingDependency


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


def test_no_device_is_a_missing_dependency(monkeypatch):
    fake = fake_cupy()
    def no_device():
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device")

    fake.cuda.runtime.getDeviceCount = no_device
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(MissingDependency, match="no usable NVIDIA GPU.*cudaErrorNoDevice.*--simulate"):
        dev.require_gpu()
