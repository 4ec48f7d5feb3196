// A test-only instance of the CPU kernel body over generic_v.inl's 16-lane shape: it takes the
// AVX-512 path's code (16 lanes, a tiled K column in one register, bf16 split by parity) on any
// CPU, so the logic of a path this machine may not run is still checked. (The AVX2 path's
// shape is the generic instance itself.)
#pragma once

#include "kernels/cpu/kernel_api.h"

namespace mactune::cpu::lanes16 {
KernelSet kernel_set(int head_dim, DType kv_dtype);
}
