"""Optional heavy imports stay lazy: `--help`, `--list` and all of analysis/ work without CUDA packages, and
only drawing imports matplotlib."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["kernels.registry", "kernels.stream", "kernels.cache", "kernels.fma", "kernels.intensity",
           "kernels.tensor", "kernels.library", "ceilings.measure", "ceilings.compare", "ceilings.roofs",
           "ceilings.sweeps",
           "analysis.ncu", "analysis.roofline", "analysis.whatif", "analysis.profile"]


@pytest.mark.parametrize("module", MODULES)
def test_importing_does_not_import_heavy_packages(module):
    code = (f"import sys, {module}, kernels.registry; kernels.registry.all_benchmarks(); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'cupy', 'numba', 'pynvml', 'matplotlib'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


COMMANDS = ["ceilings.measure", "ceilings.compare", "ceilings.fleet", "kernels.inspect", "analysis.ncu",
            "analysis.roofline", "analysis.whatif", "analysis.llm", "analysis.profile"]
HEAVY = {"pandas", "numpy", "matplotlib", "cupy", "numba", "torch"}


@pytest.mark.parametrize("command", COMMANDS)
def test_help_imports_no_heavy_package(command):
    """`python -m COMMAND --help` prints its help before any heavy package is imported (scripts/bench_help.py
    times it); the help itself is printed, so the module did run."""
    code = (f"import runpy, sys\nsys.argv = [{command!r}, '--help']\n"
            f"try:\n    runpy.run_module({command!r}, run_name='__main__')\nexcept SystemExit:\n    pass\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY)!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert "usage:" in out.stdout and out.stdout.strip().endswith("[]")


def test_reader_contract_imports_no_reader():
    """The contract is the readers' shared vocabulary; the registry, not the contract, knows the readers."""
    code = ("import sys, analysis.readers.contract; "
            "print(sorted(m for m in sys.modules if m.startswith('analysis.') and m not in "
            "('analysis.readers', 'analysis.readers.contract')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_renderer_draws_the_figure_data_and_imports_no_computation():
    """analysis.plot draws analysis.figure's data: it imports analysis.figure, not analysis.roofline (which
    imports analysis.plot when asked for a picture), and analysis.figure imports no renderer."""
    import ast

    def imported(module):
        tree = ast.parse((ROOT / "analysis" / f"{module}.py").read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | \
            {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}

    assert "analysis.figure" in imported("plot") and "analysis.roofline" not in imported("plot")
    assert not {m for m in imported("figure") if m and m.split(".")[0] == "matplotlib" or m == "analysis.plot"}
