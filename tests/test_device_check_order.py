"""scripts/device_check.sh on a stand-in GPU machine: every program is a stub on PATH that answers at once, so
only the script's logic shows. The steps run in the order of the plan `--plan` prints, whose expected H200 times
fit 420 s, the default measure (tensor ceilings first) right after env; a missing tool or Python module skips
its steps with the reason; ncu's counters are probed first, and without them the ncu steps are skipped with
ncu's own error and the applications go through torch.profiler; measure's "ran, some ceilings invalid" exit
status is not a failure, a crash is."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "device_check.sh"
SYSTEM_PATH = "/usr/bin:/bin"  # bash, coreutils (timeout, date), awk, git: no Nsight tools

# The stand-in python: it answers the script's probes from FAKE_* variables, writes what a measurement or a
# profile would write, and succeeds at everything else.
FAKE_PYTHON = r"""#!/usr/bin/env bash
case "$*" in
    *find_spec*)  # missing_modules: the first module named in FAKE_MISSING
        shift 2
        for m in "$@"; do case " ${FAKE_MISSING:-} " in *" $m "*) echo "$m"; exit 0 ;; esac; done
        echo; exit 0 ;;
    *insp.find_tool*) echo "${FAKE_INSPECT_MISSING:-}"; exit 0 ;;
esac
out=""; prev=""
for a in "$@"; do [ "$prev" = "--out" ] && out=$a; prev=$a; done
case "$*" in
    *ceilings.measure*) [ -z "$out" ] || echo '{}' > "$out"; exit "${FAKE_MEASURE_RC:-0}" ;;
    *"analysis.profile --torch"*) mkdir -p "$out" && : > "$out/host_1.1.pt.trace.json" ;;
    *analysis.profile*) echo 'kernel' > "$out.csv" ;;
esac
exit 0
"""

# ncu as FAKE_NCU says: "ok" (a counter value), or the errors seen on GPU machines.
FAKE_NCU = r"""#!/usr/bin/env bash
case "${FAKE_NCU:-ok}" in
    ok) echo "==PROF== Connected to process 42"; echo "    sm__cycles_elapsed.sum    cycle    4,332" ;;
    library) echo "==PROF== Connected to process 42"
             echo "==ERROR== Failed to initialize the profiler: LibraryNotLoaded"; exit 1 ;;
    permission) echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU" \
                     "Performance Counters on the target device 0." ;;
esac
"""


def _stub(folder: Path, name: str, text: str = "#!/bin/sh\nexit 0\n") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    (folder / name).chmod(0o755)


def run_check(tmp_path: Path, tools=("nvidia-smi", "ncu", "nsys"), tool_dirs: str = "", **fake) -> tuple:
    """(exit status, {step: (status, command)} of summary.txt, the steps in order, stderr); `fake` sets the
    stand-ins' FAKE_* variables (missing="torchvision", measure_rc=3, ncu="library", inspect_missing=WHY)."""
    if shutil.which("ncu", path=SYSTEM_PATH) or shutil.which("nsys", path=SYSTEM_PATH):
        pytest.skip(f"this machine has Nsight tools in {SYSTEM_PATH}: they cannot be hidden from the script")
    stubs = tmp_path / "bin"
    _stub(stubs, "python", FAKE_PYTHON)
    for tool in tools:
        _stub(stubs, tool, FAKE_NCU if tool == "ncu" else "#!/bin/sh\nexit 0\n")
    out = tmp_path / "out"
    env = {"PATH": f"{stubs}{os.pathsep}{SYSTEM_PATH}", "HOME": str(tmp_path), "PYTHON": str(stubs / "python"),
           "DEVICE_CHECK_TOOL_DIRS": tool_dirs, **{f"FAKE_{k.upper()}": str(v) for k, v in fake.items()}}
    proc = subprocess.run(["bash", str(SCRIPT), str(out)], env=env, capture_output=True, text=True, timeout=120)
    rows = [line.split("\t") for line in (out / "summary.txt").read_text().splitlines() if not line.startswith("#")]
    return proc.returncode, {row[0]: (row[1], row[4]) for row in rows}, [row[0] for row in rows], proc.stderr


# The device time a run may spend on its plan: 15 minutes of device time hold the machine's start (a few
# minutes), the transfers, the packing and one command of at most 600 s (docs/device-check.md).
PLAN_LIMIT_S = 420


def plan() -> list[tuple[str, float, str]]:
    out = subprocess.run(["bash", str(SCRIPT), "--plan"], capture_output=True, text=True, timeout=30, check=True)
    return [(name, float(seconds), part) for name, seconds, part in (line.split("\t") for line in
                                                                     out.stdout.splitlines())]


def test_the_plan_fits_its_time_and_measures_the_tensor_roofs_first():
    steps = plan()
    assert sum(seconds for _, seconds, part in steps if part == "plan") <= PLAN_LIMIT_S
    assert [name for name, _, _ in steps[:2]] == ["env", "measure"]
    assert {part for _, _, part in steps} == {"plan", "if time is left"}
    parts = [part for _, _, part in steps]
    assert parts == sorted(parts, key=lambda p: p != "plan")  # what is left for spare time comes last
    assert "inspect" not in [name for name, _, _ in steps]  # proven offline, not on device time
    from kernels.registry import all_benchmarks

    groups = [b.group for b in all_benchmarks()]
    first_other = next(i for i, g in enumerate(groups) if g not in ("tensor", "library"))
    assert set(groups[:first_other]) == {"tensor", "library"} and "tensor" not in groups[first_other:]
    assert "library" not in groups[first_other:]


def test_the_run_follows_the_plan(tmp_path):
    rc, steps, order, err = run_check(tmp_path)
    assert rc == 0, err[-2000:]
    assert order == [name for name, _, _ in plan()]
    python = str(tmp_path / "bin" / "python")
    assert steps["pytest-gpu"][1].startswith(f"{python} -m pytest -m gpu -v --timeout ")
    assert steps["measure-quick"][1].startswith(f"{python} -m ceilings.measure --quick")
    assert steps["measure"][1].startswith(f"{python} -m ceilings.measure --force")
    assert "--only dram.*:cuda-c," in steps["selfcheck"][1]
    assert all(status == "ok" for status, _ in steps.values()), steps
    out = tmp_path / "out"
    assert steps["resnet50-roofline"][1].endswith(f"--roofs {out}/roofs.json {out}/resnet50.csv -o {out}/resnet50-"
                                                  f"roofline.png --report {out}/resnet50-report.md --csv "
                                                  f"{out}/resnet50-kernels.csv --force")
    assert steps["ncu-probe"][1].startswith("ncu --clock-control none --launch-count 1 --metrics sm__cycles_elapsed")


@pytest.mark.parametrize("ncu, cause", [
    ("library", "Failed to initialize the profiler: LibraryNotLoaded"),
    ("permission", "ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"),
])
def test_without_counters_the_ncu_steps_say_why_and_the_apps_use_torch_profiler(tmp_path, ncu, cause):
    rc, steps, order, err = run_check(tmp_path, ncu=ncu)
    assert rc == 0, err[-2000:]  # a GPU machine without counters runs through
    assert steps["ncu-probe"][0].startswith(f"unavailable: {cause}")
    for name in ("selfcheck", "ncu-rep"):
        assert steps[name][0].startswith(f"skipped: ncu cannot read the GPU's counters: {cause}")
    assert "resnet50" not in steps and "decode" not in steps
    assert order[order.index("selfcheck") + 1:order.index("env-after")] == ["decode-torch", "decode-roofline"]
    assert order[order.index("fma-chains") + 1:] == ["resnet50-torch", "resnet50-roofline", "ncu-rep",
                                                     "nsys-decode"]
    out = tmp_path / "out"
    assert steps["resnet50-torch"] == ("ok", f"{tmp_path}/bin/python -m analysis.profile --torch --force --out "
                                             f"{out}/resnet50-torch --wait 1 --warmup 1 --active 1 -- "
                                             "scripts/apps/resnet50_step.py --batch 64 --bf16 --channels-last "
                                             "--warmup 2 --no-profiler-range")
    assert steps["decode-roofline"][0] == "ok" and f"{out}/decode-torch -o" in steps["decode-roofline"][1]


def test_missing_ncu_and_nsys_are_named_and_their_steps_skipped(tmp_path):
    rc, steps, order, err = run_check(tmp_path, tools=("nvidia-smi",))
    assert rc == 0, err[-2000:]
    assert steps["ncu-probe"][0] == "unavailable: ncu not found on PATH or in DEVICE_CHECK_TOOL_DIRS"
    assert steps["selfcheck"][0].startswith("skipped: ncu cannot read the GPU's counters: ncu not found")
    assert steps["nsys-decode"] == ("skipped: nsys not found on PATH or in DEVICE_CHECK_TOOL_DIRS",
                                    "bash -c nsys_decode")


def test_ncu_outside_path_is_found_in_the_tool_folders(tmp_path):
    _stub(tmp_path / "opt" / "nsight-compute" / "2099.1", "ncu", FAKE_NCU)
    rc, steps, _, err = run_check(tmp_path, tools=("nvidia-smi",),
                                  tool_dirs=f"/nowhere:{tmp_path}/opt/nsight-compute/*")
    assert rc == 0 and steps["ncu-probe"][0] == "ok" and steps["selfcheck"][0] == "ok"
    assert f"ncu: not on PATH, found in {tmp_path}/opt/nsight-compute/2099.1" in err


@pytest.mark.parametrize("measure_rc, status, failed", [(3, "ran: some ceilings invalid (exit 3)", False),
                                                        (1, "failed (exit 1)", True)])
def test_measure_that_ran_with_invalid_ceilings_is_not_a_failure(tmp_path, measure_rc, status, failed):
    rc, steps, _, err = run_check(tmp_path, measure_rc=measure_rc)
    for name in ("measure-quick", "measure", "fma-chains"):
        assert steps[name][0] == status, name
    assert rc == (1 if failed else 0), err[-2000:]
    assert steps["pytest-gpu"][0] == "ok"  # other programs' exit 3 stays a failure: only measure's is a result


def test_a_missing_python_module_skips_its_steps_with_the_reason(tmp_path):
    rc, steps, _, err = run_check(tmp_path, missing="torchvision")
    assert rc == 0, err[-2000:]
    python = f"{tmp_path}/bin/python"
    assert steps["resnet50"][0] == f"skipped: Python module torchvision is not importable by {python}"
    assert steps["resnet50"][1].startswith(f"{python} -m analysis.profile --range")  # what it would have run
    assert steps["resnet50-roofline"][0] == "skipped: no profile or no roofs file"
    assert steps["decode"][0] == "ok" and steps["decode-roofline"][0] == "ok"
    rc, steps, _, _ = run_check(tmp_path / "again", missing="cupy")
    python = f"{tmp_path}/again/bin/python"
    assert all(steps[name][0].startswith("skipped: Python module cupy") for name in
               ("pytest-gpu", "measure-quick", "measure", "fma-chains", "peers"))
    for name in ("selfcheck", "ncu-rep"):
        assert steps[name][0] == f"skipped: ncu cannot read the GPU's counters: not probed: Python module cupy is " \
                                 f"not importable by {python}"
    assert steps["resnet50-roofline"][0] == "skipped: no profile or no roofs file"  # no roofs were measured
    assert steps["ncu-probe"][0] == f"unavailable: not probed: Python module cupy is not importable by {python}"
    assert steps["decode-torch"][0] == "ok"  # torch.profiler needs no CuPy
