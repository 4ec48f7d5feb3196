// Machine probes for the roofline of the CPU benchmarks: DRAM read bandwidth over a buffer far
// larger than the last-level cache, and the peak FMA throughput of all threads; each measured
// with the same thread pool the engine uses, median of several passes.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"

namespace mactune::bench {

struct Roofline {
  double read_bytes_per_s = 0;  // all threads streaming a buffer >> LLC
  double flops_per_s = 0;       // all threads issuing independent FMAs (2 flops each)
  std::size_t buffer_bytes = 0;
  int threads = 0;
  std::string isa;
  // The time a kernel that moves `bytes` and computes `flops` cannot beat.
  double bound_seconds(double bytes, double flops) const {
    const double tb = bytes / read_bytes_per_s, tf = flops / flops_per_s;
    return tb > tf ? tb : tf;
  }
};

// Median over `passes` of one full read of a buffer of `bytes` split over the pool, with the
// load width of `isa`'s kernels (64 bytes on AVX-512, 32 on AVX2, 8 on the generic path).
double read_bandwidth(cpu::ThreadPool& pool, std::size_t bytes, int passes, cpu::Isa isa);
// The same over one buffer of max(8 x LLC, 256 MiB) allocated and touched once per process, on
// all logical CPUs with the best ISA: a few passes of ~10 ms, cheap enough to take around each
// benchmark point, so that its roofline uses the bandwidth the machine had at that time (on a
// shared VM it moves by 30% from one minute to the next).
double read_bandwidth_now(int passes);
// The same over a buffer of `bytes` (at least 1 MiB): the bandwidth of the cache level a
// working set of that size lives in. One buffer per process, reallocated when the size asked
// for changes by more than 5%; on a host whose last-level cache holds a step's KV (480 MiB of
// L3 on the Xeon VM), this is the bound that step can reach, not DRAM's.
double read_bandwidth_at(std::size_t bytes, int passes);
// Median over `passes` of FMA throughput with the widest ISA this CPU runs.
double peak_fma(cpu::ThreadPool& pool, cpu::Isa isa, int passes);

// FMA throughput of the calling thread alone, per second of its CPU time (not wall time), so
// that kernel efficiencies measured in CPU time compare with it on a loaded machine.
double peak_fma_thread_cpu(cpu::Isa isa, int passes);

// Measured once per process (threads = 0: all logical CPUs), then cached.
const Roofline& machine_roofline();

}  // namespace mactune::bench
