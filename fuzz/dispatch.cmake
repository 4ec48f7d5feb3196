# fuzz_dispatch: the dispatch-table loader (parse, validate, select, write back) on arbitrary
# bytes. The dispatch sources are compiled into the fuzzer so they carry its coverage
# instrumentation and sanitizers.
mactune_add_fuzzer(fuzz_dispatch
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_dispatch.cpp
          ${PROJECT_SOURCE_DIR}/dispatcher/catalog.cpp
          ${PROJECT_SOURCE_DIR}/dispatcher/dispatch.cpp
          ${PROJECT_SOURCE_DIR}/dispatcher/header.cpp
          ${PROJECT_SOURCE_DIR}/dispatcher/json.cpp
          ${PROJECT_SOURCE_DIR}/dispatcher/table.cpp
  LIBS mactune::kernels nlohmann_json::nlohmann_json)
