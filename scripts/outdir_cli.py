"""What the scripts share: a parser whose help is the script's docstring, and (the device-check scripts) an
OUTDIR that must exist."""

from __future__ import annotations

import argparse
from pathlib import Path

from common.errors import CeilingsError


def doc_parser(script: str, doc: str) -> argparse.ArgumentParser:
    """`python SCRIPT ...`: description = the docstring's first paragraph, epilog = the rest."""
    first, _, rest = doc.partition("\n\n")
    return argparse.ArgumentParser(prog=f"python {script}", description=first, epilog=rest,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def script_parser(prog: str, doc: str, outdir_help: str) -> argparse.ArgumentParser:
    """`python scripts/PROG.py ... OUTDIR`, its help from `doc` (doc_parser)."""
    p = doc_parser(f"scripts/{prog}.py", doc)
    p.add_argument("outdir", metavar="OUTDIR", help=outdir_help)
    return p


def existing_folder(path: str) -> Path:
    folder = Path(path)
    if not folder.is_dir():
        raise CeilingsError(f"{folder}: no such folder; create it first")
    return folder
