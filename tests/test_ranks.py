"""Which task a process is, from the variables each launcher really sets, and the --out template letters."""

import pytest

from ceilings.measure import device_indices, how_measured
from ceilings.ranks import Task, check_unique, detect, expand, letters, node_gpu_index
from common.errors import CeilingsError

# The variables a real srun (Slurm 22.05) sets, with their values for task 5 of `srun -n 8 -N 2` (the second
# node's second task).
SRUN = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "5", "SLURM_LOCALID": "1",
        "SLURM_STEP_NUM_TASKS": "8", "SLURM_STEP_TASKS_PER_NODE": "4(x2)", "SLURM_NODEID": "1",
        "SLURMD_NODENAME": "gpu017", "SLURM_NTASKS": "8", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
# the batch script of `sbatch --ntasks=8`: SLURM_PROCID=0 but no step: one process, not one of 8 tasks
SBATCH = {"SLURM_JOB_ID": "4242", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "8",
          "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_NODEID": "0", "SLURMD_NODENAME": "gpu016"}
# `mpirun -np 4` inside that batch script: each rank carries the batch script's SLURM_* too
MPIRUN = {**SBATCH, "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
          "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
TORCHRUN = {"RANK": "9", "LOCAL_RANK": "1", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "1",
            "TORCHELASTIC_RUN_ID": "none"}


def test_srun_task():
    task = detect(SRUN)
    assert task == Task(launcher="slurm", rank=5, local_rank=1, world_size=8, local_size=4, job_id="4242",
                        node="gpu017", cuda_visible_devices="0,1,2,3")
    assert task.several


def test_the_batch_script_itself_is_no_task_of_several():
    task = detect(SBATCH)
    assert (task.launcher, task.rank, task.world_size, task.several) == (None, None, None, False)
    assert (task.job_id, task.node) == ("4242", "gpu016")


def test_mpirun_inside_a_slurm_job_is_openmpi():
    task = detect(MPIRUN)
    assert (task.launcher, task.rank, task.local_rank, task.world_size, task.local_size) == ("openmpi", 3, 3, 4, 4)
    assert task.job_id == "4242"  # still the Slurm job's


def test_torchrun():
    task = detect(TORCHRUN)
    assert (task.launcher, task.rank, task.local_rank, task.world_size, task.local_size) == ("torchrun", 9, 1, 16, 8)
    assert task.job_id is None and task.cuda_visible_devices is None


def test_no_launcher(monkeypatch):
    monkeypatch.setattr("platform.node", lambda: "workstation")
    assert detect({}) == Task(None, None, None, None, None, None, "workstation", None)


@pytest.mark.parametrize("spec, node, size", [("2(x3),1", "0", 2), ("2(x3),1", "2", 2), ("2(x3),1", "3", 1),
                                              ("8", "0", 8), ("2(x3),1", "4", None), ("weird", "0", None)])
def test_slurm_tasks_on_this_node(spec, node, size):
    env = {**SRUN, "SLURM_STEP_TASKS_PER_NODE": spec, "SLURM_NODEID": node}
    assert detect(env).local_size == size


def test_a_rank_that_is_no_number_is_one_line():
    with pytest.raises(CeilingsError, match="OMPI_COMM_WORLD_RANK='x' is not a task number"):
        detect({**MPIRUN, "OMPI_COMM_WORLD_RANK": "x"})


def test_gpu_index_is_the_place_in_pci_order(tmp_path):
    for bus in ("0000:b7:00.0", "0000:17:00.0", "0000:65:00.0", "0000:CA:00.0"):
        (tmp_path / bus).mkdir()
    assert node_gpu_index("0000:65:00.0", tmp_path) == 1
    assert node_gpu_index("0000:ca:00.0", tmp_path) == 3  # CUDA writes hex in lower case
    assert node_gpu_index("0000:99:00.0", tmp_path) is None
    assert node_gpu_index(None, tmp_path) is None
    assert node_gpu_index("0000:17:00.0", tmp_path / "no-driver") is None


def test_template_letters():
    assert letters("roofs-%h-%g-%d.json") == {"h", "g", "d"}
    assert letters("100%%-%u.json") == {"%", "u"}
    with pytest.raises(CeilingsError, match=r"%x is not a template letter"):
        letters("roofs-%x.json")
    with pytest.raises(CeilingsError, match="a lone % at the end"):
        letters("roofs-%")


def test_expand():
    values = {"h": "gpu017", "r": 5, "l": 1, "g": 3, "u": "GPU-8f3a", "d": "20261201-0930"}
    assert expand("roofs-%h-%g-%u-%r-%l-%d-100%%.json", values) == \
        "roofs-gpu017-3-GPU-8f3a-5-1-20261201-0930-100%.json"
    assert expand("roofs-%h.json", {**values, "h": "a/b c"}) == "roofs-a-b-c.json"  # never a folder or a space
    with pytest.raises(CeilingsError, match=r"%r \(rank\) is not known in this run; use another letter \(%h %l"):
        expand("roofs-%r.json", {**values, "r": None})


@pytest.mark.parametrize("template, tasks, gpus, ok", [
    ("roofs-%r.json", True, False, True),
    ("roofs-%u.json", True, True, True),
    ("roofs-%h-%l.json", True, False, True),
    ("roofs-%h-%g.json", True, True, True),
    ("roofs-%g.json", True, False, False),  # the same GPU index on every node
    ("roofs-%h-%d.json", True, False, False),
    ("roofs-%l.json", True, False, False),
    ("roofs-%h-%r.json", True, True, False),  # --device all: every GPU of the task in one file
    ("roofs-%d.json", False, False, True),
])
def test_every_task_and_gpu_gets_its_own_file(template, tasks, gpus, ok):
    if ok:
        check_unique(template, several_tasks=tasks, several_gpus=gpus)
    else:
        with pytest.raises(CeilingsError, match="would write"):
            check_unique(template, several_tasks=tasks, several_gpus=gpus)


def _task(**kw):
    base = dict(launcher="slurm", rank=5, local_rank=1, world_size=8, local_size=4, job_id="1", node="n",
                cuda_visible_devices=None)
    return Task(**{**base, **kw})


def test_each_task_measures_its_own_gpu():
    assert device_indices(None, 4, _task()) == [1]  # all four GPUs visible: the local rank's
    assert device_indices(None, 1, _task(cuda_visible_devices="2")) == [0]  # bound to one GPU
    assert device_indices(None, 4, _task(launcher=None)) == [0]
    assert device_indices("3", 4, _task()) == [3] and device_indices("all", 2, _task()) == [0, 1]
    with pytest.raises(CeilingsError, match="4 tasks on this node and one GPU, which every task sees"):
        device_indices(None, 1, _task())  # four tasks, one GPU, no binding
    with pytest.raises(CeilingsError, match="has local rank 5 but sees 4 GPUs"):
        device_indices(None, 4, _task(local_rank=5, local_size=8))
    with pytest.raises(CeilingsError, match="no local rank"):
        device_indices(None, 4, _task(local_rank=None))


def test_how_the_gpus_were_measured():
    alone = _task(launcher=None, local_size=None)
    assert how_measured(alone, 1, concurrent=False) == ("single", 1)
    assert how_measured(alone, 8, concurrent=False) == ("sequential", 1)
    assert how_measured(alone, 8, concurrent=True) == ("concurrent", 8)
    assert how_measured(_task(), 1, concurrent=False) == ("concurrent", 4)  # 4 tasks of this node at once
    assert how_measured(_task(local_size=1), 1, concurrent=False) == ("single", 1)
    assert how_measured(_task(local_size=None), 1, concurrent=False) == (None, None)  # not said: unknown
