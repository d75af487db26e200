import pytest

from ceilings.stats import NOISE_REL_IQR, summarize


def test_summary_of_known_samples():
    # 1..9 ms: median 5, quartiles 3 and 7 (numpy linear interpolation), IQR/median = 4/5
    s = summarize([i * 1e-3 for i in (9, 1, 8, 2, 7, 3, 6, 4, 5)])
    assert s.n == 9
    assert s.min_s == pytest.approx(1e-3) and s.max_s == pytest.approx(9e-3)
    assert s.median_s == pytest.approx(5e-3)
    assert s.rel_iqr == pytest.approx(0.8)
    assert s.noisy and "budget" in s.noise_remedy


def test_quiet_samples_are_not_noisy_and_raw_samples_are_kept():
    samples = [1.000e-3, 1.001e-3, 0.999e-3, 1.0005e-3]
    s = summarize(samples)
    assert not s.noisy and s.noise_remedy is None
    assert s.rel_iqr < NOISE_REL_IQR
    assert list(s.samples_s) == samples
    assert s.as_dict()["samples_s"] == samples


def test_empty_samples_raise():
    with pytest.raises(ValueError):
        summarize([])
