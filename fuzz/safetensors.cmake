# The safetensors reader and decode-trace checks (replay/), built from their sources so
# that libFuzzer's coverage instrumentation reaches them. Seeds: fuzz/corpus/fuzz_safetensors/.
mactune_add_fuzzer(fuzz_safetensors
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_safetensors.cpp
          ${PROJECT_SOURCE_DIR}/replay/safetensors.cpp
          ${PROJECT_SOURCE_DIR}/replay/sha256.cpp
          ${PROJECT_SOURCE_DIR}/replay/trace.cpp
  LIBS mactune::kernels nlohmann_json::nlohmann_json)
