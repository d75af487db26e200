"""Atomic file writes: a reader, or a crash, never sees half a file, and nothing already written is lost."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from .errors import CeilingsError

# picture formats the CLIs write (matplotlib knows more; these are the ones worth sharing)
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
STDOUT = "-"  # as a text output path: standard output


def check_target(path: str | os.PathLike, *, force: bool = True) -> Path:
    """Raise CeilingsError unless `path` can be written; call it before long work that ends in a write."""
    target = Path(path)
    if target.is_dir():
        raise CeilingsError(f"cannot write {target}: it is a folder; give a file name")
    if not force and target.exists():
        raise CeilingsError(f"{target} exists; pass --force to overwrite it or choose another --out")
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
        yield target
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


def write_text(path: str | os.PathLike, text: str, *, force: bool = True) -> Path:
    """`text` to `path` atomically, or to standard output when `path` is "-"."""
    if str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return Path(STDOUT)
    with atomic_path(path, force=force) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def check_figure_path(path: str | os.PathLike, option: str = "-o", *, force: bool = True) -> Path:
    """Raise CeilingsError unless `path` names a picture format we write in a folder we can write (and, with
    force=False, no file there yet); call it before any work."""
    target = Path(path)
    if target.suffix.lower() not in FIGURE_SUFFIXES:
        raise CeilingsError(f"{option} {target}: the picture must end in {', '.join(FIGURE_SUFFIXES)}")
    return check_target(target, force=force)


def save_figure(fig, path: str | os.PathLike, *, force: bool = True, **savefig_kwargs) -> Path:
    """fig.savefig through a temporary file; the format comes from the target's suffix."""
    target = check_figure_path(path, force=force)
    fmt = target.suffix.lstrip(".").lower()
    with atomic_path(target, force=force) as tmp:
        fig.savefig(tmp, format=fmt, **savefig_kwargs)
    return target
