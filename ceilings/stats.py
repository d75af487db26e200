"""Summary statistics of raw timing samples, with a named noise criterion and its remedy."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

# Relative inter-quartile range (IQR / median) past which a result is marked noisy (nvbench uses a
# similar relative-noise criterion; 5% is past what a quiet GPU shows for ms-long kernels).
NOISE_REL_IQR = 0.05
NOISE_REMEDY = ("close other GPU work (nvidia-smi shows processes), let clocks settle, or raise the time "
                "budget (drop --quick)")


@dataclass(frozen=True)
class SampleStats:
    samples_s: tuple[float, ...]
    n: int
    min_s: float
    median_s: float
    max_s: float
    rel_iqr: float
    noisy: bool
    noise_remedy: str | None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["samples_s"] = list(self.samples_s)
        return d


def summarize(samples_s: Sequence[float], noise_threshold: float = NOISE_REL_IQR) -> SampleStats:
    if len(samples_s) == 0:
        raise ValueError("no timing samples to summarize")
    values = np.asarray(samples_s, dtype=float)
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    rel_iqr = float((q3 - q1) / median) if median > 0 else float("inf")
    noisy = rel_iqr > noise_threshold
    return SampleStats(
        samples_s=tuple(float(v) for v in values),
        n=len(values),
        min_s=float(values.min()),
        median_s=float(median),
        max_s=float(values.max()),
        rel_iqr=rel_iqr,
        noisy=noisy,
        noise_remedy=NOISE_REMEDY if noisy else None,
    )
