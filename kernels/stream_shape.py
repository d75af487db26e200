"""The shape of the DRAM benchmarks' kernels that both the planner (kernels.stream) and the Numba kernels
(kernels.numba_stream, which imports numba) need: here, so that neither imports the other."""

BLOCK = 256  # threads per block, both backends

# Numba: scalar float32 accesses. Uncapped, ptxas (sm_90) gives read 32, write 30, copy 39, triad 40, dot 32:
# 8 blocks of 256 fit per SM for read/write, 4 for copy/triad/dot (<= 64 registers). Read and write unroll
# 16 because NVVM unrolls a trip loop of only 8 accesses twice and adds a remainder loop.
NUMBA_UNROLL = {"read": 16, "write": 16, "copy": 8, "triad": 8, "dot": 8}
