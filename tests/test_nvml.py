import time

from ceilings.nvml import ClockSampler, decode_reasons, summarize_samples


def test_decode_reasons_by_bit():
    # 0x4 sw power cap, 0x40 hw thermal slowdown (nvml.h clocks-event reason bits)
    assert decode_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_reasons(0) == []


def test_summary_takes_medians_and_unions_reasons():
    samples = [
        {"sm_hz": 1.98e9, "mem_hz": 2.6e9, "power_w": 600, "temperature_c": 60, "reasons": 0},
        {"sm_hz": 1.70e9, "mem_hz": 2.6e9, "power_w": 700, "temperature_c": 70, "reasons": 0x4},
        {"sm_hz": 1.80e9, "mem_hz": 2.6e9, "power_w": 650, "temperature_c": 65, "reasons": 0x1},
    ]
    s = summarize_samples(samples)
    assert s["samples"] == 3 and s["sm_hz_median"] == 1.80e9 and s["sm_hz_min"] == 1.70e9
    assert s["power_w_median"] == 650 and s["temperature_c_max"] == 70
    assert s["throttle_reasons"] == ["gpu_idle", "sw_power_cap"]


def test_sampler_without_nvml_is_empty_not_an_error():
    with ClockSampler(None) as sampler:
        pass
    assert sampler.summary() == {"samples": 0}


class FakeNvml:
    ok = True

    def __init__(self, fail_after):
        self.n, self.fail_after = 0, fail_after

    def sample(self):
        self.n += 1
        if self.n > self.fail_after:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return {"sm_hz": 1.5e9, "mem_hz": 1e9, "power_w": 100, "temperature_c": 40, "reasons": 0}


def test_sampler_keeps_samples_and_reports_a_failure():
    with ClockSampler(FakeNvml(fail_after=2), interval_s=0.001) as sampler:
        time.sleep(0.05)
    s = sampler.summary()
    assert s["samples"] == 2 and s["error"] == "NVML_ERROR_GPU_IS_LOST"


def test_nvml_opens_the_cuda_device_by_pci_bus_id(monkeypatch):
    """NVML's index order is not CUDA's (CUDA_VISIBLE_DEVICES, PCI order): CUDA device 1 here sits at bus
    0000:3B:00.0, which NVML would call device 0; the handle must be the one for that bus id."""
    import sys
    import types

    from ceilings.nvml import Nvml

    handles = {"0000:3B:00.0": "bus-3b", "0000:18:00.0": "bus-18"}
    fake_nvml = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByPciBusId=handles.__getitem__,
        nvmlDeviceGetHandleByIndex=lambda i: ["bus-3b", "bus-18"][i],
    )
    cuda_order = ["0000:18:00.0", "0000:3B:00.0"]  # CUDA device 1 is the one at 3B
    fake_runtime = types.SimpleNamespace(deviceGetPCIBusId=cuda_order.__getitem__)
    fake_cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=fake_runtime))
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    nvml = Nvml(1)
    assert nvml.ok and nvml._handle == "bus-3b"
