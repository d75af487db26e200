"""Units and values as Nsight Compute / Nsight Systems print them, scaled to base SI units.

ncu picks a unit PER ROW with powers of 1000 (`Kbyte` on one row, `Gbyte` on the next), and the unit names
changed across versions (`nsecond` then `ns`, `cycle/second` then `hz`). Every value is multiplied by the
factor of its own unit: bytes, seconds, hertz (cycles per second), counts. Percentages stay in percent.
Missing values (`n/a`, `(!) nan`, `(!) n/a`, words) become NaN, never 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ceilings.lazy import lazy

np = lazy("numpy")
pd = lazy("pandas")

# Time units, both the 2019-2023 spelling and the 2024+ one.
_TIME = {
    "psecond": 1e-12, "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
    "ps": 1e-12, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0,
}
# Decimal prefixes (auto units use powers of 1000). Lower-case k appears in "khz".
_PREFIX = {"K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
# Base quantities that take a prefix: their factor is 1 in our base units.
_BASES = {"byte", "B", "hz", "Hz", "cycle", "inst", "sector", "request", "warp", "block", "thread",
          "wavefront", "transaction", "op", "flop", "register", "issue", "SM", "cluster", "bit"}


def _single_factor(unit: str) -> float:
    if unit in _TIME:
        return _TIME[unit]
    if unit in _BASES:
        return 1.0
    if len(unit) > 1 and unit[0] in _PREFIX and unit[1:] in _BASES:
        return _PREFIX[unit[0]]
    if len(unit) > 3 and unit[0] in _PREFIX and unit[1:].lower() == "hz":  # "Mhz", "GHz", "khz"
        return _PREFIX[unit[0]]
    return 1.0  # %, blank, unknown words: the value is kept as printed


_FACTOR_CACHE: dict[str, float] = {}
# a metric whose name gives its unit, for outputs that leave the unit cell blank (ncu's raw page of 2019 prints
# device__attribute_max_gpu_frequency_khz = 1,759,000 with no unit; later ones print "khz")
NAMED_UNITS = {"_khz": 1e3}


def named_factor(metric: str) -> float:
    """The factor a metric's name implies for a value printed without a unit: '..._khz' -> 1e3, else 1."""
    return next((f for suffix, f in NAMED_UNITS.items() if metric.endswith(suffix)), 1.0)


def metric_factor(metric: str, unit: str | None) -> float:
    """Multiplier from a metric's printed unit to base units; a blank unit takes the one its name gives."""
    blank = unit is None or (isinstance(unit, float) and math.isnan(unit)) or not str(unit).strip()
    return named_factor(metric) if blank else unit_factor(unit)


def unit_factor(unit: str | None) -> float:
    """Multiplier from `unit` to base units: 'Kbyte' -> 1e3, 'usecond' -> 1e-6, 'cycle/nsecond' -> 1e9."""
    if unit is None or (isinstance(unit, float) and math.isnan(unit)):
        return 1.0
    cached = _FACTOR_CACHE.get(unit)
    if cached is not None:
        return cached
    u = unit.strip()
    if "/" in u:
        num, den = u.split("/", 1)
        factor = _single_factor(num.strip()) / _single_factor(den.strip())
    else:
        factor = _single_factor(u)
    _FACTOR_CACHE[unit] = factor
    return factor


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_NUMBER_CHARS = "0123456789.eE+-"


def parse_value(text: str) -> float:
    """A printed ncu value as float: thousands separators dropped; 'n/a', '(!) nan', words -> NaN.

    Per-instance lists ('a; b; c', raw page) are not a single value: NaN.
    """
    s = text.strip().replace(",", "")
    if not s.strip(_NUMBER_CHARS):  # only these characters: float() accepts exactly what _NUMBER matches
        try:
            return float(s)
        except ValueError:
            return math.nan
    if _NUMBER.fullmatch(s):  # other characters: float() would also take 'nan', 'inf', '1_000'
        return float(s)
    return math.nan


def parse_values(values: pd.Series) -> pd.Series:
    """Vectorised parse_value for a column of strings (or of numbers that read_csv parsed already)."""
    if values.dtype == bool:  # read_csv reads a column of only true/false words as booleans: no numbers
        return pd.Series(np.nan, index=values.index)
    if pd.api.types.is_numeric_dtype(values):
        numeric = values.astype("float64")
        return numeric.where(np.isfinite(numeric))
    if values.dtype == object:  # read_csv's chunks mixed numbers and words: all back to text
        values = values.astype("str")
    numeric = pd.to_numeric(values, errors="coerce").astype("float64")
    retry = numeric.isna().to_numpy()
    if retry.any():  # thousands separators ("1,312,168,927.90"), only where the plain parse failed
        cleaned = values[retry].astype("str").str.replace(",", "", regex=False)
        numeric[retry] = pd.to_numeric(cleaned, errors="coerce").astype("float64").to_numpy()
    # to_numeric reads a bare 'inf' as a number; ncu never prints one as a real value.
    return numeric.where(np.isfinite(numeric))


def _codes(column: pd.Series) -> tuple[np.ndarray, Sequence]:
    """Each cell's code (-1: missing) and the distinct values: a categorical's own (read_csv made them)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(), column.cat.categories
    return pd.factorize(column, use_na_sentinel=True)


def unit_factors(units: pd.Series, metrics: pd.Series) -> np.ndarray:
    """Vectorised metric_factor (pairs of metric and unit are few: computed once per distinct pair)."""
    unit_codes, unit_names = _codes(units)
    metric_codes, metric_names = _codes(metrics)
    unit_names, metric_names = [None, *unit_names], ["", *map(str, metric_names)]  # code -1 (missing) -> 0
    n = len(unit_names)
    pair_codes, pairs = pd.factorize((metric_codes.astype("int64") + 1) * n + unit_codes + 1)
    table = np.array([metric_factor(metric_names[p // n], unit_names[p % n]) for p in pairs])
    return table[pair_codes]
