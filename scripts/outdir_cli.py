"""What the device-check scripts share: a parser whose help is the script's docstring, and an OUTDIR that
must exist."""

from __future__ import annotations

import argparse
from pathlib import Path

from common.errors import CeilingsError


def script_parser(prog: str, doc: str, outdir_help: str) -> argparse.ArgumentParser:
    """`python scripts/PROG.py ... OUTDIR`: description = the docstring's first paragraph, epilog = the rest."""
    first, _, rest = doc.partition("\n\n")
    p = argparse.ArgumentParser(prog=f"python scripts/{prog}.py", description=first, epilog=rest,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir", metavar="OUTDIR", help=outdir_help)
    return p


def existing_folder(path: str) -> Path:
    folder = Path(path)
    if not folder.is_dir():
        raise CeilingsError(f"{folder}: no such folder; create it first")
    return folder
