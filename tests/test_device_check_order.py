"""scripts/device_check.sh on a GPU machine runs the GPU tests and both measurements before anything else:
the steps' limits add up to more than the budget, so the steps at the end are the ones that get skipped.
Here every program is a stand-in that succeeds at once (`true`), so only the order and the commands show."""

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "device_check.sh"


def test_gpu_tests_then_quick_then_default_measure_come_first(tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for tool in ("nvidia-smi", "ncu"):  # whatever this machine has, they answer at once
        (stubs / tool).write_text("#!/bin/sh\nexit 0\n")
        (stubs / tool).chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": "true", "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}"}
    env.pop("DEVICE_CHECK_BUDGET_S", None)
    proc = subprocess.run(["bash", str(SCRIPT), str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split("\t") for line in (out / "summary.txt").read_text().splitlines()
            if not line.startswith("#")]
    steps = [row[0] for row in rows]
    assert steps == ["env", "pytest-gpu", "measure-quick", "measure", "fma-chains", "inspect", "selfcheck", "peers",
                     "ncu-rep", "resnet50", "resnet50-roofline", "decode", "decode-roofline", "env-after"]
    commands = {row[0]: row[4] for row in rows}
    assert commands["pytest-gpu"].startswith("true -m pytest -m gpu")
    assert commands["measure-quick"].startswith("true -m ceilings.measure --quick")
    assert commands["measure"].startswith("true -m ceilings.measure --force")
    assert all(row[1] == "ok" for row in rows if not row[0].endswith("-roofline"))  # no profile: no roofline
