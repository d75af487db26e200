"""Nsight Systems SQLite exports and .nsys-rep reports (analysis.readers.nsys_sqlite).

The exports are built here with sqlite3, with the tables and columns of NVIDIA's export schema; every expected
value below is read off the rows put in (times in ns there, seconds in the profile).
"""

from __future__ import annotations

import gzip
import math
import os
import shutil
import sqlite3
import stat
from contextlib import closing
from fractions import Fraction
from pathlib import Path

import pytest

from analysis.ncu import kernel_table, read_profile
from analysis.readers import nsys_sqlite
from analysis.readers.contract import Source
from analysis.readers.launches import read_source
from analysis.readers.registry import detect
from common.errors import CeilingsError

NCU_DATA = Path(__file__).parent / "data" / "ncu"
T = "gpu__time_duration.sum"
SCALE = "void scale<float>(float *, int)"
COPY = "copy(float*)"
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, registersPerThread INTEGER,
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER,
    globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER, callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
    category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
    domainId INTEGER);
CREATE TABLE TARGET_INFO_GPU (id INTEGER NOT NULL, name TEXT, busLocation TEXT, smCount INTEGER, chipName TEXT,
    computeMajor INTEGER, computeMinor INTEGER);
"""
STRINGS = {1: SCALE, 2: "scale", 3: COPY, 4: "copy", 5: "cudaLaunchKernel_v7000", 6: "step"}
# serialized ids: PID in bits 24-47, TID in bits 0-23, and a host/VM number above (3 here)
P1, P2 = (3 << 48) | (1234 << 24), (3 << 48) | (5678 << 24)
T1A, T1B, T2 = P1 | 1234, P1 | 1240, P2 | 5678
# start, end, deviceId, correlationId, globalPid, demangledName, shortName, grid, block
KERNELS = [
    (1000, 3000, 0, 10, P1, 1, 2, (64, 1, 1), (256, 1, 1)),
    (5000, 7500, 0, 11, P1, 1, 2, (128, 2, 1), (128, 1, 1)),
    (8000, 8600, 2, 12, P1, 3, 4, (1, 1, 1), (32, 1, 1)),  # device 2: not in TARGET_INFO_GPU
    (2000, 5000, 1, 10, P2, 1, 2, (64, 1, 1), (256, 1, 1)),  # correlation id 10 again, in the other process
    (6000, 6100, 1, 99, P2, 3, 4, (0, 0, 0), (0, 0, 0)),  # no API call 99 exported; sizes left at default 0
]
# start, end, globalTid, correlationId: the calls that launched them (and one that launched nothing)
RUNTIME = [(900, 950, T1A, 10), (4000, 4100, T1A, 11), (7000, 7100, T1B, 12), (1500, 1600, T2, 10),
           (100, 200, T1A, 13)]
# start, end, eventType (59 push/pop, 60 start/end, 75 domain create), text, textId, globalTid
NVTX = [
    (0, 10000, 59, "train", None, T1A),
    (800, 2000, 59, None, 6, T1A),  # "step", a registered string
    (3900, 4200, 59, "inner", None, T1A),  # starts with "outer": the shorter is the inner
    (3900, 5000, 59, "outer", None, T1A),
    (500, 9000, 60, "epoch", None, T1B),  # a process range: encloses calls of thread T1A too
    (6900, 7050, 59, "io", None, T1B),  # ends before call 12 (7000-7100) does
    (7000, 7100, 59, "exact", None, T1B),  # exactly call 12's span
    (7000, 7100, 59, "other thread", None, T1A),  # the same span on a thread that did not launch it
    (1400, 1700, 59, "infer", None, T2),
    (1450, None, 59, "forever", None, T2),  # never popped
    (1500, None, 75, "mydomain", None, T2),  # a domain, not a range
]
GPUS = [(0, H100, 9, 0), (1, A100, 8, 0)]


def make_export(path: Path, kernels=KERNELS, runtime=RUNTIME, nvtx=NVTX, gpus=GPUS, strings=STRINGS,
                drop=()) -> Path:
    """An nsys-style SQLite export; `drop`: tables to leave out."""
    with closing(sqlite3.connect(path)) as con:
        con.executescript(SCHEMA)
        for table in drop:
            con.execute(f"DROP TABLE {table}")
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", strings.items())
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
                        "correlationId, globalPid, demangledName, shortName, gridX, gridY, gridZ, blockX, blockY, "
                        "blockZ) VALUES (?, ?, ?, 1, 7, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [(*k[:7], *k[7], *k[8]) for k in kernels])
        if "CUPTI_ACTIVITY_KIND_RUNTIME" not in drop:
            con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
                            "correlationId, nameId, returnValue) VALUES (?, ?, 1, ?, ?, 5, 0)", runtime)
        if "NVTX_EVENTS" not in drop:
            con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, textId, globalTid) "
                            "VALUES (?, ?, ?, ?, ?, ?)", nvtx)
        if "TARGET_INFO_GPU" not in drop:
            con.executemany("INSERT INTO TARGET_INFO_GPU (id, name, computeMajor, computeMinor) VALUES (?, ?, ?, ?)",
                            gpus)
        con.commit()
    return path


def rows(df, *columns):
    """The columns' values row by row, a missing one (NaN in a string column) as None."""
    return [tuple(None if isinstance(v, float) and math.isnan(v) else v for v in r)
            for r in df[list(columns)].itertuples(index=False)]


def test_each_launch_with_its_full_name_time_grid_gpu_and_process(tmp_path):
    df = read_profile(make_export(tmp_path / "report.sqlite"))
    assert df.attrs["format"] == nsys_sqlite.SQLITE.name == "nsys .sqlite export" and df.attrs["yields"] == "times"
    # one run per process in the order of their first kernel (1234 at 1000 ns, 5678 at 2000 ns); id: start order
    assert rows(df, "run", "id", "process", "kernel") == [
        (0, 0, "1234", SCALE), (0, 1, "1234", SCALE), (0, 2, "1234", COPY), (1, 0, "5678", SCALE), (1, 1, "5678", COPY)]
    assert df[T].tolist() == pytest.approx([2000e-9, 2500e-9, 600e-9, 3000e-9, 100e-9])  # end - start
    assert rows(df, "grid", "block") == [("(64, 1, 1)", "(256, 1, 1)"), ("(128, 2, 1)", "(128, 1, 1)"),
                                         ("(1, 1, 1)", "(32, 1, 1)"), ("(64, 1, 1)", "(256, 1, 1)"), (None, None)]
    assert rows(df, "device", "gpu", "cc") == [("0", H100, "9.0"), ("0", H100, "9.0"), ("2", None, None),
                                               ("1", A100, "8.0"), ("1", A100, "8.0")]
    assert (df["launches"] == 1).all() and (df["source"] == "nsys").all() and not df["name_truncated"].any()


def test_nvtx_ranges_enclosing_each_launch_call_outermost_first(tmp_path):
    df = read_profile(make_export(tmp_path / "report.sqlite"))
    assert df["nvtx"].tolist() == [
        ("train", "epoch", "step"),  # call 900-950 on T1A: train 0-10000, epoch (process range) 500-9000, step 800-2000
        ("train", "epoch", "outer", "inner"),  # call 4000-4100: step is over
        ("epoch", "exact"),  # call 7000-7100 on T1B: io ends at 7050; "other thread" is T1A's
        ("infer", "forever"),  # process 5678: P1's epoch covers the time but not the process
        None,  # its API call (correlation id 99) is not in the export: unknown
    ]


def test_no_nvtx_table_gives_no_ranges_and_no_runtime_table_unknown_ranges(tmp_path):
    assert read_profile(make_export(tmp_path / "a.sqlite", drop=["NVTX_EVENTS"]))["nvtx"].tolist() == [()] * 5
    assert read_profile(make_export(tmp_path / "b.sqlite", drop=["CUPTI_ACTIVITY_KIND_RUNTIME"]))["nvtx"].tolist() \
        == [None] * 5
    df = read_profile(make_export(tmp_path / "c.sqlite", drop=["TARGET_INFO_GPU"]))
    assert df["gpu"].isna().all() and df["cc"].isna().all() and df["device"].tolist() == ["0", "0", "2", "1", "1"]


def test_a_device_listed_with_two_names_an_unnamed_range_and_a_shared_correlation_id_are_unknown(tmp_path):
    export = make_export(tmp_path / "report.sqlite", gpus=GPUS + [(1, "NVIDIA A100-PCIE-40GB", 8, 0)],
                         runtime=RUNTIME + [(4050, 4060, T1B, 11)])  # a second call 11 in process 1234
    with closing(sqlite3.connect(export)) as con:
        con.execute("ALTER TABLE NVTX_EVENTS DROP COLUMN textId")  # an export from before textId: "step" is nameless
        con.commit()
    df = read_profile(export)
    assert rows(df, "device", "gpu", "cc")[3:] == [("1", None, None), ("1", None, None)]
    assert df["nvtx"].tolist()[:2] == [("train", "epoch"), None]


def test_zero_ids_are_missing_values_not_ids(tmp_path):
    """Old exports write a default 0 where a value is missing: no process, no API call, no compute capability."""
    kernels = [(1000, 2000, 0, 0, 0, 1, 2, (1, 1, 1), (1, 1, 1)), (3000, 4000, 0, 11, P1, 1, 2, (1, 1, 1), (1, 1, 1))]
    df = read_profile(make_export(tmp_path / "report.sqlite", kernels=kernels, gpus=[(0, H100, 0, 0)]))
    assert rows(df, "run", "id", "process", "cc") == [(0, 0, None, None), (1, 0, "1234", None)]
    assert df["nvtx"].tolist() == [None, ("train", "epoch", "outer", "inner")]


def test_a_gzipped_export_is_read_from_a_temporary_copy(tmp_path):
    plain = make_export(tmp_path / "report.sqlite")
    packed = tmp_path / "report.sqlite.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = read_profile(plain), read_profile(packed)
    assert rows(b, "run", "id", "kernel", T, "nvtx") == rows(a, "run", "id", "kernel", T, "nvtx")


def test_detected_by_its_magic_bytes_before_text_formats(tmp_path):
    data = make_export(tmp_path / "report.sqlite").read_bytes()
    assert data.startswith(b"SQLite format 3\0")
    fmt, _ = detect(Source(data, "anything.bin"), binary=True)
    assert fmt is nsys_sqlite.SQLITE


def test_an_export_is_read_from_its_file_not_loaded_into_memory(tmp_path):
    """Only the first 64 KiB are read to recognise it (an export of a long run is GBs); sqlite opens the file."""
    kernels = [(i * 100, i * 100 + 50, 0, i + 1, P1, 1, 2, (1, 1, 1), (32, 1, 1)) for i in range(5000)]
    export = make_export(tmp_path / "big.sqlite", kernels=kernels, runtime=[], nvtx=[])
    assert export.stat().st_size > 2 * 65536
    source = read_source(export)
    assert len(source.data) == 65536 and source.file == export
    assert read_profile(export)["launches"].sum() == 5000


def test_kernel_table_takes_times_from_the_export_by_full_name(tmp_path):
    """text_no_time.txt: one launch of FULL, 2 x 500,000 FFMA = 1e6 FLOPs, no time. The export times FULL at
    3000, 4000 and 5000 ns (4000 per launch) and TWIN, whose first 100 characters are FULL's, at 100 ns twice:
    full names tell them apart, where names cut at 100 characters could not."""
    full = ("void very_long_namespace::detail::kernel_impl<float, 128, 4, very_long_namespace::functor<float, "
            "(int)3>, true>(float const*, float*, int)")
    twin = full.replace("(int)3", "(int)4")
    strings = {1: full, 2: "kernel_impl", 3: twin}
    kernels = [(s, s + d, 0, c, P1, n, 2, (8, 1, 1), (128, 1, 1)) for s, d, c, n in
               [(0, 3000, 1, 1), (10000, 100, 2, 3), (20000, 4000, 3, 1), (30000, 100, 4, 3), (40000, 5000, 5, 1)]]
    export = make_export(tmp_path / "times.sqlite", kernels=kernels, runtime=[], nvtx=[], strings=strings)
    t = kernel_table([NCU_DATA / "text_no_time.txt"], nsys=[export])
    by_name = t.set_index("kernel")
    assert by_name.at[full, "launches"] == 1 and by_name.at[full, "time_s"] == pytest.approx(4000e-9)
    assert by_name.at[full, "flop_per_s"] == pytest.approx(1e6 / 4000e-9)
    assert by_name.at[twin, "launches"] == 2 and by_name.at[twin, "time_s"] == pytest.approx(2 * 100e-9)
    assert not any("cut at 100 characters" in w for w in t.attrs["warnings"])


def test_what_the_caller_uses_is_all_that_is_read(tmp_path):
    """Without ranges: every launch, NVTX ranges unread (None: unknown, not "none"); not each launch: launches
    of the same kernel, process, grid, block, GPU and ranges summed into one row, in the order of their first."""
    # two more launches of SCALE at (64,1,1)x(256,1,1) on device 0 in process 1234: 3 with KERNELS' first
    kernels = [*KERNELS, (9000, 9007, 0, 13, P1, 1, 2, (64, 1, 1), (256, 1, 1)),
               (9100, 9103, 0, 14, P1, 1, 2, (64, 1, 1), (256, 1, 1))]
    export = make_export(tmp_path / "report.sqlite", kernels=kernels)
    each = read_profile(export, ranges=False)
    assert len(each) == 7 and each["nvtx"].tolist() == [None] * 7
    summed = read_profile(export, each_launch=False, ranges=False)
    assert rows(summed, "run", "id", "process", "kernel", "launches", "grid", "device") == [
        (0, 0, "1234", SCALE, 3, "(64, 1, 1)", "0"), (0, 1, "1234", SCALE, 1, "(128, 2, 1)", "0"),
        (0, 2, "1234", COPY, 1, "(1, 1, 1)", "2"), (1, 0, "5678", SCALE, 1, "(64, 1, 1)", "1"),
        (1, 1, "5678", COPY, 1, None, "1")]
    # seconds per launch: (2000 + 7 + 3) ns / 3, then the single launches' own
    assert summed[T].tolist() == pytest.approx([2010e-9 / 3, 2500e-9, 600e-9, 3000e-9, 100e-9], rel=1e-15)
    assert summed["nvtx"].tolist() == [None] * 5
    # by kernel: 5 launches of SCALE in 2000 + 2500 + 3000 + 7 + 3 = 7510 ns, 2 of COPY in 600 + 100 ns
    t = kernel_table(export).set_index("kernel")
    assert t.loc[SCALE, ["launches", "time_s"]].tolist() == [5, pytest.approx(7510e-9, rel=1e-15)]
    assert t.loc[COPY, ["launches", "time_s"]].tolist() == [2, pytest.approx(700e-9, rel=1e-15)]


def test_the_table_reads_ranges_where_it_groups_or_filters_by_them(tmp_path):
    """The kernel table reads no NVTX ranges, --by annotation and --nvtx do (KERNELS' launches with the ranges
    of test_nvtx_ranges_enclosing_each_launch_call_outermost_first, innermost last); --nvtx and --kernel on an
    export alone (both raised KeyError 'kernel' before: an empty frame indexed by an empty Series)."""
    export = make_export(tmp_path / "report.sqlite")
    by = kernel_table(export, by="annotation").set_index("kernel")
    # innermost range of each launch: step (2000 ns), inner (2500), exact (600), forever (3000); the last
    # launch's API call is not exported: no annotation known (100 ns)
    assert by["launches"].to_dict() == {"step": 1, "inner": 1, "exact": 1, "forever": 1, "(no annotation)": 1}
    assert by["time_s"].to_dict() == pytest.approx({"step": 2000e-9, "inner": 2500e-9, "exact": 600e-9,
                                                    "forever": 3000e-9, "(no annotation)": 100e-9}, rel=1e-15)
    inside = kernel_table(export, nvtx="epoch").set_index("kernel")  # a process range of 1234: its 3 launches
    assert inside["launches"].to_dict() == {SCALE: 2, COPY: 1}
    assert inside["time_s"].to_dict() == pytest.approx({SCALE: 4500e-9, COPY: 600e-9}, rel=1e-15)
    # --kernel on an export alone (no ncu launches to filter; it raised KeyError 'kernel' before)
    scale = kernel_table(export, kernel_regex="scale")
    assert scale["kernel"].tolist() == [SCALE] and scale["launches"].tolist() == [3]
    assert scale["time_s"].tolist() == pytest.approx([(2000 + 2500 + 3000) * 1e-9], rel=1e-15)


def test_launches_are_summed_by_their_ranges_and_the_table_reads_none_it_does_not_use(tmp_path, monkeypatch):
    """Four launches of one kernel, process, grid, block and GPU: in "a" and "b" on thread T1A, and in "s" on
    T1A and on T1B (two threads' ranges of one name: one row). Summed: a 10 ns, b 20 ns, s 2 launches 70 ns."""
    kernels = [(start, start + d, 0, corr, P1, 1, 2, (64, 1, 1), (256, 1, 1))
               for start, d, corr in [(200, 10, 1), (2200, 20, 2), (4300, 30, 3), (4400, 40, 4)]]
    runtime = [(100, 150, T1A, 1), (2100, 2150, T1A, 2), (4100, 4150, T1A, 3), (4200, 4250, T1B, 4)]
    nvtx = [(0, 1000, 59, "a", None, T1A), (2000, 3000, 59, "b", None, T1A), (4000, 5000, 59, "s", None, T1A),
            (4000, 5000, 59, "s", None, T1B)]
    export = make_export(tmp_path / "report.sqlite", kernels=kernels, runtime=runtime, nvtx=nvtx)
    summed = read_profile(export, each_launch=False)
    assert rows(summed, "nvtx", "launches") == [(("a",), 1), (("b",), 1), (("s",), 2)]
    assert summed[T].tolist() == pytest.approx([10e-9, 20e-9, 35e-9], rel=1e-15)
    by = kernel_table(export, by="annotation").set_index("kernel")
    assert by["launches"].to_dict() == {"a": 1, "b": 1, "s": 2}
    assert by["time_s"].to_dict() == pytest.approx({"a": 10e-9, "b": 20e-9, "s": 70e-9}, rel=1e-15)

    def unused(*args):
        raise AssertionError("NVTX ranges read for a table that does not use them")

    monkeypatch.setattr(nsys_sqlite, "_nvtx", unused)
    assert kernel_table(export)["launches"].tolist() == [4]
    assert kernel_table(export, per_launch=True)["launches"].tolist() == [1, 1, 1, 1]


def test_seconds_are_the_nanoseconds_correctly_rounded(tmp_path):
    """A duration of d ns is d/10^9 s rounded to the nearest double (d x 1e-9 is not: 1e-9 has no exact binary
    form); checked with exact fractions, per launch and for a kernel's total."""
    durations = [7, 3, 123456789, 1]
    kernels = [(1000 * i, 1000 * i + d, 0, i + 1, P1, 1, 2, (1, 1, 1), (32, 1, 1)) for i, d in enumerate(durations)]
    export = make_export(tmp_path / "report.sqlite", kernels=kernels, runtime=[], nvtx=[])

    def nearest(x, exact):  # no double lies between x and the exact value
        return abs(Fraction(x) - exact) <= Fraction(math.ulp(x)) / 2

    seconds = read_profile(export, ranges=False)[T].tolist()
    assert all(nearest(x, Fraction(d, 10**9)) for x, d in zip(seconds, durations))
    per_launch = read_profile(export, each_launch=False, ranges=False)[T].iloc[0]  # summed: total / (10^9 x 4)
    assert nearest(per_launch, Fraction(sum(durations), 4 * 10**9))
    total = kernel_table(export)["time_s"].iloc[0]
    assert abs(Fraction(total) - Fraction(sum(durations), 10**9)) <= Fraction(math.ulp(total))


def fake_nsys(tmp_path: Path, monkeypatch, script: str) -> Path:
    """An executable `nsys` shell script first on PATH."""
    fake = tmp_path / "bin" / "nsys"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\n{script}")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    return fake


def test_an_nsys_rep_report_is_exported_by_nsys_on_path(tmp_path, monkeypatch):
    export = make_export(tmp_path / "fixture.sqlite")
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"\0\x01report bytes nsys reads\0")
    # the arguments this reader must pass, else the fake fails as nsys would
    fake = fake_nsys(tmp_path, monkeypatch, f'[ "$1 $2 $3 $4" = "export --type sqlite --output" ] && '
                     f'[ "$6" = "{report}" ] || {{ echo "unexpected arguments: $*" >&2; exit 2; }}\n'
                     f'cp "{export}" "$5"\n')
    df = read_profile(report)
    assert df.attrs["format"] == ".nsys-rep (through nsys export)" and df.attrs["yields"] == "times"
    assert rows(df, "run", "id", "kernel", "nvtx") == rows(read_profile(export), "run", "id", "kernel", "nvtx")

    fake.write_text('#!/bin/sh\necho "starting export"\necho "ERROR: not a valid report" >&2\nexit 1\n')
    with pytest.raises(CeilingsError) as err:
        read_profile(report)
    assert str(err.value) == (f"{report}: `nsys export` failed (ERROR: not a valid report); run `nsys export --type "
                              f"sqlite --output {report}.sqlite {report}` to see why")


def test_a_gzipped_nsys_rep_reaches_nsys_decompressed(tmp_path, monkeypatch):
    export = make_export(tmp_path / "fixture.sqlite")
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(gzip.compress(b"\0\x01report bytes nsys reads\0"))
    # the fake exports only a report whose first bytes are the report's own, not gzip's (1f 8b)
    fake_nsys(tmp_path, monkeypatch, f'[ "$(head -c 2 "$6" | od -An -tx1 | tr -d " ")" = "0001" ] '
              f'|| {{ echo "not a report: gzip" >&2; exit 2; }}\ncp "{export}" "$5"\n')
    assert read_profile(report).attrs["format"] == ".nsys-rep (through nsys export)"


def test_an_nsys_that_cannot_run_or_hangs_is_a_one_line_error(tmp_path, monkeypatch):
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"\0report\0")
    sleep = shutil.which("sleep")
    fake = tmp_path / "bin" / "nsys"
    fake.parent.mkdir()
    fake.write_text("#!/no/such/shell\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    with pytest.raises(CeilingsError, match=f"^{report}: cannot run {fake} \\("):
        read_profile(report)
    fake.write_text(f"#!/bin/sh\nexec {sleep} 5\n")
    monkeypatch.setattr(nsys_sqlite, "EXPORT_TIMEOUT_S", 0.2)
    with pytest.raises(CeilingsError, match=f"^{report}: `nsys export` did not finish in 0.2 s; run `nsys export"):
        read_profile(report)


def test_an_nsys_rep_report_without_nsys_is_a_one_line_error_with_the_command(tmp_path, monkeypatch):
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"\0\x01report bytes\0")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(CeilingsError) as err:
        read_profile(report)
    assert str(err.value) == (f"{report}: an .nsys-rep report; nsys is not on PATH to export it: run `nsys export "
                              f"--type sqlite --output {report}.sqlite {report}` where nsys is installed and pass "
                              f"{report}.sqlite")


def test_a_text_file_named_nsys_rep_is_not_taken_for_a_report(tmp_path, monkeypatch):
    text = tmp_path / "notes.nsys-rep"
    text.write_text("some notes, not a report\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(CeilingsError, match="not Nsight Compute or Nsight Systems output"):
        read_profile(text)


def test_an_sqlite_file_that_is_no_nsys_export(tmp_path):
    other = tmp_path / "other.sqlite"
    with closing(sqlite3.connect(other)) as con:
        con.execute("CREATE TABLE notes (id INTEGER)")
        con.commit()
    with pytest.raises(CeilingsError) as err:
        read_profile(other)
    assert str(err.value) == (f"{other}: not an nsys export: no CUPTI_ACTIVITY_KIND_KERNEL table; was the run "
                              f"traced with --trace=cuda?")


@pytest.mark.parametrize("change, message", [
    ("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN gridZ",
     "an nsys export without the column gridZ in CUPTI_ACTIVITY_KIND_KERNEL"),
    ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 42 WHERE start = 5000",
     "a broken nsys export (kernel name id 42 not in StringIds)"),
    ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 4000 WHERE start = 5000",
     "a broken nsys export (a kernel from 5000 to 4000 ns)"),
    ("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL", "profiler output without any kernel results"),
    # values no nsys writes in integer columns: text, a number past int64
    *[(f"UPDATE {table} SET {column} = {value} WHERE rowid = 2", f"a broken nsys export (a value that is no integer, "
       f"such as text, in an integer column of {table})") for table, column, value in [
        ("CUPTI_ACTIVITY_KIND_KERNEL", "start", "'abc'"), ("CUPTI_ACTIVITY_KIND_KERNEL", "end", "1e30"),
        ("CUPTI_ACTIVITY_KIND_KERNEL", "deviceId", "'x'"), ("CUPTI_ACTIVITY_KIND_RUNTIME", "start", "'x'"),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid", "'x'"), ("NVTX_EVENTS", "start", "'abc'"),
        ("NVTX_EVENTS", "globalTid", "'tid'")]],
])
def test_broken_exports_are_one_line_errors_naming_the_file(tmp_path, change, message):
    export = make_export(tmp_path / "report.sqlite")
    with closing(sqlite3.connect(export)) as con:
        con.execute(change)
        con.commit()
    with pytest.raises(CeilingsError) as err:
        read_profile(export)  # every table read: the ranges too
    assert str(err.value).startswith(f"{export}: {message}") and "\n" not in str(err.value)


def test_a_truncated_sqlite_file_is_a_one_line_error(tmp_path):
    export = make_export(tmp_path / "report.sqlite")
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(export.read_bytes()[:100] + os.urandom(50))
    with pytest.raises(CeilingsError) as err:
        read_profile(cut)
    assert str(err.value).startswith(f"{cut}: an SQLite file that cannot be read (")


def test_ranges_pushed_and_never_popped_keep_the_innermost_64_and_are_counted(tmp_path):
    """70 ranges pushed at 100..169 ns on thread T1A and never popped (end NULL), then the launch of kernel 10
    at 900-950 (RUNTIME): it is inside all 70, train (0-10000) and the process range epoch (500-9000). By
    start, epoch is the innermost: the innermost 64 are leaked7..leaked69 and epoch."""
    leaked = [(100 + i, None, 59, f"leaked{i}", None, T1A) for i in range(70)]
    kernels = [KERNELS[0]]
    df = read_profile(make_export(tmp_path / "report.sqlite", kernels=kernels, nvtx=NVTX[:1] + NVTX[4:5] + leaked))
    assert df["nvtx"].tolist() == [(*(f"leaked{i}" for i in range(7, 70)), "epoch")]
    assert df.attrs["notes"] == ["1 launch(es) inside more than 64 NVTX ranges at once (70 range(s) never closed: "
                                 "pushed and not popped): only the innermost 64 of each are kept; pop every range "
                                 "pushed"]
