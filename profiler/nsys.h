// The Nsight Systems command line for a profile loop: `mactune profile --nsys` prints it instead
// of running the loop, so the user runs the same loop under nsys with a capture range around the
// measured steps only (warm-up and setup stay out of the report).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mactune::prof {

struct NsysOptions {
  std::string output = "mactune-profile";  // report name: <output>.nsys-rep and <output>.sqlite
  // CUDA backend: capture between cudaProfilerStart and cudaProfilerStop (the loop calls them
  // around the measured steps). CPU backend: capture the NVTX range "measure" in domain mactune.
  bool cuda = true;
  bool export_sqlite = true;  // also write <output>.sqlite for `mactune db import-nsys`
};

// The registered NVTX message the loop pushes around the measured steps.
inline constexpr std::string_view kMeasureRange = "measure";

// `nsys profile ... <program...>`, every word shell-quoted where needed.
std::string nsys_command(const std::vector<std::string>& program, const NsysOptions& options);

// The word as a POSIX shell reads it back: unchanged when it has only safe characters, else in
// single quotes with embedded single quotes written as '\''.
std::string shell_quote(std::string_view word);

// The absolute path of the running executable (/proc/self/exe), or `fallback`.
std::string self_executable(const std::string& fallback);

}  // namespace mactune::prof
