"""`python -m ceilings.measure`: the no-GPU paths, --list, --simulate end to end, errors and Ctrl-C."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ceilings import measure
from ceilings.roofs import load_record, load_roofs
from tests.conftest import NO_GPU_REASON
from tests.test_harness import copy_benchmark

ROOT = Path(__file__).resolve().parents[1]


LAUNCHER_PREFIXES = ("SLURM_", "OMPI_", "PMIX_")
LAUNCHER_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURMD_NODENAME")
# `mpirun -np 2` on one node, as OpenMPI 4.1 sets it for rank 1
MPIRUN_RANK_1 = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
                 "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}


def clean_env(**extra):
    """This environment without any launcher's variables (the tests may run inside a Slurm job), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(LAUNCHER_PREFIXES) and k not in LAUNCHER_NAMES and k != "NUMBA_ENABLE_CUDASIM"}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def run(*args, env_extra=None, cwd=None):
    env = clean_env(**(env_extra or {}))
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


def test_an_existing_sweep_figure_is_refused_before_measuring(tmp_path, monkeypatch, capsys):
    """x-bandwidth-sweep.png is an output of --out x.json: without --force the run stops before its first
    benchmark (not after minutes of measuring), the picture kept and no roofs file written."""
    from ceilings import harness

    def never(*args, **kwargs):
        raise AssertionError("measured although an output was refused")

    monkeypatch.setattr(harness, "measure_plan", never)
    monkeypatch.setattr("kernels.registry.select", lambda pattern, simulate: [copy_benchmark()])
    monkeypatch.setattr(measure, "enable_simulator", lambda: None)
    figure = tmp_path / "x-bandwidth-sweep.png"
    figure.write_bytes(b"keep me")
    assert measure.main(["--simulate", "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert f"{figure} exists; pass --force" in err and len(err.strip().splitlines()) == 1
    assert figure.read_bytes() == b"keep me" and not (tmp_path / "x.json").exists()


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


def test_sigterm_half_way_leaves_a_valid_file_with_what_had_finished(tmp_path):
    """`timeout` at a step's limit sends SIGTERM: the roofs file saved after each benchmark stays, and the run
    ends by saving what it had, complete: false, stopped by SIGTERM."""
    import signal
    import time

    listed = run("--list", "--simulate").stdout
    planned = sum(1 for line in listed.splitlines() if line.startswith("| ") and "numba" in line)
    target = tmp_path / "roofs.json"
    proc = subprocess.Popen([sys.executable, "-m", "ceilings.measure", "--simulate", "--quick", "--no-plots",
                             "--out", str(target)], env=clean_env(), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        seen = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if target.exists():
                seen = load_roofs(target)  # never half a file: every save is one rename
                if len(seen["ceilings"]) >= 2:
                    break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be stopped half-way"
        assert seen["complete"] is False and seen["meta"]["finished"] is None
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "interrupted (SIGTERM)" in err
    doc = load_roofs(target)
    names = [c["name"] for c in doc["ceilings"]]
    assert doc["complete"] is False and doc["meta"]["stopped"] == "SIGTERM" and doc["meta"]["finished"]
    assert {c["name"] for c in seen["ceilings"]} <= set(names) and len(names) < planned
    assert load_record(target).complete is False


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


@pytest.mark.parametrize("args, env, message", [
    (["--out", "roofs.json"], MPIRUN_RANK_1, "--out roofs.json in one of 2 tasks (openmpi): every task would write it"),
    (["--out", "roofs-%h.json"], MPIRUN_RANK_1, "several tasks would write the same file"),
    (["--out", "-"], MPIRUN_RANK_1, "the tasks' standard outputs would mix"),
    (["--device", "all"], MPIRUN_RANK_1, "--device all in one of 2 tasks (openmpi), 2 of them on this node"),
    (["--device", "all", "--out", "roofs-%h.json"], {}, "--device all would write every GPU to the same file"),
    (["--concurrent"], {}, "--concurrent measures the GPUs of --device all at once; add --device all"),
    (["--out", "roofs-%z.json"], {}, "%z is not a template letter"),
])
def test_outputs_several_tasks_or_gpus_would_share_are_refused_before_anything_runs(tmp_path, args, env, message):
    out = run(*args, env_extra=env, cwd=tmp_path)  # no GPU needed to say so
    assert out.returncode == 2 and out.stdout == "" and list(tmp_path.iterdir()) == []
    assert out.stderr.count("\n") == 1 and message in out.stderr


@pytest.mark.sim
def test_a_task_of_mpirun_records_its_rank_and_names_its_file(tmp_path):
    env = {**MPIRUN_RANK_1, "SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "gpu017"}
    out = run("--simulate", "--quick", "--only", "dram.copy", "--out", "roofs-%h-r%r-l%l.json", env_extra=env,
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    rec = load_record(tmp_path / "roofs-gpu017-r1-l1.json")
    launch = rec.launch
    assert (launch.launcher, launch.rank, launch.local_rank, launch.world_size, launch.local_size) == \
        ("openmpi", 1, 1, 2, 2)
    assert (launch.job_id, launch.node, launch.gpu_index) == ("4242", "gpu017", None)  # the simulator has no GPU
    assert (launch.mode, launch.gpus_at_once) == ("concurrent", 2)  # both tasks of the node ran at once
    assert (rec.schema_version, rec.schema_minor, rec.simulated) == (1, 4, True)  # written at the current minor (1.4)


@pytest.mark.sim
def test_the_default_name_of_one_of_several_tasks_holds_host_and_rank(tmp_path):
    out = run("--simulate", "--quick", "--only", "dram.copy", env_extra={**MPIRUN_RANK_1, "SLURMD_NODENAME": "n7"},
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    [written] = [p.name for p in tmp_path.iterdir()]
    assert written.startswith("roofs-simulator-n7-r1-") and written.endswith(".json")


@pytest.mark.sim
def test_a_letter_without_a_value_here_is_refused_before_measuring(tmp_path):
    out = run("--simulate", "--quick", "--only", "dram.copy", "--out", "roofs-%u.json", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []
    assert "%u (UUID) is not known in this run; use another letter (%h %d)" in out.stderr


@pytest.mark.sim
def test_concurrent_workers_are_spawned_processes_that_each_write_their_file(tmp_path):
    """The CLI refuses --concurrent with --simulate (the simulator is one fake device), but the processes that
    --concurrent spawns run the same on it: a real spawned worker, its file, its exit code."""
    args = measure.build_parser().parse_args(["--simulate", "--quick", "--only", "dram.copy", "--no-plots",
                                              "--out", str(tmp_path / "roofs.json")])
    task = measure.detect({})
    assert measure.measure_concurrently([0], args, [], task) == 0
    launch = load_record(tmp_path / "roofs-d0.json").launch  # -d<index>: one file per GPU
    assert (launch.mode, launch.gpus_at_once) == ("concurrent", 1)


def test_a_hung_concurrent_worker_is_stopped_and_named(tmp_path, capsys):
    """A worker still running at --worker-timeout is stopped and fails the run (1, not 2: no bad input)
    with a line naming its GPU; a spawned worker takes longer than 0.05 s just to start."""
    args = measure.build_parser().parse_args(["--simulate", "--quick", "--only", "dram.copy", "--no-plots",
                                              "--worker-timeout", "0.05", "--out", str(tmp_path / "roofs.json")])
    assert measure.measure_concurrently([0], args, [], measure.detect({})) == 1
    err = capsys.readouterr().err
    assert "GPU 0: its process had not finished after 0.05 s (--worker-timeout)" in err


def test_after_ctrl_c_a_hung_worker_is_waited_for_the_grace_only(monkeypatch, capsys):
    """Ctrl-C while waiting: the workers get WORKER_GRACE_S to save, then a still running one (stuck in a
    CUDA call, its handler never runs) is stopped and named, never waited for without a bound."""
    import multiprocessing

    class Stuck:  # a worker that never ends by itself; the first wait on it is cut by Ctrl-C
        def __init__(self, target=None, args=(), name=""):
            self.alive, self.exitcode, self.waits = True, None, []

        def start(self):
            pass

        def join(self, timeout=None):
            self.waits.append((timeout, self.alive))
            if len(self.waits) == 1:
                raise KeyboardInterrupt

        def is_alive(self):
            return self.alive

        def terminate(self):
            pass

        def kill(self):
            self.alive, self.exitcode = False, -9

    made = []
    monkeypatch.setattr(multiprocessing, "get_context",
                        lambda method: type("Context", (), {"Process": lambda self, **kw: made.append(Stuck(**kw))
                                                            or made[-1]})())
    monkeypatch.setattr(measure, "WORKER_GRACE_S", 0.05)
    args = measure.build_parser().parse_args(["--simulate", "--quick", "--no-plots", "--worker-timeout", "3600"])
    assert measure.measure_concurrently([0], args, [], measure.detect({})) == 1
    (worker,) = made
    # every wait on the live worker after Ctrl-C is bounded by the grace; only the killed one is waited for
    assert all(t is not None and t <= 0.05 for t, alive in worker.waits[1:] if alive) and not worker.alive
    assert "GPU 0: its process had not finished after 0.05 s after the interrupt" in capsys.readouterr().err


@pytest.mark.gpu
def test_concurrent_all_devices_writes_one_file_per_gpu_saying_so(tmp_path):
    import cupy

    count = cupy.cuda.runtime.getDeviceCount()
    out = run("--device", "all", "--concurrent", "--quick", "--only", "dram.copy", "--no-plots",
              "--out", "roofs-%g-%u.json", cwd=tmp_path)
    assert out.returncode in (0, measure.EXIT_SOME_INVALID), out.stderr[-2000:]
    records = [load_record(p) for p in sorted(tmp_path.glob("roofs-*.json"))]
    assert len(records) == count
    assert {(r.launch.mode, r.launch.gpus_at_once) for r in records} == {("concurrent", count)}
    assert len({r.device.uuid for r in records}) == count


def test_the_run_exit_code_is_its_most_severe_gpu():
    """GPU 0 failed (2, no file), GPU 1 ran with an invalid ceiling (3): the run failed, whatever 3 > 2."""
    assert measure.worst([2, 3]) == 2
    assert measure.worst([3, 0]) == 3 and measure.worst([0, 0]) == 0 and measure.worst([]) == 0
    assert measure.worst([-9, 3]) == 1  # killed by a signal: no file, a failure (not bad input)
    assert measure.worst([3, 130, 1]) == 130 and measure.worst([1, 2]) == 1
