"""ceilings.fleet on hand-made roofs files (real roofs documents, saved through save_roofs, so validated) with
known outliers; every expected figure is worked out by hand in the comments."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")
import pytest
from matplotlib.figure import Figure

from ceilings import fleet
from ceilings.fleet import BELOW, CONFIGURATION, INVALID, MISSING, UNJUDGED, analyze, collect, load_gpus
from ceilings.roofs import save_roofs
from tests.text_extents import pictures_of, problems

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
TB, TF, GHZ = 1e12, 1e12, 1e9
KINDS = {"dram.read": ("bandwidth", "dram", None, "memory", "dram", "B/s"),
         "fp32.fma": ("compute", None, "fp32", "cuda-core", "fp32", "FLOP/s")}


def ceiling(name, value, *, valid=True, notes=(), sm_hz=1.98 * GHZ, reasons=("gpu_idle",)):
    kind, level, precision, pipe, peak_key, unit = KINDS[name]
    return {"name": name, "kind": kind, "level": level, "precision": precision, "pipe": pipe, "peak_key": peak_key,
            "value": value, "unit": unit, "backend": "cuda-c", "kernel": name, "work": {}, "params": {},
            "stats": {"rel_iqr": 0.01, "noisy": False}, "valid": valid, "notes": list(notes), "peaks": {},
            "clocks": {"samples": 10, "sm_hz_median": sm_hz, "mem_hz_median": 2.619 * GHZ,
                       "throttle_reasons": list(reasons)}}


def roofs(host, gpu, ceilings, *, model=H100, power=700.0, driver="550.54.15", simulated=False, complete=True,
          uuid="auto"):
    uuid = f"GPU-{host}-{gpu}" if uuid == "auto" else uuid
    return {"schema_version": 1, "schema_minor": 1, "simulated": simulated, "complete": complete,
            "meta": {"tool": "ceilings", "host": host, "argv": ["--quick"]},
            "device": {"index": 0, "name": model, "memory_bytes": 80 * 2**30, "max_sm_clock_hz": 1.98 * GHZ,
                       "memory_clock_hz": 2.619 * GHZ, "driver_version": "12.4", "uuid": uuid,
                       "pci_bus_id": f"0000:{0x17 + gpu:02x}:00.0",
                       "nvml": {"driver_version": driver, "power_limit_w": power, "ecc_enabled": True}},
            "launch": {"launcher": "slurm", "job_id": "77", "node": host, "rank": gpu, "local_rank": gpu,
                       "world_size": 8, "local_size": 8, "cuda_visible_devices": str(gpu), "gpu_index": gpu,
                       "mode": "concurrent", "gpus_at_once": 8},
            "ceilings": ceilings, "sweeps": []}


def write(folder, docs):
    for doc in docs:
        save_roofs(doc, folder / f"roofs-{doc['launch']['node']}-{doc['launch']['gpu_index']}.json")
    return folder


# node1 GPUs 0-4: one H100 group of 5 (700 W).
#   dram.read  3.00 3.10 2.90 3.05 2.00 TB/s: sorted 2.00 2.90 3.00 3.05 3.10, median 3.00; GPU 4 at
#              2.00 / 3.00 = 0.667. Linear quartiles at positions 1 and 3: 2.90 and 3.05, IQR/median 0.05.
#   fp32.fma   60 60 60 53.4 60 TFLOP/s: median 60; GPU 3 at 53.4 / 60 = 0.89 < 0.9, at SM 1.70 GHz (peers'
#              median 1.98 GHz; 1.70 < 0.95 x 1.98 = 1.881) with sw_power_cap among its throttle reasons.
# node2 GPU 0: the same model at 500 W, alone in its configuration: judged against the 700 W group's medians,
#   fp32.fma 45 / 60 = 0.75; dram.read 3.0 / 3.0 = 1.
# node2 GPU 1: an A100, the only one: nothing to judge it against.
def docs_with_faults():
    healthy = lambda dram, fp32: [ceiling("dram.read", dram * TB), ceiling("fp32.fma", fp32 * TF)]  # noqa: E731
    return [
        roofs("node1", 0, healthy(3.00, 60)),
        roofs("node1", 1, healthy(3.10, 60)),
        roofs("node1", 2, healthy(2.90, 60)),
        roofs("node1", 3, [ceiling("dram.read", 3.05 * TB),
                           ceiling("fp32.fma", 53.4 * TF, sm_hz=1.70 * GHZ, reasons=("gpu_idle", "sw_power_cap"))]),
        roofs("node1", 4, healthy(2.00, 60)),
        roofs("node2", 0, healthy(3.00, 45), power=500.0),
        roofs("node2", 1, healthy(1.50, 19), model=A100),
    ]


@pytest.fixture
def faults(tmp_path):
    return write(tmp_path, docs_with_faults())


def outliers(result):
    return sorted((o.gpu.host, o.gpu.gpu_index, o.reason, o.ceiling, None if o.ratio is None else round(o.ratio, 4))
                  for o in result.outliers)


def test_groups_medians_ratios_and_every_outlier(faults):
    result = analyze(load_gpus(collect([str(faults)])))
    assert [(g.id, g.config.model, g.config.power_limit_w, len(g.gpus)) for g in result.groups] == \
        [("G1", H100, 700.0, 5), ("G2", H100, 500.0, 1), ("G3", A100, 700.0, 1)]
    assert outliers(result) == [
        ("node1", 3, BELOW, "fp32.fma", round(53.4 / 60, 4)),
        ("node1", 4, BELOW, "dram.read", round(2.00 / 3.00, 4)),
        ("node2", 0, BELOW, "fp32.fma", 0.75),
        ("node2", 0, CONFIGURATION, None, None),
        ("node2", 1, UNJUDGED, None, None),
    ]
    dram = result.groups[0].ceilings[0]
    assert (dram.name, dram.n, dram.median, dram.min, dram.max, dram.below) == ("dram.read", 5, 3.0 * TB, 2.0 * TB,
                                                                               3.1 * TB, 1)
    assert dram.rel_iqr == pytest.approx(0.05) and dram.baseline == 3.0 * TB
    assert result.ratios[str(faults / "roofs-node2-0.json")] == pytest.approx({"dram.read": 1.0, "fp32.fma": 0.75})
    assert result.groups[1].baseline == "median of G1, its model's usual configuration (5 GPUs)"
    assert result.groups[2].baseline is None and not result.passed


def test_the_likely_causes_the_files_know(faults):
    result = analyze(load_gpus(collect([str(faults)])))
    causes = {(o.gpu.host, o.gpu.gpu_index, o.reason): o.cause for o in result.outliers}
    assert causes[("node1", 3, BELOW)] == "throttled (sw_power_cap); SM clock 1700 MHz, its peers' 1980 MHz"
    assert causes[("node1", 4, BELOW)] is None  # nothing in its file explains it: weak HBM?
    assert causes[("node2", 0, BELOW)] == "power limit 500 W (its model's usual: 700 W)"
    assert causes[("node2", 0, CONFIGURATION)] == "power limit 500 W (its model's usual: 700 W)"
    assert "give --reference" in causes[("node2", 1, UNJUDGED)]


def test_invalid_and_missing_ceilings_are_outliers(tmp_path):
    docs = [roofs(f"n{i}", 0, [ceiling("dram.read", 3.0 * TB), ceiling("fp32.fma", 60 * TF)]) for i in range(3)]
    docs.append(roofs("n3", 0, [ceiling("dram.read", 3.0 * TB),
                                ceiling("fp32.fma", None, valid=False, notes=["output check failed: 3 of 1024"])]))
    docs.append(roofs("n4", 0, [ceiling("dram.read", 3.0 * TB)], complete=False))
    result = analyze(load_gpus(collect([str(write(tmp_path, docs))])))
    assert [(o.gpu.host, o.reason, o.ceiling, o.cause) for o in result.outliers] == [
        ("n3", INVALID, "fp32.fma", "output check failed: 3 of 1024"),
        ("n4", MISSING, "fp32.fma", "the run was interrupted"),
    ]


def test_a_roofs_file_reference(faults, tmp_path):
    # the known-good GPU: 3.2 TB/s and 62 TFLOP/s; node1 GPU 2: 2.90 / 3.2 = 0.906, 60 / 62 = 0.968
    good = tmp_path / "good.json"
    save_roofs(roofs("golden", 0, [ceiling("dram.read", 3.2 * TB), ceiling("fp32.fma", 62 * TF)]), good)
    gpus = load_gpus(collect([str(faults / f"roofs-node1-{i}.json") for i in range(5)]))
    result = analyze(gpus, reference=fleet.reference_of(str(good), simulated=False))
    assert result.ratios[str(faults / "roofs-node1-2.json")] == pytest.approx({"dram.read": 2.90 / 3.2,
                                                                               "fp32.fma": 60 / 62})
    # below 0.9: GPU 3 fp32 53.4 / 62 = 0.861, GPU 4 dram 2.00 / 3.2 = 0.625
    assert outliers(result) == [("node1", 3, BELOW, "fp32.fma", round(53.4 / 62, 4)),
                                ("node1", 4, BELOW, "dram.read", round(2.00 / 3.2, 4))]
    assert result.groups[0].baseline == "reference good.json"


def test_a_datasheet_reference_at_dcgms_ratio(faults):
    # H100 SXM datasheet: 3350 GB/s and 66.9 TFLOP/s fp32. At 0.75: GPU 4's 2.00 / 3.35 = 0.597 fails; GPU 3's
    # fp32 53.4 / 66.9 = 0.798 passes.
    gpus = load_gpus(collect([str(faults / f"roofs-node1-{i}.json") for i in range(5)]))
    result = analyze(gpus, min_ratio=0.75, reference=fleet.reference_of("H100 SXM", simulated=False))
    assert outliers(result) == [("node1", 4, BELOW, "dram.read", round(2.00 / 3.35, 4))]
    assert result.groups[0].ceilings[1].baseline == pytest.approx(66.9 * TF)


def test_a_reference_of_another_model_is_refused(faults):
    gpus = load_gpus(collect([str(faults)]))  # H100s and an A100
    with pytest.raises(fleet.CeilingsError, match="datasheet NVIDIA H100 SXM5 80GB is not a NVIDIA A100"):
        analyze(gpus, reference=fleet.reference_of("H100 SXM", simulated=False))


def test_the_picture_shows_every_gpu_and_labels_the_outliers(faults):
    result = analyze(load_gpus(collect([str(faults)])))
    ax = Figure().subplots()
    fleet.plot_ceiling(ax, result, "dram.read")
    by_gid = {c.get_gid(): c for c in ax.collections}
    # G1: four pass (ratios 0.967 1.0 1.017 1.033), GPU 4 fails at 0.667; G2 (500 W) passes at 1.0; G3 unjudged
    assert sorted(by_gid) == ["gpus:G1", "gpus:G2", "outliers:G1", "outliers:G2"]
    assert sorted(by_gid["gpus:G1"].get_offsets()[:, 1].tolist()) == pytest.approx([2.9 / 3, 1.0, 3.05 / 3, 3.1 / 3])
    assert list(by_gid["outliers:G1"].get_offsets()[:, 1]) == pytest.approx([2 / 3])
    assert len(by_gid["outliers:G2"].get_offsets()) == 0 and by_gid["outliers:G1"].get_facecolor()[0][0] > 0.8
    labels = [t for t in ax.texts if (t.get_gid() or "").startswith("label:")]
    assert [(t.get_gid(), t.get_text(), t.xy[1]) for t in labels] == \
        [("label:node1:4", "node1:4", pytest.approx(2 / 3))]
    lines = {line.get_gid(): line.get_ydata()[0] for line in ax.lines}
    assert lines == {"baseline": 1.0, "min-ratio": 0.9}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["G1\n5 GPUs", "G2\n1 GPUs"]
    fig = fleet.draw(result)
    assert [a.get_title() for a in fig.axes if a.get_visible()] == ["dram.read", "fp32.fma"]


def test_cli_markdown_json_picture_and_exit_1(faults, tmp_path, capsys):
    out, png = tmp_path / "fleet.json", tmp_path / "fleet.png"
    assert fleet.main([str(faults), "--json", str(out), "-o", str(png)]) == 1
    text = capsys.readouterr().out
    assert text.startswith("# 7 GPUs in 3 group(s), 4 falling short")
    row = next(line for line in text.splitlines() if "| dram.read" in line and "node1" in line)
    assert [cell.strip() for cell in row.split("|")[1:-1]] == [
        "node1", "4", "GPU-node1-4", "0000:1b:00.0", "G1", "dram.read", "2 TB/s", "0.667", "below", "-",
        "roofs-node1-4.json"]
    doc = json.loads(out.read_text())
    assert doc["passed"] is False and doc["simulated"] is False and doc["gpus"] == 7
    assert {o["gpu"] for o in doc["outliers"]} == {"node1:3", "node1:4", "node2:0", "node2:1"}
    assert {(o["host"], o["gpu_index"], o["uuid"], o["pci_bus_id"], o["reason"]) for o in doc["outliers"]} == {
        ("node1", 3, "GPU-node1-3", "0000:1a:00.0", "below"), ("node1", 4, "GPU-node1-4", "0000:1b:00.0", "below"),
        ("node2", 0, "GPU-node2-0", "0000:17:00.0", "below"),
        ("node2", 0, "GPU-node2-0", "0000:17:00.0", "configuration"),
        ("node2", 1, "GPU-node2-1", "0000:18:00.0", "unjudged")}
    assert png.read_bytes()[:4] == b"\x89PNG"
    # run again over the same folder: its own --json there is not read as a roofs file, and not overwritten
    assert fleet.main([str(faults), "--json", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert fleet.main([str(faults), "--json", str(out), "--force"]) == 1


@pytest.mark.parametrize("reference", [[], ["--reference", "H100 SXM"]])
def test_the_title_of_one_panel_fits_the_picture(tmp_path, capsys, monkeypatch, reference):
    # one ceiling: one panel 4.5 in wide, narrower than "every GPU against datasheet NVIDIA H100 SXM5 80GB; red:
    # under 0.9" in 12 pt type: the title goes on two lines, every word kept, nothing cut or over another text
    pictures = pictures_of(monkeypatch)
    docs = [roofs(f"n{i}", 0, [ceiling("dram.read", v * TB)]) for i, v in enumerate((3.0, 3.1, 2.0))]
    assert fleet.main([str(write(tmp_path, docs)), "-o", str(tmp_path / "f.png"), *reference]) == 1
    (_, fig, kwargs), = pictures
    assert problems(fig, **kwargs) == []
    against = "datasheet NVIDIA H100 SXM5 80GB" if reference else "its group's median"
    assert fig.get_suptitle().split() == f"every GPU against {against}; red: under 0.9".split()


def test_a_picture_of_nothing_judged_says_so(tmp_path, capsys):
    # two GPUs: too few for a median, no reference; the verdict stays exit 1 (unjudged), the picture says why
    docs = [roofs(f"n{i}", 0, [ceiling("dram.read", 3.0 * TB)]) for i in range(2)]
    png = tmp_path / "f.png"
    assert fleet.main([str(write(tmp_path, docs)), "-o", str(png)]) == 1
    assert png.read_bytes()[:4] == b"\x89PNG"
    [ax] = fleet.draw(analyze(load_gpus(collect([str(tmp_path)])))).axes
    assert [t.get_gid() for t in ax.texts] == ["nothing-judged"] and "give --reference" in ax.texts[0].get_text()


def test_every_gpu_passing_exits_0(tmp_path, capsys):
    docs = [roofs(f"n{i}", 0, [ceiling("dram.read", v * TB)]) for i, v in enumerate((3.0, 2.95, 3.05))]
    assert fleet.main([str(write(tmp_path, docs))]) == 0
    assert "None: every GPU passes." in capsys.readouterr().out


def test_simulated_files_are_kept_among_themselves(tmp_path, capsys):
    sims = [roofs(f"n{i}", 0, [ceiling("dram.read", v)], simulated=True, uuid=None) for i, v in enumerate((1, 2, 3))]
    folder = tmp_path / "sim"
    folder.mkdir()
    write(folder, sims)
    assert fleet.main([str(folder)]) == 1  # 1 / 2 = 0.5 under 0.9: even simulated, a shortfall is reported
    assert capsys.readouterr().out.startswith("# SIMULATED (meaningless numbers): 3 GPUs")
    measured = tmp_path / "measured.json"
    save_roofs(roofs("real", 0, [ceiling("dram.read", 3.0 * TB)]), measured)
    assert fleet.main([str(folder), str(measured)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is simulated and" in err and "aggregate them apart" in err
    assert fleet.main([str(folder), "--reference", str(measured)]) == 2
    assert "a measured file for simulated GPUs" in capsys.readouterr().err
    assert fleet.main([str(folder), "--reference", "H100 SXM"]) == 2
    assert "a datasheet for simulated GPUs" in capsys.readouterr().err


@pytest.mark.parametrize("setup, args, message", [
    (lambda d: (d / "x.json").write_text("{"), [], "x.json:1: not valid JSON"),
    (lambda d: (d / "x.json").write_text(json.dumps({**roofs("a", 0, []), "launch": None})), [],
     "roofs.launch: expected object, found NoneType"),
    (lambda d: None, [], "no roofs files (*.json) in this folder"),
    (lambda d: [save_roofs(roofs("a", 0, c), d / f"{n}.json")  # one GPU measured twice, differently
                for n, c in (("one", []), ("two", [ceiling("dram.read", 3.0 * TB)]))], [], "GPU GPU-a-0 is also in"),
    (lambda d: save_roofs({**roofs("a", 0, []), "source": "published figures"}, d / "p.json"), [],
     "not a measurement (published figures); give it as --reference"),
    (lambda d: save_roofs(roofs("a", 0, []), d / "a.json"), ["--min-ratio", "1.5"], "--min-ratio 1.5"),
    (lambda d: save_roofs(roofs("a", 0, []), d / "a.json"), ["-o", "x.jpg"], "the picture must end in"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, setup, args, message):
    folder = tmp_path / "in"
    folder.mkdir()
    setup(folder)
    assert fleet.main([str(folder), *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err


def test_a_1_0_file_without_launch_is_read(tmp_path):
    docs = []
    for i, v in enumerate((3.0, 3.0, 1.5)):
        doc = roofs(f"n{i}", 0, [ceiling("dram.read", v * TB)])
        del doc["launch"], doc["schema_minor"]
        docs.append(doc)
    for i, doc in enumerate(docs):
        save_roofs(doc, tmp_path / f"old{i}.json")
    result = analyze(load_gpus(collect([str(tmp_path)])))
    [o] = result.outliers
    assert (o.gpu.host, o.gpu.gpu_index, o.gpu.label, o.ratio) == ("n2", None, "old2.json", 0.5)
    assert result.groups[0].config.mode is None  # not said in a 1.0 file: unknown, not "single"


def test_a_gpu_keeps_the_best_valid_ceiling_of_each_name_and_why_a_name_has_none(tmp_path):
    # dram.read twice: an invalid 3.5 TB/s (its note) and a valid 2.9 TB/s, noisy with IQR/median 0.2 (spread
    # ±10 %), throttled by sw_power_cap; fp32.fma only invalid, twice with the same note (named once)
    noisy = ceiling("dram.read", 2.9 * TB, reasons=("gpu_idle", "sw_power_cap"))
    noisy["stats"] = {"rel_iqr": 0.2, "noisy": True}
    doc = roofs("node1", 0, [ceiling("dram.read", 3.5 * TB, valid=False, notes=["output check failed"]), noisy,
                             ceiling("fp32.fma", 60 * TF, valid=False, notes=["output check failed", "x"]),
                             ceiling("fp32.fma", 61 * TF, valid=False, notes=["output check failed"])])
    [gpu] = load_gpus(collect([str(write(tmp_path, [doc]))]))
    assert gpu.layout.names == ("dram.read", "fp32.fma") and gpu.layout.units == ("B/s", "FLOP/s")
    assert (gpu.value(0), gpu.value(1)) == (2.9 * TB, None)
    assert gpu.kinds == ("bandwidth", None)
    assert (gpu.sm_hz[0], gpu.mem_hz[0]) == (1.98 * GHZ, 2.619 * GHZ)
    assert gpu.throttled == ("throttled (sw_power_cap)", None)
    assert gpu.noisy == ("noisy: launch times spread ±10%", None)
    assert gpu.why_invalid == (None, "output check failed")
    assert (gpu.label, gpu.uuid, gpu.pci_bus_id) == ("node1:0", "GPU-node1-0", "0000:17:00.0")
