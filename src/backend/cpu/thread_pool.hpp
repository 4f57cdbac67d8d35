#pragma once
// The CPU backend's worker threads. The backend used OpenMP parallel regions before; libgomp's idle
// workers spin (GOMP_SPINCOUNT 300k pauses, milliseconds of CPU) after every region unless the user
// sets OMP_WAIT_POLICY=passive before the program starts, which a library cannot do. On a busy
// machine the spinning workers lose their CPU share to the scheduler and every op then waits a
// time slice for a worker: `exp` of 1M floats took 28-44 ms instead of 0.5 ms under load.
// This pool spins for a few microseconds only, then sleeps; the caller works too and waits only for
// chunks a worker has started, so a worker that the OS has not scheduled costs nothing.
#include <cstddef>

namespace wick::cpu {

// Threads that parallel_chunks uses, the caller included: default_threads() at first use.
size_t pool_threads();

// The thread count a CPU job should use, as OpenMP's default: OMP_NUM_THREADS when it is a positive
// integer, else the CPUs in this thread's affinity mask (taskset, cgroup cpusets), at least 1.
size_t default_threads();

// Runs fn(ctx, c) once for every c in [0, chunks), on the pool and the calling thread; returns when
// all have run. Chunks are claimed one at a time (dynamic schedule). Runs everything on the calling
// thread when called from inside a chunk, or while another thread has the pool. The first exception
// a chunk throws is rethrown here.
void parallel_chunks(size_t chunks, void (*fn)(void* ctx, size_t chunk), void* ctx);

}  // namespace wick::cpu
