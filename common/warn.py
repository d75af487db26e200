"""The one printer of a command's warnings on the terminal: a few short lines, the most important first; the
reports and -v/--verbose hold every warning whole."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import TextIO

from common.errors import one_line

MAX_LINES = 5  # warning lines a run prints without -v, the line counting the rest included
LINE_CHARS = 160  # every such line is shorter than this
PREFIX = "warning: "
CUT = "…"
# the folders of an absolute or home path ('/tmp/run/' of '/tmp/run/a.csv'): not of a URL ('https://host/a'),
# a relative path, a unit ('FLOP/s') or a list ('fp16/bf16')
_FOLDERS = re.compile(r"(?<![\w.:/~-])~?/[^\s:]*/(?=[^\s/])")


def add_verbose(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="store_true",
                        help=f"print every warning whole (by default at most {MAX_LINES} short lines, the rest "
                             f"counted; the reports list them all)")


def short_line(warning: str) -> str:
    """`warning` as one terminal line under LINE_CHARS, its paths said by their file names: cut at a word boundary,
    ending with CUT when cut."""
    line = PREFIX + _FOLDERS.sub("", one_line(warning))
    if len(line) < LINE_CHARS:
        return line
    head = line[:LINE_CHARS - len(CUT)]
    head = head[:head.rfind(" ")] if " " in head[len(PREFIX):] else head[:-1]  # a word is never split
    return head.rstrip(" ,;:(" + CUT) + CUT


def print_warnings(warnings: Sequence[str], verbose: bool = False, file: TextIO | None = None) -> None:
    """Print `warnings` (ordered, the most important first) on stderr: every one whole with `verbose`; else
    at most MAX_LINES short lines, the last counting those not shown when there are more."""
    file = file or sys.stderr
    if verbose or len(warnings) <= MAX_LINES:
        lines = [PREFIX + one_line(w) if verbose else short_line(w) for w in warnings]
    else:
        more = len(warnings) - (MAX_LINES - 1)
        lines = [short_line(w) for w in warnings[:MAX_LINES - 1]]
        lines.append(f"{PREFIX}{more} more warnings: run with -v to print them all (the reports list them too)")
    for line in lines:
        print(line, file=file)
