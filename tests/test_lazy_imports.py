"""Optional heavy imports stay lazy: `--help`, `--list` and all of analysis/ work without CUDA packages, and
only drawing imports matplotlib."""

import subprocess
import sys
from pathlib import Path

import pytest

from ceilings.__main__ import COMMANDS as CONSOLE_COMMANDS

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


# every command of the console script, as `python -m` runs it
COMMANDS = [module.removesuffix(".__main__") for module, _ in CONSOLE_COMMANDS.values()]
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


# The floors run one way: common/ (errors, atomic writes, the HTML renderer) <- kernels/ <- ceilings/ <-
# analysis/ (docs/architecture.md; tests/test_architecture.py reads it off every import statement).


def test_kernels_import_nothing_of_ceilings_or_analysis():
    """Importing every kernels module (and planning every benchmark) loads no ceilings and no analysis module:
    kernels/ stands on common/ alone. The Numba kernels' modules import Numba itself: left out of an install
    without the CUDA extras (README, "Set up")."""
    from importlib.util import find_spec

    modules = sorted(f"kernels.{p.stem}" for p in (ROOT / "kernels").glob("*.py") if p.stem != "__init__"
                     and (find_spec("numba") or not p.stem.startswith("numba_")))
    code = (f"import sys, {', '.join(modules)}, kernels.registry\n"
            "from kernels.base import REFERENCE_LIMITS\n"
            "for b in kernels.registry.all_benchmarks(): b.plans(REFERENCE_LIMITS['sm_90'], False)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ceilings', 'analysis', 'common')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    import ast

    loaded = set(ast.literal_eval(out.stdout))
    assert {m for m in loaded if m.split(".")[0] != "common"} == set()
    assert "common.errors" in loaded  # the test sees the imports it polices (kernels.inspect's)


def test_common_imports_nothing_of_the_project():
    """common/ is the bottom floor: every package renders its pages with it, so it may know none of them."""
    import ast

    for path in (ROOT / "common").glob("*.py"):
        tree = ast.parse(path.read_text())
        names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        project = {m for m in names if m and m.split(".")[0] in ("ceilings", "kernels", "analysis", "scripts")}
        assert not project, (path.name, sorted(project))
