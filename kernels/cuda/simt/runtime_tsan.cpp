// The ThreadSanitizer instrumentation callbacks of the simt runtime (GCC/Clang -fsanitize=thread
// on the kernel translation units, no TSan runtime): every load and store of kernel code arrives
// here and goes to the runtime's checks (runtime_memory.cpp).
#include "kernels/cuda/simt/runtime_internal.h"

#define SIMT_PC_HOOK __builtin_extract_return_addr(__builtin_return_address(0))
extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
#define SIMT_HOOKS(N)                                           \
  void __tsan_read##N(void* p) {                                \
    mactune::simt::internal::access(p, N, false, SIMT_PC_HOOK); \
  }                                                             \
  void __tsan_write##N(void* p) {                               \
    mactune::simt::internal::access(p, N, true, SIMT_PC_HOOK);  \
  }                                                             \
  void __tsan_unaligned_read##N(void* p) {                      \
    mactune::simt::internal::access(p, N, false, SIMT_PC_HOOK); \
  }                                                             \
  void __tsan_unaligned_write##N(void* p) {                     \
    mactune::simt::internal::access(p, N, true, SIMT_PC_HOOK);  \
  }                                                             \
  void __tsan_volatile_read##N(void* p) {                       \
    mactune::simt::internal::access(p, N, false, SIMT_PC_HOOK); \
  }                                                             \
  void __tsan_volatile_write##N(void* p) {                      \
    mactune::simt::internal::access(p, N, true, SIMT_PC_HOOK);  \
  }
SIMT_HOOKS(1)
SIMT_HOOKS(2)
SIMT_HOOKS(4)
SIMT_HOOKS(8)
SIMT_HOOKS(16)
void __tsan_read_range(void* p, unsigned long n) {
  mactune::simt::internal::access(p, n, false, SIMT_PC_HOOK);
}
void __tsan_write_range(void* p, unsigned long n) {
  mactune::simt::internal::access(p, n, true, SIMT_PC_HOOK);
}
}
