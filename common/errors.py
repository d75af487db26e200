"""User-facing errors and the one place that turns them into a one-line message and an exit code; the words
messages share."""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Sequence

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
# An exception's text quoted in a message is cut here: a compiler or driver error can run to pages.
QUOTED_ERROR_CHARS = 300


class CeilingsError(Exception):
    """An error the user can act on: the message names the file/value and the remedy, on one line."""


class MissingDependency(CeilingsError):
    """A tool, package, driver or GPU that is needed is not there."""


def cli_entry(prog: str) -> Callable[[Callable[[Sequence[str] | None], int]], Callable[..., int]]:
    """Wrap `main(argv) -> int` so that a CeilingsError is one line on stderr and exit code 2, never a traceback."""

    def decorate(main: Callable[[Sequence[str] | None], int]) -> Callable[..., int]:
        @functools.wraps(main)
        def wrapper(argv: Sequence[str] | None = None) -> int:
            try:
                return main(argv)
            except CeilingsError as exc:
                print(f"{prog}: error: {one_line(str(exc))}", file=sys.stderr)
                return EXIT_USER_ERROR
            except BrokenPipeError:  # `... | head` closed the pipe: not an error
                return 0
            except KeyboardInterrupt:  # Ctrl-C: files are written atomically, so nothing is half-written
                print(f"{prog}: interrupted", file=sys.stderr)
                return EXIT_INTERRUPTED

        return wrapper

    return decorate


def one_line(message: str) -> str:
    """`message` with every run of whitespace, newlines included, made one space."""
    return " ".join(message.split())


def describe(exc: BaseException) -> str:
    """An exception as a short one-line phrase to quote in a message: its text, else its type."""
    return one_line(str(exc))[:QUOTED_ERROR_CHARS] or type(exc).__name__


def listed(items: Sequence, shown: int, show: Callable[[Any], str] = str, sep: str = "; ") -> str:
    """The first `shown` of `items` as `show` writes them, joined by `sep`, then how many more ('a; b; and 3 more'):
    a message about thousands of kernels names a few."""
    more = len(items) - shown
    return sep.join(show(item) for item in items[:shown]) + (f"{sep}and {more} more" if more > 0 else "")
