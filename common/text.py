"""Tables as text, for a terminal (fixed-width columns) and for Markdown: the one place columns are aligned."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def aligned(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: Collection[str] = ()) -> str:
    """Fixed-width columns two spaces apart under their header: the columns named in `left` (text) aligned
    left, the others (numbers) right; no trailing spaces."""
    cells = [list(header), *rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if h in left else c.rjust(w) for c, w, h in zip(r, widths, header)).rstrip()
                     for r in cells)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, its columns padded to one width so that the text reads as a table too."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

    def line(cells):
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])
