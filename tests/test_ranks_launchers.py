"""Real multi-process runs through real launchers: a one-node Slurm cluster started here (slurmctld + slurmd
from Debian's slurm-wlm) and OpenMPI's mpirun. Each task runs `python -m ceilings.measure --simulate --quick`
with a templated --out; one file per task, with its rank. Skipped, with the reason, where a launcher is not
installed (CI installs only the Python packages) or cannot start here."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ceilings import fleet
from ceilings.roofs import load_record
from tests.test_measure_cli import ROOT, clean_env

TASKS = 3
MEASURE = [sys.executable, "-m", "ceilings.measure", "--simulate", "--quick"]
SLURM_START_S = 30  # slurmctld and slurmd register in a few seconds; past this, they will not
TASKS_TIMEOUT_S = 300

pytestmark = pytest.mark.sim


def _missing(*tools: str) -> str | None:
    absent = [t for t in tools if shutil.which(t) is None]
    return f"{', '.join(absent)} not installed (apt-get install slurm-wlm openmpi-bin)" if absent else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check_task_files(folder: Path, host: str, launcher: str) -> None:
    files = sorted(folder.glob("roofs-*.json"))
    assert [p.name for p in files] == [f"roofs-{host}-r{rank}.json" for rank in range(TASKS)]
    for rank, path in enumerate(files):
        launch = load_record(path).launch
        assert (launch.launcher, launch.rank, launch.world_size, launch.local_size) == (launcher, rank, TASKS, TASKS)
        assert (launch.mode, launch.gpus_at_once) == ("concurrent", TASKS)
    # the fleet of what the tasks wrote: simulated files, kept apart from any measurement and said so
    assert fleet.main([str(folder), "--json", str(folder / "fleet.json")]) in (0, 1)


@pytest.fixture
def slurm(tmp_path):
    """A one-node Slurm cluster in tmp_path; yields the environment that reaches it."""
    reason = _missing("slurmctld", "slurmd", "srun", "sinfo")
    if reason:
        pytest.skip(reason)
    if os.geteuid() != 0:
        pytest.skip("slurmd starts jobs as their user and must run as root")
    node = socket.gethostname().split(".")[0]
    state = tmp_path / "slurm"
    for sub in ("state", "spool"):
        (state / sub).mkdir(parents=True)
    conf = state / "slurm.conf"
    # no munge: auth/none and cred/none, so that nothing outside the test is needed or touched
    conf.write_text(f"""ClusterName=ceilingstest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation={state / 'state'}
SlurmdSpoolDir={state / 'spool'}
SlurmctldPidFile={state / 'slurmctld.pid'}
SlurmdPidFile={state / 'slurmd.pid'}
SlurmctldLogFile={state / 'slurmctld.log'}
SlurmdLogFile={state / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    env = clean_env(SLURM_CONF=str(conf))
    daemons = [subprocess.Popen([daemon, "-D", "-f", str(conf), *extra], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.STDOUT)
               for daemon, extra in (("slurmctld", []), ("slurmd", ["-N", node]))]
    try:
        deadline = time.monotonic() + SLURM_START_S
        while True:
            states = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout
            if states.strip() == "idle":
                break
            if time.monotonic() > deadline or any(d.poll() is not None for d in daemons):
                log = " ".join("".join(p.read_text()[-300:] for p in state.glob("*.log")).split())
                pytest.skip(f"a one-node Slurm does not start here (sinfo: {states.strip()!r}): {log}")
            time.sleep(0.5)
        yield env, node
    finally:
        for daemon in daemons:
            daemon.terminate()
        for daemon in daemons:
            try:
                daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()


def test_srun_tasks_write_one_file_each_with_their_rank(slurm, tmp_path):
    env, node = slurm
    out = tmp_path / "out"
    out.mkdir()
    # --overcommit: more tasks than this machine's CPUs is fine for the simulator
    done = subprocess.run(["srun", "--overcommit", "-n", str(TASKS), "--chdir", str(ROOT), *MEASURE,
                           "--out", str(out / "roofs-%h-r%r.json")], env=env, capture_output=True, text=True,
                          errors="replace", timeout=TASKS_TIMEOUT_S)  # srun cuts the tasks' output mid-character
    assert done.returncode == 0, done.stderr[-3000:]
    _check_task_files(out, node, "slurm")
    assert {load_record(p).launch.job_id for p in out.glob("roofs-*.json")} != {None}


def test_mpirun_tasks_write_one_file_each_with_their_rank(tmp_path):
    reason = _missing("mpirun")
    if reason:
        pytest.skip(reason)
    host = socket.gethostname()
    # root may start MPI jobs only when it says so (OpenMPI's own guard against mistakes)
    env = clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    done = subprocess.run(["mpirun", "--oversubscribe", "-np", str(TASKS), *MEASURE,
                           "--out", str(tmp_path / "roofs-%h-r%r.json")], env=env, cwd=ROOT, capture_output=True,
                          text=True, errors="replace", timeout=TASKS_TIMEOUT_S)
    if done.returncode != 0 and "ceilings.measure" not in done.stderr:  # mpirun itself could not start its tasks
        pytest.skip(f"mpirun cannot start tasks here: {' '.join(done.stderr.split())[:300]}")
    assert done.returncode == 0, done.stderr[-3000:]
    _check_task_files(tmp_path, host, "openmpi")
