"""Heavy packages imported on first use, so that `--help` (and any CLI that exits before its work) starts in
the time of a bare interpreter: `np = lazy("numpy")` at a module's top stands for `import numpy as np`.

The package is imported the first time one of its attributes is read; its names are then copied onto the
stand-in, so every later `np.x` is a plain attribute read (no cost in a loop).
"""

from __future__ import annotations

import importlib
from types import ModuleType


class _Lazy(ModuleType):
    def __getattr__(self, attr: str):  # only for names not (yet) copied: the first use, or one added later
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        return getattr(module, attr)


def lazy(name: str) -> ModuleType:
    """A stand-in for the module `name`, imported when first used."""
    return _Lazy(name)
