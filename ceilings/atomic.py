"""Atomic file writes: a reader, or a crash, never sees half a file, and nothing already written is lost."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

from .errors import CeilingsError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, force: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` in one rename.

    With force=False an existing file is an error (raised before anything is written).
    """
    target = Path(path)
    if not force and target.exists():
        raise CeilingsError(f"{target} exists; pass --force to overwrite it or choose another --out")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise CeilingsError(f"cannot write {target}: folder {parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)


def write_text(path: str | os.PathLike, text: str, *, force: bool = True) -> Path:
    with atomic_path(path, force=force) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def save_figure(fig, path: str | os.PathLike, **savefig_kwargs) -> Path:
    """fig.savefig through a temporary file; the format comes from the target's suffix."""
    target = Path(path)
    fmt = target.suffix.lstrip(".") or "png"
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format=fmt, **savefig_kwargs)
    return target
