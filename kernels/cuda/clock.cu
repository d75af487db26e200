// The SM clock as the timed kernels ran: a companion launched on their stream right after them. Thread 0 of
// each block reads %globaltimer (ns, one clock for the whole GPU) and clock64 (cycles of its own SM) at the
// start, spins until `spin_cycles` SM cycles have passed, and reads both again: cycles / ns is that SM's
// clock. Nothing but the spin runs, so the SM issues nothing that could stall the reads.
extern "C" __global__ void sm_clock(long long spin_cycles, long long* out) {
    if (threadIdx.x != 0) {
        return;
    }
    unsigned long long ns0, ns1;
    // volatile: the compiler must neither merge the two timer reads nor move them across the spin
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns0));
    long long c0 = clock64();
    long long c1;
    do {
        c1 = clock64();
    } while (c1 - c0 < spin_cycles);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns1));
    out[2 * blockIdx.x] = c1 - c0;
    out[2 * blockIdx.x + 1] = (long long)(ns1 - ns0);
}
