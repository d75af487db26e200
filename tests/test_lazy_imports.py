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


def test_reader_contract_imports_no_reader():
    """The contract is the readers' shared vocabulary; the registry, not the contract, knows the readers."""
    code = ("import sys, analysis.readers.contract; "
            "print(sorted(m for m in sys.modules if m.startswith('analysis.') and m not in "
            "('analysis.readers', 'analysis.readers.contract')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
