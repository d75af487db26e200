"""ceilings.sweeps: plateaus on synthetic bandwidth curves, the knee of a compute sweep, the theoretical
DRAM bandwidth, and the figures."""

import numpy as np
import pytest

from ceilings import sweeps
from common.errors import CeilingsError
from tests.test_roofs import doc as roofs_doc

KiB, MiB = 2**10, 2**20
L2 = 50 * MiB
X = 4 * KiB * 2 ** (np.arange(66) / 4)  # 4 KiB .. 512 MiB, 4 points per octave (as the sweep)


def curve(levels, x=X, transition_octaves=0.5):
    """Bandwidth levels [(last x of the level, value), ..., (None, last value)]: flat, with a
    geometric ramp over `transition_octaves` after each level's end."""
    y = np.empty_like(x)
    for i, xi in enumerate(x):
        for j, (end, value) in enumerate(levels):
            if end is None or xi <= end:
                y[i] = value
                break
            ramp = np.log2(xi / end) / transition_octaves
            if ramp < 1:
                y[i] = value * (levels[j + 1][1] / value) ** ramp
                break
    return y


def noisy(y, fraction, seed=0):
    return y * (1 + np.random.default_rng(seed).uniform(-fraction, fraction, len(y)))


def summary(plateaus):
    """(level, value in TB/s) pairs, the values to within 3% (the noise added is at most 5%)."""
    return [(p.level, pytest.approx(p.value / 1e12, rel=0.03)) for p in plateaus]


def test_one_level_beyond_l2():
    x = X[X > 64 * MiB]
    found = sweeps.find_plateaus(x, noisy(np.full(len(x), 3.0e12), 0.03), L2)
    assert summary(found) == [("dram", 3.0)]
    assert found[0].x_min == x[0] and found[0].x_max == x[-1]
    assert summary(sweeps.find_plateaus(x, np.full(len(x), 3.0e12))) == [("dram", 3.0)]  # no L2 given


def test_two_levels():
    y = curve([(20 * MiB, 8e12), (None, 3e12)], transition_octaves=2)
    assert summary(sweeps.find_plateaus(X, y, L2)) == [("l2", 8.0), ("dram", 3.0)]
    assert summary(sweeps.find_plateaus(X, y)) == [("l2", 8.0), ("dram", 3.0)]


def test_three_levels_noisy_with_an_outlier():
    y = noisy(curve([(128 * KiB, 20e12), (20 * MiB, 8e12), (None, 3e12)]), 0.05)
    y[30] *= 2.0  # one wild point inside the L2 plateau
    found = sweeps.find_plateaus(X, y, L2)
    assert summary(found) == [("l1", 20.0), ("l2", 8.0), ("dram", 3.0)]
    l1, l2, dram = found
    assert l1.x_min == X[0] and 90 * KiB <= l1.x_max <= 128 * KiB
    assert 128 * KiB < l2.x_min <= 256 * KiB and 14 * MiB <= l2.x_max <= 20 * MiB
    assert 20 * MiB < dram.x_min <= 40 * MiB and dram.x_max == X[-1]


def test_two_l2_partitions():
    y = noisy(curve([(128 * KiB, 20e12), (20 * MiB, 8e12), (48 * MiB, 5.5e12), (None, 3e12)],
                    transition_octaves=0.25), 0.03, seed=3)
    found = sweeps.find_plateaus(X, y, L2)
    assert summary(found) == [("l1", 20.0), ("l2.near", 8.0), ("l2.far", 5.5), ("dram", 3.0)]
    assert 20 * MiB < found[2].x_min and found[2].x_max <= 48 * MiB
    # without the L2 size the names come from the order alone
    assert [p.level for p in sweeps.find_plateaus(X, y)] == ["l1", "l2.near", "l2.far", "dram"]


def test_monotone_tail_is_no_plateau():
    y = curve([(128 * KiB, 20e12), (None, 20e12)])
    tail = X > 128 * KiB
    y[tail] = 20e12 * 0.96 ** np.arange(1, tail.sum() + 1)  # 4% lower at every point, to the end
    assert summary(sweeps.find_plateaus(X, y, L2)) == [("l1", 20.0)]
    assert sweeps.find_plateaus(X, 20e12 * 0.97 ** np.arange(len(X)), L2) == []


def test_too_few_or_bad_points():
    assert sweeps.find_plateaus([1, 2], [1, 1]) == []
    assert sweeps.find_plateaus([1, 2, 4, 8], [np.nan, 1, 0, 1]) == []


def test_knee_of_a_roofline():
    ai = 2.0 ** np.arange(-3, 9)  # 1/8 .. 256 FLOP/B
    flops = np.minimum(3e12 * ai, 60e12)  # ridge at 20 FLOP/B
    assert sweeps.find_knee(ai, flops) == pytest.approx((20.0, 60e12))
    x, y = sweeps.find_knee(ai, noisy(flops, 0.03, seed=1))
    assert 18 < x < 22 and 57e12 < y < 63e12
    assert sweeps.find_knee(ai, flops, peak=67e12) == pytest.approx((67 / 3, 67e12))
    assert sweeps.find_knee(ai[:6], flops[:6]) is None  # only the slope: ai <= 4
    assert sweeps.find_knee(ai[-5:], flops[-5:]) is None  # only the flat


H100_DEVICE = {"name": "NVIDIA H100 80GB HBM3", "memory_clock_hz": 2619e6, "memory_bus_width_bits": 5120,
               "l2_bytes": L2}


def test_dram_theoretical():
    assert sweeps.dram_theoretical(H100_DEVICE) == pytest.approx(3.352e12, rel=1e-3)
    a100 = {"memory_clock_hz": 1215e6, "memory_bus_width_bits": 5120}
    assert sweeps.dram_theoretical(a100) == pytest.approx(1.555e12, rel=1e-3)
    assert sweeps.dram_theoretical({"memory_clock_hz": None, "memory_bus_width_bits": 5120}) is None


def bandwidth_sweep():
    y = curve([(128 * KiB, 20e12), (20 * MiB, 8e12), (None, 3e12)])
    return {"name": "bandwidth.working_set", "x": {"name": "working set", "unit": "B"},
            "y": {"name": "bandwidth", "unit": "B/s"}, "points": [[float(a), float(b)] for a, b in zip(X, y)],
            "plateaus": [p.as_dict() for p in sweeps.find_plateaus(X, y, L2)], "knee": None,
            "backend": "cuda-c", "kernel": "cache_read"}


def compute_sweep():
    ai = 2.0 ** np.arange(-3, 9)
    return {"name": "intensity.fp32", "x": {"name": "arithmetic intensity", "unit": "FLOP/B"},
            "y": {"name": "achieved", "unit": "FLOP/s"},
            "points": [[float(a), float(min(3e12 * a, 60e12))] for a in ai], "plateaus": [], "knee": None,
            "backend": "cuda-c", "kernel": "intensity_fp32"}


def test_plot_bandwidth_sweep():
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    sweeps.plot_bandwidth_sweep(ax, bandwidth_sweep(), dram_theoretical=3.35e12, l2_bytes=L2)
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["l1 20.00 TB/s", "l2 8.00 TB/s", "dram 3.00 TB/s"]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert "4 KiB" in labels and "1 MiB" in labels
    assert any(line.get_linestyle() == "--" and line.get_ydata()[0] == pytest.approx(3.35)
               for line in ax.get_lines())
    assert "L2 50 MiB" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_plot_compute_sweep_marks_knee_and_ideal():
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    sweeps.plot_compute_sweep(ax, compute_sweep(), bandwidth=3e12, peak=60e12)
    legend = " | ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "knee 20 FLOP/B, 60 TFLOP/s" in legend and "ideal" in legend
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


@pytest.mark.parametrize("simulated", [False, True])
def test_save_sweep_figures(tmp_path, simulated, monkeypatch):
    drawn = []  # the compute sweep's (bandwidth, peak): its ideal roof, from the doc's ceilings

    def plot_compute_sweep(ax, sweep, bandwidth, peak):
        drawn.append((bandwidth, peak))
        plot(ax, sweep, bandwidth, peak)

    plot = sweeps.plot_compute_sweep
    monkeypatch.setattr(sweeps, "plot_compute_sweep", plot_compute_sweep)
    doc = roofs_doc(simulated=simulated, device=H100_DEVICE, sweeps=[bandwidth_sweep(), compute_sweep()])
    written = sweeps.save_sweep_figures(doc, tmp_path / "h100.json")
    assert sorted(p.name for p in written) == ["h100-bandwidth-sweep.png", "h100-compute-sweep.png"]
    assert drawn == [(3e12, 6e13)]  # tests.test_roofs.doc: dram.copy 3 TB/s, fp32.fma 60 TFLOP/s (cuda-core)
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)
    assert sweeps.figure_title(doc).startswith("SIMULATED") == simulated
    only = sweeps.save_sweep_figures({**doc, "sweeps": [compute_sweep()]}, tmp_path / "only.json")
    assert [p.name for p in only] == ["only-compute-sweep.png"]


def test_save_sweep_figures_without_force_keeps_an_existing_figure(tmp_path):
    doc = roofs_doc(device=H100_DEVICE, sweeps=[bandwidth_sweep()], ceilings=[])
    earlier = tmp_path / "run-bandwidth-sweep.png"
    earlier.write_text("an earlier run's figure")
    with pytest.raises(CeilingsError, match="exists; pass --force"):
        sweeps.save_sweep_figures(doc, tmp_path / "run.json", force=False)
    assert earlier.read_text() == "an earlier run's figure"
    sweeps.save_sweep_figures(doc, tmp_path / "run.json", force=True)
    assert earlier.read_bytes()[:4] == b"\x89PNG"


# gpu-benches (te42kyfo/gpu-benches, gpu-l2-cache/h200.txt): an H200's L2-only read bandwidth against the
# footprint (kB, GB/s), every row of the published file from 1.5 MB to 256 MB
H200_GPU_L2_CACHE = [
    (1536, 13526.6), (2048, 11745.0), (2560, 11385.1), (3072, 11049.3), (3584, 10706.6), (4096, 10619.2),
    (4608, 10544.9), (5120, 10538.3), (5632, 10325.0), (6144, 10260.0), (6656, 10236.1), (7168, 10231.8),
    (7680, 10238.0), (8192, 10251.9), (8704, 10074.8), (9216, 10042.1), (9728, 9916.7), (10240, 10084.5),
    (11264, 9914.4), (12288, 9716.0), (13312, 9834.6), (14336, 9836.4), (15360, 9920.3), (16896, 9765.2),
    (18432, 9774.3), (19968, 9885.0), (21504, 9739.7), (23552, 9766.9), (25600, 9675.0), (28160, 9780.0),
    (30720, 9769.1), (33792, 9628.8), (36864, 9477.3), (40448, 9666.0), (44032, 9105.3), (48128, 7542.5),
    (52736, 6467.1), (57856, 5053.8), (63488, 4463.9), (69632, 4201.3), (76288, 4017.5), (83456, 3946.8),
    (91648, 3916.1), (100352, 3903.5), (110080, 3892.8), (120832, 3889.9), (132608, 3887.9), (145408, 3888.2),
    (159744, 3887.9), (175616, 3888.2), (193024, 3888.5), (211968, 3887.3), (232960, 3888.6), (256000, 3887.6)]


def test_public_h200_l2_curve():
    """The whole-L2 plateau (9.86 TB/s, 6-41 MB) and DRAM (3.89 TB/s) are found; the 1.5-5 MB decline from
    13.5 TB/s is a slope (12% per octave), no plateau: l2.read.near measures that footprint directly."""
    x = np.array([kb * 1024.0 for kb, _ in H200_GPU_L2_CACHE])
    y = np.array([gbs * 1e9 for _, gbs in H200_GPU_L2_CACHE])
    l2, dram = sweeps.find_plateaus(x, y, 60 * MiB)
    assert (l2.level, dram.level) == ("l2", "dram")
    assert l2.value == pytest.approx(9.86e12, rel=0.01) and 5 * MiB < l2.x_min < 6 * MiB < 38 * MiB < l2.x_max
    assert dram.value == pytest.approx(3.888e12, rel=0.001) and dram.x_min > 70 * MiB
