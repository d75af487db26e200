"""Tables people can paste: the measure command's summary as a Markdown table."""

from __future__ import annotations

from typing import Sequence

from common.text import markdown_table
from kernels.base import merit

from .roofs import run_sm_hz

# down to nano: a latency ceiling is in seconds (2.5e-6 s -> 2.5 us)
_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "u"),
             (1e-9, "n"))


def format_rate(value: float | None, unit: str) -> str:
    """4.51e12, 'B/s' -> '4.51 TB/s'; 2.5e-6, 's' -> '2.5 us'; None -> '-'."""
    if value is None:
        return "-"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.0%}"


def best_per_name(ceilings: Sequence[dict]) -> list[dict]:
    """One ceiling per name in first-seen order: the best valid one, else the first (to show why)."""
    order: list[str] = []
    best: dict[str, dict] = {}
    for c in ceilings:
        name = c["name"]
        if name not in best:
            order.append(name)
            best[name] = c
            continue
        current = best[name]
        if c["valid"] and c["value"] is not None and (
                not current["valid"] or current["value"] is None
                or merit(c["kind"], c["value"]) > merit(c["kind"], current["value"])):
            best[name] = c
    return [best[n] for n in order]


def numba_ratio(ceilings: Sequence[dict], name: str) -> float | None:
    """Numba / CUDA C for a ceiling measured validly in both backends."""
    by_backend: dict[str, float] = {}
    for c in ceilings:  # the best valid value of each backend (a ceiling has several launch variants)
        if c["name"] == name and c["valid"] and c["value"]:
            by_backend[c["backend"]] = max(c["value"], by_backend.get(c["backend"], 0.0))
    if "numba" in by_backend and "cuda-c" in by_backend:
        return by_backend["numba"] / by_backend["cuda-c"]
    return None


def library_ratio(ceilings: Sequence[dict], ceiling: dict) -> float | None:
    """A hand-written tensor ceiling over the best valid library (cuBLAS) ceiling of the same peak key: how
    close our mma.sync / wgmma kernels come to what the vendor library reaches on this GPU."""
    if ceiling["pipe"] != "tensor" or ceiling["backend"] == "library" or not ceiling["valid"] or not ceiling["value"]:
        return None
    library = [c["value"] for c in ceilings if c["backend"] == "library" and c["valid"] and c["value"]
               and c.get("peak_key") == ceiling.get("peak_key")]
    return ceiling["value"] / max(library) if library else None


def ceiling_status(ceiling: dict) -> str:
    """'ok' or 'INVALID', then every note: a later note can be the one that matters (gaps.annotate puts the
    mma.sync-is-not-the-tensor-peak note after a clock note)."""
    status = "ok" if ceiling["valid"] else "INVALID"
    return f"{status}: {'; '.join(ceiling['notes'])}" if ceiling["notes"] else status


def ceilings_table(doc: dict) -> str:
    """The summary table: best per ceiling, against clock-derived and datasheet peaks."""
    header = ["ceiling", "SIMULATED (meaningless)" if doc["simulated"] else "measured", "by", "spread", "SM MHz",
              "clock-derived", "% clk", "datasheet", "% ds",
              "numba/cuda-c", "vs cuBLAS", "status"]
    rows = []
    for c in best_per_name(doc["ceilings"]):
        peaks = c.get("peaks") or {}
        clock = peaks.get("clock_derived_run") or peaks.get("clock_derived_max")
        sm = run_sm_hz(c.get("clocks"))
        ratio = numba_ratio(doc["ceilings"], c["name"])
        vs_library = library_ratio(doc["ceilings"], c)
        rows.append([
            c["name"],
            format_rate(c["value"], c["unit"]),
            f"{c['backend']}:{c['kernel']}",
            "-" if not c["stats"] else f"±{c['stats']['rel_iqr'] / 2:.1%}",
            "-" if sm is None else f"{sm / 1e6:.0f}",
            format_rate(clock, c["unit"]),
            _pct(peaks.get("of_clock_derived")),
            format_rate(peaks.get("datasheet"), c["unit"]),
            _pct(peaks.get("of_datasheet")),
            "-" if ratio is None else f"{ratio:.2f}",
            _pct(vs_library),
            ceiling_status(c),
        ])
    return markdown_table(header, rows)


def roofs_summary(doc: dict) -> str:
    """The roofs a roofline will use: the best valid ceiling per level and per precision, and who gave it."""
    from .roofs import record

    rec, lines = record(doc, sweeps=False), []
    for level in ("dram", "l2", "l1", "host"):
        if c := rec.best(kind="bandwidth", level=level):
            lines.append(f"{level.upper()} roof: {format_rate(c.value, c.unit)} from {c.name} ({c.backend}:{c.kernel})")
    for precision in dict.fromkeys(c.precision for c in rec.ceilings if c.kind == "compute"):
        if c := rec.best(kind="compute", precision=precision):
            lines.append(f"{precision} roof: {format_rate(c.value, c.unit)} from {c.name} ({c.backend}:{c.kernel})")
    for c in rec.best_by_name().values():  # the floors and the SFU (1.4): each by name
        if c.kind in ("latency", "special"):
            lines.append(f"{c.name}: {format_rate(c.value, c.unit)} ({c.backend}:{c.kernel})")
    prefix = "SIMULATED, meaningless: " if doc["simulated"] else ""
    return "\n".join(prefix + line for line in lines)


def sweeps_summary(doc: dict) -> str:
    lines = []
    for s in doc["sweeps"]:
        parts = [f"{p['level']} {format_rate(p['value'], s['y']['unit'])}" for p in s["plateaus"]]
        if s.get("knee"):
            knee = s["knee"]
            parts.append(f"knee at {knee['x']:.3g} {s['x']['unit']}, {format_rate(knee['y'], s['y']['unit'])}")
        found = "; ".join(parts) or "no plateau found"
        lines.append(f"{s['name']} ({s['backend']}, {len(s['points'])} points): {found}")
    return "\n".join(lines)
