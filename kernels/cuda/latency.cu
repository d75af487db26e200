// Latency floors (kernels/latency.py): the cost of a kernel launch, and of one load that cannot be hidden.

// One thread counts the launches that ran: the output check compares the count with the launches made, so a
// launch that never ran (or ran twice) is seen. Nothing else: the kernel is as small as a kernel that does
// anything checkable can be.
extern "C" __global__ void launch_count(unsigned int* counter) {
    counter[0] += 1u;
}

// A pointer chase: one thread follows `next` (a random cyclic permutation, one node per cache line) for
// `steps` dependent loads, each load's address the value the last one returned, so no two loads overlap.
// state[0] is where the chase stands: it starts there and is left there for the next launch, which goes on
// along the cycle instead of re-reading lines the last one brought into the caches; state[1] counts the
// launches. The output check compares both with the host's walk of the same cycle.
extern "C" __global__ void pointer_chase(const unsigned int* next, unsigned int* state, int steps) {
    unsigned int j = state[0];
#pragma unroll 1
    for (int i = 0; i < steps; ++i) {
        j = next[j];
    }
    state[0] = j;
    state[1] += 1u;
}

// Holds the stream for `cycles` SM cycles (one thread), so that the host can queue the kernels after it
// before the first of them may start: their gaps are then the GPU's own, not the host's launch rate.
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
