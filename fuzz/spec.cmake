# fuzz_spec: the sweep-spec reader (YAML through yaml-cpp, every key's checks, the grid of a
# small spec) and fuzz_expr: the constraint-expression parser and evaluator. Built from their
# sources so libFuzzer's coverage instrumentation reaches them. Seeds: fuzz/corpus/<name>/.
mactune_add_fuzzer(fuzz_spec
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_spec.cpp
          ${PROJECT_SOURCE_DIR}/tuner/spec/spec.cpp
          ${PROJECT_SOURCE_DIR}/tuner/spec/spec_yaml.cpp
          ${PROJECT_SOURCE_DIR}/tuner/spec/axes.cpp
          ${PROJECT_SOURCE_DIR}/tuner/spec/expr.cpp
          ${PROJECT_SOURCE_DIR}/tuner/spec/grid.cpp
          ${PROJECT_SOURCE_DIR}/tuner/spec/skip_ratio.cpp
          ${PROJECT_SOURCE_DIR}/tuner/spec/stats.cpp
          ${PROJECT_SOURCE_DIR}/kernels/cpu/thread_pool.cpp  # the grid's thread-count bound
  LIBS mactune::kernels yaml-cpp Threads::Threads)
mactune_add_fuzzer(fuzz_expr
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_expr.cpp
          ${PROJECT_SOURCE_DIR}/tuner/spec/expr.cpp
  LIBS mactune::kernels)
