"""The roofs file: build, validate, load and save (schema in docs/roofs-schema.md), and the typed record that
readers use (`RoofsRecord`, made from a validated document here and nowhere else: `record`, `load_record`)."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import atomic
from common.errors import CeilingsError
from kernels.base import UNITS, merit

from .inputs import GZIP_MAGIC, loads_json, read_bytes

SCHEMA_VERSION = 1  # the major version: a reader refuses a newer one
# The minor version written: 1 added `launch`, 2 the SM clock measured by a kernel (`clocks.sm_hz_kernel_*`)
# and which clock the clock-derived peak used (`peaks.clock_source`), 3 `meta.stopped` (a file is saved after
# each benchmark, `complete` false until the end). A file without `schema_minor` is 1.0 and still read; a
# newer minor only adds fields, so it is read too (without what it adds).
# 4: the ceilings beyond FLOPs and bytes: kinds `special` (MUFU results per second) and `latency` (seconds per
# launch or per dependent load, lower is better), pipes `sfu` and `launch`, `work.special` and `work.steps`,
# bandwidth level `host` (the host link), `energy` (joules per unit of work from NVML's power).
SCHEMA_MINOR = 4
KINDS = tuple(UNITS)
LEVELS = ("dram", "l2", "l1", "host")  # host: the host link (1.4)
BACKENDS = ("cuda-c", "numba", "library")
PIPES = ("memory", "cuda-core", "tensor", "sfu", "launch")
# launch.launcher: whose environment variables named this task's rank (ceilings.ranks reads them)
LAUNCHERS = ("slurm", "openmpi", "torchrun")
# launch.mode: how the GPUs of a node were measured. single: this one alone; sequential: `--device all`, one
# after another, each alone; concurrent: at once (`--device all --concurrent`, or several tasks of a launcher
# on one node), sharing the node's power and PCIe.
SINGLE, SEQUENTIAL, CONCURRENT = "single", "sequential", "concurrent"
MODES = (SINGLE, SEQUENTIAL, CONCURRENT)
# peaks.clock_source: the clock clock_derived_run / of_clock_derived used. kernel: the SM clock measured by
# the clock kernel on the benchmark's stream; nvml: NVML's samples; max: neither, so of_clock_derived is
# against the max clock (a power-capped clock then reads as a shortfall of the kernel).
CLOCK_SOURCES = ("kernel", "nvml", "max")

# every number of a roofs file (clocks, bytes, watts, counts, rates) is 0 or more and below 2^64: no 64-bit
# counter or register reads more, and a larger int would overflow float arithmetic downstream
MAX_NUMBER = 2**64
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NONE = type(None)
_NUMBER = (int, float, _NONE)
_INT = (int, _NONE)
_STR = (str, _NONE)
_BOOL = (bool, _NONE)

# field -> (type(s), required)
_TOP = {
    "schema_version": (int, True),
    "schema_minor": (int, False),
    "simulated": (bool, True),
    "complete": (bool, True),
    "meta": (dict, True),
    "device": (dict, True),
    "launch": (dict, False),  # required from minor 1 on
    "ceilings": (list, True),
    "sweeps": (list, True),
    "source": (str, False),
}
_META = {"tool": (_STR, False), "version": (_STR, False), "git_sha": (_STR, False), "argv": (list, False),
         "started": (_STR, False), "finished": (_STR, False), "host": (_STR, False),
         "stopped": (_STR, False)}
_DEVICE = {
    "index": (_INT, False),
    "name": (_STR, False),
    "compute_capability": (_STR, False),
    "sm_count": (_INT, False),
    "max_sm_clock_hz": (_NUMBER, False),
    "memory_clock_hz": (_NUMBER, False),
    "memory_bytes": (_INT, False),
    "l2_bytes": (_INT, False),
    "driver_version": (_STR, False),
    "uuid": (_STR, False),
    "pci_bus_id": (_STR, False),
    "nvml": (dict, False),
}
_NVML = {"driver_version": (_STR, False), "power_limit_w": (_NUMBER, False), "ecc_enabled": (_BOOL, False)}
_LAUNCH = {
    "launcher": (_STR, True),
    "job_id": (_STR, True),
    "node": (_STR, True),
    "rank": (_INT, True),
    "local_rank": (_INT, True),
    "world_size": (_INT, True),
    "local_size": (_INT, True),
    "cuda_visible_devices": (_STR, True),
    "gpu_index": (_INT, True),
    "mode": (_STR, True),
    "gpus_at_once": (_INT, True),
}
_CEILING = {
    "name": (str, True),
    "kind": (str, True),
    "level": ((str, type(None)), True),
    "precision": ((str, type(None)), True),
    "pipe": (str, True),
    "peak_key": (str, True),
    "value": ((int, float, type(None)), True),
    "unit": (str, True),
    "backend": (str, True),
    "kernel": (str, True),
    "work": (dict, True),
    "params": (dict, True),
    "stats": (dict, True),
    "clocks": (dict, True),
    "peaks": (dict, True),
    "valid": (bool, True),
    "notes": (list, True),
    "energy": (dict, False),  # 1.4
}
_STATS = {"rel_iqr": (_NUMBER, False), "noisy": (_BOOL, False)}
_CLOCKS = {"sm_hz_median": (_NUMBER, False), "mem_hz_median": (_NUMBER, False),
           "power_w_median": (_NUMBER, False), "temperature_c_max": (_NUMBER, False),
           "throttle_reasons": (list, False),
           # 1.2: the clock kernel's (kernels.clock), or why it has none
           "sm_hz_kernel_median": (_NUMBER, False), "sm_hz_kernel_min": (_NUMBER, False),
           "sm_hz_kernel_max": (_NUMBER, False), "sm_hz_kernel_readings": (_INT, False),
           "sm_hz_kernel_error": (_STR, False)}
_PEAKS = {"clock_source": (_STR, False)}  # 1.2; the figures themselves are free-form
# 1.4, optional: joules from NVML's power over the timed launches (ceilings.harness.energy_record)
_ENERGY = {"samples": (_INT, False), "timed_s": (_NUMBER, False), "power_w": (_NUMBER, False),
           "joules_per_launch": (_NUMBER, False), "j_per_byte": (_NUMBER, False), "j_per_flop": (_NUMBER, False),
           "j_per_op": (_NUMBER, False), "j_per_step": (_NUMBER, False), "why_none": (_STR, False)}
_SWEEP = {
    "name": (str, True),
    "x": (dict, True),
    "y": (dict, True),
    "points": (list, True),
    "plateaus": (list, True),
    "knee": ((dict, type(None)), True),
    "backend": (str, True),
    "kernel": (str, True),
}
_UNIT = {"unit": (str, True)}


def _as_tuples(*specs: dict) -> None:
    """Every spec's types as a tuple, as _check_fields looks them up."""
    for spec in specs:
        for field, (types, required) in spec.items():
            spec[field] = (types if isinstance(types, tuple) else (types,), required)


_as_tuples(_TOP, _META, _DEVICE, _NVML, _LAUNCH, _CEILING, _STATS, _CLOCKS, _PEAKS, _ENERGY, _SWEEP, _UNIT)
_ABSENT = object()
_XY_TYPES = {int, float}  # a sweep point's coordinates as JSON gives them (bool is no number here)
# stats.samples_s as this module writes it (json.dumps, indent=1), and what a list of JSON numbers is made of
_SAMPLES_KEY = b'"samples_s": ['
_NUMBER_BYTES = b"0123456789.eE+-, \t\r\n"


# The clock kernel runs right after a chunk of timed launches, when the GPU has just gone light, and can read
# higher than the clock a power-capped kernel ran at; NVML samples during the chunks. With at least this many
# NVML samples and the two further apart than this fraction, NVML's median is the run's clock.
NVML_MIN_SAMPLES = 5
CLOCK_DISAGREEMENT_FRACTION = 0.05


def run_sm_clock(clocks: Mapping | None) -> tuple[float | None, str | None]:
    """(the SM clock a benchmark ran at, where it comes from: "kernel" | "nvml" | None) from a ceiling's
    `clocks` object: the clock kernel's (measured on the SMs, on the benchmark's stream), unless NVML's
    median of at least NVML_MIN_SAMPLES samples disagrees with it by more than CLOCK_DISAGREEMENT_FRACTION;
    else NVML's; (None, None) when neither answered."""
    clocks = clocks or {}
    kernel, nvml = clocks.get("sm_hz_kernel_median"), clocks.get("sm_hz_median")
    if kernel and nvml and (clocks.get("samples") or 0) >= NVML_MIN_SAMPLES \
            and abs(kernel / nvml - 1) > CLOCK_DISAGREEMENT_FRACTION:
        return nvml, "nvml"
    if kernel:
        return kernel, "kernel"
    return (nvml, "nvml") if nvml else (None, None)


def run_sm_hz(clocks: Mapping | None) -> float | None:
    """The SM clock a benchmark ran at (run_sm_clock); None when neither the kernel nor NVML answered."""
    return run_sm_clock(clocks)[0]


@dataclass(frozen=True, slots=True)  # slots: a fleet holds thousands of records
class Clocks:
    """What NVML saw while one benchmark ran; None where it did not answer (no NVML: every field)."""

    sm_hz_median: float | None = None
    mem_hz_median: float | None = None
    power_w_median: float | None = None
    temperature_c_max: float | None = None
    throttle_reasons: tuple[str, ...] | None = None  # every reason seen (ceilings.nvml.THROTTLE_REASONS)
    # The clock kernel's median over its readings (1.2; None before, on the simulator, or when it failed)
    sm_hz_kernel_median: float | None = None
    nvml_samples: int | None = None  # how many NVML samples the medians are of

    @property
    def sm_hz(self) -> float | None:
        """The SM clock the benchmark ran at: run_sm_hz."""
        return run_sm_hz({"sm_hz_kernel_median": self.sm_hz_kernel_median, "sm_hz_median": self.sm_hz_median,
                          "samples": self.nvml_samples})


@dataclass(frozen=True, slots=True)
class Ceiling:
    """One measured ceiling (docs/roofs-schema.md, `ceilings[]`)."""

    name: str
    kind: str  # KINDS
    level: str | None  # LEVELS, for bandwidth
    precision: str | None  # for compute
    pipe: str  # PIPES
    peak_key: str
    value: float | None  # None: not measured
    unit: str
    backend: str  # BACKENDS
    kernel: str
    valid: bool
    notes: tuple[str, ...]
    clocks: Clocks
    rel_iqr: float | None  # the spread of its launch times (IQR / median)
    noisy: bool | None

    @property
    def usable(self) -> bool:
        """Valid and measured: a rate a reader may use."""
        return self.valid and self.value is not None


@dataclass(frozen=True, slots=True)
class Sweep:
    name: str
    x_unit: str
    y_unit: str
    points: tuple[tuple[float, float], ...]
    backend: str
    kernel: str


@dataclass(frozen=True, slots=True)
class Device:
    """The GPU measured; None where its probe failed (the file's `probe_errors` says why) or, in a simulated
    run, for every fact of a real GPU."""

    index: int | None  # CUDA device index in the measuring process
    name: str | None
    compute_capability: str | None
    sm_count: int | None
    max_sm_clock_hz: float | None
    memory_clock_hz: float | None
    memory_bytes: int | None
    driver_version: str | None  # the CUDA version the driver runs ("12.4")
    uuid: str | None
    pci_bus_id: str | None
    nvml_driver_version: str | None  # the driver's own version ("550.54.15")
    power_limit_w: float | None  # enforced power limit
    ecc_enabled: bool | None


@dataclass(frozen=True, slots=True)
class Meta:
    tool: str | None
    version: str | None
    argv: tuple[str, ...]
    started: str | None
    host: str | None


@dataclass(frozen=True, slots=True)
class Launch:
    """How the run was started (schema 1.1): the launcher's task and how the node's GPUs were measured."""

    launcher: str | None  # LAUNCHERS; None: started by hand
    job_id: str | None  # SLURM_JOB_ID
    node: str | None  # the node's name as the launcher knows it (SLURMD_NODENAME), else the host name
    rank: int | None
    local_rank: int | None
    world_size: int | None
    local_size: int | None  # tasks on this node
    cuda_visible_devices: str | None
    gpu_index: int | None  # the GPU's index as nvidia-smi numbers it on its node (PCI order)
    mode: str | None  # MODES; None: not known
    gpus_at_once: int | None  # GPUs of the node measured at the same time as this one (1: alone)


@dataclass(frozen=True, slots=True)
class RoofsRecord:
    """A validated roofs file, typed. Free-form parts (params, work, raw samples, probe errors) stay in the
    document: readers that need them load it with `load_roofs`."""

    schema_version: int
    schema_minor: int
    simulated: bool
    complete: bool
    source: str | None  # where the numbers come from when not measured here
    meta: Meta
    device: Device
    launch: Launch | None  # None in a 1.0 file
    ceilings: tuple[Ceiling, ...]
    sweeps: tuple[Sweep, ...]

    def best(self, *, kind: str, level: str | None = None, precision: str | None = None,
             pipe: str | None = None) -> Ceiling | None:
        """The best valid measured ceiling matching every given field (kernels.base.merit), or None."""
        candidates = [c for c in self.ceilings if c.usable and c.kind == kind
                      and (level is None or c.level == level) and (precision is None or c.precision == precision)
                      and (pipe is None or c.pipe == pipe)]
        return max(candidates, key=lambda c: merit(c.kind, c.value), default=None)

    def best_by_name(self) -> dict[str, Ceiling]:
        """name -> its best valid measured ceiling (several backends may measure one name): the highest rate,
        the lowest latency."""
        best: dict[str, Ceiling] = {}
        for c in self.ceilings:
            if c.usable and (c.name not in best or merit(c.kind, c.value) > merit(c.kind, best[c.name].value)):
                best[c.name] = c
        return best


def _check_fields(obj: Any, spec: dict, where: str) -> None:
    if not isinstance(obj, dict):
        raise CeilingsError(f"{where}: expected an object, found {type(obj).__name__}")
    for field, (types, required) in spec.items():
        value = obj.get(field, _ABSENT)
        if value is _ABSENT:
            if required:
                raise CeilingsError(f"{where}.{field}: missing")
            continue
        kind = type(value)
        if kind in types:  # what JSON gives: exactly one of the types (a fleet loads thousands of files)
            if kind is str:
                if _CONTROL.search(value):  # a host name with a newline breaks every table
                    raise CeilingsError(f"{where}.{field}: {value[:60]!r} has control characters (a newline, say); "
                                        f"no name or version has them")
            elif (kind is float or kind is int) and not 0 <= value < MAX_NUMBER:  # NaN fails the comparison too
                raise CeilingsError(f"{where}.{field}: {_shown(value)} is not a measurement (a number here is 0 "
                                    f"or more, finite and below 2^64; null when unknown)")
            continue
        # bool is an int in Python; an int field must not accept true/false
        if isinstance(value, bool) and bool not in types:
            raise CeilingsError(f"{where}.{field}: expected {_type_names(types)}, found a boolean")
        if not isinstance(value, types):
            raise CeilingsError(f"{where}.{field}: expected {_type_names(types)}, found {type(value).__name__}")


def _shown(value: float | int) -> str:
    text = repr(value)
    return text if len(text) <= 30 else f"a {len(text)}-digit number"


def _type_names(types: tuple) -> str:
    names = {int: "integer", float: "number", str: "string", bool: "boolean", dict: "object", list: "list",
             type(None): "null"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _check_strings(values: list, where: str) -> None:
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise CeilingsError(f"{where}[{i}]: expected a string, found {type(value).__name__}")


def _check_launch(launch: dict) -> None:
    _check_fields(launch, _LAUNCH, "roofs.launch")
    for field, vocabulary in (("launcher", LAUNCHERS), ("mode", MODES)):
        if launch[field] is not None and launch[field] not in vocabulary:
            raise CeilingsError(f"roofs.launch.{field}: {launch[field]!r} is not one of {', '.join(vocabulary)} "
                                f"(or null)")
    for field in ("rank", "local_rank", "gpu_index"):
        if launch[field] is not None and launch[field] < 0:
            raise CeilingsError(f"roofs.launch.{field}: {launch[field]} is negative")
    for field in ("world_size", "local_size", "gpus_at_once"):
        if launch[field] is not None and launch[field] < 1:
            raise CeilingsError(f"roofs.launch.{field}: {launch[field]}; a count of tasks or GPUs is at least 1")
    for rank, size in (("rank", "world_size"), ("local_rank", "local_size")):
        if None not in (launch[rank], launch[size]) and launch[rank] >= launch[size]:
            raise CeilingsError(f"roofs.launch.{rank}: {launch[rank]} is not below {size} {launch[size]}")


def validate(doc: Any) -> dict:
    """Raise CeilingsError naming the first bad field; return the document."""
    _check_fields(doc, _TOP, "roofs")
    if doc["schema_version"] > SCHEMA_VERSION:
        raise CeilingsError(f"roofs.schema_version: {doc['schema_version']} is newer than this ceilings "
                            f"understands ({SCHEMA_VERSION}); upgrade ceilings")
    if doc["schema_version"] < 1:
        raise CeilingsError(f"roofs.schema_version: {doc['schema_version']} is not a valid version")
    minor = doc.get("schema_minor", 0)
    if minor < 0:
        raise CeilingsError(f"roofs.schema_minor: {minor} is not a valid version")
    _check_fields(doc["meta"], _META, "roofs.meta")
    if "argv" in doc["meta"]:
        _check_strings(doc["meta"]["argv"], "roofs.meta.argv")
    _check_fields(doc["device"], _DEVICE, "roofs.device")
    if "nvml" in doc["device"]:
        _check_fields(doc["device"]["nvml"], _NVML, "roofs.device.nvml")
    if "launch" in doc:
        _check_launch(doc["launch"])
    elif minor >= 1:
        raise CeilingsError(f"roofs.launch: missing; a schema 1.{minor} file records how its run was launched")
    for i, ceiling in enumerate(doc["ceilings"]):
        name = ceiling.get("name") if isinstance(ceiling, dict) else None
        where = f"roofs.ceilings[{i}]" + (f" ({name})" if isinstance(name, str) else "")
        _check_fields(ceiling, _CEILING, where)
        if ceiling["kind"] not in KINDS:
            raise CeilingsError(f"{where}.kind: {ceiling['kind']!r} is not one of {', '.join(KINDS)}")
        if ceiling["unit"] != UNITS[ceiling["kind"]]:
            raise CeilingsError(f"{where}.unit: {ceiling['unit']!r}; a {ceiling['kind']} ceiling is in "
                                f"{UNITS[ceiling['kind']]}")
        if ceiling["kind"] == "bandwidth" and ceiling["level"] not in LEVELS:
            raise CeilingsError(f"{where}.level: {ceiling['level']!r} is not one of {', '.join(LEVELS)}")
        if ceiling["kind"] == "latency" and ceiling["level"] not in (*LEVELS, None):
            raise CeilingsError(f"{where}.level: {ceiling['level']!r} is not one of {', '.join(LEVELS)} (a memory "
                                f"latency) or null (a launch)")
        if ceiling["kind"] in ("compute", "special") and not ceiling["precision"]:
            raise CeilingsError(f"{where}.precision: missing for a {ceiling['kind']} ceiling")
        if ceiling["backend"] not in BACKENDS:
            raise CeilingsError(f"{where}.backend: {ceiling['backend']!r} is not one of {', '.join(BACKENDS)}")
        if ceiling["pipe"] not in PIPES:
            raise CeilingsError(f"{where}.pipe: {ceiling['pipe']!r} is not one of {', '.join(PIPES)}")
        value = ceiling["value"]
        if value is not None and (not math.isfinite(value) or value < 0):
            raise CeilingsError(f"{where}.value: {value!r} is not a finite non-negative rate")
        if ceiling["valid"] and value == 0:  # a roof of 0 makes every time at the roof infinite
            raise CeilingsError(f"{where}.value: 0 in a valid ceiling; a valid ceiling's rate is positive (or set "
                                f"\"valid\": false)")
        _check_strings(ceiling["notes"], f"{where}.notes")
        _check_fields(ceiling["stats"], _STATS, f"{where}.stats")
        _check_fields(ceiling["clocks"], _CLOCKS, f"{where}.clocks")
        if "throttle_reasons" in ceiling["clocks"]:
            _check_strings(ceiling["clocks"]["throttle_reasons"], f"{where}.clocks.throttle_reasons")
        kernel_hz = ceiling["clocks"].get("sm_hz_kernel_median")
        if kernel_hz is not None and not (math.isfinite(kernel_hz) and kernel_hz > 0):
            raise CeilingsError(f"{where}.clocks.sm_hz_kernel_median: {kernel_hz!r} is not a positive clock "
                                f"(null when not measured)")
        _check_fields(ceiling["peaks"], _PEAKS, f"{where}.peaks")
        if "energy" in ceiling:
            _check_fields(ceiling["energy"], _ENERGY, f"{where}.energy")
        source = ceiling["peaks"].get("clock_source")
        if source is not None and source not in CLOCK_SOURCES:
            raise CeilingsError(f"{where}.peaks.clock_source: {source!r} is not one of {', '.join(CLOCK_SOURCES)} "
                                f"(or null)")
    for i, sweep in enumerate(doc["sweeps"]):
        where = f"roofs.sweeps[{i}]"
        _check_fields(sweep, _SWEEP, where)
        _check_fields(sweep["x"], _UNIT, f"{where}.x")
        _check_fields(sweep["y"], _UNIT, f"{where}.y")
        points = sweep["points"]
        if _plain_points(points):
            continue  # the common case, checked at C speed; numpy numbers and mistakes below
        for j, point in enumerate(points):
            if not (isinstance(point, list) and len(point) == 2
                    and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in point)):
                raise CeilingsError(f"{where}.points[{j}]: expected [x, y] numbers, found {point!r}")
    return doc


def _plain_points(points: list) -> bool:
    """Every point a JSON [x, y] pair of numbers (int or float, not bool): what save_roofs writes."""
    if not points:
        return True
    if set(map(type, points)) != {list} or set(map(len, points)) != {2}:
        return False
    xs, ys = zip(*points)
    return set(map(type, xs)) <= _XY_TYPES and set(map(type, ys)) <= _XY_TYPES


def _float_pairs(points: list) -> tuple[tuple[float, float], ...]:
    xs, ys = zip(*points) if points else ((), ())
    return tuple(zip(map(float, xs), map(float, ys)))


def record(doc: Any, *, sweeps: bool = True) -> RoofsRecord:
    """The typed record of a roofs document; CeilingsError naming the first bad field. Without `sweeps`, the
    record has none (they are validated still): a reader of the ceilings alone keeps thousands of records."""
    validate(doc)
    device, nvml, meta = doc["device"], doc["device"].get("nvml", {}), doc["meta"]
    launch = doc.get("launch")
    return RoofsRecord(
        schema_version=doc["schema_version"],
        schema_minor=doc.get("schema_minor", 0),
        simulated=doc["simulated"],
        complete=doc["complete"],
        source=doc.get("source"),
        meta=Meta(tool=meta.get("tool"), version=meta.get("version"), argv=tuple(meta.get("argv", ())),
                  started=meta.get("started"), host=meta.get("host")),
        device=Device(index=device.get("index"), name=device.get("name"),
                      compute_capability=device.get("compute_capability"), sm_count=device.get("sm_count"),
                      max_sm_clock_hz=device.get("max_sm_clock_hz"), memory_clock_hz=device.get("memory_clock_hz"),
                      memory_bytes=device.get("memory_bytes"), driver_version=device.get("driver_version"),
                      uuid=device.get("uuid"), pci_bus_id=device.get("pci_bus_id"),
                      nvml_driver_version=nvml.get("driver_version"), power_limit_w=nvml.get("power_limit_w"),
                      ecc_enabled=nvml.get("ecc_enabled")),
        launch=None if launch is None else Launch(**{field: launch[field] for field in _LAUNCH}),
        ceilings=tuple(_ceiling(c) for c in doc["ceilings"]),
        sweeps=tuple(Sweep(name=s["name"], x_unit=s["x"]["unit"], y_unit=s["y"]["unit"],
                           points=_float_pairs(s["points"]),
                           backend=s["backend"], kernel=s["kernel"]) for s in doc["sweeps"] if sweeps),
    )


def _shared(text: str | None) -> str | None:
    """One copy of a name every file repeats (a fleet of thousands of files holds each once)."""
    return text if text is None else sys.intern(text)


def _ceiling(c: dict) -> Ceiling:
    clocks = c["clocks"]
    reasons = clocks.get("throttle_reasons")
    return Ceiling(name=_shared(c["name"]), kind=_shared(c["kind"]), level=_shared(c["level"]),
                   precision=_shared(c["precision"]), pipe=_shared(c["pipe"]), peak_key=_shared(c["peak_key"]),
                   value=None if c["value"] is None else float(c["value"]), unit=_shared(c["unit"]),
                   backend=_shared(c["backend"]), kernel=_shared(c["kernel"]), valid=c["valid"],
                   notes=tuple(c["notes"]),
                   clocks=Clocks(sm_hz_median=clocks.get("sm_hz_median"), mem_hz_median=clocks.get("mem_hz_median"),
                                 power_w_median=clocks.get("power_w_median"),
                                 temperature_c_max=clocks.get("temperature_c_max"),
                                 throttle_reasons=None if reasons is None else tuple(map(sys.intern, reasons)),
                                 sm_hz_kernel_median=clocks.get("sm_hz_kernel_median"),
                                 nvml_samples=clocks.get("samples")),
                   rel_iqr=c["stats"].get("rel_iqr"), noisy=c["stats"].get("noisy"))


def _read(path: Path, *, samples: bool = True) -> Any:
    """The JSON document of `path`; without `samples`, every ceiling's raw launch times are left out: they are
    most of a file, and parsing them most of the time that loading a fleet's thousands of files takes."""
    if not path.exists():
        raise CeilingsError(f"{path}: no such roofs file; make one with `python -m ceilings.measure`")
    data = read_bytes(path, "roofs file")
    if data.startswith(GZIP_MAGIC) or b"\0" in data[:4096]:
        raise CeilingsError(f"{path}: a {'gzip' if data.startswith(GZIP_MAGIC) else 'binary'} file, not a roofs "
                            f"file (JSON text from `python -m ceilings.measure`); decompress it or give the right "
                            f"file")
    try:
        return loads_json(data if samples else _without_samples(data), path)
    except UnicodeDecodeError as exc:
        raise CeilingsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}), so not a roofs file; "
                            f"save it as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise CeilingsError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); is this a roofs file from "
                            f"`python -m ceilings.measure`?") from None


def _without_samples(data: bytes) -> bytes:
    """`data` with every samples_s list emptied. Only a list of nothing but number characters is emptied, so
    what is dropped is what parsing would have made of it (a malformed number in it goes unnoticed: nothing
    that loads a record keeps the list); anything else is left for the parser to judge. Inside a JSON string
    the key's quotes would be escaped, so it never matches there."""
    parts, at = [], 0
    while (start := data.find(_SAMPLES_KEY, at)) >= 0:
        start += len(_SAMPLES_KEY)
        end = data.find(b"]", start)
        if end < 0:
            break
        parts.append(data[at:start])
        at = start if data[start:end].translate(None, _NUMBER_BYTES) else end
    parts.append(data[at:])
    return b"".join(parts)


def _in_file(path: Path, check, doc: Any):
    try:
        return check(doc)
    except CeilingsError as exc:
        raise CeilingsError(f"{path}: {exc}") from None


def load_roofs(path: str | os.PathLike) -> dict:
    """Read and validate a roofs file as its JSON document (for tools that show its free-form parts); every
    problem is a CeilingsError naming the file and the field. Readers of the numbers use `load_record`."""
    path = Path(path)
    return _in_file(path, validate, _read(path))


def load_record(path: str | os.PathLike, *, sweeps: bool = True) -> RoofsRecord:
    """Read a roofs file as the typed record (`sweeps`: as `record`'s); every problem is a CeilingsError naming
    the file and the field."""
    path = Path(path)
    return _in_file(path, lambda doc: record(doc, sweeps=sweeps), _read(path, samples=False))


def dumps(doc: dict) -> str:
    return json.dumps(validate(doc), indent=1, allow_nan=False) + "\n"


def save_roofs(doc: dict, path: str | os.PathLike, *, force: bool = False) -> Path:
    """Validate, then write atomically; an existing file is kept unless force."""
    return atomic.write_text(path, dumps(doc), force=force)
