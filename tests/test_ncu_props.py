"""Random corruptions of valid ncu text and CSV give a table or a CeilingsError, never another exception."""

from __future__ import annotations

from pathlib import Path

import pytest

# the dev extra has hypothesis; a GPU machine running the suite from the repo may not
pytest.importorskip("hypothesis", reason="property tests need hypothesis: pip install -e '.[dev]'")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from analysis.ncu import kernel_table  # noqa: E402
from common.errors import CeilingsError  # noqa: E402

DATA = Path(__file__).parent / "data" / "ncu"
INPUTS = ["text_old_metrics.txt", "text_new_sections.txt", "summary.txt", "details_12col.csv",
          "details_20col.csv", "raw.csv", "nsys_stats.txt"]
GARBAGE = st.sampled_from(['"', ",", "----- ---", '"ID","Process ID","Kernel Name"', "    Section: X", "\x00",
                           "  k(int), 2021-Mar-16 14:53:47, Context 1, Stream 7", "(!) nan", "1,2,3", "…"])


@st.composite
def corrupted(draw):
    text = (DATA / draw(st.sampled_from(INPUTS))).read_text()
    lines = text.split("\n")
    kind = draw(st.sampled_from(["truncate", "delete", "duplicate", "insert"]))
    if kind == "truncate":
        return text[:draw(st.integers(0, len(text)))]
    i = draw(st.integers(0, len(lines) - 1))
    if kind == "delete":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    else:
        junk = draw(st.one_of(GARBAGE, st.text(max_size=40)))
        lines.insert(i, junk if draw(st.booleans()) else lines[i][:draw(st.integers(0, 60))] + junk)
    return "\n".join(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=corrupted(), per_launch=st.booleans())
def test_corrupted_inputs_give_table_or_ceilings_error(tmp_path, text, per_launch):
    f = tmp_path / "corrupt.out"
    f.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        table = kernel_table([f], per_launch=per_launch)
    except CeilingsError as exc:
        assert str(f) in str(exc) and "\n" not in str(exc)
        return
    assert len(table) > 0


@pytest.mark.parametrize("name", ["details_12col.csv", "details_20col.csv"])
def test_duplicated_csv_rows_keep_the_result(tmp_path, name):
    """A details CSV whose lines are all duplicated gives the same table (first value wins)."""
    text = (DATA / name).read_text().split("\n")
    f = tmp_path / name
    f.write_text("\n".join(line for x in text for line in (x, x)))
    a, b = kernel_table([DATA / name]), kernel_table([f])
    assert a.equals(b)
