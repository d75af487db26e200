"""Atomic file writes: a reader, or a crash, never sees half a file, and nothing already written is lost."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import stat
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Iterator

from .errors import CeilingsError

# picture formats the CLIs write (matplotlib knows more; these are the ones worth sharing)
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
STDOUT = "-"  # as a text output path: standard output


def check_target(path: str | os.PathLike, *, force: bool = True, option: str | None = None) -> Path:
    """Raise CeilingsError unless `path` can be written; call it before long work that ends in a write.
    `option`: the command-line option that named it, for the message."""
    target = Path(path)
    if target.is_dir():
        raise CeilingsError(f"cannot write {target}: it is a folder; give a file name")
    if not force and target.is_file():  # a device or pipe (/dev/null, /dev/stdout) is written, never replaced
        raise CeilingsError(f"{f'{option} ' if option else ''}{target} exists; pass --force to overwrite it or "
                            f"give another name")
    check_folder(target.parent if str(target.parent) else Path("."), target)
    return target


def check_folder(folder: str | os.PathLike, target: str | os.PathLike | None = None) -> Path:
    """Raise CeilingsError unless files can be created in `folder` (named in the message as `target`)."""
    folder = Path(folder)
    what = target if target is not None else f"into {folder}"
    if not folder.is_dir():
        raise CeilingsError(f"cannot write {what}: folder {folder} does not exist")
    try:  # create a file rather than ask os.access, which says yes to root on read-only mounts
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise CeilingsError(f"cannot write {what}: folder {folder} is not writable ({exc.strerror or exc}); "
                            f"choose another path") from None
    return folder


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, force: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` in one rename.

    With force=False an existing file is an error (raised before anything is written). Any OS error
    (permissions, disk full, a folder in the way) is a one-line CeilingsError; `path` is then untouched.
    The file gets the mode the target already has, else the usual 0666 & ~umask (not mkstemp's 0600).
    A symbolic link stays a link: the file it points to is replaced. A device or pipe (/dev/stdout) cannot
    be renamed over: it is written in place.
    """
    target = check_target(path, force=force)
    if target.is_symlink():
        target = target.resolve()
    if target.exists() and not target.is_file():
        try:
            yield target
        except OSError as exc:  # /dev/full: the disk-full error, as one line
            raise CeilingsError(f"cannot write {target}: {exc.strerror or exc}") from None
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise CeilingsError(f"cannot write {target}: {exc.strerror or exc}; choose another path") from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, _mode_for(target))
        _move(tmp_path, target, force)
    except OSError as exc:
        raise CeilingsError(f"cannot write {target}: {exc.strerror or exc}; nothing was changed there"
                            ) from None
    finally:
        tmp_path.unlink(missing_ok=True)


def _move(tmp: Path, target: Path, force: bool) -> None:
    """Rename `tmp` to `target`. Without force, a link that fails if `target` appeared meanwhile (another run
    in the same minute): checking first and renaming later would overwrite it."""
    if force:
        os.replace(tmp, target)
        return
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise CeilingsError(f"{target} exists (written while this ran); pass --force to overwrite it or choose "
                            "another --out") from None
    except OSError:  # a file system without hard links
        os.replace(tmp, target)


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text(path: str | os.PathLike, text: str | bytes, *, force: bool = True) -> Path:
    """`text` (or bytes: a rendered picture) to `path` atomically, or to standard output when `path` is "-"."""
    if str(path) == STDOUT:
        sys.stdout.write(text if isinstance(text, str) else text.decode())
        sys.stdout.flush()
        return Path(STDOUT)
    with atomic_path(path, force=force) as tmp:
        if isinstance(text, str):
            tmp.write_text(text, encoding="utf-8")
        else:
            tmp.write_bytes(text)
    return Path(path)


def check_figure_path(path: str | os.PathLike, option: str = "-o", *, force: bool = True) -> Path:
    """Raise CeilingsError unless `path` names a picture format we write in a folder we can write (and, with
    force=False, no file there yet); call it before any work."""
    target = Path(path)
    if target.suffix.lower() not in FIGURE_SUFFIXES:
        raise CeilingsError(f"{option} {target}: the picture must end in {', '.join(FIGURE_SUFFIXES)}")
    return check_target(target, force=force, option=option)


def save_figure(fig, path: str | os.PathLike, *, force: bool = True, **savefig_kwargs) -> Path:
    """fig.savefig through a temporary file; the format comes from the target's suffix."""
    target = check_figure_path(path, force=force)
    fmt = target.suffix.lstrip(".").lower()
    with atomic_path(target, force=force) as tmp:
        fig.savefig(tmp, format=fmt, **savefig_kwargs)
    return target


class Outputs:
    """Every output of one command run, through one door.

    `want` each output before the work (a path that is an input, symlinks and hard links followed, an
    existing file without --force, two outputs on one file, an unwritable folder: one-line errors before
    anything is computed); `text` / `figure` stage an output in memory (a figure is rendered now, so that a
    plot that fails leaves nothing written); `commit` writes them all, each atomically, once every output of
    the run has been computed. A text output "-" is standard output, printed at commit in staging order.

        out = Outputs(inputs=[*args.profiles, args.roofs], force=args.force)
        out.want("--csv", args.csv); out.want("-o", args.output, picture=True)
        ... compute ...
        out.text(args.csv, table.to_csv(index=False)); out.figure(args.output, fig, dpi=150)
        out.commit()
    """

    def __init__(self, *, inputs=(), force: bool = False):
        self.force = force
        self._inputs = [Path(p) for p in inputs if p is not None and str(p) != STDOUT]
        self._wanted: dict[Path, tuple[str, str, Path]] = {}  # resolved target -> ("option path", option, target)
        self._staged: list[tuple[str, str | bytes]] = []

    def add_inputs(self, paths) -> None:
        """More files the run reads (found in folders, say), protected like those given at construction: an
        output already wanted that is one of them is refused now."""
        added = [Path(p) for p in paths]
        self._inputs += added
        for _, option, target in self._wanted.values():
            self._refuse_input(option, target, added)

    def want(self, option: str, path, *, picture: bool = False) -> None:
        """Check output `path` of `option` (None: not asked for) before any work."""
        if path is None or str(path) == STDOUT:
            return
        target = (check_figure_path(path, option, force=self.force) if picture else
                  check_target(path, force=self.force, option=option))
        key = _key(target)
        if key in self._wanted:
            raise CeilingsError(f"{self._wanted[key][0]} and {option} {path} are the same file; give each its own "
                                f"file")
        self._wanted[key] = (f"{option} {path}", option, target)  # as given, to name a clash
        self._refuse_input(option, target, self._inputs)

    @staticmethod
    def _refuse_input(option: str, target: Path, inputs) -> None:
        if not target.exists():
            return
        for item in inputs:
            if not item.exists():
                continue  # a datasheet name, say
            same = (_inside(target, item) if item.is_dir() else os.path.samefile(target, item))
            if same:
                raise CeilingsError(f"{option} {target}: that is an input of this run ({item}); writing it would "
                                    f"destroy it; give another name")

    def text(self, path, text: str) -> None:
        """Stage `text` for `path` ("-": standard output); None: not asked for, nothing staged."""
        if path is not None:
            self._staged.append((str(path), text))

    def figure(self, path, fig, **savefig_kwargs) -> None:
        """Render matplotlib `fig` for `path` now (in memory), to be written at commit."""
        if path is None:
            return
        target = check_figure_path(path)
        buf = io.BytesIO()
        try:
            fig.savefig(buf, format=target.suffix.lstrip(".").lower(), **savefig_kwargs)
        except (OverflowError, ValueError, RuntimeError) as exc:  # matplotlib on values beyond its range
            raise CeilingsError(f"cannot draw {path}: {type(exc).__name__}: {str(exc)[:200]}; nothing was written"
                                ) from None
        self._staged.append((str(path), buf.getvalue()))

    def commit(self, log=None) -> list[str]:
        """Write every staged output, each atomically (standard output in staging order); `log(path)` after
        each file."""
        written = []
        for path, content in self._staged:
            write_text(path, content, force=self.force)
            if path != STDOUT:
                written.append(path)
                if log is not None:
                    log(path)
        self._staged = []
        return written


def _key(path: Path) -> Path:
    return path.resolve()


def _inside(target: Path, folder: Path) -> bool:
    return folder.resolve() in target.resolve().parents


def json_text(doc) -> str:
    """A document as the commands' --json write it: indented, every NaN or infinity (unknown) null, numpy
    scalars plain numbers; a file never holds NaN."""
    return json.dumps(plain(doc), indent=1, allow_nan=False) + "\n"


def plain(value, digits: int | None = None):
    """`value` as JSON takes it: every NaN or infinity (unknown) None, numpy scalars Python numbers, mappings
    with text keys; with `digits`, every float rounded to that many significant digits."""
    if isinstance(value, Mapping):
        return {str(k): plain(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, digits) for v in value]
    if hasattr(value, "item"):  # a numpy scalar
        value = value.item()
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return value if digits is None else float(f"{value:.{digits}g}")
    return value
