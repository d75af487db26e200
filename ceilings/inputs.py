"""Reading input files so that no file hangs a command or exhausts memory: regular files only, gzip
decompressed up to a stated bound, JSON nesting bounded."""

from __future__ import annotations

import json
import os
import stat
import zlib
from pathlib import Path
from typing import Any

from .errors import CeilingsError, describe

GZIP_MAGIC = b"\x1f\x8b"
MAX_DECOMPRESSED_ENV = "CEILINGS_MAX_DECOMPRESSED_MB"
DEFAULT_MAX_DECOMPRESSED_MB = 4096  # a week of torch.profiler traces of one rank fit; a gzip bomb does not
_CHUNK = 1 << 24


def read_bytes(path: str | os.PathLike, what: str = "file", limit: int | None = None) -> bytes:
    """The bytes of regular file `path` (its first `limit` where given). A folder, pipe (FIFO) or device
    (/dev/zero) would hang a read or never end; each is a one-line CeilingsError, as is a missing or unreadable
    file."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise CeilingsError(f"{p}: no such {what}") from None
    except OSError as exc:
        raise CeilingsError(f"{p}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise CeilingsError(f"{p}: is a folder; give the {what} itself")
    if not stat.S_ISREG(mode):
        kind = "a pipe (FIFO)" if stat.S_ISFIFO(mode) else "a device or socket"
        raise CeilingsError(f"{p}: {kind}, not a regular file; save the {what} to a file and give that")
    try:
        with p.open("rb") as f:
            return f.read(-1 if limit is None else limit)
    except OSError as exc:
        raise CeilingsError(f"{p}: cannot read it ({exc.strerror or exc})") from None


def max_decompressed_bytes() -> int:
    raw = os.environ.get(MAX_DECOMPRESSED_ENV, "")
    try:
        mb = float(raw) if raw else DEFAULT_MAX_DECOMPRESSED_MB
    except ValueError:
        mb = float("nan")
    if not mb > 0 or mb == float("inf"):
        raise CeilingsError(f"{MAX_DECOMPRESSED_ENV}={raw}: give the bound in MB, a positive number")
    return int(mb * 1e6)


def gunzip(data: bytes, path: str | os.PathLike) -> bytes:
    """`data` (gzip, possibly several members) decompressed, refused past max_decompressed_bytes() (a gzip
    bomb is refused after reading that much, not after filling memory)."""
    limit = max_decompressed_bytes()
    out, total, rest = [], 0, data
    try:
        while rest:
            d = zlib.decompressobj(wbits=31)
            while True:
                chunk = d.decompress(rest, min(_CHUNK, limit + 1 - total))
                total += len(chunk)
                out.append(chunk)
                if total > limit:
                    raise CeilingsError(f"{path}: decompresses to more than {limit / 1e6:.0f} MB; if it really "
                                        f"is a profile that large, raise the bound: {MAX_DECOMPRESSED_ENV}=<MB>")
                if d.eof:
                    break
                if not d.unconsumed_tail:
                    raise EOFError("compressed file ended before the end-of-stream marker")
                rest = d.unconsumed_tail
            rest = d.unused_data.lstrip(b"\0")
            if rest and not rest.startswith(GZIP_MAGIC):
                break  # trailing garbage after the last member, as gzip itself ignores it
    except (zlib.error, EOFError) as exc:
        raise CeilingsError(f"{path}: a gzip file that does not decompress ({describe(exc)}); truncated "
                            f"download?") from None
    return b"".join(out)


def loads_json(data: bytes | str, path: str | os.PathLike, what: str = "profile or roofs file") -> Any:
    """json.loads, the one reader of every JSON input: nesting too deep for the parser (100,000 brackets) is a
    one-line CeilingsError saying the file is no `what`; other errors (ValueError) are left to the caller, which
    knows what the file should be."""
    try:
        return json.loads(data)
    except RecursionError:
        raise CeilingsError(f"{path}: JSON nested too deep to be a {what} (a thousand levels or more); is this "
                            f"the right file?") from None
