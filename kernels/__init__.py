"""Microbenchmark kernels: CUDA C (through CuPy) and Numba CUDA, each declaring its work per launch as data.

`kernels.registry.all_benchmarks()` lists them; `kernels.base` defines the narrow interface every family
implements; `python -m kernels.inspect` proves the declared work from the compiled SASS.
"""
