"""Acceptance review regressions: every CLI turns bad output paths, Ctrl-C and unknown commands into one line
and exit 2 (130 for Ctrl-C), checks its outputs before long work, and never loses a file already written."""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

import pytest

from analysis import ncu, profile, whatif
from analysis.roofline.__main__ import main as roofline_main
from ceilings import __main__ as console
from ceilings import compare, measure
from common import atomic
from common.errors import EXIT_INTERRUPTED, EXIT_USER_ERROR, CeilingsError, cli_entry
from kernels import inspect as insp

ROOT = Path(__file__).resolve().parents[1]
ROOFS = ROOT / "examples" / "published" / "roofs.json"
PROFILE = ROOT / "examples" / "published" / "profile.csv"
# a folder where nobody, root included, can create a file (root ignores permission bits on ordinary folders)
UNWRITABLE = Path("/proc")
needs_proc = pytest.mark.skipif(not (UNWRITABLE / "self").is_dir(), reason="needs Linux /proc")


def one_line_error(err: str, *needles: str) -> str:
    """The last stderr line is the error, names every needle, and no traceback came before it."""
    assert "Traceback" not in err, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert "error:" in lines[-1], err
    assert all(n in lines[-1] for n in needles), err
    return lines[-1]


# --- outputs: a folder in the way, an unwritable folder, a bad picture suffix ---------------------------

@pytest.mark.parametrize("cli, args", [
    (roofline_main, ["--roofs", str(ROOFS), str(PROFILE), "--csv"]),
    (roofline_main, ["--roofs", str(ROOFS), str(PROFILE), "--report"]),
    (roofline_main, ["--roofs", str(ROOFS), str(PROFILE), "-o"]),  # a folder named *.png below
    (compare.main, [str(ROOFS), "--csv"]),
    (compare.main, [str(ROOFS), "-o"]),
    (ncu.main, [str(PROFILE), "--json"]),
    (whatif.main, [str(PROFILE), "--on", "a100-sxm4-80gb", "--csv"]),
])
def test_output_path_that_is_a_folder_is_one_line_exit_2(cli, args, tmp_path, capsys):
    folder = tmp_path / "out.png"
    (folder / "inside").mkdir(parents=True)
    assert cli([*args, str(folder)]) == EXIT_USER_ERROR
    one_line_error(capsys.readouterr().err, str(folder), "folder")
    assert (folder / "inside").is_dir()  # nothing lost


@needs_proc
@pytest.mark.parametrize("option", ["--csv", "--report", "-o"])
def test_unwritable_output_folder_is_one_line_exit_2(option, capsys):
    name = {"--csv": "k.csv", "--report": "r.md", "-o": "r.png"}[option]
    target = UNWRITABLE / name
    assert roofline_main(["--roofs", str(ROOFS), str(PROFILE), option, str(target)]) == EXIT_USER_ERROR
    one_line_error(capsys.readouterr().err, str(target), "not writable")


def test_compare_rejects_a_picture_suffix_it_cannot_write_before_writing_anything(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    assert compare.main([str(ROOFS), "-o", str(tmp_path / "chart.txt"), "--csv", str(csv)]) == EXIT_USER_ERROR
    one_line_error(capsys.readouterr().err, "chart.txt", ".png")
    assert list(tmp_path.iterdir()) == []


def test_compare_says_where_it_wrote_the_csv(tmp_path, capsys):
    csv, png = tmp_path / "t.csv", tmp_path / "c.png"
    assert compare.main([str(ROOFS), "-o", str(png), "--csv", str(csv)]) == 0
    err = capsys.readouterr().err
    assert f"wrote {csv}" in err and f"wrote {png}" in err


# --- atomic writes -----------------------------------------------------------------------------------------

def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("old\n")
    with pytest.raises(CeilingsError, match="No space left"):
        with atomic.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_interrupted_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "report.md"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise KeyboardInterrupt
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_new_files_get_the_umask_mode_and_existing_files_keep_theirs(tmp_path):
    old_umask = os.umask(0o022)
    try:
        fresh = atomic.write_text(tmp_path / "new.json", "{}\n")
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644  # 0666 & ~0022, not mkstemp's 0600
        kept = tmp_path / "kept.json"
        kept.write_text("{}\n")
        kept.chmod(0o640)
        atomic.write_text(kept, "[]\n")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text() == "[]\n"
    finally:
        os.umask(old_umask)


def test_a_symlinked_output_stays_a_link_and_its_file_is_replaced(tmp_path):
    real = tmp_path / "results" / "table.csv"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "latest.csv"
    link.symlink_to(real)
    atomic.write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"


def test_a_fifo_output_is_written_in_place_not_replaced(tmp_path):
    """A pipe or device (e.g. --json /dev/stdout) cannot be renamed over: replacing it would leave a plain
    file where the pipe was and the reader would get nothing."""
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    atomic.write_text(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert got == ["through the pipe\n"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_dash_writes_the_table_to_stdout(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ncu.main([str(ROOT / "tests/data/ncu/nsys_kern_sum.csv"), "--csv", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kernel,launches,time_s,") and "saxpy" in out
    assert not (tmp_path / "-").exists()


# --- checks before long work -------------------------------------------------------------------------------

@pytest.mark.parametrize("make_out", [
    lambda tmp: tmp / "no-such-folder" / "r.json",
    lambda tmp: tmp,  # a folder, even with --force
])
def test_measure_checks_out_before_measuring(make_out, tmp_path, monkeypatch, capsys):
    def must_not_run(*args, **kwargs):
        raise AssertionError("measured before checking --out")

    monkeypatch.setattr(measure, "run_device", must_not_run)
    monkeypatch.setattr(measure, "enable_simulator", lambda: None)
    out = make_out(tmp_path)
    assert measure.main(["--simulate", "--quick", "--only", "fp32.fma", "--force", "--out", str(out)]) == 2
    one_line_error(capsys.readouterr().err, str(out))


@needs_proc
def test_measure_checks_the_default_folder_before_measuring(monkeypatch, capsys):
    monkeypatch.setattr(measure, "run_device", lambda *a, **k: pytest.fail("measured before checking"))
    monkeypatch.setattr(measure, "enable_simulator", lambda: None)
    monkeypatch.chdir(UNWRITABLE)
    assert measure.main(["--simulate", "--quick", "--only", "fp32.fma"]) == 2
    one_line_error(capsys.readouterr().err, "not writable")


@pytest.mark.parametrize("args, needle", [
    (["--json", "{tmp}"], "folder"),
    (["--keep", "{tmp}/file"], "--keep"),
    (["--jobs", "0"], "--jobs 0"),
])
def test_inspect_checks_its_options_before_compiling(args, needle, tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setattr(insp, "inspect_benchmarks", lambda *a, **k: pytest.fail("compiled before checking"))
    argv = ["--only", "fp32.fma", *(a.format(tmp=tmp_path) for a in args)]
    assert insp.main(argv) == 2
    one_line_error(capsys.readouterr().err, needle)
    assert (tmp_path / "file").read_text() == "not a folder"


# --- every CLI names itself as it is run ------------------------------------------------------------------

@pytest.mark.parametrize("module, cli, args", [
    ("analysis.ncu", ncu.main, ["{tmp}/nope.csv"]),
    ("analysis.roofline", roofline_main, ["--roofs", "{tmp}/nope.json", str(PROFILE)]),
    ("analysis.whatif", whatif.main, [str(PROFILE), "--on", "{tmp}"]),
    ("analysis.profile", profile.main, ["-k", "(", "--", "./app"]),
    ("ceilings.measure", measure.main, ["--simulate", "--device", "1"]),
    ("ceilings.compare", compare.main, ["{tmp}/nope.json", "-o", "{tmp}/c.png"]),
    ("kernels.inspect", insp.main, ["--jobs", "0"]),
])
def test_error_prefix_is_the_module_as_run(module, cli, args, tmp_path, capsys):
    assert cli([a.format(tmp=tmp_path) for a in args]) == EXIT_USER_ERROR
    assert one_line_error(capsys.readouterr().err).startswith(f"python -m {module}: error: ")


# --- Ctrl-C and the console script -------------------------------------------------------------------------

def test_ctrl_c_in_any_cli_is_exit_130_without_traceback(capsys):
    @cli_entry("demo")
    def main(argv=None):
        raise KeyboardInterrupt

    assert main([]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "demo: interrupted\n"


def test_console_script_unknown_command_is_one_line_exit_2(capsys):
    assert console.main(["bogus"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert one_line_error(captured.err, "'bogus'", "roofline").startswith("ceilings: error:")


def test_console_script_help_lists_every_command(capsys):
    assert console.main([]) == 0
    out = capsys.readouterr().out
    for name in ("measure", "compare", "inspect", "ncu", "roofline", "profile", "whatif"):
        assert f"\n  {name} " in out


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


def test_without_force_a_file_that_appears_during_the_write_is_kept(tmp_path):
    target = tmp_path / "roofs.json"
    with pytest.raises(CeilingsError, match="exists \\(written while this ran\\); pass --force"):
        with atomic.atomic_path(target, force=False) as tmp:
            tmp.write_text("ours")
            target.write_text("theirs")  # another run, between the check and the rename
    assert target.read_text() == "theirs" and [p.name for p in tmp_path.iterdir()] == ["roofs.json"]
