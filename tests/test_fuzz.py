"""Seeded fuzz of every reader and command: mutated and adversarial inputs give either a clean
one-line error with exit 2 or numbers that are possible (finite, not negative); never a traceback, never a
hang, and no input is ever changed. Cases run in-process (main(argv)) under an alarm; a few run as
subprocesses to see what a user sees."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from analysis import ncu, roofline, whatif
from analysis.llm import __main__ as llm
from analysis.roofline import inputs as roofline_inputs
from analysis.roofline.__main__ import main as roofline_main
from ceilings import compare, fleet

DATA = Path(__file__).parent / "data"
ROOFS = DATA / "roofs" / "h100.json"
PROFILES = sorted([*(DATA / "ncu").glob("*.csv"), *(DATA / "ncu").glob("*.txt"), *(DATA / "nsys").glob("*"),
                   DATA / "roofline" / "kernels.csv", DATA / "roofline" / "raw_page.csv"])
SEED = 26
CASES_PER_PROFILE = 12
CASE_SECONDS = 20  # one in-process case; a hang fails the test instead of blocking the suite
# what a number in a profile or roofs file is replaced by: each is impossible or hostile
HOSTILE_NUMBERS = ("-1", "-994.5", "inf", "-inf", "nan", "1e308", "1" * 23, "1" * 400, "abc", "", "0x10", "1e-400")
NUMBER = re.compile(rb"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


class Hang(Exception):
    pass


def _call(main, argv, capsys) -> tuple[int, str, str]:
    """main(argv) with an alarm: (exit code, stdout, stderr). Anything but a clean exit propagates; so does
    a numpy RuntimeWarning (overflow, an invalid cast), which a user would see on stderr."""
    def alarm(*_):
        raise Hang(f"{argv} ran past {CASE_SECONDS} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(CASE_SECONDS)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            rc = main([str(a) for a in argv])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out, err = capsys.readouterr()
    numpy = [f"{w.filename}:{w.lineno}: {w.message}" for w in seen if issubclass(w.category, RuntimeWarning)]
    assert not numpy, f"{argv}: {numpy}"
    return rc, out, err


def _assert_contract(rc: int, err: str, *, ok=(0,)) -> None:
    assert rc in (*ok, 2), err
    if rc == 2:
        errors = [line for line in err.splitlines() if ": error: " in line]
        assert len(errors) == 1 and "Traceback" not in err, err


def _digest(paths) -> dict:
    return {p: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths if Path(p).is_file()}


def _possible(records: list[dict]) -> None:
    """Every number of the kernel table is finite and 0 or more (missing is null)."""
    for row in records:
        for key, value in row.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert math.isfinite(value) and value >= 0, f"{row.get('kernel')}: {key} = {value}"


def _mutate(data: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(5)
    if kind == 0:  # a number made hostile
        hits = list(NUMBER.finditer(data))
        if hits:
            m = rng.choice(hits)
            return data[:m.start()] + rng.choice(HOSTILE_NUMBERS).encode() + data[m.end():]
    if kind == 1:  # cut short anywhere (inside a quoted cell, a header)
        return data[:rng.randrange(len(data))]
    if kind == 2:  # bytes flipped
        b = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if kind == 3:  # a line dropped or doubled
        lines = data.split(b"\n")
        i = rng.randrange(len(lines))
        lines[i:i + 1] = [] if rng.random() < 0.5 else [lines[i], lines[i]]
        return b"\n".join(lines)
    return data.decode("utf-8", "replace").encode("utf-16")  # PowerShell's encoding


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_mutated_profiles_give_clean_errors_or_possible_numbers(profile, tmp_path, capsys):
    rng = random.Random(f"{SEED}-{profile.name}")
    data = profile.read_bytes()
    for case in range(CASES_PER_PROFILE):
        f = tmp_path / f"{case}{profile.suffix}"
        f.write_bytes(_mutate(data, rng))
        before = _digest([f])
        out = tmp_path / f"{case}.json"
        rc, _, err = _call(ncu.main, [f, "--json", out], capsys)
        _assert_contract(rc, err)
        if rc == 0:
            _possible(json.loads(out.read_text()))
        assert _digest([f]) == before


def test_mutated_roofs_files_through_every_command(tmp_path, capsys):
    rng = random.Random(SEED)
    data = ROOFS.read_bytes()
    kernels = DATA / "roofline" / "kernels.csv"
    for case in range(40):
        f = tmp_path / f"roofs{case}.json"
        f.write_bytes(_mutate(data, rng))
        before = _digest([f, kernels])
        for main, argv in ((roofline_main, [kernels, "--roofs", f, "--no-datasheet", "--csv", tmp_path / f"r{case}"]),
                           (whatif.main, [kernels, "--on", f]),
                           (compare.main, [ROOFS, f, "-o", tmp_path / f"c{case}.svg"]),
                           (fleet.main, [f])):
            rc, _, err = _call(main, argv, capsys)
            _assert_contract(rc, err, ok=(0, 1) if main is fleet.main else (0,))
        assert _digest([f, kernels]) == before


@pytest.mark.parametrize("main, argv, option", [
    (ncu.main, ["{p}", "--csv", "{p}", "--force"], "--csv"),
    (ncu.main, ["{p}", "--json", "{link}", "--force"], "--json"),
    (roofline_main, ["{p}", "--roofs", "{roofs}", "--csv", "{p}", "--force"], "--csv"),
    (roofline_main, ["{p}", "--roofs", "{roofs}", "--report", "{roofs}", "--force"], "--report"),
    (whatif.main, ["{p}", "--on", "{roofs}", "--csv", "{link}", "--force"], "--csv"),
    (compare.main, ["{roofs}", "--csv", "{roofs}", "-o", "{dir}/c.png", "--force"], "--csv"),
    (fleet.main, ["{dir}", "--json", "{roofs}", "--force"], "--json"),
])
def test_no_output_replaces_an_input(main, argv, option, tmp_path, capsys):
    p = tmp_path / "p.csv"
    p.write_bytes((DATA / "roofline" / "kernels.csv").read_bytes())
    roofs = tmp_path / "roofs.json"
    roofs.write_bytes(ROOFS.read_bytes())
    (tmp_path / "link.csv").symlink_to(p)
    names = {"p": p, "roofs": roofs, "link": tmp_path / "link.csv", "dir": tmp_path}
    before = _digest([p, roofs])
    rc, _, err = _call(main, [a.format(**names) for a in argv], capsys)
    # with --force every one of them is refused for being an input, not for existing
    assert rc == 2 and option in err and "input" in err, err
    assert _digest([p, roofs]) == before


def test_an_existing_output_needs_force_and_a_failed_run_writes_nothing(tmp_path, capsys, monkeypatch):
    kernels = DATA / "roofline" / "kernels.csv"
    kept = tmp_path / "t.csv"
    kept.write_text("mine\n")
    rc, _, err = _call(ncu.main, [kernels, "--csv", kept], capsys)
    assert rc == 2 and "--force" in err and kept.read_text() == "mine\n"
    # the picture fails to draw (matplotlib on values beyond its range): the CSV asked for with it is not
    # written either
    from matplotlib.figure import Figure

    def fails(*args, **kwargs):
        raise OverflowError("cannot convert float infinity to integer")

    monkeypatch.setattr(Figure, "savefig", fails)
    rc, _, err = _call(roofline_main, [kernels, "--roofs", ROOFS, "--csv", tmp_path / "k.csv", "-o",
                                       tmp_path / "k.png"], capsys)
    assert rc == 2 and "cannot draw" in err and "nothing was written" in err, err
    assert not (tmp_path / "k.csv").exists() and not (tmp_path / "k.png").exists()


@pytest.mark.parametrize("make", ["fifo", "device", "folder", "deep-json", "bomb", "utf16", "twice", "gzip-roofs"])
def test_hostile_files(make, tmp_path, capsys, monkeypatch):
    f = tmp_path / "in.json"
    argv = [f]
    if make == "fifo":
        os.mkfifo(f)
    elif make == "device":
        f = Path("/dev/zero")
        argv = [f]
    elif make == "folder":
        f.mkdir()
        argv = [f, "--nsys", f]
    elif make == "deep-json":
        f.write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + '], "deviceProperties": []}')
    elif make == "bomb":
        f.write_bytes(gzip.compress(b"\0" * 3_000_000))
        monkeypatch.setenv("CEILINGS_MAX_DECOMPRESSED_MB", "1")
    elif make == "utf16":
        f.write_bytes((DATA / "ncu" / "raw.csv").read_text().encode("utf-16"))
    elif make == "twice":
        f.write_bytes((DATA / "ncu" / "raw.csv").read_bytes())
        argv = [f, f]
    if make == "gzip-roofs":
        f.write_bytes(gzip.compress(ROOFS.read_bytes()))
        rc, _, err = _call(roofline_main, [DATA / "roofline" / "kernels.csv", "--roofs", f], capsys)
        assert rc == 2 and "gzip" in err, err
        return
    rc, _, err = _call(ncu.main, argv, capsys)
    assert rc == 2, err
    expected = {"fifo": "pipe (FIFO)", "device": "not a regular file", "folder": "folder", "deep-json": "nested",
                "bomb": "CEILINGS_MAX_DECOMPRESSED_MB", "utf16": "UTF-16", "twice": "same file"}[make]
    assert expected in err, err


DEEP = "[" * 100_000 + "]" * 100_000  # past any JSON parser's recursion


@pytest.mark.parametrize("command", ["compare", "roofline --roofs", "whatif --on", "fleet folder", "llm --model",
                                     "llm --roofs", "llm --calibrate"])
def test_deeply_nested_json_is_one_line_naming_the_file(command, tmp_path, capsys):
    """Every JSON the project reads (roofs files, a fleet's folder, an LLM config, a torch trace to calibrate
    with) goes through ceilings.inputs.loads_json: 100,000 nested lists are refused by the file's name."""
    f = tmp_path / "deep.json"
    f.write_text('{"schema_version": ' + DEEP + "}" if command != "llm --calibrate" else
                 '{"traceEvents": [' + DEEP + '], "deviceProperties": []}')
    kernels = DATA / "roofline" / "kernels.csv"
    main, argv = {"compare": (compare.main, [f, "-o", tmp_path / "c.png"]),
                  "roofline --roofs": (roofline_main, [kernels, "--roofs", f]),
                  "whatif --on": (whatif.main, [kernels, "--on", f]),
                  "fleet folder": (fleet.main, [tmp_path]),
                  "llm --model": (llm.main, ["--model", f, "--roofs", ROOFS]),
                  "llm --roofs": (llm.main, ["--model", "Llama-3.2-1B", "--roofs", f]),
                  "llm --calibrate": (llm.main, ["--model", "Llama-3.2-1B", "--roofs", ROOFS, "--calibrate", f])
                  }[command]
    rc, _, err = _call(main, argv, capsys)
    _assert_contract(rc, err)
    assert rc == 2 and f"{f}: JSON nested too deep" in err, err


@pytest.mark.parametrize("field, value", [("memory_bytes", -1), ("max_sm_clock_hz", float("nan")),
                                          ("memory_clock_hz", 10**400)])
def test_impossible_roofs_numbers_are_refused(field, value, tmp_path, capsys):
    doc = json.loads(ROOFS.read_text())
    doc["device"][field] = value
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    rc, _, err = _call(compare.main, [f, "-o", tmp_path / "c.png"], capsys)
    assert rc == 2 and f"device.{field}" in err, err
    assert not (tmp_path / "c.png").exists()


def test_a_host_name_with_a_newline_is_refused(tmp_path, capsys):
    doc = json.loads(ROOFS.read_text())
    doc["meta"]["host"] = "node1\n| fake | row |"
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    rc, out, err = _call(fleet.main, [f], capsys)
    assert rc == 2 and "meta.host" in err and "control characters" in err and out == "", err


@pytest.mark.parametrize("started", ["2025-01-01T00:00:00Z", None])
def test_a_copy_without_uuid_is_one_gpu_said_in_a_warning(started, tmp_path, capsys):
    """A roofs file and its copy, the GPU without a UUID (and without a start time, where the fuzz found two
    GPUs counted): one GPU, the copy named in a warning, and protected as an input."""
    doc = json.loads(ROOFS.read_text())
    doc["device"]["uuid"] = None
    doc["meta"]["started"] = started
    for name in ("a.json", "copy.json"):
        (tmp_path / name).write_text(json.dumps(doc))
    rc, _, err = _call(fleet.main, [tmp_path, "--json", tmp_path / "report.out", "-v"], capsys)
    assert rc in (0, 1) and f"warning: {tmp_path / 'copy.json'}: the same bytes as {tmp_path / 'a.json'}" in err, err
    assert len(json.loads((tmp_path / "report.out").read_text())["files"]) == 1
    rc, _, err = _call(fleet.main, [tmp_path, "--json", tmp_path / "copy.json", "--force"], capsys)
    assert rc == 2 and "that is an input" in err, err


def test_one_gpu_by_host_pci_bus_and_index_measured_twice_is_refused(tmp_path, capsys):
    """Without a UUID, host + PCI bus + CUDA index is the GPU: two files of it that differ (two runs) are two
    measurements of one GPU, not two GPUs; which counts is the user's choice."""
    doc = json.loads(ROOFS.read_text())
    doc["device"].update(uuid=None, pci_bus_id="0000:17:00.0")
    (tmp_path / "a.json").write_text(json.dumps(doc))
    doc["meta"]["started"] = "2025-01-02T00:00:00Z"
    (tmp_path / "b.json").write_text(json.dumps(doc))
    rc, _, err = _call(fleet.main, [tmp_path], capsys)
    assert rc == 2 and "GPU 0 at PCI 0000:17:00.0 on test is also in" in err and "a.json" in err, err


def test_a_schema_1_0_file_among_1_1_files_is_no_configuration_outlier(tmp_path, capsys):
    old = json.loads(ROOFS.read_text())  # schema 1.0: no launch record
    launch = {"launcher": None, "job_id": None, "node": None, "rank": None, "local_rank": None, "world_size": None,
              "local_size": None, "cuda_visible_devices": None, "gpu_index": None, "mode": "single",
              "gpus_at_once": 1}
    doc = {**old, "schema_minor": 1, "launch": launch}
    for i in range(3):
        doc["device"]["uuid"] = f"GPU-{i}"
        (tmp_path / f"new{i}.json").write_text(json.dumps(doc))
    old["device"]["uuid"] = "GPU-old"
    (tmp_path / "old.json").write_text(json.dumps(old))
    rc, out, err = _call(fleet.main, [tmp_path, "--json", tmp_path / "fleet.out"], capsys)
    report = json.loads((tmp_path / "fleet.out").read_text())
    assert rc in (0, 1) and len(report["groups"]) == 1, out + err
    assert "configuration" not in json.dumps(report["outliers"]), report["outliers"]


def _trace(**kernel) -> dict:
    event = {"ph": "X", "cat": "kernel", "name": "k", "ts": 10, "dur": 5, "pid": 0, "tid": 7,
             "args": {"device": 0, "correlation": 1}, **kernel}
    return {"deviceProperties": [{"id": 0, "name": "NVIDIA H100", "computeMajor": 9, "computeMinor": 0}],
            "traceEvents": [{k: v for k, v in event.items() if v is not None}]}


@pytest.mark.parametrize("field, value", [("ts", "abc"), ("dur", {"x": 1}), ("args", [1]), ("tid", [None]),
                                          ("dur", "1e400"), ("ts", -1e308)])
def test_wrong_typed_torch_trace_fields(field, value, tmp_path, capsys):
    f = tmp_path / "t.pt.trace.json"
    f.write_text(json.dumps(_trace(**{field: value})))
    out = tmp_path / "t.out"
    rc, _, err = _call(ncu.main, [f, "--json", out], capsys)
    _assert_contract(rc, err)
    if rc == 0:
        _possible(json.loads(out.read_text()))


def test_a_torch_kernel_without_dur_has_no_time_not_zero(tmp_path, capsys):
    f = tmp_path / "t.pt.trace.json"
    f.write_text(json.dumps(_trace(dur=None)))
    out = tmp_path / "t.out"
    rc, _, err = _call(ncu.main, [f, "--json", out], capsys)
    # its one kernel has no time at all (it was 0 s): nothing measured, said so
    assert rc == 2 and "missing" in err and not out.exists(), err


def test_a_node_named_dotdot_stays_in_the_out_folder():
    from ceilings.ranks import expand

    assert expand("out/%h/x.json", {"h": ".."}) == "out/--/x.json"
    assert Path(expand("out/%h/x.json", {"h": "/etc"})).parts[:2] == ("out", "-etc")


@pytest.mark.parametrize("argv", [
    ["-m", "analysis.ncu", "/dev/zero"],
    ["-m", "analysis.ncu", str(DATA / "ncu" / "raw.csv"), "--csv", "/dev/full"],
])
def test_a_user_sees_one_line_not_a_traceback(argv):
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[1])
    said = [line for line in done.stderr.splitlines() if not line.startswith("warning: ")]
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(said) == 1, done.stderr


@pytest.mark.parametrize("value", ["inf", "1" * 23, "-1", "2.5", "nan"])
def test_an_ncu_id_cell_that_is_no_launch_number_is_refused(value, tmp_path, capsys):
    lines = (DATA / "ncu" / "raw.csv").read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith('"0",'))
    lines[first] = f'"{value}"' + lines[first][len('"0"'):]
    f = tmp_path / "raw.csv"
    f.write_text("\n".join(lines) + "\n")
    rc, _, err = _call(ncu.main, [f], capsys)
    _assert_contract(rc, err)
    # nan is no number at all: a stray row, dropped like a repeated header; the others are refused by name
    assert rc == 0 if value == "nan" else rc == 2 and f"ID '{value}' is no launch number" in err, err


@pytest.mark.parametrize("name", ["details_20col.csv", "details_12col.csv", "raw.csv"])
def test_a_parse_error_quotes_the_files_line(name, tmp_path, capsys):
    """One data row gets a cell more than the header: the error names that row's line in the file, whatever
    lines (a preamble, the units row) come before it."""
    lines = (DATA / "ncu" / name).read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith('"ID",')) + 3
    lines[row] += ',"x"'
    f = tmp_path / name
    f.write_text("\n".join(lines) + "\n")
    rc, _, err = _call(ncu.main, [f], capsys)
    assert rc == 2 and f"{f}:{row + 1}: unreadable" in err and f"in line {row + 1}," in err, err


def test_absurd_shapes_give_an_impossible_rate_naming_the_kernel(tmp_path, capsys):
    """An fp32 mm of 10^6 x 10^6 x 10^6 in 5 us is 4e23 FLOP/s; an H100 SXM5 does 67 TFLOP/s of fp32."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 9, "pid": 1, "tid": 1,
               "args": {"External id": 1, "Input Dims": [[10**6] * 2] * 2, "Input type": ["float"] * 2}},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2, "dur": 1, "pid": 1,
               "tid": 1, "args": {"correlation": 1}},
              {"ph": "X", "cat": "kernel", "name": "sgemm_huge", "ts": 10, "dur": 5, "pid": 0, "tid": 7,
               "args": {"device": 0, "correlation": 1}}]
    f = tmp_path / "t.pt.trace.json"
    f.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9,
                                                  "computeMinor": 0, "numSms": 132}], "traceEvents": events}))
    rc, _, err = _call(ncu.main, [f, "--json", tmp_path / "t.out"], capsys)
    assert rc == 0 and "IMPOSSIBLE RATE: 1 launch(es) report more fp32 FLOP/s" in err and "'sgemm_huge'" in err, err


@pytest.mark.parametrize("value", ["inf", "1" * 400, "1e30", "0", "2.5"])
def test_a_kernel_table_csv_with_an_impossible_launch_count_is_refused(value, tmp_path, capsys):
    """analysis.ncu's own CSV read back: its first kernel's launches (2) replaced; a 400-digit count, which
    read_csv keeps as a Python int, too."""
    lines = (DATA / "roofline" / "kernels.csv").read_text().splitlines()
    cells = lines[1].rsplit('",', 1)
    lines[1] = cells[0] + '",' + value + cells[1][cells[1].index(","):]
    f = tmp_path / "k.csv"
    f.write_text("\n".join(lines) + "\n")
    rc, _, err = _call(ncu.main, [f], capsys)
    assert rc == 2 and "gemm_kernel" in err and "launches" in err and "whole number from 1 up" in err, err


def test_a_torch_event_with_a_wrong_typed_field_is_refused_by_name(tmp_path, capsys):
    f = tmp_path / "t.pt.trace.json"
    f.write_text(json.dumps(_trace(dur="12")))
    rc, _, err = _call(ncu.main, [f], capsys)
    assert rc == 2 and "traceEvents[0] ('k'): dur = '12', not a number of microseconds" in err, err


def test_an_input_found_while_working_is_refused_as_an_output_at_once(tmp_path):
    """A run that finds more inputs (files in a folder) learns them through add_inputs: an output already
    wanted that is one of them is refused there, before anything is computed or written."""
    from common.atomic import Outputs
    from common.errors import CeilingsError

    found = tmp_path / "found.json"
    found.write_text("{}")
    out = Outputs(force=True)
    out.want("--json", found)
    with pytest.raises(CeilingsError, match="--json .*found.json: that is an input of this run"):
        out.add_inputs([found])
    assert found.read_text() == "{}"


@pytest.mark.parametrize("value", ["1e308", "9" * 23, "2.5"])
@pytest.mark.parametrize("name, count", [("summary_per_kernel.csv", '"{}","Command'),
                                         ("summary.txt", "Invocations {}\n"),
                                         ("summary_per_gpu.txt", "Invocations {}\n")])
def test_a_summary_count_past_int64_is_quoted_as_written(name, count, value, tmp_path, capsys):
    """An Invocations count of 1e308 or 23 digits was cast to int64 and wrapped round (-9.22337e+18 launches);
    2.5 was cut to 2 and read. Each is refused, quoting the cell as the file writes it."""
    data = (DATA / "ncu" / name).read_text()
    written = next(count.format(n) for n in ("10", "300") if count.format(n) in data)  # the first kernel's count
    f = tmp_path / name
    f.write_text(data.replace(written, count.format(value), 1))
    rc, _, err = _call(ncu.main, [f], capsys)
    assert rc == 2 and f"'{value}' launches" in err and str(f) in err, err


@pytest.mark.parametrize("cell, value", [(",2,1e-3,", ",2,1e-290,"), (",5e12,", ",1e308,")])
@pytest.mark.parametrize("picture", ["-o", "--html", "--level all -o"])
def test_a_kernel_beyond_float_range_is_left_off_the_picture_and_said(cell, value, picture, tmp_path, capsys):
    """A kernel time of 1e-290 s (5e9 FLOP in it: 5e299 FLOP/s) made the axis limit the int 10**300, which
    matplotlib refuses (TypeError); near 1e308 the limit overflowed. The picture is drawn without that kernel,
    its note counting it off the axes; the table keeps it."""
    lines = (DATA / "roofline" / "kernels.csv").read_text().splitlines()
    assert cell in lines[1]  # gemm_kernel: 5e9 FLOPs in 1e-3 s over 2 launches
    lines[1] = lines[1].replace(cell, value)
    f = tmp_path / "k.csv"
    f.write_text("\n".join(lines) + "\n")
    *options, flag = picture.split()
    out = tmp_path / ("r.html" if flag == "--html" else "r.png")
    rc, _, err = _call(roofline_main, [f, "--roofs", ROOFS, "--csv", tmp_path / "t.csv", *options, flag, out], capsys)
    assert rc == 0 and out.exists(), err
    assert "gemm_kernel" in (tmp_path / "t.csv").read_text()
    if value == ",2,1e-290,":  # the rate (5e9 / 1e-290) is off the axes; a rate of 1e308 in the CSV is recomputed
        from analysis.figure import roofline as picture

        roofs = roofline.load(ROOFS)
        note = picture(roofs, roofline.roofline_table(roofs, roofline_inputs.read_kernels([f]))).not_drawn
        assert "1 kernel(s) off the axes, 1e-100 to 1e100" in note, note


@pytest.mark.parametrize("name, kernel", [("details_20col.csv", "cutlass_gemm"), ("raw.csv", "vecAdd"),
                                          ("summary_per_kernel.csv", "void saxpy<float>"), ("summary.txt", "step(")])
def test_a_latin1_byte_in_a_kernel_name_is_read_with_a_warning(name, kernel, tmp_path, capsys):
    """An export saved as Latin-1 ('café' as the one byte 0xe9): the summary CSV was refused whole as
    undecodable; every reader now reads the numbers, the name with U+FFFD in that byte's place, and says so."""
    data = (DATA / "ncu" / name).read_bytes()
    f = tmp_path / name
    f.write_bytes(data.replace(kernel.encode(), b"caf\xe9_" + kernel.encode()))
    out = tmp_path / "t.json"
    rc, _, err = _call(ncu.main, [f, "--json", out, "-v"], capsys)
    assert rc == 0 and "not UTF-8" in err and str(f) in err, err
    names = [row["kernel"] for row in json.loads(out.read_text())]
    assert any(n.startswith("caf\ufffd_" + kernel) for n in names), names
    # the numbers are those of the file without the byte
    plain = tmp_path / f"plain{f.suffix}"
    plain.write_bytes(data)
    rc, _, _ = _call(ncu.main, [plain, "--json", tmp_path / "p.json"], capsys)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "kernel"} for r in rows]  # noqa: E731
    assert strip(json.loads(out.read_text())) == strip(json.loads((tmp_path / "p.json").read_text()))


@pytest.mark.parametrize("name, column", [("details_20col.csv", "Kernel Name"), ("details_20col.csv", "ID"),
                                          ("raw.csv", "Kernel Name"), ("raw.csv", "ID"),
                                          ("summary_per_kernel.csv", "Kernel Name"),
                                          ("summary_per_kernel.csv", "Metric Name"),
                                          ("summary_per_kernel.csv", "Metric Unit")])
@pytest.mark.parametrize("edit", ["renamed", "missing"])
def test_an_ncu_csv_lacking_a_column_names_it(name, column, edit, tmp_path, capsys):
    """A header cell renamed, or the column cut from every row: a KeyError traceback (summary), or 'profiler
    output without any kernel results' (details, raw) before; now the column is named."""
    import csv
    import io

    lines = (DATA / "ncu" / name).read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if f'"{column}"' in line)
    rows = list(csv.reader(io.StringIO("".join(lines[at:]))))
    j = rows[0].index(column)
    rows = [r[:j] + ["Renamed"] + r[j + 1:] if i == 0 else r for i, r in enumerate(rows)] if edit == "renamed" \
        else [r[:j] + r[j + 1:] for r in rows]
    text = io.StringIO()
    csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    f = tmp_path / name
    f.write_text("".join(lines[:at]) + text.getvalue())
    rc, _, err = _call(ncu.main, [f], capsys)
    _assert_contract(rc, err)
    assert rc == 2 and f"{f}: " in err and f"without a {column!r} column" in err, err


def test_a_gzip_bomb_is_refused_by_its_inflate_ratio(tmp_path, capsys, monkeypatch):
    """3 MB of one byte gzip to 3 kB (1,000 times): past the point where the ratio counts (lowered here from
    64 MB to 1 MB) a stream growing more than 100 times is refused, long before a 2 GB bomb fills memory."""
    from ceilings import inputs

    monkeypatch.setattr(inputs, "RATIO_CHECKED_FROM", 10**6)
    f = tmp_path / "t.pt.trace.json.gz"
    f.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * 3_000_000 + b"]}"))
    for main, argv in ((ncu.main, [f]), (roofline_main, [f, "--roofs", ROOFS]), (whatif.main, [f, "--on", ROOFS])):
        rc, _, err = _call(main, argv, capsys)
        assert rc == 2 and f"{f}: " in err and "gzip bomb" in err and "CEILINGS_MAX_INFLATE_RATIO" in err, err


def test_max_inflated_bounds_a_gzip_input_and_progress_is_shown(tmp_path, capsys, monkeypatch):
    """Incompressible bytes (ratio 1): only the size bound stops them. --max-inflated 0.001 (1 MB) refuses 3 MB
    naming the option; a progress line every PROGRESS_EVERY bytes (lowered to 0.5 MB) says how far it got."""
    from ceilings import inputs

    monkeypatch.setattr(inputs, "PROGRESS_EVERY", 500_000)
    f = tmp_path / "p.csv.gz"
    f.write_bytes(gzip.compress(random.Random(SEED).randbytes(3_000_000)))
    rc, _, err = _call(ncu.main, [f, "--max-inflated", "0.001"], capsys)
    assert rc == 2 and "decompresses to more than 1 MB" in err and "--max-inflated" in err, err
    assert err.count("MB decompressed so far (refused past 1 MB)") == 2, err  # at 0.5 and 1.0 MB
    # a real profile past a low bound in the environment reads once --max-inflated raises it
    kernels = tmp_path / "k.csv.gz"
    kernels.write_bytes(gzip.compress((DATA / "roofline" / "kernels.csv").read_bytes()))
    monkeypatch.setenv("CEILINGS_MAX_DECOMPRESSED_MB", "0.0001")
    rc, _, err = _call(ncu.main, [kernels], capsys)
    assert rc == 2 and "CEILINGS_MAX_DECOMPRESSED_MB" in err, err
    rc, out, err = _call(ncu.main, [kernels, "--max-inflated", "1"], capsys)
    assert rc == 0 and "gemm_kernel" in out, err
    rc, _, err = _call(ncu.main, [kernels, "--max-inflated", "-1"], capsys)
    assert rc == 2 and "--max-inflated -1: give the bound in GB" in err, err


# Seeded generators of each class of hostile input, run over the commands (their pictures, --html, --by views,
# analysis.llm, ceilings.fleet): each case ends in one error line with exit 2 or in a result, never a traceback,
# a hang, a numpy warning or a changed input. Fast: a few cases per class, for CI.
# a few cases of each class in CI; `CEILINGS_FUZZ_CASES=200 python -m pytest tests/test_fuzz.py -k seeded` is the
# longer run (BENCHMARKS.md has its last figures)
HOSTILE_CASES = int(os.environ.get("CEILINGS_FUZZ_CASES", "6"))
# a field of a torch trace's event with a value of another type than Kineto writes
WRONG_TYPES = ("7", [1, 2], {"a": 1}, None, True, -3, 1e308, "", [[1, "x"]])
TRACE_FIELDS = ("ts", "dur", "args", "name", "Input Dims", "Input type", "Concrete Inputs", "device",
                "correlation", "External id", "Collective name", "In msg nelems", "Out msg nelems", "Group size",
                "dtype")
EDGE_NUMBERS = ("1e308", "1.7976931348623157e308", "4.9e-324", "1e-300", "9" * 23, "1.8e19", "1e-120")


def _commands(profile: Path, roofs: Path, tmp: Path, rng: random.Random) -> list[tuple]:
    """(main, argv, exit codes besides 0 and 2 that it may give) for a profile and a roofs file."""
    by = rng.choice(["kernel", "op", "module", "annotation"])
    return [(ncu.main, [profile, "--json", tmp / "t.json", "--force", "--by", by], ()),
            (roofline_main, [profile, "--roofs", roofs, "-o", tmp / "r.png", "--html", tmp / "r.html", "--json",
                             tmp / "r.json", "--csv", tmp / "r.csv", "--report", tmp / "r.md", "--force",
                             "--by", by, "--level", rng.choice(["dram", "all"])], ()),
            (whatif.main, [profile, "--on", roofs], ()),
            (llm.main, ["--model", "Llama-3.2-1B", "--roofs", roofs, "--activations", "fp16", "--weights", "fp16",
                        "--kv-cache", "fp16", "--calibrate", profile, "--html", tmp / "l.html", "--force"], ())]


def _collective_trace(path: Path) -> Path:
    """A step of tests/test_torch_trace.py's layout with an all-reduce (record_param_comms with its sizes) beside
    a GEMM with shapes: every field the reader computes with, for the field-types class to damage."""
    from tests.test_torch_trace import model_events, trace, x

    meta = {"Collective name": "allreduce", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20,
            "Group size": 8, "dtype": "BFloat16"}
    events = model_events() + [x("cpu_op", "record_param_comms", 600, 50, **{"External id": 7, **meta}),
                               x("cuda_runtime", "cudaLaunchKernel", 610, 5, correlation=970),
                               x("kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 700, 40, pid=0, tid=9,
                                 correlation=970, device=0)]
    return trace(path, events)


@pytest.mark.parametrize("kind", ["nesting", "float-edges", "encodings", "bomb", "fleet-twins", "field-types"])
def test_seeded_hostile_inputs_over_every_command(kind, tmp_path, capsys, monkeypatch):
    from ceilings import inputs

    rng = random.Random(f"{SEED}-{kind}")
    kernels = DATA / "roofline" / "kernels.csv"
    monkeypatch.setattr(inputs, "RATIO_CHECKED_FROM", 10**6)  # a bomb of a few MB is enough to trip it
    for case in range(HOSTILE_CASES):
        tmp = tmp_path / str(case)
        tmp.mkdir()
        roofs, profile = tmp / "roofs.json", tmp / "p.csv"
        roofs.write_bytes(ROOFS.read_bytes())
        profile.write_bytes(kernels.read_bytes())
        cases = []
        if kind == "nesting":  # a JSON nested past the parser, in any JSON the project reads
            depth = rng.choice([1_200, 5_000, 100_000])
            opener, closer = rng.choice([("[", "]"), ('{"a": ', "}")])
            deep = opener * depth + ("1" if opener != "[" else "") + closer * depth
            where = rng.choice(["roofs", "config", "trace"])
            if where == "roofs":
                roofs.write_text('{"schema_version": 1, "ceilings": ' + deep + "}")
            elif where == "trace":
                profile = tmp / "t.pt.trace.json"
                profile.write_text('{"traceEvents": [' + deep + '], "deviceProperties": []}')
            config = tmp / "config.json"
            config.write_text(deep if where == "config" else (DATA / "llm" / "tiny-olmo.json").read_text())
            cases.append((llm.main, ["--model", config, "--roofs", roofs], ()))
            cases.append((compare.main, [roofs, "-o", tmp / "c.png", "--force"], ()))
            cases.append((fleet.main, [roofs, "--html", tmp / "f.html", "--force"], (1,)))
        elif kind == "float-edges":  # a number near the ends of float64 in the profile or the roofs file
            data = profile.read_bytes()
            for _ in range(rng.randrange(1, 3)):
                m = rng.choice(list(NUMBER.finditer(data)))
                data = data[:m.start()] + rng.choice(EDGE_NUMBERS).encode() + data[m.end():]
            profile.write_bytes(data)
            if rng.random() < 0.5:
                doc = json.loads(ROOFS.read_text())
                rng.choice(doc["ceilings"])["value"] = float(rng.choice(EDGE_NUMBERS))
                roofs.write_text(json.dumps(doc))
            cases.append((compare.main, [roofs, "-o", tmp / "c.svg", "--force"], ()))
            cases.append((fleet.main, [roofs, "--json", tmp / "f.json", "--force"], (1,)))
        elif kind == "encodings":  # a Latin-1 byte in a name, or a CSV column renamed or cut away
            source = rng.choice([p for p in PROFILES if p.suffix in (".csv", ".txt")])
            data = source.read_bytes()
            if rng.random() < 0.5:
                at = rng.choice([m.start() for m in re.finditer(rb"[A-Za-z_]{4,}", data)])
                data = data[:at] + bytes([rng.choice([0xe9, 0xfc, 0xff])]) + data[at:]
            else:
                cells = list(re.finditer(rb'"[A-Z][A-Za-z ]+"', data[:4000]))
                if cells:
                    m = rng.choice(cells)
                    data = data[:m.start()] + rng.choice([b'"Renamed"', b'""', b""]) + data[m.end():]
            profile = tmp / f"p{source.suffix}"
            profile.write_bytes(data)
        elif kind == "bomb":  # a gzip'd profile that grows 1,000 times, or past a lowered size bound
            profile = tmp / "p.pt.trace.json.gz"
            filler = bytes([rng.randrange(256)]) * rng.choice([2_000_000, 3_000_000])
            profile.write_bytes(gzip.compress(b'{"traceEvents": [' + filler + b"]}"))
            if rng.random() < 0.5:
                monkeypatch.setenv("CEILINGS_MAX_DECOMPRESSED_MB", "0.5")
            else:
                monkeypatch.delenv("CEILINGS_MAX_DECOMPRESSED_MB", raising=False)
        elif kind == "field-types":  # a field of a torch trace's event of another type than Kineto writes
            profile = _collective_trace(tmp / "t.pt.trace.json")
            doc = json.loads(profile.read_text())
            for _ in range(rng.randrange(1, 4)):
                event = rng.choice(doc["traceEvents"])
                field = rng.choice(TRACE_FIELDS)
                where = event if field in ("ts", "dur", "args", "name") or not isinstance(event.get("args"), dict) \
                    else event["args"]
                where[field] = rng.choice(WRONG_TYPES)
            profile.write_text(json.dumps(doc))
        if kind != "fleet-twins":
            cases += [(main, argv, ok) for main, argv, ok in _commands(profile, roofs, tmp, rng)]
            if kind == "bomb":
                for main, argv, _ in cases:
                    rc, _, err = _call(main, argv, capsys)
                    assert rc == 2 and ("gzip bomb" in err or "decompresses to more than" in err), (argv, err)
        else:  # copies and twins of one GPU without a UUID among other GPUs
            folder = tmp / "fleet"
            folder.mkdir()
            files = []
            for i in range(rng.randrange(2, 5)):
                doc = json.loads(ROOFS.read_text())
                doc["device"].update(uuid=None, pci_bus_id=f"0000:{0x17 + i:02x}:00.0")
                doc["meta"]["started"] = rng.choice([None, "2025-01-01T00:00:00Z"])
                files.append(folder / f"gpu{i}.json")
                files[-1].write_text(json.dumps(doc))
            copies = rng.sample(files, rng.randrange(1, len(files) + 1))
            for j, original in enumerate(copies):
                (folder / f"copy{j}.json").write_bytes(original.read_bytes())
            rc, _, err = _call(fleet.main, [folder, "--json", tmp / "f.out", "--html", tmp / "f.html"], capsys)
            _assert_contract(rc, err, ok=(0, 1))
            # the GPUs are the distinct files: every copy is named, none counted
            assert rc in (0, 1) and err.count("the same bytes as") == len(copies), err
            assert len(json.loads((tmp / "f.out").read_text())["files"]) == len(files)
        for main, argv, ok in cases:
            inputs_of_case = [p for p in tmp.iterdir() if p.suffix != ".html" and p.name not in ("t.json", "f.json")]
            before = _digest(inputs_of_case)
            rc, _, err = _call(main, argv, capsys)
            _assert_contract(rc, err, ok=(0, *ok))
            assert _digest(inputs_of_case) == before, argv
            if rc == 0 and main is ncu.main:
                _possible(json.loads((tmp / "t.json").read_text()))
