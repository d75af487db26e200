"""`python -m ceilings.measure`: the no-GPU paths, --list, --simulate end to end, errors and Ctrl-C."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ceilings import measure
from ceilings.roofs import load_roofs
from tests.conftest import NO_GPU_REASON
from tests.test_harness import copy_benchmark

ROOT = Path(__file__).resolve().parents[1]


def run(*args, env_extra=None, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    return subprocess.run([sys.executable, "-m", "ceilings.measure", *args], capture_output=True, text=True,
                          env=env, cwd=cwd or ROOT, timeout=600)


def test_help_explains_the_no_gpu_path():
    out = run("--help")
    assert out.returncode == 0
    assert "--simulate" in out.stdout and "roofs file" in out.stdout


@pytest.mark.skipif(NO_GPU_REASON is None, reason="this machine has a GPU")
def test_no_gpu_is_one_line_exit_2_pointing_to_simulate(tmp_path):
    out = run(cwd=tmp_path)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "no usable NVIDIA GPU" in lines[0] and "--simulate" in lines[0]
    assert "Traceback" not in out.stderr and list(tmp_path.iterdir()) == []


def test_missing_cupy_names_the_extra(tmp_path):
    fake = tmp_path / "fake" / "cupy"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named cupy')\n")
    out = run(env_extra={"PYTHONPATH": f"{fake.parent}{os.pathsep}{ROOT}"}, cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "pip install 'ceilings[cuda13]'" in out.stderr


def test_list_needs_no_gpu_and_shows_both_backends():
    out = run("--list")
    assert out.returncode == 0, out.stderr
    rows = [line.split("|")[1:3] for line in out.stdout.splitlines()[2:]]
    pairs = {(name.strip(), backend.strip()) for name, backend in rows}
    for pair in [("dram.copy", "cuda-c"), ("dram.copy", "numba"), ("fp32.fma", "cuda-c"), ("fp32.fma", "numba")]:
        assert pair in pairs


def test_bad_only_and_bad_device_are_one_line_errors():
    out = run("--simulate", "--only", "no-such-thing")
    assert out.returncode == 2 and "matches no benchmark" in out.stderr and out.stderr.count("\n") == 1


def test_fma_chains_with_simulate_is_a_one_line_error():
    out = run("--simulate", "--only", "fp32.fma", "--fma-chains", "4")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--fma-chains with --simulate" in out.stderr


def test_fma_chains_out_of_range_is_a_one_line_error():
    out = run("--only", "fp32.fma", "--fma-chains", "0")  # said before looking for a GPU
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "--fma-chains: 0 chains per thread: choose 2 to 8" in out.stderr


@pytest.mark.sim
def test_simulate_quick_writes_a_valid_simulated_roofs_file(tmp_path):
    out = run("--simulate", "--quick", "--only", "dram.copy,fp32.fma", "--out", str(tmp_path / "x.json"))
    assert out.returncode == 0, out.stderr[-2000:]
    doc = load_roofs(tmp_path / "x.json")
    assert doc["simulated"] is True and doc["complete"] is True
    kinds = {c["kind"] for c in doc["ceilings"] if c["valid"]}
    assert kinds == {"bandwidth", "compute"}
    assert all(c["backend"] == "numba" for c in doc["ceilings"])
    assert "meaningless" in out.stdout


def test_existing_output_is_never_overwritten_without_force(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("keep me")
    out = run("--simulate", "--quick", "--out", str(target))
    assert out.returncode == 2 and "--force" in out.stderr
    assert target.read_text() == "keep me"


def test_ctrl_c_keeps_what_was_measured(tmp_path, monkeypatch):
    from ceilings import harness

    real = harness.measure_plan
    calls = []

    def interrupt_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(harness, "measure_plan", interrupt_second)
    monkeypatch.setattr("kernels.registry.select", lambda pattern, simulate: [copy_benchmark(), copy_benchmark()])
    monkeypatch.setattr(measure, "enable_simulator", lambda: None)
    target = tmp_path / "partial.json"
    assert measure.main(["--simulate", "--out", str(target)]) == 130
    doc = json.loads(target.read_text())
    assert doc["complete"] is False and len(doc["ceilings"]) == 1 and doc["simulated"] is True


def test_list_with_simulate_shows_only_what_the_simulator_runs():
    out = run("--list", "--simulate")
    assert out.returncode == 0, out.stderr
    backends = {line.split("|")[2].strip() for line in out.stdout.splitlines()[2:]}
    assert backends == {"numba"}


def test_stdout_with_device_all_is_refused_before_anything_runs(tmp_path):
    # several JSON documents on one stdout would not be JSON; no GPU is needed to say so
    out = run("--out", "-", "--device", "all", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "" and list(tmp_path.iterdir()) == []
    assert out.stderr.count("\n") == 1 and "--out - with --device all" in out.stderr


def test_device_with_simulate_is_refused():
    out = run("--simulate", "--device", "1")
    assert out.returncode == 2 and "--simulate" in out.stderr and out.stderr.count("\n") == 1


def test_git_sha_is_only_this_checkouts(monkeypatch, tmp_path):
    """Installed into a venv inside another git repository, git would answer with that repository's commit."""
    from ceilings import measure as m

    root = Path(m.__file__).resolve().parents[1]
    for toplevel, sha in ((root, "abc123"), (tmp_path, None)):  # this checkout; the user's own repository
        answer = subprocess.CompletedProcess([], 0, f"{toplevel}\nabc123\n", "")
        monkeypatch.setattr(subprocess, "run", lambda *args, _answer=answer, **kwargs: _answer)
        assert m._git_sha() == sha
