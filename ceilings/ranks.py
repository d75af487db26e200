"""Which task of a launcher this process is (srun, mpirun, torchrun), and the letters of `--out` templates.

Each launcher names a task's rank in environment variables of its own. They are read in this order, the
innermost launcher first: mpirun and torchrun started inside a Slurm job also carry the job's SLURM_*
variables, and the batch script of a job has SLURM_PROCID=0 without being one of several tasks.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from common.errors import CeilingsError

# One folder per NVIDIA GPU of the machine, named by its PCI bus id ("0000:17:00.0"), all of them whatever
# CUDA_VISIBLE_DEVICES or a cgroup lets this process see; nvidia-smi numbers GPUs in this (PCI) order.
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")

# --out template letters -> what they stand for (docs/fleet.md)
LETTERS = {
    "h": "host: the node's name (SLURMD_NODENAME under Slurm, else the host name)",
    "r": "rank: the task's rank among all tasks (SLURM_PROCID, OMPI_COMM_WORLD_RANK, RANK)",
    "l": "local rank: the task's rank on its node (SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, LOCAL_RANK)",
    "g": "GPU index: the GPU's index on its node as nvidia-smi numbers it (PCI order)",
    "u": "UUID: the GPU's UUID (GPU-...)",
    "d": "date: when the run started, UTC, yyyymmdd-hhmm",
    "%": "%: a literal %",
}
# a file name written by several tasks must hold one of these sets of letters, each unique to one task
PER_TASK = ({"r"}, {"u"}, {"h", "l"}, {"h", "g"})
# ... and by several GPUs of one process (--device all), one of these
PER_GPU = ({"g"}, {"u"})
# what a template value may put in a file name; anything else (a "/" in a host name) becomes "-"
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class Task:
    """This process as one task of a launcher; every field None when no launcher started it."""

    launcher: str | None  # ceilings.roofs.LAUNCHERS
    rank: int | None
    local_rank: int | None
    world_size: int | None
    local_size: int | None  # tasks of the launcher on this node
    job_id: str | None  # SLURM_JOB_ID, also when mpirun or torchrun runs inside a Slurm job
    node: str  # the node's name as Slurm knows it (what scontrol takes), else the host name
    cuda_visible_devices: str | None

    @property
    def several(self) -> bool:
        """One of several tasks: their output files must differ."""
        return (self.world_size or 1) > 1


def detect(env: Mapping[str, str]) -> Task:
    """The task that `env` (os.environ) describes. CeilingsError when a launcher's variable is not a number."""
    common = {"job_id": env.get("SLURM_JOB_ID"), "node": env.get("SLURMD_NODENAME") or platform.node(),
              "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES")}
    if "OMPI_COMM_WORLD_RANK" in env:
        return Task("openmpi", *_numbers(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"), **common)
    if "RANK" in env and "LOCAL_RANK" in env:
        return Task("torchrun", *_numbers(env, "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"), **common)
    if "SLURM_STEP_ID" in env or "SLURM_STEPID" in env:  # a task of srun, not the batch script itself
        rank, local_rank, world_size = _numbers(env, "SLURM_PROCID", "SLURM_LOCALID", "SLURM_STEP_NUM_TASKS")
        return Task("slurm", rank, local_rank, world_size, _slurm_local_size(env), **common)
    return Task(None, None, None, None, None, **common)


def _numbers(env: Mapping[str, str], *names: str) -> list[int | None]:
    values = []
    for name in names:
        text = env.get(name)
        if text is not None and not text.isdigit():
            raise CeilingsError(f"{name}={text!r} is not a task number; unset it or start ceilings through the "
                                f"launcher that sets it")
        values.append(None if text is None else int(text))
    return values


def _slurm_local_size(env: Mapping[str, str]) -> int | None:
    """This node's entry of SLURM_STEP_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of 3 nodes, then 1)."""
    spec, node_id = env.get("SLURM_STEP_TASKS_PER_NODE"), env.get("SLURM_NODEID")
    if spec is None or node_id is None or not node_id.isdigit():
        return None
    counts: list[int] = []
    for part in spec.split(","):
        found = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part)
        if found is None:
            return None
        counts += [int(found.group(1))] * int(found.group(2) or 1)
    return counts[int(node_id)] if int(node_id) < len(counts) else None


def node_gpu_index(pci_bus_id: str | None, gpus_dir: Path = NVIDIA_GPUS) -> int | None:
    """The GPU's place among all NVIDIA GPUs of the node in PCI order, as nvidia-smi numbers them; None when
    the bus id or the driver's list is unknown. The CUDA index is no such thing: a task that Slurm binds to
    one GPU sees it as device 0."""
    if pci_bus_id is None:
        return None
    try:
        buses = sorted(entry.name.lower() for entry in gpus_dir.iterdir())
    except OSError:  # no NVIDIA driver loaded here (or not Linux)
        return None
    return buses.index(pci_bus_id.lower()) if pci_bus_id.lower() in buses else None


def letters(template: str) -> set[str]:
    """The letters a --out template uses; CeilingsError for an unknown one."""
    used = set(re.findall(r"%(.?)", template, flags=re.DOTALL))
    unknown = used - set(LETTERS)
    if unknown:
        shown = ", ".join(sorted(f"%{u}" if u else "a lone % at the end" for u in unknown))
        known = " ".join(f"%{k}" for k in LETTERS)
        raise CeilingsError(f"--out {template}: {shown} is not a template letter; use {known} (docs/fleet.md)")
    return used


def check_unique(template: str, *, several_tasks: bool, several_gpus: bool) -> None:
    """Before measuring: CeilingsError unless every task (and every GPU of --device all) gets a file of its own."""
    used = letters(template)
    if several_tasks and not any(need <= used for need in PER_TASK):
        raise CeilingsError(f"--out {template}: several tasks would write the same file; put %r (rank) or %u (GPU "
                            f"UUID), or %h with %l or %g, in the name, e.g. roofs-%h-%g.json")
    if several_gpus and not any(need <= used for need in PER_GPU):
        raise CeilingsError(f"--out {template}: --device all would write every GPU to the same file; put %g (GPU "
                            f"index) or %u (GPU UUID) in the name")


def file_safe(text: str) -> str:
    """`text` fit for a file name: never a folder (no '/', never empty, '.' or '..': a node named '..' would
    write outside the --out folder), a space or a shell character."""
    safe = _SAFE.sub("-", text)
    return safe if safe.strip(".") else (safe.replace(".", "-") or "-")


def expand(template: str, values: Mapping[str, str | int | None]) -> str:
    """The file name of `template` with each letter's value; CeilingsError naming a letter whose value is
    missing here (no launcher gave a rank, the GPU's UUID could not be probed, ...)."""
    def value(found: re.Match) -> str:
        letter = found.group(1)
        if letter == "%":
            return "%"
        if values.get(letter) is None:
            known = " ".join(f"%{k}" for k, v in values.items() if v is not None)
            raise CeilingsError(f"--out {template}: %{letter} ({LETTERS[letter].split(':')[0]}) is not known in "
                                f"this run; use another letter ({known})")
        return file_safe(str(values[letter]))

    letters(template)
    return re.sub(r"%(.)", value, template, flags=re.DOTALL)
