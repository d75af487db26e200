"""scripts/sharegpt_like.py: the shipped workload is what it writes at seed 0; an existing file needs --force."""

from __future__ import annotations

import importlib
from pathlib import Path

sg = importlib.import_module("scripts.sharegpt_like")
SHIPPED = Path(__file__).resolve().parents[1] / "examples" / "workloads" / "sharegpt-like.csv"


def test_seed_0_writes_the_shipped_workload_byte_for_byte(tmp_path):
    out = tmp_path / "w.csv"
    assert sg.main([str(out)]) == 0
    assert out.read_bytes() == SHIPPED.read_bytes()


def test_an_existing_file_needs_force_and_is_left_as_it_was(tmp_path, capsys):
    out = tmp_path / "w.csv"
    out.write_text("mine\n")
    assert sg.main([str(out), "--requests", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--force" in err and str(out) in err
    assert out.read_text() == "mine\n"
    assert sg.main([str(out), "--requests", "3", "--force"]) == 0
    assert len(out.read_text().splitlines()) == 4  # the header and 3 requests
