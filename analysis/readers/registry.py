"""The registry of profile formats: every reader of this package, in the order they are tried."""

from __future__ import annotations

from typing import Any

from .contract import Format, Source

# The names of formats(), in its order, for the --help of every command that reads profiles: a help imports no
# reader (they import pandas); tests/test_ncu.py holds this to the readers' own names.
NAMES = (".ncu-rep (through ncu_report)", "nsys .sqlite export", ".nsys-rep (through nsys export)",
         "ceilings kernel table (CSV)", "ncu --csv (details page)", "ncu --csv --page raw",
         "ncu --print-summary per-kernel --csv", "nsys kernel summary (CSV)",
         "nsys kernel launch & exec summary (CSV)", "nsys GPU trace (CSV)", "torch.profiler trace", "nvprof output",
         "ncu text", "nsys kernel summary (text)", "nsys kernel launch & exec summary (text)",
         "nsys GPU trace (text)")


def formats() -> tuple[Format, ...]:
    """Every format, in the order they are tried (the most specific first)."""
    from . import ncu_csv, ncu_rep, ncu_text, nsys, nsys_sqlite, nvprof, torch_trace

    return (ncu_rep.REPORT, nsys_sqlite.SQLITE, nsys_sqlite.REPORT,
            ncu_csv.OWN_CSV, ncu_csv.DETAILS_CSV, ncu_csv.RAW_CSV, ncu_csv.SUMMARY_CSV,
            nsys.CSV, nsys.EXEC_CSV, nsys.TRACE_CSV,
            torch_trace.TRACE, nvprof.TEXT, ncu_text.TEXT, nsys.TEXT, nsys.EXEC_TEXT, nsys.TRACE_TEXT)


def detect(source: Source, binary: bool = False) -> tuple[Format, Any] | None:
    """The first format that recognises `source`, and what its `find` returned: of the binary formats
    (magic bytes) or of the text ones. Those recognised by their first bytes (`head`) are tried first, in
    the order of formats(), so that a large file of such a format is never scanned by the others' finders."""
    for fmt in sorted((f for f in formats() if f.binary == binary), key=lambda f: f.head is None):
        found = fmt.recognise(source)
        if found is not None:
            return fmt, found
    return None


def reads() -> str:
    """What a command that reads profiles reads, for its --help."""
    return f"reads (told apart by content, gzipped or not): {'; '.join(NAMES)}"
