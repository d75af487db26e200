"""The clock kernel (kernels.clock): its arithmetic and checks from made-up outputs, its SASS offline, and
on a GPU a reading beside NVML's."""

import re

import pytest

from kernels.clock import SOURCE, SPIN_CYCLES, summarize
from tests.sass_tools import sass_of


def test_clock_is_the_median_of_cycles_over_nanoseconds():
    # 2^20 cycles in 524288 ns: 2.0 GHz; in 699051 ns: 1.5 GHz (to 1 ppm); 2^21 - 1 cycles in 1e6 ns: 2.097 GHz
    readings = [(SPIN_CYCLES, 524_288), (SPIN_CYCLES, 699_051), (2 * SPIN_CYCLES - 1, 1_000_000)]
    out = summarize(readings)
    assert out["sm_hz_kernel_median"] == pytest.approx(2.0e9)
    assert out["sm_hz_kernel_min"] == pytest.approx(1.5e9, rel=1e-6)
    assert out["sm_hz_kernel_max"] == pytest.approx(2_097_151e3)
    assert out["sm_hz_kernel_readings"] == 3


@pytest.mark.parametrize("bad, why", [
    ((-1, -1), "-1 cycles for a spin of 1048576"),  # a block that never wrote (the buffer's fill)
    ((SPIN_CYCLES - 1, 524_288), "1048575 cycles"),  # the spin cannot end early
    ((2 * SPIN_CYCLES + 1, 524_288), "2097153 cycles"),  # reads stalled past twice the spin
    ((SPIN_CYCLES, 0), "0 ns elapsed"),
    ((SPIN_CYCLES, 100_000), "10.5 GHz"),  # 2^20 / 1e5 ns: above any GPU clock
    ((SPIN_CYCLES, 20_000_000), "0.0524 GHz"),  # 2^20 / 2e7 ns: below any GPU clock
])
def test_one_implausible_reading_discards_them_all(bad, why):
    out = summarize([(SPIN_CYCLES, 524_288), bad])
    assert set(out) == {"sm_hz_kernel_error"}
    assert out["sm_hz_kernel_error"].startswith("1 of 2 clock readings implausible (reading 1: ")
    assert why in out["sm_hz_kernel_error"]


def test_no_readings_is_an_error_not_a_clock():
    assert summarize([]) == {"sm_hz_kernel_error": "the clock kernel gave no readings"}


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
def test_sass_reads_the_sm_clock_in_the_spin_and_the_global_timer_around_it(arch):
    sass = sass_of(SOURCE, arch)
    reads = re.findall(r"CS2R R\d+, (SR_\w+)", sass)
    # globaltimer, clock (start), clock (each spin trip), globaltimer: 64-bit reads, in this order
    assert reads == ["SR_GLOBALTIMERLO", "SR_CLOCKLO", "SR_CLOCKLO", "SR_GLOBALTIMERLO"]
    loop = re.search(r"/\*([0-9a-f]{4})\*/\s+CS2R R\d+, SR_CLOCKLO ;(?:(?!CS2R).)*?BRA 0x([0-9a-f]+)", sass.split(
        "SR_CLOCKLO", 1)[1], re.S)
    assert loop and int(loop.group(1), 16) == int(loop.group(2), 16)  # the backward branch re-reads the clock
    assert sass.count("STG.E.64") == 2  # (cycles, ns) of the block


@pytest.mark.gpu
def test_the_clock_kernel_reads_a_plausible_clock_beside_nvml(gpu_runtime):
    from ceilings.nvml import ClockSampler, Nvml
    from kernels.clock import ClockProbe

    probe = ClockProbe(gpu_runtime)
    with ClockSampler(Nvml(0)) as sampler:
        for _ in range(4):
            probe.launch()
    out = probe.summary()
    assert "sm_hz_kernel_error" not in out, out
    assert out["sm_hz_kernel_readings"] == 4 * probe.blocks
    nvml = sampler.summary().get("sm_hz_median")
    if nvml:  # an idle GPU may sit below boost; the kernel and NVML must still see one clock
        assert out["sm_hz_kernel_median"] == pytest.approx(nvml, rel=0.05)
