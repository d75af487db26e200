"""The SM clock a profile ran at against the clock the roofs were measured at: the median of a profile's
kernels, and a warning when the two differ, which way and its likely cause."""

from __future__ import annotations

from ceilings.lazy import lazy

pd = lazy("pandas")

# the profile's SM clock may differ from the clock the roofs were measured at by this much before we warn
# (ncu locks clocks to base unless --clock-control none; base is often 30-40% under boost)
CLOCK_MISMATCH_TOLERANCE = 0.05


def profile_sm_clock(kernels: pd.DataFrame) -> float | None:
    """Median SM clock over the profiled kernels (None when the profile has no clock metric)."""
    clocks = kernels["sm_clock_hz"].dropna()
    return float(clocks.median()) if len(clocks) else None


def clock_warning(roofs, profile_clock_hz: float | None) -> str | None:
    """`roofs`: analysis.roofline.Roofs (its sm_clock_hz). A warning when the profile ran at a different SM clock
    than the roofs were measured at: which way, and its likely cause."""
    if not profile_clock_hz or not roofs.sm_clock_hz:
        return None
    ratio = profile_clock_hz / roofs.sm_clock_hz
    if abs(ratio - 1) <= CLOCK_MISMATCH_TOLERANCE:
        return None
    measured = (f"the profile ran at an SM clock of {profile_clock_hz / 1e9:.3f} GHz (median over kernels), "
                f"{abs(ratio - 1) * 100:.0f}% {'below' if ratio < 1 else 'above'} the roofs' "
                f"{roofs.sm_clock_hz / 1e9:.3f} GHz")
    scale = "--scale-clock scales the compute roofs to the profile's clock (bandwidth roofs are not scaled)"
    if ratio < 1:
        return (f"{measured}: ncu's default `--clock-control base` locks the SM clock to base (reprofile with "
                f"`--clock-control none`, which `python -m analysis.profile` does), or the GPU throttled (thermal "
                f"or power) while profiled; compute-bound kernels look further from their roof than they are; "
                f"{scale}")
    return (f"{measured}: the roofs were measured at a lower clock (the GPU throttled or was power-capped during "
            f"`python -m ceilings.measure`: check the clock notes of its ceilings), so the compute roofs are low; "
            f"remeasure, or {scale}")
