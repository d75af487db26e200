"""Profile PyTorch code with torch.profiler, recording what a roofline of its kernels needs.

From a training loop:

    from analysis.torch_profile import roofline_profile

    with roofline_profile("runs/step", wait=1, warmup=1, active=3, repeat=1) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()
    prof.kernels(by="op")                                    # analysis.ncu.kernel_table of the traces
    fig, table = prof.roofline("roofs.json", "roofline.png")  # or ax=None (a new Figure), or a matplotlib Axes

Around an unmodified script: `profile_script(["train.py", ...], "runs/step")`, behind
`python -m analysis.profile --torch --out DIR -- SCRIPT.py ARGS` (each optimizer step is a profiler step).

What is recorded: CPU and CUDA activity (the CPU only where torch sees no CUDA device), input shapes (the
trace reader, analysis.readers.torch_trace, rebuilds FLOPs and algorithmic bytes from them), memory, FLOPs for
key_averages(), and the Python tracer (with_stack), whose "nn.Module: ..." ranges `--by module` reads:
with_modules alone names modules of TorchScript models only. One TensorBoard trace per recorded cycle of the
schedule goes into the folder (torch.profiler.tensorboard_trace_handler), `<host>_<pid>.<ns>.pt.trace.json`.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from common.atomic import check_figure_path, check_folder, save_figure
from common.errors import CeilingsError, MissingDependency

SCHEDULE = {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}  # torch.profiler.schedule's arguments, defaults
LEAST = {"wait": 0, "warmup": 0, "active": 1, "repeat": 0}  # repeat 0: cycles until the run ends
TORCH_MISSING = ("PyTorch is not installed: install a CUDA build (e.g. pip install torch --index-url "
                 "https://download.pytorch.org/whl/cu128) or the CPU-only one (--index-url "
                 "https://download.pytorch.org/whl/cpu), as https://pytorch.org/get-started/locally/ shows")
NO_CUDA = ("analysis.torch_profile: no CUDA device (torch.cuda.is_available() is False): profiling the CPU only, "
           "so the traces will hold operators but no GPU kernels to draw")


def _torch():
    try:
        import torch
    except ImportError:
        raise MissingDependency(TORCH_MISSING) from None
    return torch


class roofline_profile:  # lower case: a context manager, named like the torch.profiler.profile it wraps
    """torch.profiler.profile writing TensorBoard traces into the folder `out`, scheduled by
    torch.profiler.schedule(wait, warmup, active, repeat): call step() once per iteration.

    optimizer_steps: every optimizer step (any torch.optim optimizer, through torch's global post-step hook) is
    a profiler step instead, so step() is not called. What runs before the first optimizer step is recorded
    either way: a run without any optimizer step is then one window, and one trace; with steps it is kept
    only where the schedule records step 0.

    modules=False leaves out the Python tracer, which costs time in Python-heavy code: then no nn.Module
    ranges. An existing folder that is not empty is refused unless force=True, which deletes its traces.
    """

    def __init__(self, out: str | os.PathLike, *, wait: int = SCHEDULE["wait"], warmup: int = SCHEDULE["warmup"],
                 active: int = SCHEDULE["active"], repeat: int = SCHEDULE["repeat"], force: bool = False,
                 modules: bool = True, optimizer_steps: bool = False):
        self.schedule = {"wait": wait, "warmup": warmup, "active": active, "repeat": repeat}
        for name, value in self.schedule.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < LEAST[name]:
                raise CeilingsError(f"{name} {value!r}: must be a whole number of steps, {LEAST[name]} or more")
        self.folder = Path(out)
        self.force, self.modules, self.optimizer_steps = force, modules, optimizer_steps
        self.profiler = None  # the torch.profiler.profile, once entered (key_averages() of the last window)
        self.cuda: bool | None = None
        self._hook = None
        self._tentative = False  # step 0 is recorded only in case no optimizer step comes
        self._discard = False

    def __enter__(self) -> roofline_profile:
        torch = _torch()
        from torch.profiler import ProfilerAction, ProfilerActivity, profile, schedule, tensorboard_trace_handler

        _prepare(self.folder, self.force)
        self.cuda = torch.cuda.is_available()
        if not self.cuda:
            print(NO_CUDA, file=sys.stderr)
        planned = schedule(**self.schedule)
        self._tentative = self.optimizer_steps and planned(0) not in (ProfilerAction.RECORD,
                                                                     ProfilerAction.RECORD_AND_SAVE)
        export = tensorboard_trace_handler(str(self.folder))

        def steps(n: int):
            # RECORD_AND_SAVE: saved at the end of a run without optimizer steps, closed (and discarded) at the
            # first one, after which the transitions are those of the planned schedule
            return ProfilerAction.RECORD_AND_SAVE if self._tentative and n == 0 else planned(n)

        def ready(prof) -> None:
            if not self._discard:
                export(prof)

        self.profiler = profile(
            activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else []), schedule=steps,
            on_trace_ready=ready, record_shapes=True, profile_memory=True, with_flops=True, with_modules=True,
            with_stack=self.modules)
        self.profiler.__enter__()
        if self.optimizer_steps:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self._hook = register_optimizer_step_post_hook(self._optimizer_step)
        return self

    def _optimizer_step(self, _optimizer, _args, _kwargs) -> None:
        self._discard = self._tentative and self.profiler.step_num == 0
        try:
            self.profiler.step()
        finally:
            self._discard = False

    def __exit__(self, *exc) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        self.profiler.__exit__(*exc)  # a window still recording is saved, also when the block raised

    def step(self) -> None:
        """The next profiler step (once per training iteration)."""
        self.profiler.step()

    @property
    def steps(self) -> int:
        """Steps taken so far (optimizer steps with optimizer_steps=True)."""
        return self.profiler.step_num if self.profiler is not None else 0

    def traces(self) -> list[Path]:
        """The torch.profiler traces in the folder, in name order (those of other ranks writing there too)."""
        return _traces(self.folder)

    def no_trace_reason(self) -> str:
        """Why the folder has no trace, in one line: too few steps for the schedule."""
        first = self.schedule["wait"] + self.schedule["warmup"]
        return (f"{self.folder}: no trace written: {self.steps} step(s) ran and the schedule records from step "
                f"{first} (wait {self.schedule['wait']} + warmup {self.schedule['warmup']}); run more steps or "
                f"lower wait and warmup")

    def kernels(self, by: str = "kernel"):
        """analysis.ncu.kernel_table of the folder's traces: one row per kernel, or per op, nn.Module or
        innermost record_function range (`by`)."""
        from analysis.ncu import kernel_table

        if not self.traces():
            raise CeilingsError(self.no_trace_reason())
        return kernel_table(self.folder, by=by)

    def roofline(self, roofs, ax=None, *, by: str = "kernel", level: str = "dram", top: int = 10,
                 force: bool = False):
        """(figure, table): the roofline of the traces' kernels (or ops, modules, annotations: `by`) against
        `roofs` (analysis.roofline.Roofs, a roofs file or a datasheet name such as 'A100 SXM4 80GB'), drawn
        on `ax`: a matplotlib Axes, None (a new Figure), or a picture path (.png/.svg/.pdf, not overwritten
        without force). table: analysis.roofline.roofline_table, attrs["warnings"] those of the kernel table
        and of the judging (ALGORITHMIC bytes, kernels not judged)."""
        from analysis.plot import plot_roofline, roofline_figure
        from analysis.roofline import Roofs, datasheet_roofs, roofline_table, target_roofs

        picture = ax is None or isinstance(ax, (str, os.PathLike))
        if ax is not None and picture:
            check_figure_path(ax, "ax", force=force)
        roofs = roofs if isinstance(roofs, Roofs) else target_roofs(str(roofs), option="roofs")
        kernels = self.kernels(by=by)
        table = roofline_table(roofs, kernels, level=level)
        table.attrs["warnings"] = [*kernels.attrs.get("warnings", []), *table.attrs["warnings"]]
        options = {"level": level, "datasheet": datasheet_roofs(roofs), "top": top}
        if not picture:
            plot_roofline(ax, roofs, table, **options)
            return ax.figure, table
        fig = roofline_figure(roofs, table, **options)
        if ax is not None:
            save_figure(fig, ax, force=force, dpi=150, bbox_inches="tight")
        return fig, table


def operator_work(path: str | os.PathLike):
    """Every operator event of a torch.profiler trace file (CPU-only traces too) that has a FLOP rule: a
    DataFrame of name, input dims (as text), flops, precision, alg_bytes, cpu_time_s. Nested operators are all
    listed (aten::linear and the aten::addmm inside it): sum the ones of one level, as the kernel table does
    through kernels."""
    from analysis.readers.launches import read_source
    from analysis.readers.torch_trace import operator_rows

    return operator_rows(read_source(path))


def _traces(folder: Path) -> list[Path]:
    from analysis.ncu import TRACE_PATTERNS

    return sorted({f for pattern in TRACE_PATTERNS for f in folder.glob(pattern)})


def _prepare(folder: Path, force: bool) -> None:
    """The folder exists and is writable, and holds no trace of an earlier run (read with this one's, they
    would be summed with it)."""
    if folder.exists() and not folder.is_dir():
        raise CeilingsError(f"{folder}: a file, not a folder; give a folder for the traces")
    try:
        if folder.is_dir() and any(folder.iterdir()):
            if not force:
                raise CeilingsError(f"{folder} is not empty; pass --force (force=True) to replace the "
                                    f"torch.profiler traces in it, or choose another folder")
            for trace in _traces(folder):
                trace.unlink()
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CeilingsError(f"cannot prepare {folder}: {exc.strerror or exc}; choose another folder") from None
    check_folder(folder)


def profile_script(command: Sequence[str], out: str | os.PathLike, **options) -> tuple[int, roofline_profile]:
    """Run `command` (SCRIPT.py ARGS..., or -m MODULE ARGS...) in this process as python would (sys.argv set,
    the script's folder, or for a module the current one, first on sys.path) under
    roofline_profile(out, optimizer_steps=True, **options). Returns (its exit status, the profile): SystemExit
    gives the status; any other exception of the script propagates as it is, once the traces are written."""
    if not command:
        raise CeilingsError("no script to profile: put it after --, e.g. -- train.py --epochs 1, or -- -m "
                            "package.train --epochs 1")
    module = command[0] == "-m"
    if module and len(command) < 2:
        raise CeilingsError("-m without a module name: e.g. -- -m package.train --epochs 1")
    target, args = (command[1], list(command[2:])) if module else (command[0], list(command[1:]))
    prof = roofline_profile(out, optimizer_steps=True, **options)
    saved_argv, saved_path = sys.argv, sys.path[:]
    sys.path.insert(0, os.getcwd() if module else os.path.dirname(os.path.abspath(target)))
    sys.argv = [target, *args]  # runpy puts the file's path in argv[0], as python does
    try:
        run = _module(target) if module else _script(target)
        with prof:
            try:
                run()
                status = 0
            except SystemExit as exc:
                status = _exit_status(exc.code)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return status, prof


def _script(path: str):
    if not os.path.isfile(path):
        raise CeilingsError(f"{path}: no such script; give a Python file, or -m MODULE, after --")
    return lambda: runpy.run_path(path, run_name="__main__")


def _module(name: str):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a parent package that is missing, a relative name
        spec = None
    if spec is None:
        raise CeilingsError(f"-m {name}: no such module from {os.getcwd()}; check the name, or run from the "
                            f"folder `python -m {name}` works in")
    return lambda: runpy.run_module(name, run_name="__main__", alter_sys=True)


def _exit_status(code) -> int:
    """The exit status python gives a SystemExit: None is 0, a number itself, anything else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
