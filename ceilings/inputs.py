"""Reading input files so that no file hangs a command or exhausts memory: regular files only, gzip
decompressed up to a stated bound, JSON nesting bounded."""

from __future__ import annotations

import json
import os
import stat
import sys
import zlib
from pathlib import Path
from typing import Any

from common.errors import CeilingsError, describe

GZIP_MAGIC = b"\x1f\x8b"
MAX_DECOMPRESSED_ENV = "CEILINGS_MAX_DECOMPRESSED_MB"
DEFAULT_MAX_DECOMPRESSED_MB = 4096  # a week of torch.profiler traces of one rank fit; a gzip bomb does not
MAX_RATIO_ENV = "CEILINGS_MAX_INFLATE_RATIO"
# gzip shrinks profiler text and JSON 5 to 20 times; a stream of one repeated byte shrinks 1,000 times: a bomb
DEFAULT_MAX_RATIO = 100
RATIO_CHECKED_FROM = 64 * 10**6  # bytes decompressed before the ratio counts: a small file may shrink more
PROGRESS_EVERY = 512 * 10**6  # bytes decompressed between two progress lines on stderr
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


def _bound(env: str, default: float, unit: str) -> float:
    """The positive number environment variable `env` gives, else `default`."""
    raw = os.environ.get(env, "")
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise CeilingsError(f"{env}={raw}: give the bound in {unit}, a positive number")
    return value


def max_decompressed_bytes(max_inflated_gb: float | None = None) -> int:
    """The most bytes a gzip input may decompress to: `max_inflated_gb` (a command's --max-inflated), else
    CEILINGS_MAX_DECOMPRESSED_MB, else DEFAULT_MAX_DECOMPRESSED_MB."""
    if max_inflated_gb is not None:
        if not 0 < max_inflated_gb < float("inf"):
            raise CeilingsError(f"--max-inflated {max_inflated_gb:g}: give the bound in GB, a positive number")
        return int(max_inflated_gb * 1e9)
    return int(_bound(MAX_DECOMPRESSED_ENV, DEFAULT_MAX_DECOMPRESSED_MB, "MB") * 1e6)


def add_max_inflated(parser) -> None:
    """--max-inflated, for every command that reads profiles (which may be gzip'd)."""
    parser.add_argument("--max-inflated", type=float, metavar="GB",
                        help=f"refuse a gzip'd input that decompresses to more than GB (default "
                             f"{DEFAULT_MAX_DECOMPRESSED_MB / 1000:g}, or ${MAX_DECOMPRESSED_ENV} in MB); raise it "
                             f"for a real trace that large. Past {RATIO_CHECKED_FROM // 10**6} MB, one that grows "
                             f"more than {DEFAULT_MAX_RATIO} times (${MAX_RATIO_ENV}) is refused as a gzip bomb")


def gunzip(data: bytes, path: str | os.PathLike, max_inflated_gb: float | None = None) -> bytes:
    """`data` (gzip, possibly several members) decompressed, refused past max_decompressed_bytes() or, past
    RATIO_CHECKED_FROM, past $CEILINGS_MAX_INFLATE_RATIO times its compressed size: a gzip bomb is refused after
    reading that much, not after filling memory. A line on stderr every PROGRESS_EVERY bytes says how far it is."""
    limit = max_decompressed_bytes(max_inflated_gb)
    ratio = _bound(MAX_RATIO_ENV, DEFAULT_MAX_RATIO, "times the compressed size")
    out, total, rest, shown = [], 0, data, 0
    try:
        while rest:
            d = zlib.decompressobj(wbits=31)
            while True:
                # no chunk spans two progress lines (nor the bound)
                chunk = d.decompress(rest, min(_CHUNK, PROGRESS_EVERY, limit + 1 - total))
                total += len(chunk)
                out.append(chunk)
                if total > limit:
                    raise CeilingsError(f"{path}: decompresses to more than {limit / 1e6:,.0f} MB; if it really "
                                        f"is a profile that large, raise the bound: --max-inflated GB or "
                                        f"{MAX_DECOMPRESSED_ENV}=<MB>")
                read = len(data) - len(d.unconsumed_tail) - len(d.unused_data)  # compressed bytes taken so far
                if total > RATIO_CHECKED_FROM and total > ratio * read:
                    raise CeilingsError(f"{path}: {read / 1e6:.1f} MB of gzip decompress to more than "
                                        f"{total / 1e6:.0f} MB, over {ratio:g} times as much: a gzip bomb, not a "
                                        f"profile? If it really is one, raise the bound: {MAX_RATIO_ENV}=<times>")
                if total - shown >= PROGRESS_EVERY:
                    shown = total
                    print(f"{path}: {total / 1e6:,.0f} MB decompressed so far (refused past {limit / 1e6:,.0f} MB)",
                          file=sys.stderr, flush=True)
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
