"""The roofs file: build, validate, load and save (schema in docs/roofs-schema.md)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from . import atomic
from .errors import CeilingsError

SCHEMA_VERSION = 1
KINDS = ("bandwidth", "compute")
LEVELS = ("dram", "l2", "l1")
UNITS = {"bandwidth": "B/s", "compute": "FLOP/s"}
BACKENDS = ("cuda-c", "numba", "library")
PIPES = ("memory", "cuda-core", "tensor")

# field -> (type(s), required)
_TOP = {
    "schema_version": (int, True),
    "simulated": (bool, True),
    "complete": (bool, True),
    "meta": (dict, True),
    "device": (dict, True),
    "ceilings": (list, True),
    "sweeps": (list, True),
    "source": (str, False),
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
}
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


def _check_fields(obj: Any, spec: dict, where: str) -> None:
    if not isinstance(obj, dict):
        raise CeilingsError(f"{where}: expected an object, found {type(obj).__name__}")
    for field, (types, required) in spec.items():
        if field not in obj:
            if required:
                raise CeilingsError(f"{where}.{field}: missing")
            continue
        value = obj[field]
        # bool is an int in Python; an int field must not accept true/false
        if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            raise CeilingsError(f"{where}.{field}: expected {_type_names(types)}, found a boolean")
        if not isinstance(value, types):
            raise CeilingsError(f"{where}.{field}: expected {_type_names(types)}, found {type(value).__name__}")


def _type_names(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    names = {int: "integer", float: "number", str: "string", bool: "boolean", dict: "object", list: "list",
             type(None): "null"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def validate(doc: Any) -> dict:
    """Raise CeilingsError naming the first bad field; return the document."""
    _check_fields(doc, _TOP, "roofs")
    if doc["schema_version"] > SCHEMA_VERSION:
        raise CeilingsError(f"roofs.schema_version: {doc['schema_version']} is newer than this ceilings "
                            f"understands ({SCHEMA_VERSION}); upgrade ceilings")
    if doc["schema_version"] < 1:
        raise CeilingsError(f"roofs.schema_version: {doc['schema_version']} is not a valid version")
    if not isinstance(doc["device"].get("name"), (str, type(None))):
        raise CeilingsError("roofs.device.name: expected a string")
    for i, ceiling in enumerate(doc["ceilings"]):
        where = f"roofs.ceilings[{i}]"
        _check_fields(ceiling, _CEILING, where)
        where = f"{where} ({ceiling['name']})"
        if ceiling["kind"] not in KINDS:
            raise CeilingsError(f"{where}.kind: {ceiling['kind']!r} is not one of {', '.join(KINDS)}")
        if ceiling["unit"] != UNITS[ceiling["kind"]]:
            raise CeilingsError(f"{where}.unit: {ceiling['unit']!r}; a {ceiling['kind']} ceiling is in "
                                f"{UNITS[ceiling['kind']]}")
        if ceiling["kind"] == "bandwidth" and ceiling["level"] not in LEVELS:
            raise CeilingsError(f"{where}.level: {ceiling['level']!r} is not one of {', '.join(LEVELS)}")
        if ceiling["kind"] == "compute" and not ceiling["precision"]:
            raise CeilingsError(f"{where}.precision: missing for a compute ceiling")
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
    for i, sweep in enumerate(doc["sweeps"]):
        where = f"roofs.sweeps[{i}]"
        _check_fields(sweep, _SWEEP, where)
        for j, point in enumerate(sweep["points"]):
            if not (isinstance(point, list) and len(point) == 2
                    and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in point)):
                raise CeilingsError(f"{where}.points[{j}]: expected [x, y] numbers, found {point!r}")
    return doc


def load_roofs(path: str | os.PathLike) -> dict:
    """Read and validate a roofs file; every problem is a CeilingsError naming the file and the field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CeilingsError(f"{path}: no such roofs file; make one with `python -m ceilings.measure`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CeilingsError(f"{path}: cannot read it as a roofs file ({exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CeilingsError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); is this a roofs file from "
                            f"`python -m ceilings.measure`?") from None
    try:
        return validate(doc)
    except CeilingsError as exc:
        raise CeilingsError(f"{path}: {exc}") from None


def dumps(doc: dict) -> str:
    return json.dumps(validate(doc), indent=1, allow_nan=False) + "\n"


def save_roofs(doc: dict, path: str | os.PathLike, *, force: bool = False) -> Path:
    """Validate, then write atomically; an existing file is kept unless force."""
    return atomic.write_text(path, dumps(doc), force=force)


def best_ceiling(doc: dict, *, kind: str, level: str | None = None, precision: str | None = None,
                 pipe: str | None = None) -> dict | None:
    """The highest valid measured ceiling matching every given field, or None."""
    wanted = {"kind": kind, "level": level, "precision": precision, "pipe": pipe}
    candidates = [c for c in doc["ceilings"]
                  if c["valid"] and c["value"] is not None
                  and all(v is None or c.get(k) == v for k, v in wanted.items())]
    return max(candidates, key=lambda c: c["value"], default=None)
