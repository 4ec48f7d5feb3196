// Compiler glue shared by host and device code.
#pragma once

#if defined(__CUDACC__)
#define MACTUNE_HD __host__ __device__
#define MACTUNE_FORCEINLINE __forceinline__
#else
#define MACTUNE_HD
#define MACTUNE_FORCEINLINE inline __attribute__((always_inline))
#endif
