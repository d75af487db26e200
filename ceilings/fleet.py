"""`python -m ceilings.fleet DIR|FILES...`: every GPU of a cluster against its siblings or a reference, and the
ones that fall short, with the likely cause the files know; exit 1 when any does, so that it can be a Slurm
health check (docs/fleet.md).

    python -m ceilings.fleet roofs/ [--json fleet.json] [-o fleet.png] [--min-ratio 0.9] [--reference FILE|NAME]

GPUs are grouped by model, driver, clocks, power limit, ECC and how the node's GPUs were measured (a roofs
file's `launch.mode`: at once they share power and PCIe). Each ceiling of a GPU is divided by its group's
median (or by the reference's figure; a latency floor the other way round, so that twice the launch time is
0.5) and fails below --min-ratio.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
import textwrap
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from common import atomic
from common.errors import CeilingsError, cli_entry
from common.html import TAB10, cell_text, notes_section, page, strip_section, table_section, table_spec
from common.text import markdown_table
from common.warn import add_verbose, print_warnings
from kernels.base import relative

from .lazy import lazy
from .nvml import LIMITING_REASONS
from .report import format_rate
from .roofs import RoofsRecord, load_record

np = lazy("numpy")

PROG = "python -m ceilings.fleet"
# ReFrame's GPU tests fail a node whose worst GPU is under its reference minus 10 %; DCGM's diagnostics pass at
# 0.75 of theirs, a bound for datasheet references (docs/fleet.md).
DEFAULT_MIN_RATIO = 0.9
# a median of fewer GPUs cannot tell which one is off: a smaller group is judged against its model's most
# common configuration, where that has as many
MIN_SIBLINGS = 3
# an SM or memory clock this far under its siblings' median is named as the likely cause of a shortfall
CLOCK_SHORTFALL = 0.05
LABELLED_OUTLIERS = 8  # labelled per picture: the lowest ones
MARKDOWN_OUTLIERS = 200  # rows of the printed outlier table; --json has them all
PICTURE_COLUMNS = 3
PANEL_SIZE = (4.5, 3.4)  # inches
TITLE_CHARS_PER_INCH = 9  # of the picture's title (12 pt, a character about 0.6 em), with a margin
PASS_COLOR, FAIL_COLOR = "tab:blue", "tab:red"

# Outlier.reason
BELOW = "below"  # a valid ceiling under --min-ratio of its baseline
INVALID = "invalid"  # measured but invalid (a failed output check, an implausible figure)
MISSING = "missing"  # measured on other GPUs of its group, not on this one
CONFIGURATION = "configuration"  # too few GPUs share its configuration, which differs from its model's usual
UNJUDGED = "unjudged"  # no ceiling could be compared with anything
REASONS = (BELOW, INVALID, MISSING, CONFIGURATION, UNJUDGED)


@dataclass(frozen=True)
class Config:
    """What GPUs must share to be compared with one another; None where a file does not say."""

    model: str | None
    driver: str | None
    cuda: str | None
    max_sm_clock_hz: float | None
    memory_clock_hz: float | None
    power_limit_w: float | None
    ecc: bool | None
    mode: str | None


CONFIG_LABELS = {"model": "model", "driver": "driver", "cuda": "CUDA", "max_sm_clock_hz": "max SM clock",
                 "memory_clock_hz": "memory clock", "power_limit_w": "power limit", "ecc": "ECC", "mode": "mode"}


def config_of(roofs: RoofsRecord) -> Config:
    d = roofs.device
    return Config(model=d.name, driver=d.nvml_driver_version, cuda=d.driver_version,
                  max_sm_clock_hz=d.max_sm_clock_hz, memory_clock_hz=d.memory_clock_hz,
                  power_limit_w=d.power_limit_w, ecc=d.ecc_enabled,
                  mode=roofs.launch.mode if roofs.launch else None)


def show(field: str, value) -> str:
    """A Config value as people read it; '-' where it is missing."""
    if value is None:
        return "-"
    if field.endswith("_hz"):
        return f"{value / 1e6:.0f} MHz"
    if field == "power_limit_w":
        return f"{value:g} W"
    if field == "ecc":
        return "on" if value else "off"
    return str(value)


@dataclass(frozen=True, slots=True)
class Layout:
    """A file's ceiling names in order of first appearance, each with its first entry's unit and peak key:
    most files of a fleet have the same, held once."""

    names: tuple[str, ...]
    units: tuple[str, ...]
    peak_keys: tuple[str, ...]
    at: dict[str, int] = field(init=False, compare=False, repr=False)  # name -> its index, in a FleetGpu's too

    def __post_init__(self):
        object.__setattr__(self, "at", {name: i for i, name in enumerate(self.names)})


NONE = math.nan  # in a FleetGpu's arrays: no value (validated numbers are finite)


@dataclass(frozen=True, slots=True, eq=False)
class FleetGpu:
    """One GPU's roofs file as the report needs it, reduced as the file is loaded (a fleet holds tens of
    thousands): who it is, how it is set up, and for each ceiling name (`layout`, same order) its best valid
    ceiling (RoofsRecord.best_by_name): value, kind, SM clock (Clocks.sm_hz) and memory clock, NONE in the
    arrays where it has none, and what the file says of why it may fall short."""

    path: str
    config: Config
    host: str | None  # the launcher's node name, else the host name
    gpu_index: int | None  # nvidia-smi's index on its node (schema 1.1 files)
    rank: int | None
    cuda_index: int | None
    uuid: str | None
    pci_bus_id: str | None
    memory_bytes: int | None
    simulated: bool
    complete: bool
    layout: Layout
    kinds: tuple[str | None, ...]  # the best ceiling's kind; None: no valid one
    values: array  # of "d"
    sm_hz: array
    mem_hz: array
    throttled: tuple[str | None, ...]  # "throttled (reasons)" where a limiting reason was seen
    noisy: tuple[str | None, ...]  # "noisy: ..." where its launch times spread
    why_invalid: tuple[str | None, ...]  # no valid ceiling of the name: the first note of each entry

    @property
    def label(self) -> str:
        """host:GPU index, else host:r<rank>, else the file's name: what a picture labels an outlier with."""
        if self.gpu_index is not None:
            return f"{self.host or '-'}:{self.gpu_index}"
        if self.rank is not None:
            return f"{self.host or '-'}:r{self.rank}"
        return Path(self.path).name

    def value(self, i: int) -> float | None:
        """The best valid value of ceiling `layout.names[i]`; None where none is valid."""
        return _known(self.values[i])


def _known(number: float) -> float | None:
    return None if math.isnan(number) else number


def gpu_of(path: str, roofs: RoofsRecord, shared: dict) -> FleetGpu:
    """`roofs` reduced to a FleetGpu; `shared`: equal layouts, names and notes of the files loaded so far, each
    held once."""
    def one(value):
        return shared.setdefault(value, value)

    entries: dict[str, list] = {}
    for c in roofs.ceilings:
        entries.setdefault(c.name, []).append(c)
    best = roofs.best_by_name()
    firsts = [cs[0] for cs in entries.values()]
    layout = one(Layout(tuple(entries), tuple(c.unit for c in firsts), tuple(c.peak_key for c in firsts)))
    chosen = [best.get(name) for name in entries]
    throttled, noisy = [], []
    for c in chosen:
        limiting = [r for r in c.clocks.throttle_reasons or () if r in LIMITING_REASONS] if c else ()
        throttled.append(f"throttled ({', '.join(limiting)})" if limiting else None)
        noisy.append(None if c is None or not c.noisy else
                     f"noisy: launch times spread ±{c.rel_iqr / 2:.0%}" if c.rel_iqr is not None else "noisy")
    why = [("; ".join(dict.fromkeys(c.notes[0] for c in cs if c.notes)) or None) if c is None else None
           for c, cs in zip(chosen, entries.values())]

    def numbers(values):
        return array("d", (NONE if v is None else v for v in values))

    d, launch = roofs.device, roofs.launch
    return FleetGpu(path=path, config=one(config_of(roofs)),
               host=one(launch.node if launch and launch.node else roofs.meta.host),
               gpu_index=launch.gpu_index if launch else None, rank=launch.rank if launch else None,
               cuda_index=d.index, uuid=d.uuid, pci_bus_id=one(d.pci_bus_id), memory_bytes=one(d.memory_bytes),
               simulated=roofs.simulated, complete=roofs.complete, layout=layout,
               kinds=one(tuple(c.kind if c else None for c in chosen)),
               values=numbers(c.value if c else None for c in chosen),
               sm_hz=numbers(c.clocks.sm_hz if c else None for c in chosen),
               mem_hz=numbers(c.clocks.mem_hz_median if c else None for c in chosen),
               throttled=one(tuple(throttled)), noisy=one(tuple(noisy)), why_invalid=one(tuple(why)))


@dataclass(frozen=True)
class CeilingStats:
    """One ceiling across a group's GPUs (their best valid value each), and what it is judged against."""

    name: str
    unit: str
    n: int  # GPUs with a valid value
    median: float | None
    min: float | None
    max: float | None
    rel_iqr: float | None  # (75th - 25th percentile) / median
    baseline: float | None  # the group's median, the reference's figure, or None: not judged
    below: int  # GPUs under min_ratio of the baseline


@dataclass(frozen=True)
class Group:
    id: str  # "G1", ...: the largest first
    config: Config
    gpus: tuple[FleetGpu, ...]
    baseline: str | None  # what its GPUs are divided by, in words; None: nothing to judge them against
    ceilings: tuple[CeilingStats, ...]


@dataclass(frozen=True)
class Outlier:
    gpu: FleetGpu
    group: str
    reason: str  # REASONS
    ceiling: str | None
    value: float | None
    unit: str | None
    ratio: float | None
    cause: str | None  # the likely cause, where the file knows one


@dataclass(frozen=True)
class Fleet:
    simulated: bool
    min_ratio: float
    reference: str | None  # the --reference, in words
    groups: tuple[Group, ...]
    ratios: Mapping[str, Mapping[str, float]]  # file -> ceiling -> ratio to its baseline
    outliers: tuple[Outlier, ...]
    notes: tuple[str, ...]  # ceilings left unjudged, and why

    @property
    def passed(self) -> bool:
        return not self.outliers


@dataclass(frozen=True)
class Reference:
    """What every GPU is divided by instead of its group's median: a known-good GPU's roofs, or a datasheet."""

    label: str
    model: str | None  # None for a datasheet row: `matches` decides
    values: Mapping[str, float]  # ceiling name -> figure (a roofs file)
    peaks: Mapping[str, float]  # peak_key -> figure (a datasheet row)
    row_key: str | None = None

    def value(self, name: str, peak_key: str) -> float | None:
        """Its figure for ceiling `name`, whose peak key is `peak_key`."""
        return self.values.get(name) if self.row_key is None else self.peaks.get(peak_key)


def reference_of(spec: str, simulated: bool) -> Reference:
    """--reference: a roofs file (an existing path or a name ending .json), else a datasheet row."""
    path = Path(spec)
    if spec.endswith(".json") or path.is_file():
        roofs = load_record(path)
        if roofs.simulated != simulated:
            kinds = {True: "simulated", False: "measured"}
            raise CeilingsError(f"--reference {spec}: a {kinds[roofs.simulated]} file for {kinds[simulated]} GPUs; "
                                "give a reference of the same kind")
        return Reference(label=f"reference {path.name}", model=roofs.device.name,
                         values={n: c.value for n, c in roofs.best_by_name().items()}, peaks={})
    if simulated:
        raise CeilingsError(f"--reference {spec}: a datasheet for simulated GPUs; the simulator's numbers mean "
                            "nothing against it: give a simulated roofs file, or none")
    from .datasheet import find_datasheet

    try:
        row = find_datasheet(spec)
    except CeilingsError as exc:  # say that a roofs file was looked for too
        raise CeilingsError(f"--reference {spec}: no such roofs file, and {exc}") from None
    return Reference(label=f"datasheet {row.display_name}", model=None, values={}, peaks=row.peaks(),
                     row_key=row.key)


def _check_reference_fits(reference: Reference, groups: Mapping[Config, list[FleetGpu]]) -> None:
    from .datasheet import match_device

    for config, gpus in groups.items():
        if reference.row_key is None:
            fits = config.model == reference.model
        else:
            row = match_device(gpus[0].config.model or "", gpus[0].memory_bytes)
            fits = row is not None and row.key == reference.row_key
        if not fits:
            raise CeilingsError(f"--reference: {reference.label} is not a {config.model or 'GPU of unknown model'} "
                                f"({gpus[0].path}); aggregate each model on its own, or drop --reference")


def collect(inputs: Sequence[str]) -> list[Path]:
    """The roofs files named, and every *.json under a folder named."""
    paths: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found = sorted(path.rglob("*.json"))
            if not found:
                raise CeilingsError(f"{item}: no roofs files (*.json) in this folder; point at the folder "
                                    "`python -m ceilings.measure --out` wrote into")
            paths += found
        else:
            paths.append(path)
    return paths


def load_gpus(paths: Sequence[Path], *, report: Path | None = None,
              copies: list[tuple[Path, Path]] | None = None) -> list[FleetGpu]:
    """Every file as a GPU (validated whole, then reduced: gpu_of); CeilingsError for a file that is not a
    measurement or a GPU given twice. `report`: this run's --json (resolved), which the folder may hold from the
    last run: passed over when it is no roofs file; a roofs file there is an input like any other (and Outputs
    refuses to write over it). A file of the same bytes as one before it (a copy) is that GPU once more: counted
    once, and (copy, original) appended to `copies` for the caller to say so.

    One GPU is its UUID; without one (a simulator, an old driver) its host, PCI bus and CUDA index, else its host,
    run start and CUDA index: two files of one GPU that differ are two measurements of it, refused, as which one
    counts is the user's choice."""
    gpus, seen, shared, contents = [], {}, {}, {}
    for path in paths:
        try:
            roofs = load_record(path, sweeps=False)  # a fleet judges ceilings; the sweeps' points are most of it
        except CeilingsError:
            # the name first: resolving every one of thousands of paths costs more than reading them
            if report is not None and path.name == report.name and path.resolve() == report:
                continue
            raise
        if roofs.source:
            raise CeilingsError(f"{path}: not a measurement ({roofs.source}); give it as --reference")
        # read again to compare (from the page cache): the record holds no digest of the bytes it came from
        digest = hashlib.sha256(Path(path).read_bytes()).digest()
        if digest in contents:
            if copies is not None:
                copies.append((path, contents[digest]))
            continue
        contents[digest] = path
        same = _same_gpu(roofs)
        if same is not None and same in seen:
            device = roofs.device
            gpu = (f"GPU {device.uuid}" if device.uuid is not None else
                   f"GPU {device.index} at PCI {device.pci_bus_id} on {roofs.meta.host}" if device.pci_bus_id else
                   f"the run of {roofs.meta.started} on {roofs.meta.host}")
            raise CeilingsError(f"{path}: {gpu} is also in {seen[same]}, measured differently; give one file per "
                                f"GPU (the newest)")
        if same is not None:
            seen[same] = path
        gpus.append(gpu_of(str(path), roofs, shared))
    kinds = {g.simulated for g in gpus}
    if len(kinds) > 1:
        sim = next(g.path for g in gpus if g.simulated)
        real = next(g.path for g in gpus if not g.simulated)
        raise CeilingsError(f"{sim} is simulated and {real} measured: a simulator's numbers must not sit among "
                            "a GPU's; aggregate them apart")
    return gpus


def _same_gpu(roofs: RoofsRecord) -> tuple | None:
    """What makes two files one GPU (load_gpus); None where the file says too little to tell."""
    device, meta = roofs.device, roofs.meta
    if device.uuid is not None:
        return ("uuid", device.uuid)
    if device.pci_bus_id is not None and meta.host is not None:
        return ("pci", meta.host, device.pci_bus_id, device.index)
    if meta.started is not None:
        return ("run", meta.host, meta.started, device.index)
    return None


def analyze(gpus: Sequence[FleetGpu], *, min_ratio: float = DEFAULT_MIN_RATIO,
            reference: Reference | None = None) -> Fleet:
    """Group, take each group's medians, divide every GPU's ceilings by its baseline, list the outliers."""
    if not gpus:
        raise CeilingsError("no GPUs: give roofs files or a folder of them")
    if not 0 < min_ratio <= 1:
        raise CeilingsError(f"--min-ratio {min_ratio}: give a fraction of the baseline in (0, 1], e.g. "
                            f"{DEFAULT_MIN_RATIO}")
    by_config: dict[Config, list[FleetGpu]] = {}
    for gpu in gpus:
        by_config.setdefault(gpu.config, []).append(gpu)
    for config in [c for c in by_config if c.mode is None]:  # a schema-1.0 file does not record the mode: it
        # joins the one group that matches it in everything else, rather than stand apart as an outlier
        peers = [c for c in by_config if c.mode is not None and replace(c, mode=None) == config]
        if len(peers) == 1:
            by_config[peers[0]] += by_config.pop(config)
    if reference is not None:
        _check_reference_fits(reference, by_config)
    configs = sorted(by_config, key=lambda c: -len(by_config[c]))  # stable: first seen first among equals
    ids = {config: f"G{i}" for i, config in enumerate(configs, start=1)}
    usual: dict[str | None, Config] = {}  # model -> its most common configuration
    for config in configs:
        usual.setdefault(config.model, config)

    groups, outliers, notes, ratios = [], [], [], {}
    for config in configs:
        members = by_config[config]
        main = usual[config.model]
        # the GPUs this group's GPUs are compared with: itself, else its model's usual configuration
        if len(members) >= MIN_SIBLINGS:
            peers = members
        elif len(by_config[main]) >= MIN_SIBLINGS:
            peers = by_config[main]
        else:
            peers = None
        medians = _medians(peers) if peers is not None else {}
        if reference is not None:
            baseline_label = reference.label
        elif peers is members:
            baseline_label = f"median of its {len(members)} GPUs"
        elif peers is not None:
            baseline_label = f"median of {ids[main]}, its model's usual configuration ({len(peers)} GPUs)"
        else:
            baseline_label = None
        differs = [] if peers is None or peers is members else _differences(config, main)

        units: dict[str, str] = {}  # name -> unit, and peak key: its first entry's in the group
        peak_keys: dict[str, str] = {}
        for layout in dict.fromkeys(gpu.layout for gpu in members):
            for name, unit, peak_key in zip(layout.names, layout.units, layout.peak_keys):
                units.setdefault(name, unit)
                peak_keys.setdefault(name, peak_key)
        names = list(units)
        baselines: dict[str, float | None] = {}
        for name in names:
            if reference is not None:
                baselines[name] = reference.value(name, peak_keys[name])
                if baselines[name] is None:
                    notes.append(f"{ids[config]} {name}: {reference.label} has no figure for it; not judged")
            else:
                baselines[name] = medians[name].value if name in medians else None

        for gpu in members:
            at = gpu.layout.at
            gpu_ratios = {}
            for name in names:
                i = at.get(name)
                value = None if i is None else gpu.value(i)
                if i is None:
                    why = "the run was interrupted" if not gpu.complete else None
                    outliers.append(Outlier(gpu, ids[config], MISSING, name, None, units[name], None, why))
                elif value is None:
                    outliers.append(Outlier(gpu, ids[config], INVALID, name, None, units[name], None,
                                            gpu.why_invalid[i]))
                elif baselines[name]:
                    ratio = relative(gpu.kinds[i], value, baselines[name])
                    gpu_ratios[name] = ratio
                    if ratio < min_ratio:
                        cause = _likely_cause(gpu, i, medians.get(name), differs)
                        outliers.append(Outlier(gpu, ids[config], BELOW, name, value, units[name], ratio, cause))
            ratios[gpu.path] = gpu_ratios
            if differs:  # a lone GPU set up unlike the rest of its model: a wrong power cap, an old driver
                outliers.append(Outlier(gpu, ids[config], CONFIGURATION, None, None, None, None, "; ".join(differs)))
            if any(kind is not None for kind in gpu.kinds) and not gpu_ratios:
                why = (f"{reference.label} has no figure for any of its valid ceilings" if reference else
                       f"only {len(members)} GPU(s) like it and no --reference: measure more of its siblings, "
                       "or give --reference")
                outliers.append(Outlier(gpu, ids[config], UNJUDGED, None, None, None, None, why))
        groups.append(Group(ids[config], config, tuple(members), baseline_label,
                            tuple(_stats(name, units[name], members, baselines[name], ratios, min_ratio)
                                  for name in names)))
    return Fleet(simulated=gpus[0].simulated, min_ratio=min_ratio,
                 reference=reference.label if reference else None, groups=tuple(groups), ratios=ratios,
                 outliers=tuple(outliers), notes=tuple(notes))


@dataclass(frozen=True)
class _Medians:
    value: float
    sm_hz: float | None
    mem_hz: float | None


def _medians(peers: Sequence[FleetGpu]) -> dict[str, _Medians]:
    """Ceiling name -> the median value, SM clock and memory clock of `peers` (their best valid ceiling each)."""
    per_name: dict[str, list[tuple[float, float, float]]] = {}
    for gpu in peers:
        for i, name in enumerate(gpu.layout.names):
            if gpu.kinds[i] is not None:
                per_name.setdefault(name, []).append((gpu.values[i], gpu.sm_hz[i], gpu.mem_hz[i]))

    def median(values):
        values = [v for v in values if not math.isnan(v)]
        return float(np.median(values)) if values else None

    return {name: _Medians(*(median(column) for column in zip(*cs))) for name, cs in per_name.items()}


def _differences(config: Config, usual: Config) -> list[str]:
    return [f"{CONFIG_LABELS[f.name]} {show(f.name, getattr(config, f.name))} (its model's usual: "
            f"{show(f.name, getattr(usual, f.name))})"
            for f in fields(Config) if getattr(config, f.name) != getattr(usual, f.name)]


def _likely_cause(gpu: FleetGpu, i: int, peer: _Medians | None, differs: list[str]) -> str | None:
    """What the file knows of why `gpu`'s ceiling `i` fell short: throttling, a low clock against its peers'
    (`peer`), noise, a configuration unlike its peers'."""
    causes = [gpu.throttled[i]] if gpu.throttled[i] else []
    clocks = (("SM", _known(gpu.sm_hz[i]), peer.sm_hz if peer else None),)
    if gpu.kinds[i] == "bandwidth":
        clocks += (("memory", _known(gpu.mem_hz[i]), peer.mem_hz if peer else None),)
    for what, mine, theirs in clocks:
        if mine is not None and theirs and mine < theirs * (1 - CLOCK_SHORTFALL):
            causes.append(f"{what} clock {mine / 1e6:.0f} MHz, its peers' {theirs / 1e6:.0f} MHz")
    if gpu.noisy[i]:
        causes.append(gpu.noisy[i])
    causes += differs
    return "; ".join(causes) or None


def _stats(name: str, unit: str, members: Sequence[FleetGpu], baseline: float | None,
           ratios: Mapping[str, Mapping[str, float]], min_ratio: float) -> CeilingStats:
    values = [g.values[i] for g in members if (i := g.layout.at.get(name)) is not None]
    values = np.array([v for v in values if not math.isnan(v)])
    below = sum(1 for g in members if ratios[g.path].get(name, math.inf) < min_ratio)
    if values.size == 0:
        return CeilingStats(name, unit, 0, None, None, None, None, baseline, below)
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return CeilingStats(name, unit, int(values.size), float(median), float(values.min()), float(values.max()),
                        float((q3 - q1) / median), baseline, below)


# ---------------------------------------------------------------- output


def markdown(fleet: Fleet) -> str:
    """The report people paste: groups, ceilings per group, outliers."""
    n = sum(len(g.gpus) for g in fleet.groups)
    failing = len({o.gpu.path for o in fleet.outliers})
    baseline = fleet.reference or "each group's median"
    lines = [f"# {'SIMULATED (meaningless numbers): ' if fleet.simulated else ''}{n} GPUs in {len(fleet.groups)} "
             f"group(s), {failing} falling short (against {baseline}; failing under {fleet.min_ratio:g})", ""]
    lines += ["## Groups", "", markdown_table(
        ["group", "GPUs", *CONFIG_LABELS.values(), "judged against"],
        [[g.id, str(len(g.gpus)), *(show(f.name, getattr(g.config, f.name)) for f in fields(Config)),
          g.baseline or "nothing (too few GPUs; give --reference)"] for g in fleet.groups]), ""]
    rows = []
    for g in fleet.groups:
        for s in g.ceilings:
            rows.append([g.id, s.name, str(s.n), format_rate(s.median, s.unit), format_rate(s.min, s.unit),
                         format_rate(s.max, s.unit), "-" if s.rel_iqr is None else f"{s.rel_iqr:.1%}",
                         format_rate(s.baseline, s.unit), str(s.below)])
    lines += ["## Ceilings", "", markdown_table(
        ["group", "ceiling", "GPUs", "median", "min", "max", "IQR/median", "baseline", f"under {fleet.min_ratio:g}"],
        rows), ""]
    lines += ["## Outliers", ""]
    if fleet.outliers:
        shown = sorted(fleet.outliers, key=_severity)[:MARKDOWN_OUTLIERS]
        lines.append(markdown_table(
            ["host", "GPU", "UUID", "PCI bus", "group", "ceiling", "value", "ratio", "reason", "likely cause",
             "file"],
            [[o.gpu.host or "-", _text(o.gpu.gpu_index), _text(o.gpu.uuid), _text(o.gpu.pci_bus_id), o.group,
              o.ceiling or "-",
              format_rate(o.value, o.unit) if o.unit else "-", "-" if o.ratio is None else f"{o.ratio:.3f}",
              o.reason, o.cause or "-", Path(o.gpu.path).name] for o in shown]))
        if len(fleet.outliers) > MARKDOWN_OUTLIERS:
            lines.append(f"\n... and {len(fleet.outliers) - MARKDOWN_OUTLIERS} more (all of them in --json)")
    else:
        lines.append("None: every GPU passes.")
    lines += [f"- {note}" for note in fleet.notes]
    return "\n".join(lines) + "\n"


def _severity(o: Outlier):
    return (REASONS.index(o.reason), o.ratio if o.ratio is not None else 0.0, o.gpu.path)


def _text(value) -> str:
    return "-" if value is None else str(value)


def as_json(fleet: Fleet) -> dict:
    def who(gpu: FleetGpu) -> dict:
        return {"file": gpu.path, "gpu": gpu.label, "host": gpu.host, "gpu_index": gpu.gpu_index,
                "cuda_index": gpu.cuda_index, "uuid": gpu.uuid, "pci_bus_id": gpu.pci_bus_id}

    return {
        "simulated": fleet.simulated, "passed": fleet.passed, "min_ratio": fleet.min_ratio,
        "reference": fleet.reference, "gpus": sum(len(g.gpus) for g in fleet.groups),
        "groups": [{"id": g.id, **{f.name: getattr(g.config, f.name) for f in fields(Config)}, "gpus": len(g.gpus),
                    "baseline": g.baseline,
                    "ceilings": [{f.name: getattr(s, f.name) for f in fields(CeilingStats)} for s in g.ceilings]}
                   for g in fleet.groups],
        "outliers": [{**who(o.gpu), "group": o.group, "reason": o.reason, "ceiling": o.ceiling, "value": o.value,
                      "unit": o.unit, "ratio": o.ratio, "cause": o.cause} for o in fleet.outliers],
        "files": [{**who(gpu), "group": g.id, "ratios": dict(fleet.ratios[gpu.path])}
                  for g in fleet.groups for gpu in g.gpus],
    }


def json_text(fleet: Fleet) -> str:
    """as_json's report as --json writes it."""
    import io
    import json

    text = io.StringIO()  # json.dumps holds every piece of the text at once, 6 times its size (indented)
    json.dump(as_json(fleet), text, indent=1, allow_nan=False)
    text.write("\n")
    return text.getvalue()


def plot_ceiling(ax, fleet: Fleet, name: str) -> None:
    """Every GPU's ratio to its baseline for ceiling `name` on `ax`, one column of dots per group (sorted, so
    that a column reads as a distribution), the failing ones red and the lowest labelled host:GPU. Artists'
    gids: gpus:<group>, outliers:<group>, label:<host:GPU>, baseline, min-ratio."""
    ticks, labels, failing = [], [], []
    for x, group in enumerate(fleet.groups):
        points = sorted(((fleet.ratios[g.path][name], g) for g in group.gpus if name in fleet.ratios[g.path]),
                        key=lambda point: point[0])
        if not points:
            continue
        offsets = np.linspace(-0.3, 0.3, len(points)) if len(points) > 1 else np.zeros(1)
        ys = np.array([r for r, _ in points])
        low = ys < fleet.min_ratio
        ax.scatter(x + offsets[~low], ys[~low], s=12, color=PASS_COLOR, gid=f"gpus:{group.id}")
        ax.scatter(x + offsets[low], ys[low], s=18, color=FAIL_COLOR, gid=f"outliers:{group.id}")
        failing += [(r, x + dx, g) for (r, g), dx, is_low in zip(points, offsets, low) if is_low]
        ticks.append(x)
        labels.append(f"{group.id}\n{len(points)} GPUs")
    for ratio, x, gpu in sorted(failing, key=lambda f: f[0])[:LABELLED_OUTLIERS]:
        ax.annotate(gpu.label, (x, ratio), xytext=(4, -2), textcoords="offset points", fontsize="x-small",
                    color=FAIL_COLOR, gid=f"label:{gpu.label}")
    ax.axhline(1.0, color="gray", linewidth=0.8, gid="baseline")
    ax.axhline(fleet.min_ratio, color=FAIL_COLOR, linestyle="--", linewidth=0.8, gid="min-ratio")
    ax.set_xticks(ticks, labels, fontsize="small")
    ax.set_xlim(-0.5, max(len(fleet.groups) - 0.5, 0.5))
    ax.set_title(name)
    ax.set_ylabel(f"ratio to {'the reference' if fleet.reference else 'group median'}")


def judged_ceilings(fleet: Fleet) -> list[str]:
    """The ceilings with at least one GPU's ratio, in order of first appearance."""
    return list(dict.fromkeys(name for ratios in fleet.ratios.values() for name in ratios))


def draw(fleet: Fleet):
    """One subplot per judged ceiling in one figure (matplotlib's object API: no pyplot state)."""
    from matplotlib.figure import Figure

    names = judged_ceilings(fleet)
    if not names:  # the picture says so rather than being left out: a health check may look for the file
        fig = Figure(figsize=(6, 2), layout="constrained")
        ax = fig.subplots()
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no GPU could be judged: too few GPUs of each configuration; give --reference",
                ha="center", va="center", wrap=True, gid="nothing-judged")
        return fig
    cols = min(PICTURE_COLUMNS, len(names))
    rows = math.ceil(len(names) / cols)
    fig = Figure(figsize=(PANEL_SIZE[0] * cols, PANEL_SIZE[1] * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, name in zip(axes, names):
        plot_ceiling(ax, fleet, name)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    against = fleet.reference or "its group's median"
    prefix = "SIMULATED (Numba simulator: numbers are meaningless) - " if fleet.simulated else ""
    title = f"{prefix}every GPU against {against}; red: under {fleet.min_ratio:g}"
    # in lines as wide as the figure: one panel is narrower than the title
    fig.suptitle(textwrap.fill(title, int(PANEL_SIZE[0] * cols * TITLE_CHARS_PER_INCH)))
    return fig


def fleet_page(fleet: Fleet) -> str:
    """ceilings.fleet --html: per judged ceiling and group, every GPU's ratio to its baseline as a dot (those
    under --min-ratio red, the lowest named host:GPU), then the outliers with their likely cause, the groups'
    notes."""
    colour = lambda name: TAB10.get(name.removeprefix("tab:"), name)
    causes = {(o.gpu.path, o.ceiling): o for o in fleet.outliers}
    rows = []
    for name in judged_ceilings(fleet):
        for group in fleet.groups:
            ratios = sorted(((fleet.ratios[g.path][name], g) for g in group.gpus if name in fleet.ratios[g.path]),
                            key=lambda p: p[0])
            if not ratios:
                continue
            low = [g.path for r, g in ratios if r < fleet.min_ratio][:LABELLED_OUTLIERS]
            points = []
            for ratio, g in ratios:
                o = causes.get((g.path, name))
                facts = [("ceiling", name), ("ratio", f"{ratio:.3f}"), ("group", group.id), ("file", g.path)]
                if o is not None:
                    facts += [("value", format_rate(o.value, o.unit) if o.unit else "-"), ("reason", o.reason),
                              ("likely cause", o.cause or "-")]
                points.append((ratio, int(ratio < fleet.min_ratio), g.label, facts,
                               g.label if g.path in low else None))
            below = sum(r < fleet.min_ratio for r, _ in ratios)
            rows.append({"label": f"{name} · {group.id} ({len(ratios)} GPUs"
                                  + (f", {below} under" if below else "") + ")", "points": points})
    n = sum(len(g.gpus) for g in fleet.groups)
    failing = len({o.gpu.path for o in fleet.outliers})
    against = fleet.reference or "its group's median"
    title = (("SIMULATED (Numba simulator: numbers are meaningless): " if fleet.simulated else "")
             + f"{n} GPUs in {len(fleet.groups)} group(s), {failing} falling short")
    outliers = table_spec(
        [("host:GPU", False), ("UUID", False), ("PCI bus", False), ("group", False), ("ceiling", False),
         ("value", True), ("ratio", True), ("reason", False), ("likely cause", False), ("file", False)],
        [[(o.gpu.label, o.gpu.label), *((cell_text(v), cell_text(v)) for v in (o.gpu.uuid, o.gpu.pci_bus_id)),
          (o.group, o.group), (o.ceiling or "", o.ceiling or ""),
          (format_rate(o.value, o.unit) if o.unit and o.value is not None else "", o.value),
          (f"{o.ratio:.3f}" if o.ratio is not None else "", o.ratio), (o.reason, o.reason),
          (o.cause or "", o.cause or ""), (o.gpu.path, o.gpu.path)] for o in fleet.outliers])
    sections = [strip_section("fleet", f"Every GPU against {against}; red: under {fleet.min_ratio:g}", rows,
                              [("passes", colour(PASS_COLOR)), (f"under {fleet.min_ratio:g}", colour(FAIL_COLOR))],
                              xlabel=f"ratio to {'the reference' if fleet.reference else 'group median'}",
                              threshold=fleet.min_ratio, baseline=1.0, warning=fleet.simulated,
                              notes=[] if rows else ["no GPU could be judged: too few GPUs of each configuration; "
                                                     "give --reference"]),
                table_section("outliers", "Outliers" if fleet.outliers else "Outliers: none, every GPU passes",
                              outliers),
                notes_section("notes", "Notes", fleet.notes)]
    return page(title, sections)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Every GPU of a cluster against its siblings (the median of its group: same model, driver, "
                    "clocks, power limit, ECC and launch mode) or a reference; prints a Markdown report and "
                    "lists the GPUs that fall short, with the likely cause their files know.",
        epilog="exit codes: 0 every GPU passes, 1 some GPU falls short (a Slurm health check drains its node), "
               "2 bad input\n\nsimulated roofs files are aggregated only among themselves (marked SIMULATED); "
               "a mix of simulated and measured files is refused. See docs/fleet.md.")
    p.add_argument("inputs", nargs="+", metavar="DIR|FILE",
                   help="roofs files, or folders searched for *.json (python -m ceilings.measure --out)")
    p.add_argument("--json", metavar="OUT", help="also write the groups, every GPU's ratios and the outliers")
    p.add_argument("-o", "--output", metavar="PICTURE", help="a picture (.png/.svg/.pdf) of every GPU per ceiling")
    p.add_argument("--min-ratio", type=float, default=DEFAULT_MIN_RATIO, metavar="R",
                   help=f"a GPU fails a ceiling under R times its baseline (default {DEFAULT_MIN_RATIO}: "
                        "ReFrame's reference minus 10%%; DCGM passes at 0.75 of a reference)")
    p.add_argument("--reference", metavar="FILE|NAME",
                   help="judge every GPU against this roofs file (a known-good GPU) or datasheet row (e.g. "
                        "'H100 SXM') instead of its group's median")
    p.add_argument("--html", metavar="OUT.html", help="one self-contained interactive report: every GPU per "
                   "ceiling, the outliers named")
    p.add_argument("--force", action="store_true", help="overwrite existing --json, -o and --html files")
    add_verbose(p)
    return p.parse_args(argv)


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    out = atomic.Outputs(inputs=[args.reference], force=args.force)
    out.want("--json", args.json)
    out.want("-o", args.output, picture=True)
    out.want("--html", args.html)
    copies: list[tuple[Path, Path]] = []
    gpus = load_gpus(collect(args.inputs), report=Path(args.json).resolve() if args.json else None, copies=copies)
    out.add_inputs([*(Path(g.path) for g in gpus), *(copy for copy, _ in copies)])  # before anything is written
    print_warnings([f"{copy}: the same bytes as {original}, a copy of that GPU's file: counted once"
                    for copy, original in copies], args.verbose)
    reference = reference_of(args.reference, gpus[0].simulated) if args.reference else None
    fleet = analyze(gpus, min_ratio=args.min_ratio, reference=reference)
    report = markdown(fleet)
    if args.json:
        out.text(args.json, json_text(fleet))
    if args.output:
        out.figure(args.output, draw(fleet), dpi=120)
    if args.html:
        out.text(args.html, fleet_page(fleet))
    sys.stdout.write(report)
    out.commit(log=lambda path: print(f"{PROG}: wrote {path}", file=sys.stderr))
    return 0 if fleet.passed else 1


if __name__ == "__main__":
    sys.exit(main())
