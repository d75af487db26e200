"""analysis.profile: the ncu command line it builds, and its error paths with fake ncu scripts (no GPU)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from analysis import profile
from common.errors import CeilingsError

RAW = Path(__file__).parent / "data" / "roofline" / "raw_page.csv"
SEED = ["dram__sectors_read.sum", "dram__sectors_write.sum", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"]


def metrics_of(cmd: list[str]) -> list[str]:
    return cmd[cmd.index("--metrics") + 1].split(",")


def test_command_line():
    app = ["./app", "--size", "4096", "a name with spaces"]
    cmd = profile.ncu_command(app, log_file="out.csv", kernel_regex="gemm|softmax", launch_skip=2, launch_count=5,
                              ncu="/opt/ncu")
    assert cmd[0] == "/opt/ncu" and cmd[-4:] == app  # the application's arguments untouched, last
    for pair in (["--target-processes", "all"], ["--clock-control", "none"], ["--page", "raw"],
                 ["--log-file", "out.csv"], ["-k", "regex:gemm|softmax"], ["--launch-skip", "2"],
                 ["--launch-count", "5"]):
        i = cmd.index(pair[0])
        assert cmd[i:i + 2] == pair
    assert "--csv" in cmd and "--set" not in cmd
    metrics = metrics_of(cmd)
    assert set(SEED) <= set(metrics)
    for m in ("smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
              "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", "sm__inst_executed_pipe_tensor.sum",
              "gpu__time_duration.sum", "sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second"):
        assert m in metrics
    assert "lts__t_bytes.sum" not in metrics


def test_metric_sets():
    hier = profile.ncu_command(["./app"], log_file="o.csv", metric_set="hierarchical")
    assert {"lts__t_bytes.sum", "l1tex__t_bytes.sum"} <= set(metrics_of(hier))
    full = profile.ncu_command(["./app"], log_file="o.csv", metric_set="full")
    assert full[full.index("--set") + 1] == "full" and "l1tex__t_bytes.sum" in metrics_of(full)
    plain = profile.ncu_command(["./app"], log_file="o.csv")
    assert "-k" not in plain and "--launch-skip" not in plain
    with pytest.raises(CeilingsError):
        profile.ncu_command([], log_file="o.csv")


def fake_ncu(folder: Path, body: str) -> Path:
    path = folder / "ncu"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def run_main(args, monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    rc = profile.main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_missing_ncu(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no ncu
    rc, _, err = run_main(["--", "./app"], monkeypatch, tmp_path, capsys)
    assert rc == 2 and err.count("\n") == 1
    assert "ncu" in err and "CUDA toolkit" in err and "--ncu PATH" in err


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_invalid_kernel_regex_is_one_line_before_ncu(dry_run, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no ncu: were it looked for first, that would be the error
    rc, out, err = run_main([*dry_run, "-k", "(", "--", "./app"], monkeypatch, tmp_path, capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("python -m analysis.profile: error: -k '(': not a valid regular expression")


def test_counters_not_permitted(tmp_path, monkeypatch, capsys):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_ncu(bin_dir, "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                      "Performance Counters on the target device 0.'\nexit 1\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    rc, _, err = run_main(["--out", "p", "--", "./app"], monkeypatch, tmp_path, capsys)
    last = err.strip().splitlines()[-1]  # ncu's own output is echoed above the error line
    assert rc == 2 and last.startswith("python -m analysis.profile: error:")
    assert "NVreg_RestrictProfilingToAdminUsers=0" in last and "https://developer.nvidia.com/ERR_NVGPUCTRPERM" in last
    assert not (tmp_path / "p.csv").exists()


def test_application_fails(tmp_path, monkeypatch, capsys):
    ncu = fake_ncu(tmp_path, "echo '==ERROR== The application returned an error code (3).'\nexit 3\n")
    rc, _, err = run_main(["--ncu", str(ncu), "--", "./app"], monkeypatch, tmp_path, capsys)
    last = err.strip().splitlines()[-1]
    assert rc == 2 and "exit status 3" in last and "error code (3)" in last


def test_success_writes_csv_and_prints_kernel_table(tmp_path, monkeypatch, capsys):
    pytest.importorskip("analysis.ncu")
    # copies the raw-page fixture to the --log-file argument, as ncu writes its CSV there
    ncu = fake_ncu(tmp_path, 'while [ $# -gt 0 ]; do [ "$1" = --log-file ] && log="$2"; shift; done\n'
                             f'cp "{RAW}" "$log"\n')
    rc, out, err = run_main(["--ncu", str(ncu), "--out", "run1", "-k", "saxpy", "--", "./app", "1"],
                            monkeypatch, tmp_path, capsys)
    assert rc == 0 and (tmp_path / "run1.csv").read_text() == RAW.read_text()
    assert "--clock-control none" in err and "regex:saxpy" in err  # the command, shell-quoted, on stderr
    assert "saxpy" in out  # the kernel table of the result
    assert profile.main(["--ncu", str(ncu), "--out", "run1", "--", "./app"]) == 2  # exists: needs --force


def test_the_tensor_flop_counters_and_the_hfma2_mma_count_are_asked_for_only_where_offered():
    offered = {profile.base_name(m) for m in profile.ROOFLINE_METRICS} | {
        "sm__ops_path_tensor_src_fp16", "sm__ops_path_tensor_src_fp16_dst_fp32",
        "sm__inst_executed_pipe_tensor_op_hmma_type_hfma2"}
    cmd = profile.ncu_command(["./app"], log_file="x.csv", available=offered)
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    # the fp16 total, not also its destination part; ncu's own count of HFMA2.MMA moves
    assert "sm__ops_path_tensor_src_fp16.sum" in metrics and "sm__ops_path_tensor_src_fp16_dst_fp32.sum" not in metrics
    assert "sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum" in metrics
    unknown = profile.ncu_command(["./app"], log_file="x.csv", available=None)  # the listing failed: none
    assert not any("ops_path" in m or "hfma2" in m for m in unknown[unknown.index("--metrics") + 1].split(","))
