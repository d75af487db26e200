"""scripts/tracelens_compare.py without TraceLens: the one-line error naming how to install it, and the table
from a saved TraceLens result written by hand."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

tc = importlib.import_module("scripts.tracelens_compare")
TRACE = Path(__file__).resolve().parents[2] / "shared" / "torch-traces" / "triton_a100.json.gz"
needs_trace = pytest.mark.skipif(not TRACE.is_file(), reason="../shared/torch-traces is absent")


@needs_trace
def test_without_tracelens_the_error_is_one_line_naming_the_install(tmp_path, capsys):
    assert tc.main([str(TRACE), "--saved", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install" in err and "--tracelens-python" in err


@needs_trace
def test_a_saved_result_is_read_and_compared_op_by_op(tmp_path, capsys):
    # a layer norm over 2 rows of 4 bf16 with weight and bias: TraceLens counts 5 FLOPs an element, 40 in all
    norm = ["aten::layer_norm", [[2, 4], [], [4], [4], [], []],
            ["c10::BFloat16", "ScalarList", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"],
            ["", "[4]", "", "", "1e-05", "True"], None, 40.0, 64.0, 3]
    saved = {"size": TRACE.stat().st_size, "commit": "abc", "kernel_s": 4e-6, "placed_s": 1e-6, "ops": [norm]}
    (tmp_path / f"{TRACE.name}.tracelens.json").write_text(json.dumps(saved))
    assert tc.main([str(TRACE), "--saved", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith(f"| {TRACE.name}"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4] == "—"  # no collective on the interconnect
    assert cells[5] == "25.0%"  # 1 of 4 µs
    assert cells[6].startswith("`aten::layer_norm` 56 FLOP vs 40 FLOP")  # ours: 7 an element, x 8 elements
    assert "TraceLens commit: abc" in out


def test_op_differences_rank_by_ratio_and_list_zeros_apart():
    ops = [["aten::copy_", [[8], [8], []], ["float", "float", "Scalar"], ["", "", "False"], None, 8.0, 64.0, 1],
           ["aten::mm", [[2, 3], [3, 4]], ["float", "float"], ["", ""], None, 48.0, 80.0, 1]]
    worst = tc.op_differences(ops)
    assert worst["zero"] == ["`aten::copy_` (ours 0)"]  # a copy: 0 FLOPs of ours, 1 an element of theirs
    assert worst["flops"] == ("aten::mm", 48.0, 48.0)  # 2 x 2 x 3 x 4
    # bytes, both ops on both sides: the copy 64 vs 64 (8 floats read, 8 written: x1), the mm ours
    # (2x3 + 3x4 + 2x4) x 4 B = 104 vs 80 (x1.3): the larger ratio is the mm's, though the copy comes first
    assert worst["bytes"] == ("aten::mm", 104.0, 80.0)
