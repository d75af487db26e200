"""Rooflines of profiled kernels against MEASURED roofs.

`python -m analysis.roofline --roofs ROOFS.json|DATASHEET-NAME PROFILE...` reads a roofs file (from `python -m
ceilings.measure`) or a datasheet row, and Nsight Compute output (through `analysis.ncu.kernel_table`), judges
every kernel against the roofs, and writes a picture, a Markdown report and a CSV table.

Computation only (DataFrames and frozen dataclasses); drawing is in `analysis.plot`, the data of the picture in
`analysis.figure`, the HTML page in `analysis.html`, and the command that calls them in `__main__`: they all
import this module, so it imports none of them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from analysis.metrics import communicating
from analysis.names import readable_names, short_name
from analysis.ncu import GPU_FACTS, RUN_CLOCK
from analysis.roofline.links import NO_MESSAGE_SIZE, judge_link, link_warning
from ceilings.datasheet import MEMORY_MATCH_REL_TOL, Row, Serving
from ceilings.lazy import lazy
from ceilings.roofs import RoofsRecord, Sweep
from common.errors import CeilingsError, listed

np = lazy("numpy")
pd = lazy("pandas")

LEVELS = ("dram", "l2", "l1")
PRECISIONS = ("fp64", "fp32", "fp16", "tensor")
# tensor-core input types with a roof of their own (the precision field of tensor-pipe ceilings, and the
# `tensor.<type>` peak keys of ceilings.peaks / ceilings.datasheet)
TENSOR_TYPES = ("fp64", "tf32", "fp16", "bf16", "fp8", "int8")
# precision of a kernel that executes no floating-point work at all (copies, memsets, gathers)
NO_FLOPS = "none"
# a kernel this far above its roof points at wrong roofs or wrong counters, not at a fast kernel
ABOVE_ROOF_TOLERANCE = 1.05
NAMES_SHOWN = 5  # kernels named in a warning that covers many
# the Markdown report lists this many kernels; the CSV has them all
REPORT_MAX_ROWS = 50

# The launch floor: no kernel launched from the host in a stream of kernels takes less (docs/latency.md). From
# the roofs file's `launch.stream` ceiling (schema 1.4) when it has a valid one, else this default, an assumption:
# that a batch-1 decode step's norm and elementwise kernels take about one launch whatever their size, of the
# order of the 3.4-3.8 us per short kernel of NVIDIA's CUDA Graphs post (https://developer.nvidia.com/blog/cuda-graphs/).
LAUNCH_FLOOR_CEILING = "launch.stream"
DEFAULT_LAUNCH_FLOOR_S = 3e-6
DEFAULT_FLOOR_SOURCE = ("default 3 us (an assumption, of the order of the 3.4-3.8 us a short kernel takes in "
                        "https://developer.nvidia.com/blog/cuda-graphs/): no launch.stream ceiling")
# A kernel whose time per launch is within this factor of the floor is latency-bound: its time is the floor's
# more than its work's, and its saving is against the floor, not the roofs.
LATENCY_BOUND_FACTOR = 1.5
LATENCY = "latency"  # the `bound` of such a kernel, and its `roof`

# the device name of roofs or a profile that does not say which GPU it is
UNKNOWN_GPU = "unknown GPU"
# how to make a profile say which GPU it ran on
GPU_NAME_HINT = "collect device__attribute_display_name with ncu to name it"
# the first words of the warning about a profile taken on another GPU than the roofs'
FOREIGN_PROFILE = "PROFILE FROM ANOTHER GPU:"
DATASHEET = "datasheet"  # Roof.ceiling of a datasheet figure

KERNEL_COLUMNS = ("kernel", "launches", "time_s", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor",
                  "flops", "dram_bytes", "l2_bytes", "l1_bytes", "sm_clock_hz")
# bytes_kind: "counted" (profiler counters) or ALGORITHMIC (a framework operator's inputs + outputs from its
# shapes, torch traces: a lower bound of its DRAM traffic, so its AI is an upper bound and its % of roof a
# lower bound)
COUNTED, ALGORITHMIC = "counted", "algorithmic"
# judged_time_s: the time the judgement is of (time x coverage; all of it for a row held to the floor alone or
# placed on the interconnect); missing for a row not judged
TABLE_COLUMNS = ("kernel", "short_name", "launches", "time_s", "coverage", "share", "precision", "level",
                 "bytes_kind", "ai", "flop_per_s", "roof_flop_per_s", "bound", "pct_of_roof", "time_at_roof_s",
                 "time_saved_s", "judged_time_s", "flops", "bytes", "ai_dram", "ai_l2", "ai_l1", "roofs_gpu",
                 "roofs_source", "profile_gpu", "roof")


@dataclass(frozen=True)
class Roof:
    """One roof line: a bandwidth slope (B/s) or a compute flat (FLOP/s), and the ceiling that gave it."""

    key: str  # "dram", "l2", "l1"; "fp64", "fp32", "fp16", "tensor"; "tensor.<type>" (TENSOR_TYPES)
    value: float
    ceiling: str  # e.g. "dram.read", "cublas.fp16", or "datasheet" for a datasheet row
    peak_key: str | None = None  # key into datasheet peaks (Row.peaks())


@dataclass(frozen=True)
class Roofs:
    """The roofs a roofline is drawn against, built from a roofs document or a datasheet row."""

    device: str
    bandwidths: tuple[Roof, ...]  # in LEVELS order, measured levels only
    flats: tuple[Roof, ...]  # in PRECISIONS order, measured precisions only: the drawn flats
    sm_clock_hz: float | None  # the SM clock the compute roofs hold at
    simulated: bool = False
    source: str | None = None  # where the numbers come from when not measured here
    complete: bool = True
    origin: str = ""  # the file or datasheet row they were read from
    memory_bytes: int | None = None
    sweeps: tuple[Sweep, ...] = ()  # the record's measured intensity sweeps (`intensity.*`): FLOP/B against FLOP/s
    clock_scale: float = 1.0  # compute roofs were multiplied by this (--scale-clock)
    compute_capability: str | None = None  # "9.0"; None when the roofs do not say
    sm_count: int | None = None
    max_sm_clock_hz: float | None = None
    # one per tensor-core input type (keys "tensor.bf16", ...): what work of a known type runs at; the drawn
    # "tensor" flat is the best of them, for kernels whose tensor type a profile does not say
    tensor_flats: tuple[Roof, ...] = ()
    launch_floor: Roof | None = None  # seconds a kernel (LAUNCH_FLOOR_CEILING); None: not measured
    # the datasheet row of the GPU (ceilings/data/datasheets.csv), matched once: its own row for datasheet
    # roofs, the device's name and memory's for measured ones; None: no row
    datasheet_row: Row | None = None

    @property
    def floor(self) -> tuple[float, str]:
        """(the launch floor in seconds per kernel, where it comes from): measured, else the default."""
        if self.launch_floor is not None:
            return self.launch_floor.value, f"{self.launch_floor.ceiling} measured ({self.origin or self.device})"
        return DEFAULT_LAUNCH_FLOOR_S, DEFAULT_FLOOR_SOURCE

    @classmethod
    def from_doc(cls, doc: RoofsRecord | Mapping, origin: str = "") -> Roofs:
        """Best valid ceilings of a roofs record (a roofs document is validated into one first); CeilingsError
        when there is no DRAM roof."""
        from ceilings import datasheet
        from ceilings.roofs import record

        rec = doc if isinstance(doc, RoofsRecord) else record(doc)

        def roof(key: str, ceiling) -> Roof | None:
            return None if ceiling is None else Roof(key, ceiling.value, ceiling.name, ceiling.peak_key)

        bandwidths = [roof(lv, rec.best(kind="bandwidth", level=lv)) for lv in LEVELS]
        flats = [roof(p, rec.best(kind="compute", precision=p, pipe="cuda-core")) for p in ("fp64", "fp32", "fp16")]
        # tensor: the best tensor-pipe ceiling of any precision, cuBLAS included; its name says which
        flats.append(roof("tensor", rec.best(kind="compute", pipe="tensor")))
        tensor_flats = [roof(f"tensor.{t}", rec.best(kind="compute", pipe="tensor", precision=t))
                        for t in TENSOR_TYPES]
        if bandwidths[0] is None:
            raise CeilingsError(f"{origin or 'roofs'}: no valid DRAM bandwidth ceiling; a roofline needs one "
                                f"(rerun `python -m ceilings.measure` with the dram group)")
        floor = rec.best_by_name().get(LAUNCH_FLOOR_CEILING)
        clocks = [c.clocks.sm_hz for c in rec.ceilings if c.clocks.sm_hz]
        sm_clock = float(np.median(clocks)) if clocks else rec.device.max_sm_clock_hz
        sweeps = tuple(s for s in rec.sweeps if s.name.startswith("intensity."))
        return cls(device=rec.device.name or UNKNOWN_GPU,
                   bandwidths=tuple(r for r in bandwidths if r is not None),
                   flats=tuple(r for r in flats if r is not None),
                   tensor_flats=tuple(r for r in tensor_flats if r is not None),
                   sm_clock_hz=float(sm_clock) if sm_clock else None,
                   simulated=rec.simulated, source=rec.source, complete=rec.complete, origin=origin,
                   memory_bytes=rec.device.memory_bytes, sweeps=sweeps,
                   compute_capability=rec.device.compute_capability, sm_count=rec.device.sm_count,
                   max_sm_clock_hz=rec.device.max_sm_clock_hz, launch_floor=roof("launch", floor),
                   datasheet_row=datasheet.match_device(rec.device.name or "", rec.device.memory_bytes))

    @classmethod
    def from_datasheet(cls, row, like: Roofs | None = None) -> Roofs:
        """Roofs from a datasheet row: DRAM slope and flats for the same peak keys as `like` (if given)."""
        peaks = row.peaks()
        wanted = {r.key: r.peak_key for r in like.flats} if like else {}
        keys = {p: wanted.get(p) or ("tensor.fp16" if p == "tensor" else p) for p in PRECISIONS}
        flats = tuple(Roof(p, float(peaks[k]), DATASHEET, k) for p, k in keys.items() if peaks.get(k))
        tensor_flats = tuple(Roof(f"tensor.{t}", float(peaks[f"tensor.{t}"]), DATASHEET, f"tensor.{t}")
                             for t in TENSOR_TYPES if peaks.get(f"tensor.{t}"))
        if not peaks.get("dram"):
            raise CeilingsError(f"datasheet row {row.display_name!r} has no DRAM bandwidth")
        return cls(device=row.display_name, bandwidths=(Roof("dram", float(peaks["dram"]), DATASHEET, "dram"),),
                   flats=flats, tensor_flats=tensor_flats, sm_clock_hz=None, memory_bytes=row.memory_bytes,
                   sm_count=row.sm_count, max_sm_clock_hz=row.boost_clock_mhz * 1e6,
                   source=f"datasheet figures for {row.display_name}",
                   origin=f"datasheet {row.display_name}", compute_capability=row.compute_capability,
                   datasheet_row=row)

    def bandwidth(self, level: str) -> Roof | None:
        return next((r for r in self.bandwidths if r.key == level), None)

    def flat(self, precision: str) -> Roof | None:
        """The flat of "fp64", "fp32", "fp16", "tensor" (the best tensor type), or "tensor.<type>" (that type's
        own: never another type's), or None when the roofs have none."""
        return next((r for r in (*self.flats, *self.tensor_flats) if r.key == precision), None)

    def ridge(self, precision: str, level: str = "dram") -> float | None:
        """Arithmetic intensity (FLOP/B) where the flat meets the slope: flat / bandwidth."""
        flat, bw = self.flat(precision), self.bandwidth(level)
        return flat.value / bw.value if flat and bw else None

    def scaled_to_clock(self, sm_clock_hz: float) -> Roofs:
        """Compute roofs scaled by sm_clock_hz / the roofs' clock; bandwidth roofs are left as measured."""
        if not self.sm_clock_hz:
            raise CeilingsError(f"{self.origin or 'roofs'}: no SM clock recorded; cannot --scale-clock")
        factor = sm_clock_hz / self.sm_clock_hz
        return replace(self, flats=tuple(replace(r, value=r.value * factor) for r in self.flats),
                       tensor_flats=tuple(replace(r, value=r.value * factor) for r in self.tensor_flats),
                       sm_clock_hz=sm_clock_hz, clock_scale=self.clock_scale * factor)

    @property
    def provenance(self) -> str:
        """Where the numbers come from, for titles and reports; never claims a measurement that isn't."""
        if self.simulated:
            text = "SIMULATED — not a measurement"
        elif self.source:
            text = f"{self.source} (not measured here)" if "not measured" not in self.source else self.source
        else:
            text = f"measured roofs ({Path(self.origin).name})" if self.origin else "measured roofs"
        if not self.complete:
            text += "; incomplete run"
        if self.clock_scale != 1.0:
            text += f"; compute roofs scaled ×{self.clock_scale:.3f} to the profile's SM clock"
        return text

    @property
    def serving(self) -> Serving | None:
        """The GPU's serving figures (ceilings/data/serving.csv: visible memory, interconnect); None: none."""
        from ceilings.datasheet import load_serving

        return load_serving().get(self.datasheet_row.key) if self.datasheet_row is not None else None

    @property
    def link(self) -> Roof | None:
        """The interconnect's bytes a second a direction (key "link"), for collectives: serving.csv's figure,
        labelled as a datasheet figure; None without a cited figure."""
        if self.serving is None or self.serving.link_gbs is None:
            return None
        return Roof("link", self.serving.link_gbs * 1e9, f"{self.serving.link} a direction ({DATASHEET}, not measured)")

    @property
    def measured(self) -> bool:
        return not self.simulated and not self.source

    @property
    def from_datasheet_row(self) -> bool:
        return all(r.ceiling == DATASHEET for r in (*self.bandwidths, *self.flats))

    @property
    def label(self) -> str:
        """The GPU with its compute capability: 'NVIDIA A100-SXM4-80GB (CC 8.0)'."""
        return f"{self.device} (CC {self.compute_capability or 'unknown'})"


def load(path: str | Path) -> Roofs:
    """The roofs of a roofs file (ceilings.roofs.load_record + Roofs.from_doc)."""
    from ceilings.roofs import load_record

    return Roofs.from_doc(load_record(path), origin=str(path))


def target_roofs(spec: str, like: Roofs | None = None, option: str = "--on") -> Roofs:
    """A roofs file (an existing path or a name ending .json), else the datasheet row matching `spec` (its
    tensor flat for the same peak key as `like`'s). `option` names the command-line option in errors."""
    path = Path(spec)
    if path.exists() and not path.is_file():
        what = "a folder" if path.is_dir() else "not a regular file"
        raise CeilingsError(f"{option} {spec}: {what}, not a roofs file; give a roofs JSON file (from python -m "
                            f"ceilings.measure) or a datasheet name such as 'A100 SXM4 80GB'")
    if spec.endswith(".json") or path.is_file():
        return load(spec)
    from ceilings.datasheet import find_datasheet

    try:
        row = find_datasheet(spec)
    except CeilingsError as exc:  # say that a roofs file was looked for too, not only a datasheet row
        raise CeilingsError(f"{option} {spec}: no such roofs file, and {exc}") from None
    return Roofs.from_datasheet(row, like=like)


def gpu_label(gpu: Mapping) -> str:
    """One GPU of kernel_table's attrs["gpus"]: 'NVIDIA A100-SXM4-80GB (CC 8.0, device 0)'."""
    extra = f", device {gpu['device']}" if gpu.get("device") is not None else ""
    return f"{gpu.get('gpu') or UNKNOWN_GPU} (CC {gpu.get('cc') or 'unknown'}{extra})"


def profile_device(gpus: Sequence[Mapping]) -> str:
    """The GPU(s) a profile ran on (kernel_table's attrs["gpus"]), for every table, report and plot."""
    return "; ".join(gpu_label(g) for g in gpus) if gpus else UNKNOWN_GPU


def _loose_name(name: str) -> str:
    # "NVIDIA A100-SXM4-80GB" (CUDA) == "NVIDIA A100 SXM4 80GB" (datasheet display name)
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _datasheet_row(name: str, memory_bytes: int | None):
    """The datasheet row of a device name: a row's own name (roofs from a datasheet), else match_device."""
    from ceilings import datasheet

    return (next((r for r in datasheet.load_datasheets() if name in r.names()), None)
            or datasheet.match_device(name, memory_bytes))


# The GPU facts of a profile (kernel_table's attrs["gpus"]: analysis.ncu.GPU_FACTS and RUN_CLOCK) that tell
# another GPU than the roofs': (fact, the Roofs field it is held against, how far below and above that value
# it may lie as a fraction of it, the unit the two are said in (None: a count), how they are said).
GPU_FACT_CHECKS = (
    # a part has one SM count: any other is another part, or a slice of one (MIG, a green context)
    ("sm_count", "sm_count", 0.0, 0.0, None, "{theirs} SMs, the roofs' {ours}"),
    # a model has one max SM clock, CUDA's the datasheet's boost clock (H100 SXM 1980 MHz, A100 1410 MHz):
    # 3 % still tells H200 NVL (1785) from SXM (1980) and V100 PCIe (1380) from SXM2 (1530)
    ("max_sm_clock_hz", "max_sm_clock_hz", 0.03, 0.03, "Hz", "max SM clock {theirs}, the roofs' {ours}"),
    # CUDA reports less memory than the marketed size the datasheets give (ECC and driver reservations: a T4
    # 14.8 GiB of 16), so the datasheet match's tolerance; a roofs file records CUDA's own figure
    ("memory_bytes", "memory_bytes", MEMORY_MATCH_REL_TOL, MEMORY_MATCH_REL_TOL, "B",
     "memory {theirs}, the roofs' {ours}"),
    # the clock the kernels ran at: below the max is throttling or ncu's base clock lock, never another GPU;
    # GPU Boost takes GeForce parts above their max clock attribute (a public GTX 1080 ncu raw page: 2.12 GHz
    # on a 1.759 GHz max, +21 %), so only a quarter above is another GPU
    (RUN_CLOCK, "max_sm_clock_hz", math.inf, 0.25, "Hz",
     "SM clock {theirs} while profiled (median), above the roofs' max {ours}"),
)


def _other_facts(roofs: Roofs, gpu: Mapping) -> list[str]:
    """The GPU_FACT_CHECKS in which `gpu` (one of kernel_table's attrs["gpus"]) is not the roofs' GPU, said
    with both values; those the profile or the roofs do not record are not checked."""
    out = []
    for fact, field, below, above, unit, said in GPU_FACT_CHECKS:
        theirs, ours = gpu.get(fact), getattr(roofs, field)
        if theirs and ours and not ours * (1 - below) <= theirs <= ours * (1 + above):
            out.append(said.format(**{k: f"{v:.0f}" if unit is None else si(v, unit)
                                      for k, v in (("theirs", theirs), ("ours", ours))}))
    return out


def foreign_gpus(roofs: Roofs, gpus: Sequence[Mapping]) -> list[Mapping]:
    """The profiled GPUs that are not the roofs' GPU: another compute capability when both are known, another
    SM count, max SM clock, memory size or a clock above the max (_other_facts) where both record it, else
    another name, compared loosely (case and punctuation, or the same datasheet row). A GPU whose name, CC and
    facts the profile or the roofs do not give cannot be told apart and is not listed."""
    out = []
    for g in gpus:
        if g.get("cc") and roofs.compute_capability and str(g["cc"]).strip() != str(roofs.compute_capability).strip():
            out.append(g)
        elif _other_facts(roofs, g):
            out.append(g)
        elif g.get("gpu") and roofs.device != UNKNOWN_GPU and _loose_name(g["gpu"]) != _loose_name(roofs.device):
            # the row the roofs matched once; Roofs built by hand match theirs by name here
            home = roofs.datasheet_row or _datasheet_row(roofs.device, roofs.memory_bytes)
            if home is None or home is not _datasheet_row(g["gpu"], None):
                out.append(g)
    return out


def device_warning(roofs: Roofs, gpus: Sequence[Mapping], remedy: str) -> str | None:
    """The warning about a profile from another GPU than the roofs' (FOREIGN_PROFILE first), or None."""
    foreign = foreign_gpus(roofs, gpus)
    if not foreign:
        return None
    facts = "; ".join(f for g in foreign for f in _other_facts(roofs, g))
    facts = f" (the profile's GPU: {facts})" if facts else ""
    return (f"{FOREIGN_PROFILE} the profile ran on {profile_device(foreign)}, the roofs are of {roofs.label}{facts}: "
            f"{remedy}")


def unknown_device_warning(roofs: Roofs, gpus: Sequence[Mapping]) -> str | None:
    """A warning when the profile says nothing of its GPU (name, CC or GPU_FACTS), so it cannot be checked
    against the roofs'."""
    if gpus and all(g.get("gpu") or g.get("cc") or any(g.get(f) for f in GPU_FACTS) for g in gpus):
        return None
    return (f"the profile does not say which GPU it ran on, so it cannot be checked against the roofs' "
            f"{roofs.label}: {GPU_NAME_HINT}")


def _check_columns(kernels: pd.DataFrame) -> None:
    missing = [c for c in KERNEL_COLUMNS if c not in kernels.columns]
    if missing:
        raise CeilingsError(f"kernel table lacks column(s) {', '.join(missing)}; build it with "
                            f"analysis.ncu.kernel_table")


def dominant_precision(row: Mapping) -> str | None:
    """The precision with the most FLOPs; NO_FLOPS for a kernel with zero FLOPs; None when unknown (also when
    the total is unknown and no known precision has FLOPs: the missing ones may have them all)."""
    counts = {p: row[f"flops_{p}"] for p in PRECISIONS}
    known = {p: v for p, v in counts.items() if not pd.isna(v)}
    if not any(v > 0 for v in known.values()):
        return NO_FLOPS if row["flops"] == 0 else None
    return max(known, key=known.get)


def _coverage(k: Mapping) -> float:
    """The share of a kernel table row's time whose FLOPs are known (analysis.ncu's `coverage`); 1 for a table
    without the column (built by hand: every launch's work known)."""
    coverage = k.get("coverage", 1.0)
    return 1.0 if coverage is None else float(coverage)


def _intensity(flops: float, nbytes: float) -> float:
    if pd.isna(flops) or pd.isna(nbytes):
        return math.nan
    if flops == 0:
        return 0.0
    return flops / nbytes if nbytes > 0 else math.inf


def roofline_table(roofs: Roofs, kernels: pd.DataFrame, *, level: str = "dram",
                   precision: str | None = None) -> pd.DataFrame:
    """Judge every kernel against the roofs; one row per kernel, sorted by time_saved_s (largest first).

    level: "dram", "l2", "l1", or "all" (the slowest of the measured levels binds: hierarchical roofline; a
    warning names the levels the roofs lack).
    precision: judge every kernel against this flat instead of its dominant precision.
    time_at_roof_s = max(bytes / bandwidth, sum over precisions of flops_p / flat_p) (one precision:
    flops / min(bandwidth x AI, flat));
    pct_of_roof = 100 x time_at_roof_s / time_s; kernels without FLOPs have AI 0 and are memory-bound.
    The result keeps the index of `kernels`. Warnings (kernels that could not be judged, kernels above their
    roof) are in `table.attrs["warnings"]`; the profile's GPUs (kernels.attrs["gpus"]) in `table.attrs["gpus"]`
    and, as text, in the profile_gpu column beside the roofs' GPU and provenance.
    """
    _check_columns(kernels)
    warnings: list[str] = []
    if level == "all":
        levels = [lv for lv in LEVELS if roofs.bandwidth(lv)]
        unmeasured = [lv for lv in LEVELS if lv not in levels]
        if unmeasured:
            warnings.append(f"--level all: the roofs ({roofs.origin or roofs.device}) have no valid "
                            f"{' or '.join(unmeasured)} bandwidth ceiling, so kernels are judged and drawn against "
                            f"{', '.join(levels)} only; measure {'/'.join(f'{lv}.read' for lv in unmeasured)} with "
                            f"`python -m ceilings.measure` (the bandwidth group; a run with --only must include "
                            f"them)")
    elif level in LEVELS:
        if not roofs.bandwidth(level):
            raise CeilingsError(f"{roofs.origin or 'roofs'}: no valid {level} bandwidth ceiling; choose "
                                f"--level {' or '.join(r.key for r in roofs.bandwidths)}")
        levels = [level]
    else:
        raise CeilingsError(f"level {level!r} is not one of {', '.join(LEVELS)}, all")
    if precision is not None and precision not in PRECISIONS:
        raise CeilingsError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")

    not_judged: list[str] = []
    reasons: dict[str, list[str]] = {}  # why -> the kernels not judged for it
    above: list[str] = []  # the kernels faster than their roof, with their % of it
    partly: list[str] = []  # the rows judged on part of their time, with its share
    total_time = float(np.nansum(kernels["time_s"].to_numpy(dtype=float)))
    gpus = list(kernels.attrs.get("gpus", []))
    provenance = {"roofs_gpu": roofs.label, "roofs_source": roofs.provenance, "profile_gpu": profile_device(gpus)}
    rows = []
    floor_s, floor_source = device_floor(roofs, kernels)
    latency_bound = alone = linked = 0
    unjudged: dict = {}  # the index of a row not judged -> why
    names = readable_names([str(n) for n in kernels["kernel"]])  # told apart where two would read the same
    communicates = communicating(kernels).to_numpy()  # decided once, as the time budget decides it
    for position, ((index, k), name) in enumerate(zip(kernels.iterrows(), names)):
        prec = dominant_precision(k)
        if precision is not None and prec not in (NO_FLOPS, None):
            prec = precision
        ais = {lv: _intensity(k["flops"], k[f"{lv}_bytes"]) for lv in LEVELS}
        coverage = _coverage(k)
        judged_time = k["time_s"] * coverage  # the time of the launches whose work is known
        row = {"kernel": k["kernel"], "short_name": name, "launches": k["launches"],
               "time_s": k["time_s"], "coverage": coverage,
               "share": k["time_s"] / total_time if total_time > 0 else math.nan,
               "precision": prec, "level": math.nan, "bytes_kind": COUNTED, "roof": math.nan, "ai": math.nan,
               "flop_per_s": k["flops"] / judged_time if judged_time > 0 else math.nan,
               "roof_flop_per_s": math.nan, "bound": math.nan, "pct_of_roof": math.nan,
               "time_at_roof_s": math.nan, "time_saved_s": math.nan, "judged_time_s": judged_time,
               "flops": k["flops"], "bytes": math.nan,
               **{f"ai_{lv}": ais[lv] for lv in LEVELS}, **provenance}
        rows.append(row)
        if not pd.isna(k.get("comm_bytes", math.nan)):  # a collective's bus bytes: against the interconnect
            why, judged_time = judge_link(row, k, roofs.link), k["time_s"]
            linked += not why
        elif communicates[position]:  # its work is the interconnect's, not FLOPs
            why = NO_MESSAGE_SIZE
        else:
            why = _judge(row, k, roofs, levels, forced=precision is not None)
            if _against_floor(row, floor_s, placed=not why):
                latency_bound += 1
                alone += bool(why)
                why = None  # judged against the floor
        if why:
            row["judged_time_s"] = math.nan
            unjudged[index] = why
            not_judged.append(f"{row['short_name']}: not judged ({why})")
            reasons.setdefault(why, []).append(row["short_name"])
            row["bytes_kind"] = math.nan
        else:
            if row.get("borrowed"):
                warnings.append(f"{row['short_name']}: {', '.join(row['borrowed'])} charged at the "
                                f"{row['precision']} roof: the roofs have no ceiling for it")
            # the floor is the launch rate, which a kernel's own time may beat: only a roof can be exceeded
            if row["bound"] != LATENCY and row["time_at_roof_s"] > ABOVE_ROOF_TOLERANCE * judged_time:
                above.append(f"{row['short_name']} at {row['pct_of_roof']:.0f}%")
                # faster than physics allows: the roof or the counters are wrong, not the kernel beyond 100 %
                row.update(pct_of_roof=math.nan, time_saved_s=math.nan)
            if 0 < coverage < 1:  # a row of no known work judged at all is held to the floor alone, said apart
                partly.append(f"{row['short_name']} ({coverage:.0%})")
    if partly:
        warnings.append(f"{len(partly)} row(s) judged on the part of their time whose FLOPs are known "
                        f"({listed(partly, NAMES_SHOWN, sep=', ')}; the coverage column): their % of roof and "
                        f"saving are of that part; the rest of their time is not judged")
    if above:  # one line for them all, as for the reasons below
        warnings.append(f"{len(above)} kernel(s) run above their roof ({listed(above, NAMES_SHOWN, sep=', ')} of it); "
                        f"the roofs may be low (clock, incomplete run) or the counters wrong: their % of roof "
                        f"and saving are not given")
    if linked:
        warnings.append(link_warning(linked, roofs.link))
    if latency_bound:
        warnings.append(f"{latency_bound} kernel(s) latency-bound: their roofs allow less than the launch floor "
                        f"of {seconds(floor_s)} a kernel ({floor_source}); their saving is against the floor"
                        + (f"; {alone} of them placed by the floor alone (within {LATENCY_BOUND_FACTOR:g}x of it; "
                           f"their counters cannot place them: the saving is at most that)" if alone else ""))
    for why, names in reasons.items():  # one line per reason: a trace can leave hundreds of kernels unjudged
        shown = listed(names, NAMES_SHOWN, sep=", ")
        warnings.append(f"{shown}: not judged ({why})" if len(names) == 1 else
                        f"{len(names)} kernels not judged ({why}): {shown}")
    estimated = sum(r["bytes_kind"] == ALGORITHMIC for r in rows)
    if estimated:
        warnings.append(f"{estimated} kernel(s) placed with ALGORITHMIC bytes (their operator's inputs + outputs, "
                        f"from its shapes): a lower bound of DRAM traffic, so their intensity is an upper bound, "
                        f"their % of roof a lower bound; profile with ncu for DRAM bytes")
    # the kernel table's index is kept, so tables judged against different roofs align row by row
    table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS), index=kernels.index)
    if "attention_flops" in kernels.columns:  # a torch trace's --flops convention for causal attention
        table["attention_flops"] = kernels["attention_flops"]
    table = table.sort_values("time_saved_s", ascending=False, na_position="last", kind="stable")
    table.attrs["warnings"] = warnings
    table.attrs["not_judged"] = not_judged
    table.attrs["why_not_judged"] = unjudged
    table.attrs["level"] = level
    table.attrs["floor"] = (floor_s, floor_source)
    table.attrs["gpus"] = gpus
    table.attrs["application"] = application_point(kernels)
    table.attrs["by"] = kernels.attrs.get("by", "kernel")
    table.attrs["predicted"] = kernels.attrs.get("predicted")  # analysis.predict: what was predicted, not measured
    # what analysis.roofline.budget reads: the rows' time in parts, and the profile's timeline
    table.attrs["time_parts"] = kernels.attrs.get("time_parts")
    table.attrs["timeline"] = {fact: kernels.attrs.get(fact) for fact in ("early_s", "busy_s", "window_s",
                                                                           "overlap_s")}
    return table


def application_line(point: dict | None) -> str:
    """The application point in words, for the report and the terminal."""
    if point is None:
        return ("n/a: some timed kernels lack FLOPs or bytes, so a total would place the application wrongly "
                "(see the warnings)")
    return (f"{si(point['flops'], 'FLOP')} in {seconds(point['time_s'])} ({point['time_kind']}, "
            f"{point['kernels']} kernels) = {si(point['flop_per_s'], 'FLOP/s')} at {point['ai']:.3g} FLOP/B "
            f"({point['bytes_kind']} bytes)")


def application_point(kernels: pd.DataFrame) -> dict | None:
    """The whole application as one point: total FLOPs over the GPU's busy time (kernels.attrs["busy_s"],
    the union of kernel intervals, where the profile has timestamps; else the sum of kernel times, as ncu
    serialises kernels), and total bytes (counted DRAM bytes, else algorithmic). None unless every kernel
    with a time has FLOPs and bytes on all its launches (a partial sum would place the application wrongly)."""
    timed = kernels[kernels["time_s"].notna() & (kernels["time_s"] > 0)]
    if timed.empty or timed["flops"].isna().any() or ("coverage" in timed and (timed["coverage"] != 1).any()):
        return None
    dram = timed["dram_bytes"]
    alg = timed["alg_bytes"] if "alg_bytes" in timed.columns else pd.Series(np.nan, index=timed.index)
    kind, nbytes = (COUNTED, dram) if dram.notna().all() else (ALGORITHMIC, alg)
    if nbytes.isna().any():
        return None
    busy = kernels.attrs.get("busy_s")
    time_s, time_kind = (busy, "GPU busy time (union of kernel intervals)") if busy else \
        (float(timed["time_s"].sum()), "sum of kernel times")
    flops, total_bytes = float(timed["flops"].sum()), float(nbytes.sum())
    return {"flops": flops, "bytes": total_bytes, "bytes_kind": kind, "time_s": time_s, "time_kind": time_kind,
            "flop_per_s": flops / time_s, "ai": _intensity(flops, total_bytes), "kernels": len(timed)}


@dataclass(frozen=True)
class AtRoof:
    """The time some work takes at the roofs, apart from any measured time: analytic work (an LLM's ops)
    and profiled kernels alike. compute_s sums each precision's FLOPs over its own flat; memory_s is the
    slowest level's bytes over its bandwidth; time_s the larger (the roofline's min(flat, AI x bandwidth))."""

    time_s: float
    compute_s: float
    memory_s: float
    level: str  # the binding memory level
    bound: str  # "compute" or "memory"
    borrowed: tuple[str, ...] = ()  # precisions without a roof, charged at the main precision's flat


def time_at_roofs(roofs: Roofs, flops: Mapping[str, float], nbytes: Mapping[str, float],
                  main: str | None = None) -> AtRoof | str:
    """Work at the roofs: `flops` by flat key ("fp32", "tensor", "tensor.bf16", ...), `nbytes` by level; or
    why it cannot be placed (a string). A precision without a roof is charged at `main`'s flat when `main`
    has one (stray DADDs in fp32 code); without `main` it cannot be placed."""
    work = {p: f for p, f in flops.items() if f > 0}
    main_flat = roofs.flat(main) if main else None
    if main and work and main_flat is None:
        return f"the roofs have no valid {main} ceiling"
    compute, borrowed = 0.0, []
    for p, f in work.items():
        flat = roofs.flat(p)
        if flat is None:
            if main_flat is None:
                return f"the roofs have no valid {p} ceiling"
            flat = main_flat
            borrowed.append(f"{p} ({f / sum(work.values()):.1%} of its FLOPs)")
        compute += f / flat.value
    if not nbytes:
        return "no bytes"
    memory = {lv: b / roofs.bandwidth(lv).value for lv, b in nbytes.items()}
    level = max(memory, key=memory.get)
    # a kernel at the ridge (flops/flat = bytes/bw) counts as compute-bound
    bound = "compute" if work and compute >= memory[level] else "memory"
    return AtRoof(max(memory[level], compute), compute, memory[level], level, bound, tuple(borrowed))


def _judge(row: dict, k: Mapping, roofs: Roofs, levels: Sequence[str], forced: bool) -> str | None:
    """Fill the roof columns of `row`; return why the kernel cannot be judged, or None. Its time at the
    roofs (time_at_roofs) is filled whenever its work is known; % of roof and time saved need a kernel time.
    A forced --precision puts all FLOPs on that flat."""
    if pd.isna(row["coverage"]):
        return "its FLOPs and bytes are known on different launches (--per-launch shows each)"
    if pd.isna(k["flops"]):
        missing = [f"flops_{p}" for p in PRECISIONS if pd.isna(k[f"flops_{p}"])]
        return ("no FLOP counters" if len(missing) == len(PRECISIONS) else
                f"total FLOPs unknown: {', '.join(missing)} missing (a counter some launches lack, or tensor "
                "instructions without a compute capability)")
    if k["flops"] < 0 or any(k[f"{lv}_bytes"] < 0 for lv in levels):
        return "negative FLOP or byte counts (a corrupt or edited input)"
    if row["precision"] is None:
        return "no FLOP counters"
    if row["precision"] == NO_FLOPS:
        parts = {}
    elif forced:
        parts = {row["precision"]: k["flops"]}
    else:
        parts = {p: k[f"flops_{p}"] for p in PRECISIONS if not pd.isna(k[f"flops_{p}"])}
    typed = k.get("tensor_type")
    if isinstance(typed, str) and typed:  # tensor FLOPs of one known type run at that type's roof, or none
        parts = {(f"tensor.{typed}" if p == "tensor" else p): f for p, f in parts.items()}
    main = row["precision"]
    if main == "tensor" and isinstance(typed, str) and typed:
        main = f"tensor.{typed}"
    counted = {lv: k[f"{lv}_bytes"] for lv in levels if not pd.isna(k[f"{lv}_bytes"])}
    algorithmic = k.get("alg_bytes")
    if not counted and "dram" in levels and algorithmic is not None and not pd.isna(algorithmic):
        if algorithmic == 0 and k["flops"] == 0:  # a copy or reduction inside an op counted on another kernel
            return "no work of its own: its operator's FLOPs and bytes are on the operator's main kernel"
        # no counted bytes (a torch trace): the operator's inputs + outputs, the least DRAM traffic it needs
        counted, row["bytes_kind"] = {"dram": algorithmic}, ALGORITHMIC
        row["ai_dram"] = row["ai"] = _intensity(k["flops"], algorithmic)
    if not counted:
        return f"no {'/'.join(levels)} byte counters"
    at = time_at_roofs(roofs, parts, counted, main=main if parts else None)
    row["roof"] = main if parts else at.level if not isinstance(at, str) else math.nan
    if isinstance(at, str):
        return at
    row.update(level=at.level, ai=row[f"ai_{at.level}"], bytes=counted[at.level], bound=at.bound,
               time_at_roof_s=at.time_s, roof_flop_per_s=k["flops"] / at.time_s if at.time_s > 0 else math.nan,
               borrowed=list(at.borrowed))
    time = k["time_s"] * row["coverage"]
    if pd.isna(time) or time <= 0:
        return "no kernel time"
    # a saving under a billionth of the time is the rounding of sums (a prediction timed at its roofs)
    saved = time - at.time_s
    row.update(pct_of_roof=100.0 * at.time_s / time, time_saved_s=saved if saved > 1e-9 * time else 0.0)
    return None


def device_floor(roofs: Roofs, kernels: pd.DataFrame) -> tuple[float, str]:
    """The floor a kernel's time is judged against, in seconds a launch, and where it comes from: the roofs'
    launch floor, unless a kernel of the profile ran faster. A profile times kernels on the device (ncu's
    gpu__time_duration, a trace's kernel events), while the launch floor is the host's rate of launches,
    which a kernel's device time can beat: then the profile's shortest launch is the floor (an upper bound
    of the device-side floor, said as such), so that no kernel is ever judged above 100 % of it."""
    floor_s, source = roofs.floor
    timed = kernels[(kernels["time_s"] > 0) & (kernels["launches"] > 0)]
    if timed.empty:
        return floor_s, source
    per_launch = timed["time_s"] / timed["launches"]
    shortest = per_launch.idxmin()
    if per_launch[shortest] >= floor_s:
        return floor_s, source
    name = short_name(str(timed.at[shortest, "kernel"]))
    return float(per_launch[shortest]), (f"the profile's shortest kernel, {name} at {seconds(per_launch[shortest])} a "
                                         f"launch on the device: below the launch floor of {seconds(floor_s)} "
                                         f"({source}), a host-side rate; an upper bound of the device-side floor")


def _against_floor(row: dict, floor_s: float, *, placed: bool) -> bool:
    """No kernel launched from the host beats launches x the floor: a placed row whose time at the roofs is
    below that is latency-bound, its time at the roof that floor time and its % and saving against it (of the
    share of its launches whose work is known: launches x coverage x floor). A row its counters cannot place
    (`placed` false) is latency-bound by the floor alone when its time is within LATENCY_BOUND_FACTOR of the
    floor time (its saving is at most that). Any other row is left as the roofs judged it. Return whether the
    row is latency-bound."""
    time, launches = row["time_s"], row["launches"]
    if pd.isna(time) or time <= 0 or pd.isna(launches) or launches <= 0:
        return False
    if placed:
        time, floor_time = time * row["coverage"], launches * row["coverage"] * floor_s
        if row["time_at_roof_s"] >= floor_time:
            return False
    else:
        floor_time = launches * floor_s
        if time > LATENCY_BOUND_FACTOR * floor_time:
            return False
    row.update(bound=LATENCY, roof=LATENCY, time_at_roof_s=floor_time, judged_time_s=time,
               pct_of_roof=100.0 * floor_time / time,
               time_saved_s=max(0.0, time - floor_time))
    return True


def totals(table: pd.DataFrame) -> dict[str, float]:
    """Total time, total time at the roofs and the potential saving over the judged kernels (NaN if none)."""
    judged = table[table["pct_of_roof"].notna()]  # at the roofs and timed
    # NaN, not 0, when no kernel has a time or none was judged: a sum of nothing is unknown
    return {"kernels": len(table), "judged": len(judged),
            "time_s": float(table["time_s"].sum(min_count=1)),
            # the time the judgement is of: a row of coverage below 1 is judged on that share of its time
            "judged_time_s": float(judged["judged_time_s"].sum(min_count=1)),
            "time_at_roof_s": float(judged["time_at_roof_s"].sum(min_count=1)),
            "time_saved_s": float(judged["time_saved_s"].sum(min_count=1))}


def percent(part: float, whole: float) -> str:
    """100 x part / whole with one decimal, or "n/a" when either is unknown or whole is not positive."""
    if pd.isna(part) or pd.isna(whole) or not whole > 0:
        return "n/a"
    return f"{part / whole * 100:.1f}%"


def si(value: float | None, unit: str) -> str:
    """3.35e12, "B/s" -> "3.35 TB/s" (ceilings.report.format_rate); missing or infinite -> "n/a B/s"."""
    from ceilings.report import format_rate

    if value is None or not math.isfinite(value):
        return f"n/a {unit}"
    return format_rate(value, unit)


def seconds(value: float) -> str:
    """3 significant digits in s, ms, µs or ns."""
    if not math.isfinite(value):
        return "n/a"
    value = float(f"{value:.3g}")  # the unit after rounding: 999.5 µs is "1 ms", not "1e+03 µs"
    for factor, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def datasheet_roofs(roofs: Roofs, name: str | None = None) -> Roofs | None:
    """The datasheet row named by `name` (a fragment), else the row matching the roofs' device, or None (also
    for roofs that are a datasheet row: they would be drawn over themselves)."""
    from ceilings import datasheet

    if name:
        return Roofs.from_datasheet(datasheet.find_datasheet(name), like=roofs)
    row = None if roofs.from_datasheet_row else roofs.datasheet_row
    return Roofs.from_datasheet(row, like=roofs) if row is not None else None
