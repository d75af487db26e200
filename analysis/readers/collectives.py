"""The bytes a collective moves over the interconnect, from what a torch.profiler trace records of it.

A collective's size S is the larger of its input and output message (HolisticTraceAnalysis's data size:
max(in, out elements) x the dtype's size): the whole gathered tensor of an all-gather, the whole scattered
one of a reduce-scatter, the message of an all-reduce or all-to-all. Its bus bytes are S times the factor
nccl-tests applies to turn algorithm bandwidth into bus bandwidth (nccl-tests, doc/PERFORMANCE.md): all-reduce
2(n-1)/n; all-gather, reduce-scatter and all-to-all (n-1)/n; broadcast, reduce, send and receive 1, for a
group of n ranks. Bus bytes over the time is what compares with a link's bandwidth a direction.

Where a trace records the sizes: newer traces on `record_param_comms` ops and on the collective's kernel
("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype"); older ones on the `c10d::*` ops
and `nccl:*` annotations around the launch ("Input Dims", "Input type"), the group size then being the
trace's world size (distributedInfo).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..ops.base import itemsize
from .contract import COMMUNICATION

# (collective, bus bytes per byte of S for a group of n), first match wins; any other collective moves S
BUS_FACTORS = ((re.compile(r"all_?reduce", re.IGNORECASE), lambda n: 2 * (n - 1) / n),
               (re.compile(r"all_?gather|reduce_?scatter|all_?to_?all", re.IGNORECASE), lambda n: (n - 1) / n))
# the events around a collective's launch that record its message: c10d's ops, torch's record_param_comms,
# the nccl:* annotations ProcessGroupNCCL writes, and other libraries' collective ops (vLLM's vllm::all_reduce,
# symm_mem::multimem_all_reduce_, _C_custom_ar::all_reduce), whose tensor arguments are the message
RECORDS_SIZE = re.compile(r"^nccl:|c10d::|record_param_comms|::\w*(all_?reduce|all_?gather|reduce_?scatter|"
                          r"all_?to_?all)", re.IGNORECASE)
# collective ops whose tensor argument is only the rank's own part of an all-gather (vLLM's all_gather(tensor,
# dim, world_size, group_name)): the gathered message is it x the group
LOCAL_PART = frozenset({"vllm::all_gather"})


@dataclass(frozen=True)
class Collective:
    """A collective a kernel belongs to: the event that stands for it (its kernels share its bytes), what it
    is (the names recorded), and its bus bytes (None where the trace does not record its size or group)."""

    event: int
    kind: str
    bus_bytes: float | None


def collective(kernel: Mapping, op: str | None, around: Sequence[Mapping], world_size: int | None
               ) -> Collective | None:
    """The collective of a kernel event launched by `op` (the innermost cpu_op around it), given the cpu_ops and
    annotations around its launch (outermost first); None for a kernel that is no collective's (neither it
    nor its op is communication: readers.contract.COMMUNICATION)."""
    if not COMMUNICATION.search(str(kernel.get("name", ""))) and not COMMUNICATION.search(op or ""):
        return None
    args = kernel.get("args") or {}
    events = [e for e in around if RECORDS_SIZE.search(str(e.get("name", ""))) or "Collective name" in
              (e.get("args") or {})]
    recorded = [args, *((e.get("args") or {}) for e in events)]
    kind = " ".join(str(a["Collective name"]) for a in recorded if "Collective name" in a) or \
        " ".join(str(e.get("name", "")) for e in events) or str(kernel.get("name", ""))
    group = next((a["Group size"] for a in recorded if _count(a.get("Group size"))), world_size)
    parts = [group if str(e.get("name", "")) in LOCAL_PART and _count(group) else 1 for e in events]
    sizes = [s * n for a, n in zip(recorded, [1, *parts]) if (s := _message_bytes(a)) is not None]
    bus = None
    if sizes and _count(group):
        factor = next((f(group) for pattern, f in BUS_FACTORS if pattern.search(kind)), 1.0)
        bus = max(sizes) * factor
    return Collective(id(events[-1]) if events else id(kernel), kind, bus)


def _count(value) -> bool:
    return type(value) is int and value > 0


def _message_bytes(args: Mapping) -> float | None:
    """The larger message the arguments record, in bytes: the in/out element counts with the dtype, else the
    largest tensor of "Input Dims" with its "Input type"; None where they record none."""
    size = itemsize(args.get("dtype", ""))
    counts = [args.get(k) for k in ("In msg nelems", "Out msg nelems")]
    if size and any(_count(c) for c in counts):
        return float(max(c for c in counts if _count(c)) * size)
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    tensors = [math.prod(d) * itemsize(t) for d, t in zip(dims, types)
               if isinstance(d, list) and d and all(_count(x) for x in d) and itemsize(t)]
    return float(max(tensors)) if tensors else None
