# fuzz_spec: the sweep-spec reader (YAML through yaml-cpp, every key's checks, the grid of a
# small spec) and fuzz_expr: the constraint-expression parser and evaluator. Built from their
# sources so libFuzzer's coverage instrumentation reaches them. Seeds: fuzz/corpus/<name>/.
mactune_add_fuzzer(fuzz_spec
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_spec.cpp
          ${PROJECT_SOURCE_DIR}/tuner/spec.cpp
          ${PROJECT_SOURCE_DIR}/tuner/spec_yaml.cpp
          ${PROJECT_SOURCE_DIR}/tuner/axes.cpp
          ${PROJECT_SOURCE_DIR}/tuner/expr.cpp
          ${PROJECT_SOURCE_DIR}/tuner/grid.cpp
          ${PROJECT_SOURCE_DIR}/tuner/skip_ratio.cpp
          ${PROJECT_SOURCE_DIR}/tuner/stats.cpp
          ${PROJECT_SOURCE_DIR}/kernels/cpu/thread_pool.cpp  # the grid's thread-count bound
  LIBS mactune::kernels yaml-cpp Threads::Threads)
mactune_add_fuzzer(fuzz_expr
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_expr.cpp
          ${PROJECT_SOURCE_DIR}/tuner/expr.cpp
  LIBS mactune::kernels)
