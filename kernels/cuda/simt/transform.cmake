# cmake -DIN=<file> -DOUT=<file> -P transform.cmake: the mechanical rewrites that let the host
# compiler read a CUDA source of kernels/cuda unchanged otherwise (the simt build compiles the
# rewritten copy in the build tree; nothing else differs):
#   kernel<<<grid, block[, smem[, stream]]>>>(args)
#       -> ::mactune::simt::launch(kernel, "kernel", grid, block[, smem[, stream]])(args)
#   extern __shared__ [__align__(n)] T name[];
#       -> T* const name = reinterpret_cast<T*>(::mactune::simt::dev::dynamic_shared());
file(READ "${IN}" text)
string(REGEX REPLACE "([A-Za-z_][A-Za-z0-9_:]*(<[^<>;(){}]*>)?)<<<([^>]*)>>>"
       "::mactune::simt::launch(\\1, \"\\1\", \\3)" text "${text}")
string(REGEX REPLACE
       "extern __shared__ (__align__\\([0-9]+\\) )?([A-Za-z_][A-Za-z0-9_: ]*[A-Za-z0-9_]) ([A-Za-z_][A-Za-z0-9_]*)\\[\\];"
       "\\2* const \\3 = reinterpret_cast<\\2*>(::mactune::simt::dev::dynamic_shared());"
       text "${text}")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
