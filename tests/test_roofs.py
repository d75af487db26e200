import copy
import json
import re

import pytest

from ceilings.errors import CeilingsError
from ceilings.roofs import best_ceiling, dumps, load_roofs, save_roofs, validate


def ceiling(name="dram.copy", value=3.0e12, valid=True, backend="cuda-c", **kw):
    base = {"name": name, "kind": "bandwidth", "level": "dram", "precision": None, "pipe": "memory",
            "peak_key": "dram", "value": value, "unit": "B/s", "backend": backend, "kernel": "copy",
            "work": {"bytes_read": 8, "bytes_written": 8, "flops": {}}, "params": {}, "stats": {},
            "clocks": {}, "peaks": {}, "valid": valid, "notes": []}
    base.update(kw)
    return base


def doc(**kw):
    d = {"schema_version": 1, "simulated": False, "complete": True,
         "meta": {"tool": "ceilings"}, "device": {"name": "NVIDIA H200"},
         "ceilings": [ceiling(), ceiling("fp32.fma", 6.0e13, kind="compute", level=None, precision="fp32",
                                        pipe="cuda-core", peak_key="fp32", unit="FLOP/s")],
         "sweeps": [{"name": "bandwidth.working_set", "x": {"name": "working set", "unit": "B"},
                     "y": {"name": "bandwidth", "unit": "B/s"}, "points": [[1024, 1e12], [2048, 2e12]],
                     "plateaus": [], "knee": None, "backend": "cuda-c", "kernel": "sweep"}]}
    d.update(kw)
    return d


def test_round_trip(tmp_path):
    path = save_roofs(doc(), tmp_path / "r.json")
    assert load_roofs(path) == json.loads(json.dumps(doc()))


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.pop("simulated"), "roofs.simulated: missing"),
    (lambda d: d.update(schema_version="1"), "roofs.schema_version: expected integer"),
    (lambda d: d.update(complete=1), "roofs.complete: expected boolean"),
    (lambda d: d["ceilings"][0].update(kind="speed"), "ceilings[0] (dram.copy).kind"),
    (lambda d: d["ceilings"][1].update(unit="B/s"), "ceilings[1] (fp32.fma).unit"),
    (lambda d: d["ceilings"][0].update(level="l3"), "ceilings[0] (dram.copy).level"),
    (lambda d: d["ceilings"][0].update(value=-1.0), "ceilings[0] (dram.copy).value"),
    (lambda d: d["ceilings"][0].pop("valid"), "ceilings[0].valid: missing"),
    (lambda d: d["sweeps"][0]["points"].append([1, "x"]), "sweeps[0].points[2]"),
    (lambda d: d.update(schema_version=99), "newer than this ceilings understands"),
])
def test_rejection_names_the_field(mutate, field):
    bad = copy.deepcopy(doc())
    mutate(bad)
    with pytest.raises(CeilingsError, match=re.escape(field)):
        validate(bad)


def test_load_errors_name_the_file(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(CeilingsError, match="nope.json: no such roofs file"):
        load_roofs(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": 1,\n  "simulated": tru')
    with pytest.raises(CeilingsError, match=r"broken.json:2: not valid JSON"):
        load_roofs(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text("[1, 2]")
    with pytest.raises(CeilingsError, match="wrong.json: roofs: expected an object"):
        load_roofs(wrong)


def test_existing_file_is_kept_without_force(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("precious")
    with pytest.raises(CeilingsError, match="--force"):
        save_roofs(doc(), path)
    assert path.read_text() == "precious"
    save_roofs(doc(), path, force=True)
    assert json.loads(path.read_text())["schema_version"] == 1


def test_invalid_document_writes_nothing(tmp_path):
    path = tmp_path / "r.json"
    with pytest.raises(CeilingsError):
        save_roofs(doc(simulated="no"), path)
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_best_ceiling_prefers_the_highest_valid():
    d = doc(ceilings=[ceiling(value=3.0e12), ceiling(value=3.5e12, backend="numba"),
                      ceiling(value=9.0e12, valid=False), ceiling("l2.read", 9.9e12, level="l2")])
    assert best_ceiling(d, kind="bandwidth", level="dram")["value"] == 3.5e12
    assert best_ceiling(d, kind="compute") is None
    assert dumps(d).endswith("\n")
