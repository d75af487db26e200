"""The contract every profile reader follows: how a format is recognised, how it is read, and what it yields.
This module imports no reader (the registry, analysis.readers.registry, lists them).

Every reader follows one contract. `find(source)` looks at a file's content (never its name) and returns
None when the file is not in that format, else whatever `read` needs to start (an offset, a match). A format
recognised by its first bytes (a magic number, a JSON document's opening) says how many in `head`: its `find`
is given only those (a 500 MB trace is recognised from 64 KiB), and such formats are tried before the ones
whose headers may be anywhere in a file (an ncu CSV after the application's output). A binary format (magic
bytes) is recognised from at most HEAD_BYTES and read from its file: `data` then holds only those first bytes
(a multi-GB nsys export is never loaded into memory; `file` is the path to open), unless the file is gzipped
(`data` is then all of it, decompressed, and `file` None: `Source.on_disk` writes a copy). A text file past
HEAD_BYTES is read into memory only when a reader asks for `data`: a finder of a header line looks at the
head's lines first (`Source.first`), and a reader that hands the file to a parser may scan it from the
file (`Source.opened`), so a 100 MB ncu CSV read by read_csv is never also copied whole. `read(source, found)`
returns one row per launch (or per kernel of a summary, with `launches` = N and values per launch) with the
columns of `META_COLUMNS` (missing ones are filled in), then one column per raw metric in base units (bytes,
seconds, hertz, counts). `yields` says what the rows hold: COUNTERS (hardware counters, and often times) or
TIMES (times only, matched to counters by kernel name).

A new format is one module in this package with one `Format`, listed in `registry.formats()`; the first whose
`find` answers wins.

What a caller uses (`source.memo`, set by read_profile): with "ranges" False, no launch's NVTX ranges (a reader
may leave nvtx None, unknown); with "each_launch" False, only sums per kernel (a reader may give one row per
kernel, process, grid, block, GPU and NVTX ranges, launches = N, as summaries do). A million-launch nsys export
costs passes over its API calls and NVTX tables for the ranges, and a million-row frame for each launch; no
other format saves anything by them.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ceilings.lazy import lazy
from common.errors import CeilingsError, describe

pd = lazy("pandas")

HEAD_BYTES = 65536  # the most a binary format's `find` sees; a NUL byte in them means a binary file
COUNTERS = "counters"
TIMES = "times"
# run: a pass or process in its file; process: its label ("1234 app@host", "rank 0") when the file names one;
# gpu: the device's name when the profile records it; nvtx: the NVTX / record_function ranges (a tuple,
# outermost first) the launch ran inside; op, module: the framework operator and nn.Module that launched it;
# tensor_type: the input type of its tensor work where the reader knows it (a torch op's dtype);
# before_trace: launched before the profile's CPU side began (a torch trace's kernel whose launch it lacks);
# op_helper: a kernel of an op whose work is counted on another of its kernels (a transpose, a split-K
# reduction): its FLOPs are missing by kernel, and none of the op's by op
# unknown_work: why the launch's FLOPs are missing, where the reader knows (UNKNOWN_WORK's keys)
BEFORE_TRACE = "launched before the trace began"  # how such kernels are named, in the table and its warnings
# Why a launch's work is unknown: the causes of the time a roofline cannot place (its time budget), each with
# what would place it. Readers set the ones they can tell; the kernel table sets the others.
UNKNOWN_WORK = {
    "no shapes": "no input shapes recorded: profile with torch.profiler(record_shapes=True)",
    "compiled graph": "a torch.compile graph or CUDA-graph replay: its kernels have no op with shapes "
                      "(an ncu profile counts their FLOPs and bytes)",
    "no op": "no operator around the launch (launched outside any op, or a CUDA graph replayed)",
    "no op model": "an op without a model in the op tables (analysis/ops/ joins them; docs/torch.md "
                   "lists them)",
    "work not recorded": "an op whose recorded arguments do not give its work (a serving engine's fused MoE: "
                         "the expert weights; its attention: the sequence lengths): an ncu profile counts them",
    "op helper": "a helper kernel of an op (transpose, split-K reduction): the op's work is on its main kernel",
    "no counters": "no FLOP counters: profile with python -m analysis.profile (ncu with the roofline metrics)",
    "times only": "a times-only profile (nsys): pair it with an ncu profile for counters",
    BEFORE_TRACE: "the launch is not in the trace: start the profiler before the GPU work, or --include-early",
}
# the `source` of launches whose work is modelled from their operator's shapes (a torch.profiler trace), not
# counted: a paired ncu profile's counters replace it (analysis.runs.paired)
MODELLED = "torch"
# Collective communication: NCCL's kernels and the ops that launch them (c10d, torch.profiler's
# record_param_comms, vLLM's custom all-reduce); its time is the interconnect's, apart from any roof here
COMMUNICATION = re.compile(r"nccl|c10d::|record_param_comms|all_?reduce|all_?gather|reduce_?scatter|"
                           r"all_?to_?all|cross_device_reduce|multimem", re.IGNORECASE)
LAUNCH_COLUMNS = ["grid", "block", "device", "cc", "gpu"]
META_COLUMNS = ["run", "id", "kernel", "launches", *LAUNCH_COLUMNS, "process", "nvtx", "op", "module",
                "tensor_type", "source", "name_truncated", "before_trace", "op_helper", "unknown_work"]
# their types in read_profile's frames: counts and numbers int64, flags bool, nvtx's tuples objects; text is
# str, or objects where a reader gives None for missing (pandas keeps the objects when str is concatenated to them)
META_DTYPES = {"run": "int64", "id": "int64", "kernel": "str", "launches": "int64",
               **dict.fromkeys([*LAUNCH_COLUMNS, "process"], "str"), "nvtx": "object",
               **dict.fromkeys(["op", "module", "tensor_type", "source", "unknown_work"], "str"),
               **dict.fromkeys(["name_truncated", "before_trace", "op_helper"], "bool")}


def no_launches() -> pd.DataFrame:
    """A frame of no launches, META_COLUMNS typed as META_DTYPES: concatenated to launches, it leaves their
    types as they are (a frame built from column names alone has object columns, which would make every
    column it is concatenated to one: a million launch counts multiplied and summed as Python numbers)."""
    return pd.DataFrame({col: pd.Series(dtype=dtype) for col, dtype in META_DTYPES.items()})


@dataclass(frozen=True)
class Source:
    """A profile's content: bytes with a leading BOM dropped and CRLF made LF. `head` holds its first bytes, at
    least HEAD_BYTES of them, or all of it where `load` is None; `data` is all of it, read by `load` when a
    reader first asks (module docstring). `file`: the regular file the bytes were read from when they are the
    file's own (read_csv may read it again, faster): with `load`, as far as the head shows (it holds no BOM or
    CR; the rest may hold CRs, `opened`). `memo`: what readers found once and share (a scan of a 100 MB file
    is worth doing once), and the caller's reading options (read_profile sets them): "flops", how a torch
    trace's causal attention is counted; "ranges" and "each_launch", what the caller uses (module docstring)."""

    head: bytes
    path: str
    file: Path | None = None
    memo: dict = field(default_factory=dict, compare=False, repr=False)
    load: Callable[[], bytes] | None = field(default=None, compare=False, repr=False)

    @cached_property
    def data(self) -> bytes:
        return self.head if self.load is None else self.load()

    def first(self, find: Callable[[bytes], Any]) -> Any:
        """find(bytes) on the head's whole lines, and on all the content where they hold no answer: for a
        finder of the first line of a kind (a CSV header), whose answer in the head is its answer in all."""
        if self.load is None:
            return find(self.head)
        found = find(self.head[:self.head.rfind(b"\n") + 1])
        return found if found is not None else find(self.data)

    def prefix(self, end: int) -> bytes:
        """The content's first `end` bytes: from the head where it holds them."""
        return self.head[:end] if end <= len(self.head) else self.data[:end]

    @contextmanager
    def opened(self) -> Iterator[int | None]:
        """The file open for reading, a descriptor (for os.preadv, from any thread), where `load` is set, else
        None: its bytes are the content's at the same offsets but for any CR past the head (CRLF is made LF in
        `data`). A reader that scans it for what it needs may then hand the file to a parser, without a copy
        of it in memory."""
        if self.file is None or self.load is None:
            yield None
            return
        try:
            fd = os.open(self.file, os.O_RDONLY)
        except OSError as exc:  # gone since its head was read
            raise CeilingsError(f"{self.path}: cannot read it ({describe(exc)})") from None
        try:
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def on_disk(self) -> Iterator[str]:
        """A path holding the bytes (for a reader that hands a path to a library or a tool): the source's own
        file, or a temporary copy of bytes changed in reading (decompressed)."""
        if self.file is not None:
            yield str(self.file)
            return
        with tempfile.TemporaryDirectory() as folder:
            copy = Path(folder) / Path(self.path).name
            copy.write_bytes(self.data)
            yield str(copy)

    @property
    def uses(self) -> dict[str, bool]:
        """What the caller uses (module docstring): each_launch and ranges, True unless read_profile said not."""
        return {"each_launch": self.memo.get("each_launch", True), "ranges": self.memo.get("ranges", True)}

    @cached_property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Format:
    name: str
    yields: str  # COUNTERS or TIMES
    find: Callable[[Source], Any]
    read: Callable[[Source, Any], pd.DataFrame]
    binary: bool = False  # recognised by magic bytes, before a file is taken for text
    head: int | None = None  # `find` needs only the first `head` bytes (module docstring); None: all of them

    def __post_init__(self):
        if (self.binary or self.head is not None) and not (self.head and self.head <= HEAD_BYTES):
            raise ValueError(f"{self.name}: a format is recognised from its first HEAD_BYTES at most (a binary "
                             f"one always: it is read from its file)")

    def recognise(self, source: Source):
        """`find` on the bytes it needs: the first `head`, or all."""
        return self.find(source if self.head is None else Source(source.head[:self.head], source.path))
