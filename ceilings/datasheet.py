"""Published (dense) peaks of NVIDIA GPUs from ceilings/data/datasheets.csv, and matching a device to its row.

Figures are DENSE: NVIDIA's "with sparsity" (2:4) numbers are halved in the CSV. See docs/datasheets.md.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import functools
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common.errors import CeilingsError, cli_entry
from common.text import aligned

DATASHEETS_CSV = Path(__file__).parent / "data" / "datasheets.csv"
# what a serving node's GPU shows and links with, by datasheet key (analysis.llm --tp; sources in the file)
SERVING_CSV = Path(__file__).parent / "data" / "serving.csv"

GIB = 2**30
TERA = 1e12
GIGA = 1e9
# Reported memory is below the marketed size (ECC and driver reservations: T4 14.8 GiB of "16 GB",
# H200 140.4 GiB of "141 GB"); 15 % still separates 16/32, 40/80, 80/94 and 96/144 GiB parts.
MEMORY_MATCH_REL_TOL = 0.15
CLOSE_NAMES = 5

# CSV column -> peak_key; the value is in TFLOP/s (TOPS for int8), or GB/s for dram.
PEAK_COLUMNS = {
    "memory_bandwidth_gbs": "dram",
    "fp64_tflops": "fp64",
    "fp32_tflops": "fp32",
    "fp16_tflops": "fp16",
    "bf16_tflops": "bf16",
    "tensor_fp64_tflops": "tensor.fp64",
    "tensor_tf32_tflops": "tensor.tf32",
    "tensor_fp16_tflops": "tensor.fp16",
    "tensor_bf16_tflops": "tensor.bf16",
    "tensor_fp8_tflops": "tensor.fp8",
    "tensor_int8_tops": "tensor.int8",
}
_TEXT = ("key", "display_name", "architecture", "compute_capability", "memory_type", "source")
_LISTS = ("aliases", "match_patterns")  # ';'-separated
_REQUIRED = (*_TEXT, "sm_count", "boost_clock_mhz", "memory_gib", "memory_bandwidth_gbs", "fp32_tflops")


@dataclass(frozen=True)
class Row:
    """One GPU's datasheet row. Rates as in the CSV (TFLOP/s, GB/s); peaks() gives base units."""

    key: str
    display_name: str
    aliases: tuple[str, ...]
    match_patterns: tuple[str, ...]
    architecture: str
    compute_capability: str
    sm_count: int
    boost_clock_mhz: float
    memory_type: str
    memory_gib: float
    memory_bandwidth_gbs: float
    l2_mib: float | None
    fp64_tflops: float | None
    fp32_tflops: float
    fp16_tflops: float | None
    bf16_tflops: float | None
    tensor_fp64_tflops: float | None
    tensor_tf32_tflops: float | None
    tensor_fp16_tflops: float | None
    tensor_bf16_tflops: float | None
    tensor_fp8_tflops: float | None
    tensor_int8_tops: float | None
    source: str
    notes: str

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * GIB

    def peaks(self) -> dict[str, float]:
        """Published dense peaks keyed by peak_key: FLOP/s (int ops/s for int8), `dram` in B/s."""
        out = {}
        for column, key in PEAK_COLUMNS.items():
            value = getattr(self, column)
            if value is not None:
                out[key] = value * (GIGA if key == "dram" else TERA)
        return out

    def names(self) -> tuple[str, ...]:
        return (self.key, self.display_name, *self.aliases)


def _norm(text: str) -> str:
    """Case-, dash- and space-insensitive form: 'H100-SXM' == 'h100 sxm'."""
    return " ".join(re.split(r"[\s_\-]+", text.strip().lower()))


def _number(text: str, where: str, required: bool) -> float | None:
    if not text.strip():
        if required:
            raise CeilingsError(f"{where}: empty, but this column is required")
        return None
    try:
        value = float(text)
    except ValueError:
        raise CeilingsError(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise CeilingsError(f"{where}: {value} must be a finite positive number (leave it empty when unknown)")
    return value


def _read_table(path: Path, row_type: type, text: tuple[str, ...], required: tuple[str, ...],
                what: str) -> list[tuple[int, dict]]:
    """(line, fields) of each data row of a CSV whose columns are row_type's fields: `text` columns stripped,
    the others finite positive numbers or None when empty; `required` ones never empty, keys unique. The one
    reader of the tables in ceilings/data, so every row of each is checked the same way."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CeilingsError(f"{path}: cannot read the {what} table ({exc})") from None
    out = []
    reader = csv.DictReader(lines)
    for line, record in enumerate(reader, start=2):
        if None in record or None in record.values():
            raise CeilingsError(f"{path}:{line}: expected {len(reader.fieldnames)} columns")
        fields: dict = {}
        for name in row_type.__dataclass_fields__:
            where = f"{path}:{line} column {name}"
            raw = record.get(name)
            if raw is None:
                raise CeilingsError(f"{path}: column {name} is missing from the header")
            if name in text:
                if name in required and not raw.strip():
                    raise CeilingsError(f"{where}: empty, but this column is required")
                fields[name] = raw.strip()
            else:
                fields[name] = _number(raw, where, name in required)
        out.append((line, fields))
    keys = [fields["key"] for _, fields in out]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise CeilingsError(f"{path}: duplicate keys {', '.join(duplicates)}")
    return out


def _parse(path: Path) -> tuple[Row, ...]:
    rows = []
    for line, fields in _read_table(path, Row, (*_TEXT, "notes", *_LISTS), _REQUIRED, "datasheet"):
        for name in _LISTS:
            fields[name] = tuple(p.strip() for p in fields[name].split(";") if p.strip())
        fields["sm_count"] = int(fields["sm_count"])
        for pattern in fields["match_patterns"]:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise CeilingsError(f"{path}:{line} column match_patterns: {pattern!r} is not a regex ({exc})") \
                    from None
        rows.append(Row(**fields))
    return tuple(rows)


@functools.cache
def _load_cached(path: Path) -> tuple[Row, ...]:
    return _parse(path)


def load_datasheets(path: str | Path | None = None) -> tuple[Row, ...]:
    """All rows of the datasheet table (default: the packaged ceilings/data/datasheets.csv)."""
    return _load_cached(Path(path) if path is not None else DATASHEETS_CSV)


@dataclass(frozen=True)
class Serving:
    """A GPU's serving figures, by datasheet key: the memory it shows (nvidia-smi's total), its interconnect's
    bandwidth a direction and one small all-reduce's latency. Empty (None, '') where no cited figure."""

    key: str
    visible_memory_mib: float | None
    link: str
    link_gbs: float | None
    allreduce_latency_us: float | None
    source: str


@functools.cache
def _load_serving(path: Path) -> dict[str, Serving]:
    known = {r.key for r in load_datasheets()}
    out = {}
    for line, fields in _read_table(path, Serving, ("key", "link", "source"), ("key", "source"), "serving"):
        if fields["key"] not in known:
            raise CeilingsError(f"{path}:{line} column key: {fields['key']!r} is no key of {DATASHEETS_CSV.name}")
        if bool(fields["link"]) != (fields["link_gbs"] is not None):
            raise CeilingsError(f"{path}:{line} column link_gbs: give a link's name and its bandwidth, or neither")
        if fields["allreduce_latency_us"] is not None and fields["link_gbs"] is None:
            raise CeilingsError(f"{path}:{line} column allreduce_latency_us: a latency needs its link's bandwidth")
        out[fields["key"]] = Serving(**fields)
    return out


def load_serving(path: str | Path | None = None) -> dict[str, Serving]:
    """The serving table by datasheet key (default: the packaged ceilings/data/serving.csv)."""
    return _load_serving(Path(path) if path is not None else SERVING_CSV)


def match_device(name: str, memory_bytes: int | None, rows: tuple[Row, ...] | None = None) -> Row | None:
    """The row for a CUDA device name (e.g. "NVIDIA H100 80GB HBM3"), or None when no row fits.

    A row fits when one of its match_patterns is found in the name (case-insensitive) and, when
    memory_bytes is known, its memory is within MEMORY_MATCH_REL_TOL (so a MIG slice matches nothing).
    Among fits the longest pattern match wins; a tie between rows is ambiguous and gives None.
    """
    rows = load_datasheets() if rows is None else rows
    name = " ".join(name.split())
    scored: list[tuple[int, Row]] = []
    for row in rows:
        lengths = [len(m.group(0)) for p in row.match_patterns if (m := re.search(p, name, re.IGNORECASE))]
        if not lengths:
            continue
        if memory_bytes and abs(memory_bytes - row.memory_bytes) > MEMORY_MATCH_REL_TOL * row.memory_bytes:
            continue
        scored.append((max(lengths), row))
    if not scored:
        return None
    best = max(score for score, _ in scored)
    winners = [row for score, row in scored if score == best]
    if len(winners) > 1 and memory_bytes:
        winners = [min(winners, key=lambda r: abs(r.memory_bytes - memory_bytes))]
    return winners[0] if len(winners) == 1 else None


def find_datasheet(fragment: str, rows: tuple[Row, ...] | None = None) -> Row:
    """The one row whose key, display name or alias equals or contains `fragment` (case-, dash-insensitive).

    An exact name wins over fragments ('H200' is the H200 SXM, 'H200 NVL' the NVL). Ambiguous or unknown
    fragments raise CeilingsError listing the candidates or the closest names.
    """
    rows = load_datasheets() if rows is None else rows
    wanted = _norm(fragment)
    if not wanted:
        raise CeilingsError("empty datasheet name; give a GPU such as 'H100 SXM' (`ceilings datasheets` lists them)")
    exact = [r for r in rows if wanted in {_norm(n) for n in r.names()}]
    if len(exact) == 1:
        return exact[0]
    partial = exact or [r for r in rows if any(wanted in _norm(n) for n in r.names())]
    if len(partial) == 1:
        return partial[0]
    if partial:
        listed = "; ".join(f"{r.key} ({r.display_name})" for r in partial)
        raise CeilingsError(f"datasheet name {fragment!r} is ambiguous: {listed}; give one of those keys")
    every = {_norm(n): r.key for r in rows for n in r.names()}
    # the few most similar names whatever their score: a long list of every row would hide the typo's fix
    close = difflib.get_close_matches(wanted, list(every), n=len(every), cutoff=0)
    hint = ", ".join(list(dict.fromkeys(every[c] for c in close))[:CLOSE_NAMES])
    raise CeilingsError(f"no datasheet row matches {fragment!r}; closest: {hint} (`ceilings datasheets` lists them "
                        f"all)")


# the figures `ceilings datasheets` lists: (title, Row field, format)
LISTED = (("CC", "compute_capability", "{}"), ("SMs", "sm_count", "{}"), ("GiB", "memory_gib", "{:g}"),
          ("DRAM GB/s", "memory_bandwidth_gbs", "{:g}"), ("FP32 TFLOP/s", "fp32_tflops", "{:g}"),
          ("BF16 tensor", "tensor_bf16_tflops", "{:g}"), ("FP16 tensor", "tensor_fp16_tflops", "{:g}"),
          ("FP8 tensor", "tensor_fp8_tflops", "{:g}"))


def listing(rows: Sequence[Row]) -> str:
    """A fixed-width table of `rows`: the key (what --roofs, --on and --datasheet take), the display name and
    the main dense peaks ('-' where the row has none)."""
    cells = [[r.key, r.display_name, *("-" if getattr(r, field) is None else fmt.format(getattr(r, field))
                                       for _, field, fmt in LISTED)] for r in rows]
    return aligned(["key", "name", *(title for title, _, _ in LISTED)], cells, left=("key", "name"))


@cli_entry("ceilings datasheets")
def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ceilings datasheets", description="The datasheet rows: the names --roofs, --on, "
                                "--datasheet and --reference take (a key, a name or a fragment of one) and their "
                                "dense peaks.", epilog=f"From {DATASHEETS_CSV.name}; sources in docs/datasheets.md.")
    p.add_argument("fragment", nargs="?", help="only the rows whose key, name or alias contains this")
    args = p.parse_args(argv)
    rows = load_datasheets()
    if args.fragment:
        wanted = _norm(args.fragment)
        rows = tuple(r for r in rows if any(wanted in _norm(n) for n in r.names()))
        if not rows:
            find_datasheet(args.fragment)  # its error names the closest rows
    print(listing(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
