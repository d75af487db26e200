import copy
import json
import re

import pytest

from ceilings.roofs import (
    Clocks,
    Launch,
    dumps,
    load_record,
    load_roofs,
    record,
    save_roofs,
    validate,
)
from common.errors import CeilingsError


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
    (lambda d: d["ceilings"][0].pop("valid"), "ceilings[0] (dram.copy).valid: missing"),
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


def test_best_prefers_the_highest_valid():
    d = doc(ceilings=[ceiling(value=3.0e12), ceiling(value=3.5e12, backend="numba"),
                      ceiling(value=9.0e12, valid=False), ceiling("l2.read", 9.9e12, level="l2")])
    assert record(d).best(kind="bandwidth", level="dram").value == 3.5e12
    assert record(d).best(kind="compute") is None
    assert dumps(d).endswith("\n")


def launch(**kw):
    base = {"launcher": "slurm", "job_id": "4242", "node": "gpu017", "rank": 5, "local_rank": 1, "world_size": 8,
            "local_size": 4, "cuda_visible_devices": "0,1,2,3", "gpu_index": 1, "mode": "concurrent",
            "gpus_at_once": 4}
    base.update(kw)
    return base


def test_a_1_0_file_is_read_as_a_record_without_launch(tmp_path):
    path = save_roofs(doc(), tmp_path / "r.json")
    rec = load_record(path)
    assert (rec.schema_version, rec.schema_minor, rec.launch) == (1, 0, None)
    assert rec.device.name == "NVIDIA H200" and rec.device.uuid is None and rec.device.power_limit_w is None
    assert [c.name for c in rec.ceilings] == ["dram.copy", "fp32.fma"]
    assert rec.ceilings[0].clocks == Clocks()  # no NVML: every clock missing, not 0
    assert rec.sweeps[0].points == ((1024.0, 1e12), (2048.0, 2e12)) and rec.sweeps[0].y_unit == "B/s"


def test_a_1_1_file_carries_its_launch_and_nvml_facts():
    d = doc(schema_minor=1, launch=launch(),
            device={"name": "NVIDIA H200", "index": 0, "uuid": "GPU-1", "pci_bus_id": "0000:17:00.0",
                    "max_sm_clock_hz": 1.98e9, "nvml": {"driver_version": "550.54.15", "power_limit_w": 700.0,
                                                        "ecc_enabled": True}})
    d["ceilings"][0]["clocks"] = {"sm_hz_median": 1.98e9, "throttle_reasons": ["sw_power_cap"], "samples": 3}
    d["ceilings"][0]["stats"] = {"rel_iqr": 0.02, "noisy": False, "samples_s": [1e-3]}
    rec = record(d)
    assert rec.launch == Launch(launcher="slurm", job_id="4242", node="gpu017", rank=5, local_rank=1, world_size=8,
                                local_size=4, cuda_visible_devices="0,1,2,3", gpu_index=1, mode="concurrent",
                                gpus_at_once=4)
    assert (rec.device.nvml_driver_version, rec.device.power_limit_w, rec.device.ecc_enabled) == \
        ("550.54.15", 700.0, True)
    c = rec.ceilings[0]
    assert c.clocks.throttle_reasons == ("sw_power_cap",) and c.clocks.sm_hz_median == 1.98e9
    assert (c.rel_iqr, c.noisy) == (0.02, False)


def test_a_newer_minor_version_is_read():
    assert record(doc(schema_minor=7, launch=launch())).schema_minor == 7


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.pop("launch"), "roofs.launch: missing; a schema 1.1 file"),
    (lambda d: d["launch"].update(mode="parallel"), "roofs.launch.mode: 'parallel' is not one of"),
    (lambda d: d["launch"].update(launcher="pbs"), "roofs.launch.launcher: 'pbs'"),
    (lambda d: d["launch"].update(rank=8), "roofs.launch.rank: 8 is not below world_size 8"),
    (lambda d: d["launch"].update(gpus_at_once=0), "roofs.launch.gpus_at_once: 0"),
    (lambda d: d["launch"].pop("gpu_index"), "roofs.launch.gpu_index: missing"),
    (lambda d: d["launch"].update(rank=True), "roofs.launch.rank: expected integer or null, found a boolean"),
    (lambda d: d["device"].update(uuid=7), "roofs.device.uuid: expected string or null, found int"),
    (lambda d: d["device"].update(nvml={"power_limit_w": "700 W"}), "roofs.device.nvml.power_limit_w"),
    (lambda d: d["ceilings"][0]["clocks"].update(throttle_reasons=[4]), "clocks.throttle_reasons[0]"),
    (lambda d: d["ceilings"][0].update(notes=[None]), "ceilings[0] (dram.copy).notes[0]"),
    (lambda d: d.update(schema_minor=-1), "roofs.schema_minor: -1"),
])
def test_launch_and_typed_fields_are_validated(mutate, field):
    bad = copy.deepcopy(doc(schema_minor=1, launch=launch()))
    mutate(bad)
    with pytest.raises(CeilingsError, match=re.escape(field)):
        record(bad)


def test_record_best_and_best_by_name():
    d = doc(ceilings=[ceiling(value=3.0e12), ceiling(value=3.5e12, backend="numba"),
                      ceiling(value=9.0e12, valid=False), ceiling(value=None, valid=False),
                      ceiling("l2.read", 9.9e12, level="l2")])
    rec = record(d)
    assert rec.best(kind="bandwidth", level="dram").value == 3.5e12
    assert rec.best(kind="bandwidth").value == 9.9e12 and rec.best(kind="compute") is None
    assert {name: (c.value, c.backend) for name, c in rec.best_by_name().items()} == \
        {"dram.copy": (3.5e12, "numba"), "l2.read": (9.9e12, "cuda-c")}


def test_load_record_names_the_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc(schema_minor=1)))
    with pytest.raises(CeilingsError, match=f"{re.escape(str(path))}: roofs.launch: missing"):
        load_record(path)


def test_a_record_loads_without_the_raw_samples_and_loses_nothing_it_holds(tmp_path):
    d = doc()
    d["ceilings"][0]["stats"] = {"samples_s": [1.5e-4, 2e-4, 1.75e-4], "n": 3, "rel_iqr": 0.125, "noisy": True}
    # the key's text inside a string (JSON escapes its quotes there) is left alone
    d["ceilings"][0]["notes"] = ['a note quoting "samples_s": [1, 2]']
    path = save_roofs(d, tmp_path / "r.json")
    fast, full = load_record(path), record(load_roofs(path))
    assert fast == full
    assert fast.ceilings[0].notes == ('a note quoting "samples_s": [1, 2]',)
    assert (fast.ceilings[0].rel_iqr, fast.ceilings[0].noisy) == (0.125, True)


def test_schema_1_2_kernel_clock_and_clock_source_validate_and_load():
    c = ceiling(clocks={"sm_hz_median": 1.98e9, "sm_hz_kernel_median": 1.9e9, "sm_hz_kernel_min": 1.89e9,
                        "sm_hz_kernel_max": 1.91e9, "sm_hz_kernel_readings": 528},
                peaks={"clock_source": "kernel"})
    rec = record(doc(schema_minor=2, launch=launch(), ceilings=[c]))
    assert rec.ceilings[0].clocks.sm_hz_kernel_median == 1.9e9 and rec.schema_minor == 2


def test_an_older_file_has_no_kernel_clock():
    assert record(doc()).ceilings[0].clocks.sm_hz_kernel_median is None  # 1.0
    assert record(doc(schema_minor=1, launch=launch())).ceilings[0].clocks == Clocks()


@pytest.mark.parametrize("clocks, peaks, field", [
    ({"sm_hz_kernel_median": 0.0}, {}, "clocks.sm_hz_kernel_median: 0.0 is not a positive clock"),
    ({"sm_hz_kernel_median": "1.9e9"}, {}, "clocks.sm_hz_kernel_median: expected integer or number or null"),
    ({"sm_hz_kernel_readings": 1.5}, {}, "clocks.sm_hz_kernel_readings: expected integer or null"),
    ({"sm_hz_kernel_error": 3}, {}, "clocks.sm_hz_kernel_error: expected string or null"),
    ({}, {"clock_source": "guess"}, "peaks.clock_source: 'guess' is not one of kernel, nvml, max"),
])
def test_kernel_clock_fields_are_checked(clocks, peaks, field):
    with pytest.raises(CeilingsError, match=re.escape(field)):
        validate(doc(schema_minor=2, launch=launch(), ceilings=[ceiling(clocks=clocks, peaks=peaks)]))
